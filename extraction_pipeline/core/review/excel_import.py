"""``review import``: decisions typed into a workbook's Values sheet, applied by the browser's rules.

Rows are matched by their hidden, signed row id, never by position (reviewers sort and filter).
All rows are checked before anything is written: an unknown or edited row id, an unknown decision
or a corrected value of the wrong type refuses the whole file, naming each bad row, so a
half-applied spreadsheet never exists. Then each decision is recorded from the state the workbook
showed (the id's ``seq``): one already recorded is "unchanged" (re-importing the same file changes
nothing), and one that contradicts a decision made meanwhile (in the browser, or by another
import) is reported as a conflict and not applied.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.workbook import (
    COMMENT_COLUMN,
    CORRECTED_QUOTE_COLUMN,
    CORRECTED_VALUE_COLUMN,
    DECISION_COLUMN,
    ROW_ID_COLUMN,
)
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.schema import batch_items, batches, review_decisions
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.row_ids import RowId, parse_row_id, signed_by
from extraction_pipeline.core.review.values import CORRECT, DECISIONS, MARK_NOT_REPORTED

MAX_WORKBOOK_BYTES = 100 * 1024 * 1024
VALUES_SHEET = "Values"


@dataclass(frozen=True)
class RowDecision:
    row: int  # the spreadsheet's row number, as the reviewer sees it
    id: RowId
    raw_id: str
    decision: str | None
    value_text: str | None
    quote: str | None
    comment: str | None


@dataclass
class ImportReport:
    recorded: list[str] = field(default_factory=list)
    unchanged: int = 0
    comments: int = 0
    conflicts: list[str] = field(default_factory=list)
    batches: set[int] = field(default_factory=set)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def read_rows(path: Path) -> list[RowDecision | str]:
    """Each filled-in row as a RowDecision, or an error line naming the row."""
    from openpyxl import load_workbook

    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.stat().st_size > MAX_WORKBOOK_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_WORKBOOK_BYTES} bytes")
    try:
        workbook = load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"{path}: not an Excel workbook ({type(exc).__name__}: {exc})") from exc
    try:
        if VALUES_SHEET not in workbook.sheetnames:
            raise ConfigError(f"{path}: no '{VALUES_SHEET}' sheet: is this a workbook exported by this pipeline?")
        rows = workbook[VALUES_SHEET].iter_rows(values_only=True)
        header = [str(cell).strip() if cell is not None else "" for cell in next(rows, ())]
        missing = [name for name in (ROW_ID_COLUMN, DECISION_COLUMN) if name not in header]
        if missing:
            raise ConfigError(f"{path}: the Values sheet has no {' / '.join(missing)} column")
        column = {name: header.index(name) for name in header if name}
        found: list[RowDecision | str] = []
        for number, cells in enumerate(rows, start=2):
            found.extend(_read_row(number, cells, column))
        return found
    finally:
        workbook.close()


def _read_row(number: int, cells: tuple[Any, ...], column: dict[str, int]) -> list[RowDecision | str]:
    def cell(name: str) -> str | None:
        index = column.get(name)
        return _text(cells[index]) if index is not None and index < len(cells) else None

    decision, comment = cell(DECISION_COLUMN), cell(COMMENT_COLUMN)
    if decision is None and comment is None:
        return []  # nothing decided on this row
    raw_id = cell(ROW_ID_COLUMN)
    row_id = parse_row_id(raw_id or "")
    if row_id is None:
        return [
            f"row {number}: missing or malformed row id {raw_id!r}; do not edit the hidden '{ROW_ID_COLUMN}' column"
        ]
    if decision is not None:
        decision = " ".join(decision.lower().replace("_", " ").split())
        if decision not in DECISIONS:
            return [f"row {number}: unknown decision {decision!r}; use one of {', '.join(DECISIONS)}"]
    value = cell(CORRECTED_VALUE_COLUMN)
    if decision == CORRECT and value is None:
        return [f"row {number}: 'correct' needs the corrected value"]
    return [RowDecision(number, row_id, raw_id or "", decision, value, cell(CORRECTED_QUOTE_COLUMN), comment)]


def _check_ids(ledger: Ledger, rows: list[RowDecision]) -> list[str]:
    """Every id must name an existing value and carry its batch's signature."""
    item_ids = sorted({row.id.item_id for row in rows})
    with ledger.engine.connect() as conn:
        uids = dict(
            conn.execute(
                select(batch_items.c.id, batches.c.uid)
                .join(batches, batches.c.id == batch_items.c.batch_id)
                .where(id_in(batch_items.c.id, conn.dialect.name, item_ids))
            ).all()
        )
    errors = []
    for row in rows:
        uid = uids.get(row.id.item_id)
        if uid is None or not signed_by(row.raw_id, uid):
            errors.append(f"row {row.row}: unknown or tampered row id; do not edit the hidden '{ROW_ID_COLUMN}' column")
    return errors


def import_decisions(ledger: Ledger, path: Path, *, reviewer: str, options: ParseOptions | None = None) -> ImportReport:
    reviewer = " ".join((reviewer or "").split())
    if not reviewer:
        raise ConfigError("a reviewer name is required (--reviewer)")
    parsed = read_rows(path)
    errors = [entry for entry in parsed if isinstance(entry, str)]
    rows = [entry for entry in parsed if isinstance(entry, RowDecision)]
    errors += _check_ids(ledger, rows)
    if not errors:
        errors += _check_values(ledger, rows)
    if errors:
        shown = "\n  ".join(errors[:50]) + (f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else "")
        raise ConfigError(f"{path.name}: nothing imported; fix these rows and import again:\n  {shown}")
    report = ImportReport()
    origin = f"excel:{path.name}"
    for row in rows:
        report.batches.add(decisions.machine_entry(ledger, row.id.item_id, row.id.path)[0])
        if row.comment and not _has_comment(ledger, row, reviewer):
            decisions.record(
                ledger,
                item_id=row.id.item_id,
                path=row.id.path,
                action="comment",
                reviewer=reviewer,
                seen_seq=row.id.seq,
                comment=row.comment,
                origin=origin,
            )
            report.comments += 1
        if row.decision is None:
            continue
        outcome = _apply(ledger, row, reviewer, origin, options)
        if outcome.kind == decisions.RECORDED:
            report.recorded.append(f"row {row.row}: {row.id.path} {row.decision}")
        elif outcome.kind == decisions.UNCHANGED:
            report.unchanged += 1
        else:
            report.conflicts.append(f"row {row.row}: {row.id.path}: {outcome.message}")
    return report


def _check_values(ledger: Ledger, rows: list[RowDecision]) -> list[str]:
    errors = []
    for row in rows:
        try:
            _batch, entry = decisions.machine_entry(ledger, row.id.item_id, row.id.path)
            if row.decision == CORRECT and row.value_text is not None:
                corrections.checked_value(ledger, row.id.item_id, row.id.path, entry, row.value_text)
        except ConfigError as exc:
            errors.append(f"row {row.row}: {exc}")
    return errors


def _has_comment(ledger: Ledger, row: RowDecision, reviewer: str) -> bool:
    with ledger.engine.connect() as conn:
        return (
            conn.execute(
                select(review_decisions.c.id).where(
                    review_decisions.c.item_id == row.id.item_id,
                    review_decisions.c.path == row.id.path,
                    review_decisions.c.reviewer == reviewer,
                    review_decisions.c.comment == row.comment,
                )
            ).first()
            is not None
        )


def _apply(
    ledger: Ledger, row: RowDecision, reviewer: str, origin: str, options: ParseOptions | None
) -> decisions.Outcome:
    if row.decision == CORRECT:
        return corrections.correct(
            ledger,
            item_id=row.id.item_id,
            path=row.id.path,
            reviewer=reviewer,
            seen_seq=row.id.seq,
            value_text=row.value_text or "",
            quote=row.quote,
            origin=origin,
            options=options,
        )
    return decisions.record(
        ledger,
        item_id=row.id.item_id,
        path=row.id.path,
        action=row.decision or MARK_NOT_REPORTED,
        reviewer=reviewer,
        seen_seq=row.id.seq,
        origin=origin,
    )
