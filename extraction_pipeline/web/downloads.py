"""Routes under /extraction: the list of batches and each batch's workbook and meta-analysis CSV.

Only integer ids reach the handlers (Starlette's ``int`` convertor), and a workbook is served only
from inside the instance home's exports folder, whatever the ledger says its path is.
"""

from __future__ import annotations

import html
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.queries import progress, recent_batches
from extraction_pipeline.core.meta_csv import meta_analysis_csv
from extraction_pipeline.web.urls import PREFIX

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def routes(ledger: Ledger, exports_dir: Path) -> list[Route]:
    exports = exports_dir.resolve()

    async def index(request: Request) -> Response:
        rows = []
        for batch in recent_batches(ledger, limit=200):
            counts = progress(ledger, batch["id"])
            links = (
                f'<a href="{PREFIX}/batches/{batch["id"]}/workbook.xlsx">workbook</a> · '
                f'<a href="{PREFIX}/batches/{batch["id"]}/meta-analysis.csv">CSV</a>'
                if batch["export_path"]
                else "not yet written"
            )
            cells = (
                batch["id"],
                html.escape(str(batch["project"])),
                html.escape(str(batch["user"])),
                batch["status"],
                f"{counts.done}/{counts.total} ({counts.error} errors)",
            )
            rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + f"<td>{links}</td></tr>")
        body = (
            "<!doctype html><meta charset='utf-8'><title>Batches · extraction_pipeline</title>"
            "<h1>Batches</h1><p><a href='/'>Dagster UI</a></p>"
            "<table border='1' cellpadding='4'><tr><th>batch</th><th>project</th><th>user</th><th>status</th>"
            "<th>documents</th><th>downloads</th></tr>" + "".join(rows) + "</table>"
        )
        return HTMLResponse(body)

    def _closed_batch(batch_id: int) -> dict[str, object] | Response:
        batch = get_batch(ledger, batch_id)
        if batch is None:
            return PlainTextResponse(f"unknown batch {batch_id}\n", status_code=404)
        return batch

    async def workbook(request: Request) -> Response:
        batch = _closed_batch(request.path_params["batch_id"])
        if isinstance(batch, Response):
            return batch
        if not batch["export_path"]:
            return PlainTextResponse("no workbook yet: the batch is not closed and exported\n", status_code=404)
        path = Path(str(batch["export_path"])).resolve()
        if not path.is_relative_to(exports) or not path.is_file():
            return PlainTextResponse("workbook not available on this server\n", status_code=404)
        return FileResponse(path, media_type=XLSX, filename=path.name)

    async def meta_csv(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        batch = _closed_batch(batch_id)
        if isinstance(batch, Response):
            return batch
        headers = {"content-disposition": f'attachment; filename="batch-{batch_id}-meta-analysis.csv"'}
        return Response(meta_analysis_csv(ledger, batch_id), media_type="text/csv; charset=utf-8", headers=headers)

    return [
        Route(PREFIX, index),
        Route(f"{PREFIX}/", index),
        Route(f"{PREFIX}/batches/{{batch_id:int}}/workbook.xlsx", workbook),
        Route(f"{PREFIX}/batches/{{batch_id:int}}/meta-analysis.csv", meta_csv),
    ]
