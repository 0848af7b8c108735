"""The batch workbook: the reviewer's surface.

Sheets:
- **Documents**: one row per document: status, cost, how many values are verified / verified but
  flagged / approximate / unverified / judgements (each value counted once,
  ``core/review/status_words.py``), then every single-valued field (study metadata, baseline per
  arm, Risk of Bias, project fields) as value, quote, page, status and check columns.
- **Outcomes**: one row per outcome entry of each document, same columns per field: with the
  base template version 2 an entry is one outcome × arm × time point, and ``arm`` names its arm
  (version 1: one row per outcome with both arms' numbers).
- **Arms**: one row per study × arm (name, what it received, subgroup, randomized and analysed n,
  baseline), each field with its quote, page and status (version 1: treatment and control from the
  baseline fields).
- **Comparisons**: one row per printed comparison (outcome, time point, the arm and the arm it was
  compared with, measure, estimate, CI, p), each field with its status (version 1: each outcome's
  effect, treatment vs control).
- **Values**: one row per extracted value with its status and, beside it, the check column (each
  flag's sentence), its exact location (page, start, end), confidence and reason: the list to
  filter when reviewing. Its decision / corrected value / corrected quote /
  comment columns are for reviewers who work in the spreadsheet (``review import`` reads them
  back, matched by the hidden, signed row id); the final value, decision and reviewer of every
  value already decided are filled in.
- **Possibly missed**: per document, what the paper reports and no extracted value covers (the
  recall check), with its page and text and what a reviewer did about it.
- **Batch**: the batch, its frozen template version, totals, review progress, and what the colours mean.
- **Synthesis** and **Risk of bias**: the pooled outcomes with their forest plots, and the RoB 2
  traffic lights (``core/export/synthesis_sheets.py``).

Status cells are filled by tier (green / yellow / red) and check cells with a flag in orange. A
flagged value's status reads "verified, flagged" (any status with a flag: ", flagged"), filled
orange unless its own status is red: a filter on ``verified`` keeps only values no check flagged.
Written to a temporary file and renamed (``core/files.py``), so a reader never sees a half-written
workbook, even from a writer killed mid-save.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.cells import as_text_cells, cell_value, write_row
from extraction_pipeline.core.export.meta_csv import final_value, study_label
from extraction_pipeline.core.extraction.consensus import AGREE, NEEDS_REVIEW, field_of
from extraction_pipeline.core.extraction.follow_up import found_by_follow_up
from extraction_pipeline.core.extraction.grounded import GroundedFields, GroundedValue, fields_of, second_fields_of
from extraction_pipeline.core.files import replacing
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.budgets import get_budget
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress, token_rates
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing
from extraction_pipeline.core.ledger.templates import definition_of, label_of, template_of_batch
from extraction_pipeline.core.llm.offline import OFFLINE_PROVIDER, OFFLINE_WARNING
from extraction_pipeline.core.review.decisions import comments_of, current_decisions
from extraction_pipeline.core.review.missed import MissedReview, current_missed_reviews
from extraction_pipeline.core.review.progress import review_of
from extraction_pipeline.core.review.row_ids import make_row_id
from extraction_pipeline.core.review.status_words import (
    FLAGGED,
    VERIFIED_BUT_FLAGGED,
    colour_key,
    shown_status,
    status_counts,
)
from extraction_pipeline.core.review.values import (
    APPROVE,
    DECISIONS,
    REVIEWER_UNGROUNDED,
    Decision,
    decision_label,
    final_status,
    suggestion_of,
)
from extraction_pipeline.core.templates.arms import ARM_FIELDS, EFFECT_FIELDS, StudyArms, study_arms
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_SUPPORTED,
    JUDGEMENT_UNSUPPORTED,
    NOT_REPORTED,
    UNVERIFIED,
    VERIFIED,
)
from extraction_pipeline.core.verification.recall import PossiblyMissed

DECISION_COLUMN, CORRECTED_VALUE_COLUMN, CORRECTED_QUOTE_COLUMN, COMMENT_COLUMN = (
    "decision",
    "corrected value",
    "corrected quote",
    "comment",
)
EDITABLE_COLUMNS = (DECISION_COLUMN, CORRECTED_VALUE_COLUMN, CORRECTED_QUOTE_COLUMN, COMMENT_COLUMN)
ROW_ID_COLUMN = "row id"
EDITABLE_FILL = "DDEBF7"
DOCUMENT_COLUMNS = [
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
    "values verified but flagged",
    "values approximate",
    "values unverified",
    "judgements",
    "outcomes",
    "answer",
    "agreement",
    "review",
]
OUTCOME_COLUMNS = ["document_id", "filename", "outcome", "found by"]
ARM_COLUMNS = ["document_id", "filename", "study", "arm id", "arm"]
COMPARISON_COLUMNS = [
    "document_id",
    "filename",
    "study",
    "comparison id",
    "outcome",
    "time point",
    "arm compared",
    "compared with",
    "arm id",
    "comparator id",
]
# Repeated modules with sheets of their own (base template version 2); any other repeated
# module's entries are rows of the Outcomes sheet, as before.
OWN_SHEETS = ("arms", "comparisons")
COMPARISON_FIELDS = ("outcome_name", "timepoint", "arm", "comparator_arm")
MISSED_COLUMNS = ["document_id", "filename", "page", "where", "kind", "label", "text", "numbers", "why", "state"]
NOT_CHECKED = "not checked (extracted before the recall check)"
VALUE_COLUMNS = [
    "document_id",
    "filename",
    "module",
    "outcome",
    "field",
    "value",
    "quote",
    "page",
    "source",
    "start",
    "end",
    "status",
    "check",
    "confidence",
    "reason",
    "second model value",
    "second model quote",
    "second model status",
    "agreement",
    "adjudicator suggests",
    "final value",
    "final status",
    "decided by",
    "decided at (UTC)",
    "comments so far",
    *EDITABLE_COLUMNS,
    ROW_ID_COLUMN,
]
FIELD_SUFFIXES = ("", " quote", " page", " status", " check", " final", " final status", " decision")
STATUS_FILLS: dict[str, str] = {
    VERIFIED: "C6EFCE",
    APPROXIMATE: "FFEB9C",
    UNVERIFIED: "FFC7CE",
    # Judgements: blue when a quote supports them (never the green of a checked number).
    JUDGEMENT_SUPPORTED: "BDD7EE",
    JUDGEMENT_APPROXIMATE: "FFEB9C",
    JUDGEMENT_NOT_FOUND: "FFC7CE",
    JUDGEMENT_UNSUPPORTED: "FFC7CE",
    REVIEWER_UNGROUNDED: "E4DFEC",  # its own colour: neither the paper's green nor a machine's red
}
FLAG_FILL = "F4B183"
STATUS_FILLS[FLAGGED] = FLAG_FILL  # "verified, flagged", "approximate, flagged", ... (status_words.colour_key)
NOTHING_FOUND = "completed, but no value was found: check the model (Batch sheet) and the PDF"
LEGEND = [
    (
        VERIFIED,
        "quote found verbatim (similarity >= 0.95), every number in it is in the source, value in quote, "
        "and no check raised a flag",
    ),
    (
        VERIFIED_BUT_FLAGGED,
        "verified as above, but a check raised a flag (the check column says which): never counted as verified; "
        "any status with a flag reads so (approximate, flagged; unverified, flagged)",
    ),
    (
        JUDGEMENT_SUPPORTED,
        "a judgement (Risk of Bias, outcome type, study label) whose quote is found verbatim; "
        "the judgement itself is the model's reading: review it",
    ),
    (JUDGEMENT_APPROXIMATE, "a judgement whose quote is found approximately (0.80-0.95)"),
    (JUDGEMENT_NOT_FOUND, "a judgement whose quote is not in the document: nothing supports it"),
    (JUDGEMENT_UNSUPPORTED, "a judgement whose quote is found but its numbers differ from the source"),
    (APPROXIMATE, "quote found approximately (0.80-0.95) with its numbers intact: check the wording"),
    (UNVERIFIED, "quote not found, a number differs from the source, or the value is not in the quote"),
    (NOT_REPORTED, "no value given: the model found nothing to extract for this field"),
    (
        "check",
        "each flag a check raised, in its sentence: a plausibility rule failed (e.g. estimate outside its CI, "
        "events above totals, a flipped sign)",
    ),
    ("start, end", "character offsets of the quote's match in the page text or table text named in source"),
    ("final value", "the value after review: the machine's (approve), the reviewer's (correct), empty (not reported)"),
    ("final status", "the final value's status: the machine's when approved, the corrected quote's when one was given"),
    (
        REVIEWER_UNGROUNDED,
        "a reviewer's correction without a quote that grounds it: the reviewer's word, not the paper's",
    ),
    (
        "decision",
        "Values sheet, blue columns: approve / correct / not reported, then `review import FILE --reviewer NAME`",
    ),
]


@dataclass(frozen=True)
class SheetData:
    name: str
    header: list[str]
    rows: list[dict[str, Any]]


def _field_columns(names: list[str]) -> list[str]:
    return [f"{name}{suffix}" for name in names for suffix in FIELD_SUFFIXES]


def _field_cells(name: str, entry: GroundedValue, decision: Decision | None) -> dict[str, Any]:
    return {
        name: entry.value,
        f"{name} quote": entry.quote,
        f"{name} page": entry.page,
        f"{name} status": shown_status(entry),
        f"{name} check": _check_text(entry),
        f"{name} final": _final_value(entry, decision),
        f"{name} final status": final_status(entry, decision),
        f"{name} decision": decision_label(decision) or None,
    }


def _final_value(entry: GroundedValue, decision: Decision | None) -> Any:
    """The value a meta-analysis should use: the decided one, else the machine's."""
    return decision.value if decision is not None else entry.value


def _check_text(entry: GroundedValue) -> str | None:
    return "; ".join(entry.flags) or None


def _column_names(template: TemplateDefinition, results: list[GroundedFields]) -> tuple[list[str], list[str]]:
    """Document-level names ("metadata.nct_number") and outcome field names, in template order,
    then any name a stored result has that the template lacks (nothing stored is dropped)."""
    single = [f"{m.name}.{f.name}" for m in template.all_modules() if not m.repeated for f in m.fields]
    repeated = [f.name for m in template.all_modules() if m.repeated and m.name not in OWN_SHEETS for f in m.fields]
    for fields in results:
        for path, entry in fields.items():
            if entry.index is None and _column_of(path, entry) not in single:
                single.append(_column_of(path, entry))
            elif entry.index is not None and entry.module not in OWN_SHEETS and entry.field not in repeated:
                repeated.append(entry.field)
    return single, repeated


def _column_of(path: str, entry: GroundedValue) -> str:
    """Results stored before templates (no ``module`` in the entry) used field names chosen by the
    model; prefixed, they can never overwrite a document column such as ``status``."""
    return path if entry.module is not None else f"legacy.{path}"


def workbook_sheets(ledger: Ledger, batch_id: int, template: TemplateDefinition) -> list[SheetData]:
    """The Documents, Outcomes, Arms, Comparisons and Values sheets as plain data (the workbook
    writes them)."""
    items = batch_item_rows(ledger, batch_id)
    decided = current_decisions(ledger, batch_id)
    comments = comments_of(ledger, batch_id)
    results = [json.loads(item["result_json"]) if item["result_json"] else {} for item in items]
    typed = [fields_of(result) for result in results]
    single, repeated = _column_names(template, typed)
    documents: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []
    values: list[dict[str, Any]] = []
    missed: list[dict[str, Any]] = []
    arm_rows: list[dict[str, Any]] = []
    comparison_rows: list[dict[str, Any]] = []
    missed_reviews = current_missed_reviews(ledger, [int(item["id"]) for item in items])
    for item, result, fields in zip(items, results, typed, strict=True):
        agreements: dict[str, str] = result.get("agreement") or {}
        second_fields = second_fields_of(result)
        identity = {"document_id": item["document_id"], "filename": item["filename"]}
        row: dict[str, Any] = {
            **identity,
            "status": item["status"],
            "error": item["message"] if item["status"] == "error" else None,
            "model": item["model"],
            "tokens_in": item["tokens_in"],
            "tokens_out": item["tokens_out"],
            "cost_usd": round(item["cost_usd"] or 0.0, 6),
            "attempts": item["attempts"],
            "run_id": item["run_id"],
        }
        if fields:
            counts = status_counts(fields.values())
            row["values verified"] = counts.verified
            row["values verified but flagged"] = counts.verified_flagged
            row["values approximate"] = counts.approximate
            row["values unverified"] = counts.unverified
            row["judgements"] = counts.judgements
        by_outcome: dict[int, dict[str, Any]] = {}
        followed_up = found_by_follow_up(result)
        for path, entry in fields.items():
            index = entry.index
            decision = decided.get((item["id"], path))
            if index is None:
                row.update(_field_cells(_column_of(path, entry), entry, decision))
            elif entry.module in OWN_SHEETS:
                pass  # on the Arms and Comparisons sheets
            else:
                found_by = "follow-up question" if index in followed_up else "first answer"
                by_outcome.setdefault(index, {**identity, "outcome": index, "found by": found_by}).update(
                    _field_cells(entry.field, entry, decision)
                )
            agreement = agreements.get(path)
            # A field the model left empty is listed once a reviewer set it (or confirmed it empty).
            if entry.reviewable or agreement in NEEDS_REVIEW or decision is not None:
                review = _review_cells(item, path, entry, decision, comments.get((item["id"], path), []))
                second = second_fields.get(path)
                double = (
                    {
                        "second model value": second.value if second else None,
                        "second model quote": second.quote if second else None,
                        "second model status": shown_status(second) if second else None,
                        "agreement": agreement,
                        "adjudicator suggests": suggestion_of(result, path),
                    }
                    if second_fields
                    else {}
                )
                values.append({**_value_row(identity, path, entry), **double, **review})
        row["outcomes"] = len(by_outcome) if fields else None
        row["answer"] = answer_label(result) if fields else None
        rate = result.get("agreement_rate")
        row["agreement"] = f"{rate:.0%} with {result['second']['model']}" if rate is not None else None
        row["review"] = review_of(item, decided).label
        if item["status"] == "completed" and not any(entry.found for entry in fields.values()):
            row["error"] = NOTHING_FOUND  # never a silent green "completed"
        documents.append(row)
        outcomes.extend(by_outcome[index] for index in sorted(by_outcome))
        if fields:
            mine = {path: d for (item_id, path), d in decided.items() if item_id == item["id"]}
            view = study_arms(list(fields), partial(final_value, fields, mine))
            study = {**identity, "study": study_label(fields, mine, item)}
            arm_rows.extend(_arm_sheet_rows(study, fields, mine, view))
            comparison_rows.extend(_comparison_sheet_rows(study, fields, mine, view))
        if item["status"] == "completed":
            missed.extend(_missed_rows(identity, item["id"], result, missed_reviews))
    return [
        SheetData("Documents", DOCUMENT_COLUMNS + _field_columns(single), documents),
        SheetData("Outcomes", OUTCOME_COLUMNS + _field_columns(repeated), outcomes),
        SheetData("Arms", ARM_COLUMNS + _field_columns(list(ARM_FIELDS)), arm_rows),
        SheetData(
            "Comparisons", COMPARISON_COLUMNS + _field_columns([*COMPARISON_FIELDS, *EFFECT_FIELDS]), comparison_rows
        ),
        SheetData("Values", VALUE_COLUMNS, values),
        SheetData("Possibly missed", MISSED_COLUMNS, missed),
    ]


def _cells(fields: GroundedFields, decided: dict[str, Decision], paths: Mapping[str, str]) -> dict[str, Any]:
    """Every field the paths name, as value, quote, page, status, check, final and decision."""
    cells: dict[str, Any] = {}
    for name, path in paths.items():
        entry = fields.get(path)
        if entry is not None:
            cells.update(_field_cells(name, entry, decided.get(path)))
    return cells


def _arm_sheet_rows(
    study: dict[str, Any], fields: GroundedFields, decided: dict[str, Decision], view: StudyArms
) -> list[dict[str, Any]]:
    """One row per declared arm (version 1: treatment and control, from the baseline fields)."""
    return [
        {**study, "arm id": arm.key, "arm": arm.label, **_cells(fields, decided, arm.paths)}
        for arm in view.arms
        if view.version == 2 or any(path in fields for path in arm.paths.values())
    ]


def _comparison_sheet_rows(
    study: dict[str, Any], fields: GroundedFields, decided: dict[str, Decision], view: StudyArms
) -> list[dict[str, Any]]:
    """One row per printed comparison, under its outcome's name and time point."""
    rows = []
    for outcome in view.outcomes:
        for comparison in outcome.comparisons:
            rows.append(
                {
                    **study,
                    "comparison id": comparison.key,
                    "outcome": outcome.name,
                    "time point": outcome.timepoint,
                    "arm compared": view.arm_label(comparison.arm, comparison.arm_name),
                    "compared with": view.arm_label(comparison.comparator, comparison.comparator_name),
                    "arm id": comparison.arm,
                    "comparator id": comparison.comparator,
                    **_cells(fields, decided, comparison.paths),
                }
            )
    return rows


def _missed_rows(
    identity: dict[str, Any], item_id: int, result: dict[str, Any], reviews: dict[tuple[int, str], MissedReview]
) -> list[dict[str, Any]]:
    """The document's possibly-missed list with what reviewers did about each item."""
    stored = result.get("possibly_missed")
    if stored is None:
        return [{**identity, "state": NOT_CHECKED}]
    rows = []
    for entry in (PossiblyMissed.from_dict(raw) for raw in stored):
        review = reviews.get((item_id, entry.key))
        rows.append(
            {
                **identity,
                "page": entry.page,
                "where": entry.source,
                "kind": entry.kind.value,
                "label": entry.label,
                "text": entry.shown or entry.text,  # an outcome printed as a column: its cells, row by row
                "numbers": ", ".join(entry.numbers),
                "why": entry.why,
                "state": review.label if review else "open",
            }
        )
    return rows


def _value_row(identity: dict[str, Any], path: str, entry: GroundedValue) -> dict[str, Any]:
    return {
        **identity,
        "module": entry.module or path.split(".", 1)[0],
        "outcome": entry.index,
        "field": entry.field,
        "value": entry.value,
        "quote": entry.quote,
        "page": entry.page,
        "source": entry.source,
        "start": entry.start,
        "end": entry.end,
        "status": shown_status(entry),
        "check": _check_text(entry),
        "confidence": entry.confidence,
        "reason": entry.reason,
    }


def answer_label(result: dict[str, Any]) -> str:
    """How the answer was obtained, and in how many calls when it came in parts or was cut."""
    label = reused_label(result.get("reused"))
    notes = result.get("parts") or []
    cuts = [note["cut"] for note in notes if "cut" in note]
    if cuts:
        calls = sum(1 for note in notes if "cut" not in note)
        label += f"; asked in {calls} smaller calls after the {cuts[0]}"
    return label


def reused_label(reused: dict[str, Any] | None) -> str:
    """How the model's answer was obtained: a new call, or one already paid for (no cost now)."""
    if not reused:
        return "new call"
    paid = f"{reused.get('tokens_in', 0)}+{reused.get('tokens_out', 0)} tokens, ${reused.get('cost_usd', 0):.4f}"
    if reused.get("own"):
        return f"answered for this document at {reused.get('paid_at')} ({paid}, counted on it): its provider batch"
    return (
        f"reused: same prompt answered for item {reused.get('item')} at {reused.get('paid_at')} ({paid}); no cost now"
    )


def _review_cells(
    item: ItemListing, path: str, entry: GroundedValue, decision: Decision | None, comments: list[dict[str, Any]]
) -> dict[str, Any]:
    seq = decision.seq if decision else 0
    cells: dict[str, Any] = {
        "final value": _final_value(entry, decision),
        "final status": final_status(entry, decision),
        "decided by": decision.reviewer if decision else None,
        "decided at (UTC)": _timestamp(decision.created_at) if decision else None,
        "comments so far": " | ".join(f"{c['reviewer']}: {c['comment']}" for c in comments) or None,
        ROW_ID_COLUMN: make_row_id(item["batch_uid"], item["id"], path, seq),
    }
    if decision is not None:  # the current state, so re-importing an untouched workbook changes nothing
        cells[DECISION_COLUMN] = decision.action
        if decision.action != APPROVE and decision.value is not None:
            cells[CORRECTED_VALUE_COLUMN] = decision.value
        cells[CORRECTED_QUOTE_COLUMN] = decision.quote
    return cells


def write_workbook(ledger: Ledger, batch_id: int, path: Path) -> Path:
    from openpyxl import Workbook  # lazy: only export pays for it

    from extraction_pipeline.core.export.synthesis_sheets import write_synthesis_sheets

    batch = get_batch(ledger, batch_id)
    if batch is None:
        raise ConfigError(f"unknown batch {batch_id}")
    workbook = Workbook()
    default_sheet = workbook.active
    frozen = template_of_batch(ledger, batch_id)
    for data in workbook_sheets(ledger, batch_id, definition_of(frozen)):
        _write_sheet(workbook.create_sheet(data.name), data)
    if default_sheet is not None:
        workbook.remove(default_sheet)
    _write_batch_sheet(workbook.create_sheet("Batch"), ledger, batch, label_of(frozen))
    write_synthesis_sheets(workbook, ledger, batch_id)

    with replacing(path) as tmp:
        _save(workbook, tmp)
    return path


def _save(workbook: Any, target: Path) -> None:
    """``Workbook.save``, but a write that fails (a full disk) closes its zip file here: openpyxl
    leaves it open, and the garbage collector's late close prints a traceback to the log."""
    from zipfile import ZIP_DEFLATED, ZipFile

    from openpyxl.writer.excel import ExcelWriter

    archive = ZipFile(target, "w", ZIP_DEFLATED, allowZip64=True)
    try:
        ExcelWriter(workbook, archive).save()
    except BaseException:
        with contextlib.suppress(Exception):
            archive.close()  # may fail again on the same disk; the file is closed either way
        raise


def _write_sheet(sheet: Any, data: SheetData) -> None:
    from openpyxl.styles import Font, PatternFill
    from openpyxl.utils import get_column_letter

    sheet.append([cell_value(name) for name in data.header])
    as_text_cells(sheet[1])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    status_columns = [i for i, name in enumerate(data.header) if name == "status" or name.endswith(" status")]
    check_columns = [i for i, name in enumerate(data.header) if name == "check" or name.endswith(" check")]
    for number, row in enumerate(data.rows, start=2):
        cells = write_row(sheet, number, [row.get(column) for column in data.header])
        for index in status_columns:
            if color := STATUS_FILLS.get(colour_key(str(cells[index].value))):
                cells[index].fill = PatternFill("solid", start_color=color, end_color=color)
        for index in check_columns:
            if cells[index].value:
                cells[index].fill = PatternFill("solid", start_color=FLAG_FILL, end_color=FLAG_FILL)
    sheet.freeze_panes = "C2"
    if data.rows:
        sheet.auto_filter.ref = sheet.dimensions  # the reviewer filters by status, check, document
    for index, name in enumerate(data.header, start=1):
        width = 60 if name == "quote" or name.endswith(" quote") or name in ("reason", "error", "check") else 14
        sheet.column_dimensions[get_column_letter(index)].width = width
    if DECISION_COLUMN in data.header:
        _make_reviewable(sheet, data)


def _make_reviewable(sheet: Any, data: SheetData) -> None:
    """Blue editable columns, a drop-down of decisions, and the row id hidden (not deleted: the
    import matches rows by it, whatever the reviewer sorts or filters)."""
    from openpyxl.styles import PatternFill
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    fill = PatternFill("solid", start_color=EDITABLE_FILL, end_color=EDITABLE_FILL)
    for name in EDITABLE_COLUMNS:
        sheet.cell(row=1, column=data.header.index(name) + 1).fill = fill
    letter = get_column_letter(data.header.index(DECISION_COLUMN) + 1)
    choices = DataValidation(
        type="list",
        formula1=f'"{",".join(DECISIONS)}"',
        allow_blank=True,
        showErrorMessage=True,
        errorTitle="decision",
        error=f"choose one of: {', '.join(DECISIONS)}",
    )
    sheet.add_data_validation(choices)
    choices.add(f"{letter}2:{letter}{max(len(data.rows) + 1, 2)}")
    sheet.column_dimensions[get_column_letter(data.header.index(ROW_ID_COLUMN) + 1)].hidden = True


def _write_batch_sheet(sheet: Any, ledger: Ledger, batch: BatchRow, template: str) -> None:
    from openpyxl.styles import PatternFill

    models = sorted({item["model"] for item in batch_item_rows(ledger, batch["id"]) if item["model"]})
    rows: list[tuple[str, Any]] = [
        ("batch_id", batch["id"]),
        ("project", batch["project"]),
        ("user", batch["user"]),
        ("status", batch["status"]),
        ("template", template),
        ("model", ", ".join(models) or "none (no document was extracted)"),
        ("created_at (UTC)", _timestamp(batch["created_at"])),
        ("completed_at (UTC)", _timestamp(batch["completed_at"])),
        *progress(ledger, batch["id"]).as_dict().items(),
        *_token_rate_rows(ledger, batch["id"]),
        *_review_rows(ledger, batch["id"]),
        *_double_extraction_rows(ledger, batch["id"]),
    ]
    if any(model.startswith(f"{OFFLINE_PROVIDER}/") for model in models):
        rows.insert(6, ("warning", OFFLINE_WARNING))
    for key, value in rows:
        sheet.append([key, cell_value(value)])
        as_text_cells(sheet[sheet.max_row])
    sheet.append([])
    sheet.append(["legend", "meaning"])
    for name, meaning in LEGEND:
        sheet.append([name, meaning])
        if color := STATUS_FILLS.get(colour_key(name), FLAG_FILL if name == "check" else None):
            sheet.cell(row=sheet.max_row, column=1).fill = PatternFill("solid", start_color=color, end_color=color)


def _token_rate_rows(ledger: Ledger, batch_id: int) -> list[tuple[str, Any]]:
    """Per model: tokens per minute achieved over the extraction, against the provider's budget."""
    rows: list[tuple[str, Any]] = []
    for rate in token_rates(ledger, batch_id):
        if rate.per_minute is None or rate.model.startswith(f"{OFFLINE_PROVIDER}/"):
            continue
        budget = get_budget(ledger, rate.model)
        limit = budget.tokens_per_minute if budget else None
        against = f" of a budget of {limit:,}" if limit else " (no budget known)"
        share = f" ({rate.per_minute / limit:.0%})" if limit else ""
        rows.append((f"tokens/min achieved, {rate.model}", f"{rate.per_minute:,.0f}{against}{share}"))
    return rows


def _double_extraction_rows(ledger: Ledger, batch_id: int) -> list[tuple[str, Any]]:
    """Cost per model and agreement per field across the batch (only for double extraction)."""
    by_model: dict[str, list[float]] = {}
    by_field: dict[str, list[int]] = {}
    for item in batch_item_rows(ledger, batch_id):
        result = json.loads(item["result_json"]) if item["result_json"] else {}
        for model, spent in (result.get("usage_by_model") or {}).items():
            totals = by_model.setdefault(model, [0, 0, 0.0])
            totals[0] += spent["tokens_in"]
            totals[1] += spent["tokens_out"]
            totals[2] += spent["cost_usd"]
        for path, verdict in (result.get("agreement") or {}).items():
            counts = by_field.setdefault(field_of(path), [0, 0])
            counts[0] += verdict == AGREE
            counts[1] += 1
    rows: list[tuple[str, Any]] = [
        (f"cost {model}", f"${cost:.4f} ({int(tokens_in)}+{int(tokens_out)} tokens)")
        for model, (tokens_in, tokens_out, cost) in sorted(by_model.items())
    ]
    rows += [
        (f"agreement {name}", f"{agree}/{total} ({agree / total:.0%})")
        for name, (agree, total) in sorted(by_field.items())
    ]
    return rows


def _review_rows(ledger: Ledger, batch_id: int) -> list[tuple[str, Any]]:
    decided = current_decisions(ledger, batch_id)
    reviews = [review_of(item, decided) for item in batch_item_rows(ledger, batch_id) if item["status"] == "completed"]
    waiting = [r.filename for r in reviews if not r.reviewed]
    rows: list[tuple[str, Any]] = [("reviewed documents", f"{len(reviews) - len(waiting)} of {len(reviews)}")]
    if waiting:
        shown = ", ".join(waiting[:50]) + (f" and {len(waiting) - 50} more" if len(waiting) > 50 else "")
        rows.append(("not yet reviewed", shown))
    return rows


def _timestamp(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


def default_export_path(exports_dir: Path, batch_id: int, version: int = 1) -> Path:
    """``batch-7.xlsx``; a batch reopened by ``batch retry`` gets ``batch-7-v2.xlsx`` and so on, so an
    earlier workbook someone already opened is never overwritten."""
    suffix = "" if version <= 1 else f"-v{version}"
    return exports_dir / f"batch-{batch_id}{suffix}.xlsx"
