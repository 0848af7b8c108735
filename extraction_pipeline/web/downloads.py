"""The list of batches, and each batch's workbook and meta-analysis CSV.

Only integer ids reach the handlers (the ``id`` convertor), and a workbook is served only from
inside the instance home's exports folder, whatever the ledger says its path is. Once reviewers
have decided on values, the workbook served is a reviewed copy written next to the batch's own
export (named after the latest decision, so every download between two decisions is the same
file, and the machine's export is never overwritten).
"""

from __future__ import annotations

from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.export.meta_csv import meta_analysis_csv
from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import describe_state, get_batch
from extraction_pipeline.core.ledger.queries import progress, recent_batches
from extraction_pipeline.core.ledger.rows import BatchRow
from extraction_pipeline.core.review.decisions import latest_decision_id
from extraction_pipeline.core.review.progress import batch_review
from extraction_pipeline.web.deps import ledger_of, settings_of, user_of
from extraction_pipeline.web.templating import render
from extraction_pipeline.web.urls import PREFIX

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def reviewed_workbook_path(exports_dir: Path, batch_id: int, decision_id: int) -> Path:
    return exports_dir / f"batch-{batch_id}-reviewed-d{decision_id}.xlsx"


async def index(request: Request) -> Response:
    ledger = ledger_of(request)
    rows = []
    for batch in recent_batches(ledger, limit=200):
        reviews = [r for r in batch_review(ledger, batch["id"]) if r.status == "completed"]
        rows.append(
            {
                "batch": batch,
                "counts": progress(ledger, batch["id"]),
                "reviewed": sum(1 for r in reviews if r.reviewed),
                "reviewable": len(reviews),
                "state": describe_state(batch),
            }
        )
    return render("batches.html", title="Batches", rows=rows, user=user_of(request))


def _known_batch(ledger: Ledger, batch_id: int) -> BatchRow | Response:
    batch = get_batch(ledger, batch_id)
    if batch is None:
        return PlainTextResponse(f"unknown batch {batch_id}\n", status_code=404)
    return batch


def _current_workbook(ledger: Ledger, exports: Path, batch: BatchRow) -> Path:
    """The batch's export, or its reviewed copy when decisions exist (written on first request)."""
    decision = latest_decision_id(ledger, batch["id"])
    if decision is None:
        return Path(str(batch["export_path"])).resolve()
    path = reviewed_workbook_path(exports, batch["id"], decision)
    if not path.is_file():
        write_workbook(ledger, batch["id"], path)
    return path


async def workbook(request: Request) -> Response:
    ledger = ledger_of(request)
    exports = settings_of(request).exports_dir.resolve()
    batch = _known_batch(ledger, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    if not batch["export_path"]:
        return PlainTextResponse("no workbook yet: the batch is not closed and exported\n", status_code=404)
    path = await run_in_threadpool(_current_workbook, ledger, exports, batch)
    if not path.is_relative_to(exports) or not path.is_file():
        return PlainTextResponse("workbook not available on this server\n", status_code=404)
    return FileResponse(path, media_type=XLSX, filename=path.name)


async def meta_csv(request: Request) -> Response:
    ledger = ledger_of(request)
    batch_id = request.path_params["batch_id"]
    batch = _known_batch(ledger, batch_id)
    if isinstance(batch, Response):
        return batch
    headers = {"content-disposition": f'attachment; filename="batch-{batch_id}-meta-analysis.csv"'}
    text = await run_in_threadpool(meta_analysis_csv, ledger, batch_id)
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)


ROUTES = [
    Route(PREFIX, index),
    Route(f"{PREFIX}/", index),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/workbook.xlsx", workbook),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/meta-analysis.csv", meta_csv),
]
