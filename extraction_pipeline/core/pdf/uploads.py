"""PDFs uploaded through the browser: the same validation and registration as ``documents add``.

An upload is staged under the instance home (never at a path a user names), registered from there
and the staged copy removed; the filename the user sent is reduced to a plain file name first.
Each file gets its own verdict, so one bad PDF never costs the good ones.
"""

from __future__ import annotations

import re
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from extraction_pipeline.core.files import owned_name, remove_stale_partials
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.pdf.registration import RegisteredDocument, register_pdfs

MAX_FILENAME_CHARS = 200
_UNSAFE = re.compile(r"[^\w .()+,-]")


@dataclass(frozen=True)
class UploadVerdict:
    filename: str
    document: RegisteredDocument | None
    reason: str | None  # why it was refused (None: registered)


def safe_filename(sent: str | None) -> str:
    """A plain, printable file name: no directories, no control characters, ends in .pdf."""
    name = unicodedata.normalize("NFC", (sent or "").replace("\\", "/").rsplit("/", 1)[-1])
    name = _UNSAFE.sub("_", name).strip(" .")[:MAX_FILENAME_CHARS]
    if not name:
        name = "upload"
    return name if name.lower().endswith(".pdf") else f"{name}.pdf"


def register_staged(
    ledger: Ledger,
    store_dir: Path,
    project: str,
    staged: list[tuple[str | None, Path | None]],
    options: ParseOptions,
) -> list[UploadVerdict]:
    """Register an upload's staged files, each ``(sent name, staged path)`` (path None: it was over
    the size limit and not kept), in order. The PDFs are read by one isolated child after another
    (registration.register_pdfs): an upload of a hundred papers pays one child's start."""
    kept = [(safe_filename(sent), path) for sent, path in staged if path is not None]
    registered = iter(register_pdfs(ledger, store_dir, project, [path for _, path in kept], options))
    verdicts: list[UploadVerdict] = []
    for sent, path in staged:
        filename = safe_filename(sent)
        if path is None:
            limit = options.limits.max_bytes
            verdicts.append(
                UploadVerdict(filename, None, f"larger than the limit of {limit} bytes (EXTRACTION_MAX_PDF_MB)")
            )
            continue
        verdict = next(registered)
        if isinstance(verdict, RegisteredDocument):
            verdicts.append(UploadVerdict(filename, verdict, None))
        else:  # the reason names the staged path: show the user's file name instead
            reason = str(verdict.strerror if isinstance(verdict, OSError) and verdict.strerror else verdict)
            verdicts.append(
                UploadVerdict(filename, None, reason.replace(str(path), filename).replace(f"{filename}: ", ""))
            )
    return verdicts


def staging_area(home: Path) -> tempfile.TemporaryDirectory[str]:
    """A folder for one upload's files, removed when done. Named after this process: what a killed
    server leaves here is removed when `ui` starts again."""
    directory = staging_dir(home)
    directory.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=directory, prefix=owned_name("upload"))


def staging_dir(home: Path) -> Path:
    return home / "uploads"


def sweep_stale_uploads(home: Path, store_dir: Path) -> list[Path]:
    """What uploads of a killed server left (staged copies, half-written stored copies): removed
    when the server starts. Nothing of it was registered: a document row is written last."""
    return remove_stale_partials(staging_dir(home)) + remove_stale_partials(store_dir)
