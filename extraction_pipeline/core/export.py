"""The batch workbook: one row per document with every field's value, quote, page and status.

Written to a temporary file and renamed, so a reader never sees a half-written workbook.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.fields import FIELD_NAMES
from extraction_pipeline.core.grounding import APPROXIMATE, UNVERIFIED, VERIFIED
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress

FIXED_COLUMNS = [
    "document_id",
    "filename",
    "status",
    "error",
    "model",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "attempts",
    "run_id",
    "values verified",
    "values approximate",
    "values unverified",
    "values flagged",
]
STATUS_FILLS = {VERIFIED: "C6EFCE", APPROXIMATE: "FFEB9C", UNVERIFIED: "FFC7CE"}
FLAG_FILL = "F4B183"


def field_columns(field_names: list[str]) -> list[str]:
    suffixes = ("", " quote", " page", " status", " check")
    return [f"{name}{suffix}" for name in field_names for suffix in suffixes]


def document_rows(ledger: Ledger, batch_id: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one dict per document, in document order (shared by the workbook and --json)."""
    items = batch_item_rows(ledger, batch_id)
    results = [json.loads(item["result_json"]) if item["result_json"] else {} for item in items]
    names = list(FIELD_NAMES)
    for result in results:
        names.extend(name for name in result.get("fields", {}) if name not in names)
    header = FIXED_COLUMNS + field_columns(names)
    rows: list[dict[str, Any]] = []
    for item, result in zip(items, results, strict=True):
        row: dict[str, Any] = {
            "document_id": item["document_id"],
            "filename": item["filename"],
            "status": item["status"],
            "error": item["message"] if item["status"] == "error" else None,
            "model": item["model"],
            "tokens_in": item["tokens_in"],
            "tokens_out": item["tokens_out"],
            "cost_usd": round(item["cost_usd"] or 0.0, 6),
            "attempts": item["attempts"],
            "run_id": item["run_id"],
        }
        fields = result.get("fields", {})
        for name in names:
            found = fields.get(name, {})
            row[name] = found.get("value")
            row[f"{name} quote"] = found.get("quote")
            row[f"{name} page"] = found.get("page")
            row[f"{name} status"] = found.get("status")
            row[f"{name} check"] = "; ".join(found.get("flags") or []) or None
        statuses = [f.get("status") for f in fields.values()]
        for tier in (VERIFIED, APPROXIMATE, UNVERIFIED):
            row[f"values {tier}"] = statuses.count(tier) if fields else None
        row["values flagged"] = sum(1 for f in fields.values() if f.get("flags")) if fields else None
        rows.append(row)
    return header, rows


def write_workbook(ledger: Ledger, batch_id: int, path: Path) -> Path:
    from openpyxl import Workbook  # lazy: only export pays for it
    from openpyxl.styles import Font, PatternFill

    batch = get_batch(ledger, batch_id)
    if batch is None:
        raise ConfigError(f"unknown batch {batch_id}")
    header, rows = document_rows(ledger, batch_id)
    counts = progress(ledger, batch_id)

    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None  # a new Workbook always has one sheet
    sheet.title = "Documents"
    sheet.append(header)
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for row in rows:
        sheet.append([row.get(column) for column in header])
        _as_text_cells(sheet[sheet.max_row])
    status_columns = [index for index, name in enumerate(header, start=1) if name.endswith(" status")]
    check_columns = [index for index, name in enumerate(header, start=1) if name.endswith(" check")]
    for row_cells in sheet.iter_rows(min_row=2):
        for index in status_columns:
            cell = row_cells[index - 1]
            color = STATUS_FILLS.get(str(cell.value))
            if color:
                cell.fill = PatternFill("solid", start_color=color, end_color=color)
        for index in check_columns:
            cell = row_cells[index - 1]
            if cell.value:
                cell.fill = PatternFill("solid", start_color=FLAG_FILL, end_color=FLAG_FILL)
    sheet.freeze_panes = "C2"

    summary = workbook.create_sheet("Batch")
    for key, value in [
        ("batch_id", batch_id),
        ("project", batch["project"]),
        ("user", batch["user"]),
        ("status", batch["status"]),
        ("created_at (UTC)", str(batch["created_at"])),
        ("completed_at (UTC)", str(batch["completed_at"] or "")),
        *counts.as_dict().items(),
    ]:
        summary.append([key, value])
        _as_text_cells(summary[summary.max_row])

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        workbook.save(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _as_text_cells(row_cells: Any) -> None:
    """Values that merely start like a formula (from a PDF, a model or a filename) stay text:
    a workbook must never execute content taken from a document."""
    for cell in row_cells:
        if cell.data_type == "f":
            cell.data_type = "s"


def default_export_path(exports_dir: Path, batch_id: int) -> Path:
    return exports_dir / f"batch-{batch_id}.xlsx"
