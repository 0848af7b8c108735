"""A batch closes with its workbook: writing it, and saying why it could not be written.

Every document finished puts a batch in ``exporting``; only a recorded workbook makes it
``completed``. This is the one way to write a batch's own workbook, whether the aggregator's export
run or `batch export` asks: a failure (no space left, permission denied, ...) is recorded on the
batch in words and the batch stays in ``exporting``, so the aggregator tries again with backoff
and every surface says what is wrong instead of showing a completed batch without a workbook.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError, ExtractionRuntimeError
from extraction_pipeline.core.export.workbook import default_export_path, write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch, record_export_failure, record_workbook
from extraction_pipeline.core.ledger.schema import BatchStatus

# errno -> the words a user reads; anything else is told by the system's own message.
_REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.EIO: "input/output error",
}


class ExportError(ExtractionRuntimeError):
    """The batch's workbook could not be written; ``reason`` is the short cause in words."""

    def __init__(self, reason: str, *, original: BaseException | None = None) -> None:
        super().__init__(f"export failed: {reason}", original=original)
        self.reason = reason


class ExportResult(StrEnum):
    WRITTEN = "written"  # this call wrote and recorded the batch's workbook
    ALREADY_WRITTEN = "already written"  # another writer recorded this version first
    REOPENED = "reopened"  # `batch retry` reopened the batch meanwhile: the next close writes it


@dataclass(frozen=True)
class BatchWorkbook:
    result: ExportResult
    path: Path | None
    version: int


# A run imports what writing needs for a batch's last round only when it has this many documents
# left: a small run ends before the import pays back, and every small run importing cost the
# machine ~2.5 CPU-s each.
WARM_UP_MIN_LEFT = 20


def worth_warming_up(active: int, left_in_run: int, pool: int) -> bool:
    """Whether a run should import what writing the workbook needs now, with ``active`` of its
    batch's documents still active, ``left_in_run`` of its own documents unfinished and a pool of
    ``pool`` calls: when the batch's active documents could all be this run's (it will close the
    batch), or are the last round of a large run (no more than the pool holds)."""
    return active <= left_in_run or (left_in_run >= WARM_UP_MIN_LEFT and active <= pool)


def warm_up() -> None:
    """Import what writing a workbook needs (openpyxl, statsmodels for the pooling, matplotlib for
    the pictures: ~2.5 CPU-s): a run that holds a batch's last documents does it while they wait
    on the model, so the workbook follows the last document within a second or two. A failure
    here is not reported: writing imports the same modules and reports it there."""
    try:
        from matplotlib.backends import backend_agg  # noqa: F401
        from PIL import PngImagePlugin  # noqa: F401

        from extraction_pipeline.core.export import synthesis_sheets  # noqa: F401
    except Exception:  # noqa: S110 - told by the write, which imports the same
        pass


def failure_reason(exc: BaseException, folder: Path) -> str:
    """What went wrong writing into ``folder``, in words: "no space left on device (/home/exports)"."""
    if isinstance(exc, OSError):
        words = _REASONS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
        return f"{words} ({folder})"
    return f"{type(exc).__name__}: {exc}"


def write_batch_workbook(ledger: Ledger, batch_id: int, exports_dir: Path) -> BatchWorkbook:
    """Write and record the workbook of a batch in ``exporting`` (ConfigError for any other state).
    Raises ``ExportError`` after recording the reason on the batch when the file cannot be written."""
    batch = get_batch(ledger, batch_id)
    if batch is None:
        raise ConfigError(f"unknown batch {batch_id}")
    if batch["status"] != BatchStatus.EXPORTING:
        raise ConfigError(f"batch {batch_id} is {batch['status']}, not waiting for its workbook")
    version = int(batch["export_version"] or 0) + 1
    target = default_export_path(exports_dir, batch_id, version)
    try:
        path = write_workbook(ledger, batch_id, target)
    except OSError as exc:
        reason = failure_reason(exc, exports_dir)
        record_export_failure(ledger, batch_id, reason)
        raise ExportError(reason, original=exc) from exc
    if record_workbook(ledger, batch_id, str(path), version):
        return BatchWorkbook(ExportResult.WRITTEN, path, version)
    now = get_batch(ledger, batch_id)
    if now is not None and now["status"] == BatchStatus.COMPLETED and (now["export_version"] or 0) >= version:
        return BatchWorkbook(ExportResult.ALREADY_WRITTEN, Path(str(now["export_path"])), version)
    return BatchWorkbook(ExportResult.REOPENED, None, version)
