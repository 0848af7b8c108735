"""Small helpers shared by tests (no fixtures here: see conftest.py)."""

from __future__ import annotations

import hashlib

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import insert_document


def add_documents(ledger: Ledger, count: int, project: str = "p", start: int = 0) -> list[int]:
    """Document rows without PDFs, for tests of the ledger alone."""
    ids = []
    for n in range(start, start + count):
        digest = hashlib.sha256(f"{project}-{n}".encode()).hexdigest()
        doc_id, _ = insert_document(
            ledger,
            project=project,
            filename=f"paper-{n}.pdf",
            sha256=digest,
            size_bytes=1000,
            pages=3,
            stored_path=f"/nonexistent/{digest}.pdf",
        )
        ids.append(doc_id)
    return ids


def key_of(ledger: Ledger, document_id: int) -> str:
    """The document's Dagster partition key, as registration stored it."""
    from extraction_pipeline.core.ledger.documents import get_document, partition_key_of

    document = get_document(ledger, document_id)
    assert document is not None, document_id
    return partition_key_of(document_id, document["partition_key"])
