"""A document's bytes in the ledger, so a worker on another machine can parse it.

A PostgreSQL ledger is shared by every machine of a deployment (the daemon, Celery workers, a
Kubernetes pod per run); the document store under one machine's EXTRACTION_HOME is not. So when
the ledger is shared, registering a PDF also stores its bytes here, keyed by their sha256, and a
parse that finds no stored copy on its own disk reads them from here (and checks the hash). A
SQLite ledger is one machine's file: the store beside it is all there is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import document_contents, documents


def is_shared(ledger: Ledger) -> bool:
    """Whether other machines may use this ledger (anything but a SQLite file)."""
    return ledger.engine.dialect.name != "sqlite"


def has_content(ledger: Ledger, sha256: str) -> bool:
    with ledger.engine.connect() as conn:
        found = conn.execute(select(document_contents.c.sha256).where(document_contents.c.sha256 == sha256))
        return found.first() is not None


def store_content(ledger: Ledger, sha256: str, path: Path) -> bool:
    """Store the bytes of ``path`` (already verified to hash to ``sha256``) unless present; True
    if this call stored them. Only for a shared ledger (see the module docstring)."""
    if not is_shared(ledger) or has_content(ledger, sha256):
        return False
    content = path.read_bytes()
    if hashlib.sha256(content).hexdigest() != sha256:
        return False  # changed since it was checked: never store bytes under another content's key
    try:
        with ledger.engine.begin() as conn:
            conn.execute(
                insert(document_contents).values(
                    sha256=sha256, size_bytes=len(content), content=content, created_at=utcnow()
                )
            )
    except IntegrityError:
        return False  # another process stored the same bytes first
    return True


def read_content(ledger: Ledger, sha256: str) -> bytes | None:
    """The stored bytes for this content, or None."""
    with ledger.engine.connect() as conn:
        row = conn.execute(select(document_contents.c.content).where(document_contents.c.sha256 == sha256)).first()
    return bytes(row[0]) if row is not None else None


def documents_without_content(ledger: Ledger) -> list[dict[str, object]]:
    """Documents of a shared ledger whose bytes are not in it yet (registered before it kept
    them): ``init`` on the machine that holds their store adds them."""
    if not is_shared(ledger):
        return []
    missing = ~select(document_contents.c.sha256).where(document_contents.c.sha256 == documents.c.sha256).exists()
    statement = select(documents.c.id, documents.c.sha256, documents.c.stored_path).where(missing)
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(statement).mappings()]
