"""Routes under /extraction: the list of batches and each batch's workbook and meta-analysis CSV.

Only integer ids reach the handlers (Starlette's ``int`` convertor), and a workbook is served only
from inside the instance home's exports folder, whatever the ledger says its path is. Once
reviewers have decided on values, the workbook served is a reviewed copy written next to the
batch's own export (named after the latest decision, so every download between two decisions is
the same file, and the machine's export is never overwritten).
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
from extraction_pipeline.core.review.decisions import latest_decision_id
from extraction_pipeline.core.review.progress import batch_review
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.pages import esc, page, table, url_part
from extraction_pipeline.web.urls import PREFIX

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def reviewed_workbook_path(exports_dir: Path, batch_id: int, decision_id: int) -> Path:
    return exports_dir / f"batch-{batch_id}-reviewed-d{decision_id}.xlsx"


def routes(ledger: Ledger, settings: Settings) -> list[Route]:
    exports = settings.exports_dir.resolve()

    async def index(request: Request) -> Response:
        rows = []
        for batch in recent_batches(ledger, limit=200):
            counts = progress(ledger, batch["id"])
            reviews = [r for r in batch_review(ledger, batch["id"]) if r.status == "completed"]
            links = (
                f'<a href="{PREFIX}/batches/{batch["id"]}/workbook.xlsx">workbook</a> · '
                f'<a href="{PREFIX}/batches/{batch["id"]}/meta-analysis.csv">CSV</a>'
                if batch["export_path"]
                else esc(describe_state(batch))
                if batch.get("export_error")
                else "not yet written"
            )
            rows.append(
                [
                    f"<a href='{PREFIX}/batches/{batch['id']}'>batch {batch['id']}</a>",
                    f"<a href='{PREFIX}/projects/{url_part(batch['project'])}'>{esc(batch['project'])}</a>",
                    esc(batch["user"]),
                    esc(batch["status"]),
                    esc(f"{counts.done}/{counts.total} ({counts.error} errors)"),
                    esc(f"{sum(1 for r in reviews if r.reviewed)}/{len(reviews)}"),
                    links,
                ]
            )
        body = (
            f"<p><a href='{PREFIX}/projects'>Create a project, upload PDFs and start a batch</a></p>"
            + table(["batch", "project", "user", "status", "documents", "reviewed", "downloads"], rows)
            if rows
            else f"<p>No batches yet. <a href='{PREFIX}/projects'>Create a project and upload PDFs</a>.</p>"
        )
        return page("Batches", body)

    def _known_batch(batch_id: int) -> dict[str, object] | Response:
        batch = get_batch(ledger, batch_id)
        if batch is None:
            return PlainTextResponse(f"unknown batch {batch_id}\n", status_code=404)
        return batch

    def _current_workbook(batch: dict[str, object]) -> Path:
        """The batch's export, or its reviewed copy when decisions exist (written on first request)."""
        batch_id = int(str(batch["id"]))
        decision = latest_decision_id(ledger, batch_id)
        if decision is None:
            return Path(str(batch["export_path"])).resolve()
        path = reviewed_workbook_path(exports, batch_id, decision)
        if not path.is_file():
            write_workbook(ledger, batch_id, path)
        return path

    async def workbook(request: Request) -> Response:
        batch = _known_batch(request.path_params["batch_id"])
        if isinstance(batch, Response):
            return batch
        if not batch["export_path"]:
            return PlainTextResponse("no workbook yet: the batch is not closed and exported\n", status_code=404)
        path = await run_in_threadpool(_current_workbook, batch)
        if not path.is_relative_to(exports) or not path.is_file():
            return PlainTextResponse("workbook not available on this server\n", status_code=404)
        return FileResponse(path, media_type=XLSX, filename=path.name)

    async def meta_csv(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        batch = _known_batch(batch_id)
        if isinstance(batch, Response):
            return batch
        headers = {"content-disposition": f'attachment; filename="batch-{batch_id}-meta-analysis.csv"'}
        text = await run_in_threadpool(meta_analysis_csv, ledger, batch_id)
        return Response(text, media_type="text/csv; charset=utf-8", headers=headers)

    return [
        Route(PREFIX, index),
        Route(f"{PREFIX}/", index),
        Route(f"{PREFIX}/batches/{{batch_id:id}}/workbook.xlsx", workbook),
        Route(f"{PREFIX}/batches/{{batch_id:id}}/meta-analysis.csv", meta_csv),
    ]
