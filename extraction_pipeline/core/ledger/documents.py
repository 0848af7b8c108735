"""Document records: a snapshot taken at registration (filename, sha256, size, pages, stored copy),
so moving or deleting the source file later never breaks a batch."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import documents

PARTITION_PREFIX = "doc-"


def partition_key(document_id: int) -> str:
    """The Dagster partition key of a document: a safe id, never the filename."""
    return f"{PARTITION_PREFIX}{document_id}"


def document_id_from_partition(key: str) -> int | None:
    if not key.startswith(PARTITION_PREFIX) or not key[len(PARTITION_PREFIX) :].isdigit():
        return None
    return int(key[len(PARTITION_PREFIX) :])


def insert_document(
    ledger: Ledger, *, project: str, filename: str, sha256: str, size_bytes: int, pages: int, stored_path: str
) -> tuple[int, bool]:
    """Insert or find the (project, sha256) document. Returns (id, created)."""
    try:
        with ledger.engine.begin() as conn:
            doc_id = conn.execute(
                insert(documents)
                .values(
                    project=project,
                    filename=filename,
                    sha256=sha256,
                    size_bytes=size_bytes,
                    pages=pages,
                    stored_path=stored_path,
                    created_at=utcnow(),
                )
                .returning(documents.c.id)
            ).scalar_one()
        return doc_id, True
    except IntegrityError:
        with ledger.engine.connect() as conn:
            existing = conn.execute(
                select(documents.c.id).where(documents.c.project == project, documents.c.sha256 == sha256)
            ).scalar_one()
        return existing, False


def get_document(ledger: Ledger, document_id: int) -> dict[str, Any] | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(documents).where(documents.c.id == document_id)).mappings().first()
    return dict(row) if row else None


def documents_after(ledger: Ledger, last_id: int, limit: int = 5000) -> list[dict[str, Any]]:
    """Documents registered after ``last_id`` (the partition sensor's cursor), oldest first."""
    statement = select(documents).where(documents.c.id > last_id).order_by(documents.c.id).limit(limit)
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(statement).mappings()]


def project_exists(ledger: Ledger, project: str) -> bool:
    """A project exists once it has a document (templates are checked by their own module)."""
    with ledger.engine.connect() as conn:
        return conn.execute(select(documents.c.id).where(documents.c.project == project).limit(1)).first() is not None


def document_ids(ledger: Ledger) -> set[int]:
    """Every registered document's id (one indexed scan: the stray-partition check)."""
    with ledger.engine.connect() as conn:
        return set(conn.execute(select(documents.c.id)).scalars())
