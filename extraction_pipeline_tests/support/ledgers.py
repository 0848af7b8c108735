"""Ledgers to test with: document rows without PDFs, and a fresh PostgreSQL database per use (no
fixtures here: see conftest.py)."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

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


PG_ADMIN_URL = os.environ.get("EXTRACTION_TEST_PG_ADMIN_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")


def _pg_available() -> str | None:
    try:
        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except OperationalError as exc:
        return str(exc).splitlines()[0]


def fresh_pg_database() -> Iterator[str]:
    """Create a uniquely named database, yield its URL, drop it afterwards."""
    problem = _pg_available()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI but unreachable: {problem}")
        pytest.skip(f"PostgreSQL unreachable: {problem}")
    name = f"ep_test_{uuid.uuid4().hex[:10]}"  # generated here, never user input
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin.url.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
