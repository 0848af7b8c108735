"""Document records: a snapshot taken at registration (filename, sha256, size, pages, stored copy),
so moving or deleting the source file later never breaks a batch."""

from __future__ import annotations

import re
from pathlib import PurePath

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.rows import DocumentRow, document_row
from extraction_pipeline.core.ledger.schema import documents

MAX_TITLE_CHARS = 300
MAX_AUTHOR_CHARS = 200

PARTITION_PREFIX = "doc-"
SLUG_CHARS = 48
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_KEY = re.compile(r"^doc-(\d+)(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?$")


def make_partition_key(document_id: int, filename: str) -> str:
    """``doc-12-smith-2020-nejm``: the ledger id (what the key means) and the file name's stem
    reduced to lower-case letters, digits and dashes, so the launch dialog is readable while the
    key stays safe (commas and slashes break selection in the UI)."""
    slug = _NOT_SLUG.sub("-", PurePath(filename).stem.lower()).strip("-")[:SLUG_CHARS].rstrip("-")
    return f"{PARTITION_PREFIX}{document_id}-{slug}" if slug else f"{PARTITION_PREFIX}{document_id}"


def partition_key_of(document_id: int, stored_key: str | None) -> str:
    """A document's key: the one stored at registration, or "doc-12" for a document registered
    before keys were readable (its partition, runs and history keep that key)."""
    return stored_key or f"{PARTITION_PREFIX}{document_id}"


def document_id_from_partition(key: str) -> int | None:
    """The document id a key names (both forms); None for anything else."""
    match = _KEY.match(key)
    return int(match.group(1)) if match else None


def insert_document(
    ledger: Ledger,
    *,
    project: str,
    filename: str,
    sha256: str,
    size_bytes: int,
    pages: int,
    stored_path: str,
    title: str = "",
    first_author: str = "",
    year: int | None = None,
) -> tuple[int, bool]:
    """Insert or find the (project, sha256) document. Returns (id, created). ``title``,
    ``first_author`` and ``year``: what the PDF says it is, for lists ("" or None: it does not say)."""
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
                    title=title[:MAX_TITLE_CHARS] or None,
                    first_author=first_author[:MAX_AUTHOR_CHARS] or None,
                    year=year,
                )
                .returning(documents.c.id)
            ).scalar_one()
            conn.execute(
                update(documents)
                .where(documents.c.id == doc_id)
                .values(partition_key=make_partition_key(doc_id, filename))
            )
        return doc_id, True
    except IntegrityError:
        with ledger.engine.connect() as conn:
            existing = conn.execute(
                select(documents.c.id).where(documents.c.project == project, documents.c.sha256 == sha256)
            ).scalar_one()
        return existing, False


def get_document(ledger: Ledger, document_id: int) -> DocumentRow | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(documents).where(documents.c.id == document_id)).mappings().first()
    return document_row(row) if row else None


def documents_after(ledger: Ledger, last_id: int, limit: int = 5000) -> list[DocumentRow]:
    """Documents registered after ``last_id`` (the partition sensor's cursor), oldest first."""
    statement = select(documents).where(documents.c.id > last_id).order_by(documents.c.id).limit(limit)
    with ledger.engine.connect() as conn:
        return [document_row(row) for row in conn.execute(statement).mappings()]


def project_documents(ledger: Ledger, project: str) -> list[int]:
    """The ids of a project's documents, oldest first (one indexed query)."""
    statement = select(documents.c.id).where(documents.c.project == project).order_by(documents.c.id)
    with ledger.engine.connect() as conn:
        return list(conn.execute(statement).scalars())


def projects_of(ledger: Ledger, document_ids: list[int]) -> dict[int, str]:
    """Each known document's project (one query, the ids sent as one parameter)."""
    unique = list(dict.fromkeys(document_ids))
    if not unique:
        return {}
    with ledger.engine.connect() as conn:
        wanted = id_in(documents.c.id, conn.dialect.name, unique)
        statement = select(documents.c.id, documents.c.project).where(wanted)
        return {doc_id: project for doc_id, project in conn.execute(statement).all()}


def project_exists(ledger: Ledger, project: str) -> bool:
    """A project exists once it has a document (templates are checked by their own module)."""
    with ledger.engine.connect() as conn:
        return conn.execute(select(documents.c.id).where(documents.c.project == project).limit(1)).first() is not None


def document_partition_keys(ledger: Ledger) -> set[str]:
    """Every registered document's partition key (one scan: the stray-partition check)."""
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(documents.c.id, documents.c.partition_key)).all()
    return {partition_key_of(doc_id, key) for doc_id, key in rows}
