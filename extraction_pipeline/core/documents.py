"""Registering PDFs: validate, snapshot (sha256, size, pages) and keep a stored copy.

A document is stored under ``<home>/documents/<sha256>.pdf``: content-addressed, so the same file
registered twice is stored once, and the user's original may move or vanish afterwards.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import insert_document

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
MAX_PDF_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class RegisteredDocument:
    id: int
    filename: str
    sha256: str
    size_bytes: int
    pages: int
    created: bool


def validate_project(project: str) -> str:
    if not PROJECT_NAME.match(project):
        raise ConfigError(
            f"invalid project name {project!r}: use letters, digits, '.', '_' or '-' (max 100, no spaces)"
        )
    return project


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def count_pdf_pages(path: Path) -> int:
    """Open the PDF and count pages; raise PermanentError with a specific reason if it is unusable."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()  # lazy: most processes never need it

    try:
        with pymupdf.open(path, filetype="pdf") as doc:
            if doc.needs_pass:
                raise PermanentError(f"{path.name}: PDF is encrypted (password-protected)")
            pages = int(doc.page_count)
    except PermanentError:
        raise
    except Exception as exc:  # pymupdf raises several unrelated types for damaged files
        raise PermanentError(f"{path.name}: not a readable PDF ({exc})", original=exc) from exc
    if pages == 0:
        raise PermanentError(f"{path.name}: PDF has no pages")
    return pages


def check_pdf_file(path: Path, max_bytes: int = MAX_PDF_BYTES) -> None:
    """Cheap checks before opening: exists, regular file, non-empty, within size, PDF magic."""
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise ConfigError(f"{path}: file is empty")
    if size > max_bytes:
        raise ConfigError(f"{path}: {size} bytes exceeds the limit of {max_bytes} bytes (EXTRACTION_MAX_PDF_MB)")
    with path.open("rb") as handle:
        head = handle.read(1024)
    if b"%PDF-" not in head:
        raise ConfigError(f"{path}: not a PDF (no %PDF- header)")


def register_pdf(
    ledger: Ledger, store_dir: Path, project: str, source: Path, max_bytes: int = MAX_PDF_BYTES
) -> RegisteredDocument:
    """Validate ``source``, copy it into the store and record it. Idempotent per (project, content)."""
    validate_project(project)
    source = Path(source)
    check_pdf_file(source, max_bytes)
    try:
        pages = count_pdf_pages(source)
    except PermanentError as exc:
        raise ConfigError(str(exc)) from exc
    digest = sha256_of(source)
    store_dir.mkdir(parents=True, exist_ok=True)
    stored = store_dir / f"{digest}.pdf"
    if not stored.exists():
        # Copy to a temporary name first so a crash never leaves a half-written stored copy.
        fd, tmp_name = tempfile.mkstemp(dir=store_dir, suffix=".partial")
        os.close(fd)
        shutil.copyfile(source, tmp_name)
        os.replace(tmp_name, stored)
    size = stored.stat().st_size
    doc_id, created = insert_document(
        ledger,
        project=project,
        filename=source.name,
        sha256=digest,
        size_bytes=size,
        pages=pages,
        stored_path=str(stored),
    )
    return RegisteredDocument(doc_id, source.name, digest, size, pages, created)
