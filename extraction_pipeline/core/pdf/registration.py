"""Registering PDFs: validate, snapshot (sha256, size, pages) and keep a stored copy.

A document is stored under ``<home>/documents/<sha256>.pdf``: content-addressed, so the same file
registered twice is stored once, and the user's original may move or vanish afterwards. A stored
copy is never trusted by its name alone: it is read without following symbolic links and its bytes
are hashed again, when it is reused here and when it is parsed (parsing.py).
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.files import replacing
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.contents import documents_without_content, store_content
from extraction_pipeline.core.ledger.documents import get_document, insert_document
from extraction_pipeline.core.pdf.bibliography import Bibliography
from extraction_pipeline.core.pdf.isolation import ParseOptions, run_each

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
MAX_PDF_BYTES = 200 * 1024 * 1024
READD_HINT = "re-add the PDF with documents add"


@dataclass(frozen=True)
class RegisteredDocument:
    id: int
    filename: str
    sha256: str
    size_bytes: int
    pages: int
    created: bool
    registered_name: str = ""  # the filename it was first registered under (re-adding keeps it)


def validate_project(project: str) -> str:
    if not PROJECT_NAME.match(project):
        raise ConfigError(
            f"invalid project name {project!r}: use letters, digits, '.', '_' or '-' (max 100, no spaces)"
        )
    return project


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return copy_hashing(handle, None)


def copy_hashing(source: BinaryIO, target: BinaryIO | None) -> str:
    """The sha256 of everything read from ``source``, written on to ``target`` when given: one pass,
    so the bytes hashed are exactly the bytes copied."""
    digest = hashlib.sha256()
    for block in iter(lambda: source.read(1 << 20), b""):
        digest.update(block)
        if target is not None:
            target.write(block)
    return digest.hexdigest()


def open_stored_copy(path: Path) -> io.BufferedReader:
    """Open a stored copy for reading, never through a symbolic link (anyone able to write to the
    store could point one anywhere). PermanentError, one line, if it is missing, a link or not a
    regular file."""
    # O_NONBLOCK: opening a planted FIFO must not hang; it is refused below as not a regular file.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise PermanentError(f"stored copy of the document is missing: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a link
            raise PermanentError(f"stored copy {path.name} is a symbolic link: refused ({READD_HINT})") from None
        raise PermanentError(f"stored copy {path.name} cannot be read ({exc.strerror}): {READD_HINT}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PermanentError(f"stored copy {path.name} is not a regular file: refused ({READD_HINT})")
    return os.fdopen(fd, "rb")


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
    ledger: Ledger, store_dir: Path, project: str, source: Path, options: ParseOptions | None = None
) -> RegisteredDocument:
    """Validate ``source``, copy it into the store and record it. Idempotent per (project, content).
    ``options``: the limits a PDF is read under (size, pages, time, memory); the defaults if None.
    Raises ConfigError with the reason it is refused (OSError when it cannot be read at all)."""
    verdict = register_pdfs(ledger, store_dir, project, [source], options)[0]
    if isinstance(verdict, BaseException):
        raise verdict
    return verdict


def register_pdfs(
    ledger: Ledger, store_dir: Path, project: str, sources: list[Path], options: ParseOptions | None = None
) -> list[RegisteredDocument | ConfigError | OSError]:
    """Each of ``sources`` registered, or why not, in order: one bad PDF never costs the others.
    Each PDF is opened only in a child with the parse's time and memory limits (pdf/isolation.py):
    its page count checked first, then that it has text. One child reads them all, one after
    another (a new child after a PDF that fails), so a hostile file costs its child, never this
    process, and a hundred papers cost one child's start, not a hundred."""
    validate_project(project)
    options = options or ParseOptions()
    paths = [Path(source) for source in sources]
    verdicts: list[RegisteredDocument | ConfigError | OSError | None] = [None] * len(paths)
    readable: list[int] = []
    for index, path in enumerate(paths):
        try:
            check_pdf_file(path, options.limits.max_bytes)
            readable.append(index)
        except ConfigError as exc:
            verdicts[index] = exc
        except OSError as exc:  # unreadable file
            verdicts[index] = exc
    inspected = run_each(
        [paths[i] for i in readable], timeout_seconds=options.timeout_seconds, limits=options.limits, task="inspect"
    )
    for index, outcome in zip(readable, inspected, strict=True):
        if outcome.error is not None or outcome.value is None:
            verdicts[index] = ConfigError(f"{paths[index].name}: {outcome.error}")
            continue
        try:
            described = Bibliography(
                str(outcome.value.get("title") or ""),
                str(outcome.value.get("first_author") or ""),
                outcome.value.get("year") if isinstance(outcome.value.get("year"), int) else None,
            )
            verdicts[index] = _record(ledger, store_dir, project, paths[index], int(outcome.value["pages"]), described)
        except (ConfigError, OSError) as exc:
            verdicts[index] = exc
    done = [verdict for verdict in verdicts if verdict is not None]
    assert len(done) == len(paths), "every file gets a verdict"
    return done


def _record(
    ledger: Ledger, store_dir: Path, project: str, source: Path, pages: int, described: Bibliography | None = None
) -> RegisteredDocument:
    described = described or Bibliography()
    digest = sha256_of(source)
    stored = _store_copy(store_dir, source, digest)
    size = stored.lstat().st_size
    # The bytes first, the row last: a process killed in between leaves at most unreferenced
    # bytes (reused when the file is added again), never a document whose content is missing.
    store_content(ledger, digest, stored)  # a shared ledger keeps the bytes for other machines
    doc_id, created = insert_document(
        ledger,
        project=project,
        filename=source.name,
        sha256=digest,
        size_bytes=size,
        pages=pages,
        stored_path=str(stored),
        title=described.title,
        first_author=described.first_author,
        year=described.year,
    )
    registered_name = source.name
    if not created:
        existing = get_document(ledger, doc_id)
        registered_name = existing["filename"] if existing else source.name
    return RegisteredDocument(doc_id, source.name, digest, size, pages, created, registered_name)


def _store_copy(store_dir: Path, source: Path, digest: str) -> Path:
    """``<store_dir>/<digest>.pdf``, rewritten from ``source`` unless it already is a regular file
    with those bytes: whatever else sits under that name (a link, a replaced or truncated file) is
    not the document the ledger will point at."""
    _ensure_store_dir(store_dir)
    stored = store_dir / f"{digest}.pdf"
    if not _holds(stored, digest):
        _write_copy(source, stored, digest)
    return stored


def _ensure_store_dir(store_dir: Path) -> None:
    # A linked store would put every stored copy wherever the link points.
    if store_dir.is_symlink():
        raise ConfigError(f"{store_dir}: the documents store is a symbolic link: refused (make it a directory)")
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{store_dir}: the documents store is not a directory") from None


def _holds(stored: Path, digest: str) -> bool:
    """Whether ``stored`` is a regular file, not a link, whose bytes hash to ``digest``."""
    try:
        with open_stored_copy(stored) as handle:
            return copy_hashing(handle, None) == digest
    except PermanentError:
        return False


def _write_copy(source: Path, stored: Path, digest: str) -> None:
    # A temporary name first so a crash never leaves a half-written stored copy (a killed writer's
    # partial file is swept by the next one); os.replace then swaps the name itself, so a link
    # planted there is replaced, never written through.
    try:
        with replacing(stored) as tmp:
            fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)  # created by replacing
            with os.fdopen(fd, "wb") as target, source.open("rb") as handle:
                copied = copy_hashing(handle, target)
            if copied != digest:
                raise ConfigError(f"{source}: changed while it was being added; add it again")
    except IsADirectoryError:
        raise ConfigError(f"{stored}: a directory is in the way of the stored copy; remove it") from None


def store_missing_contents(ledger: Ledger) -> tuple[int, int]:
    """Put into a shared ledger the bytes of documents registered before it kept them, from this
    machine's stored copies (each checked against its sha256). Returns (stored, not found here):
    documents stored on another machine are added by ``init`` there."""
    stored = unavailable = 0
    for document in documents_without_content(ledger):
        path = Path(str(document["stored_path"]))
        if not _holds(path, str(document["sha256"])):
            unavailable += 1
            continue
        stored += int(store_content(ledger, str(document["sha256"]), path))
    return stored, unavailable
