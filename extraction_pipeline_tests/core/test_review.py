"""Review decisions on a really extracted document, on SQLite and PostgreSQL: the append-only
audit, conflicts instead of overwrites, corrections typed and re-grounded, the reviewed workbook
and CSV, the Excel round-trip, and the page image with the quote highlighted."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.export.meta_csv import meta_analysis_csv
from extraction_pipeline.core.export.workbook import ROW_ID_COLUMN, write_workbook
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.excel_import import import_decisions
from extraction_pipeline.core.review.page_image import HIGHLIGHT_FILL, Span, render
from extraction_pipeline.core.review.progress import NOTHING_EXTRACTED, DocumentReview, batch_review
from extraction_pipeline.core.review.source_view import PageImage, page_image
from extraction_pipeline.core.review.values import (
    APPROVE,
    COMMENT,
    CORRECT,
    MARK_NOT_REPORTED,
    REVIEWER_UNGROUNDED,
    reviewable_values,
)
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.grounding import UNVERIFIED, VERIFIED
from extraction_pipeline_tests.support.arms_case import make_arms_batch, three_arm_trial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import ReviewCase, make_case, results_sentence

ESTIMATE = "comparisons.1.effect_estimate"
FORGED = "comparisons.1.ci_lower"
NCT = "metadata.nct_number"
N = "metadata.randomized_n"


@pytest.fixture
def case(ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer) -> ReviewCase:
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(ledger_url)
    return make_case(settings, ledger, fake_llm)


@pytest.fixture
def v1_case(ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer) -> ReviewCase:
    """The same document in a batch an earlier release created (the two-arm template)."""
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    return make_case(settings, Ledger.connect(ledger_url), fake_llm, version=1)


@pytest.fixture
def three_arms(ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer) -> ReviewCase:
    """Two doses against saline: three arms declared, one outcome entry per arm, two comparisons."""
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    [case] = make_arms_batch(settings, Ledger.connect(ledger_url), fake_llm, [three_arm_trial()])
    return case


def _values(case: ReviewCase) -> dict[str, GroundedValue]:
    item = get_item(case.ledger, case.item_id)
    assert item is not None
    return {path: value.machine for path, value in reviewable_values(item["result_json"]).items()}


def _record(case: ReviewCase, path: str, action: str, reviewer: str = "rita", seen: int = 0) -> decisions.Outcome:
    return decisions.record(
        case.ledger, item_id=case.item_id, path=path, action=action, reviewer=reviewer, seen_seq=seen
    )


def test_the_extracted_document_has_verified_and_forged_values(case: ReviewCase) -> None:
    values = _values(case)
    assert values[ESTIMATE].status == VERIFIED and values[ESTIMATE].page == 1
    assert values[FORGED].status == UNVERIFIED


def test_a_decision_is_appended_and_the_same_decision_again_changes_nothing(case: ReviewCase) -> None:
    first = _record(case, ESTIMATE, APPROVE)
    assert first.kind == decisions.RECORDED and first.current is not None and first.current.seq == 1
    again = _record(case, ESTIMATE, APPROVE, reviewer="sam", seen=0)
    assert again.kind == decisions.UNCHANGED and again.current is not None and again.current.reviewer == "rita"
    trail = decisions.audit_trail(case.ledger, case.item_id, ESTIMATE)
    assert [(row["action"], row["reviewer"], json.loads(row["machine_value_json"])) for row in trail] == [
        (APPROVE, "rita", case.trial.hazard_ratio)
    ]


def test_a_decision_made_from_a_stale_state_is_a_conflict_not_an_overwrite(case: ReviewCase) -> None:
    assert _record(case, ESTIMATE, APPROVE, reviewer="rita", seen=0).kind == decisions.RECORDED
    late = _record(case, ESTIMATE, MARK_NOT_REPORTED, reviewer="sam", seen=0)
    assert late.kind == decisions.CONFLICT
    assert "rita decided 'approve'" in late.message and "not overwritten" in late.message
    assert decisions.current_decisions(case.ledger, case.batch_id)[(case.item_id, ESTIMATE)].action == APPROVE
    # Deciding again from the state now shown is allowed, and kept in the audit trail.
    assert _record(case, ESTIMATE, MARK_NOT_REPORTED, reviewer="sam", seen=1).kind == decisions.RECORDED
    actions = [row["action"] for row in decisions.audit_trail(case.ledger, case.item_id, ESTIMATE)]
    assert actions == [APPROVE, MARK_NOT_REPORTED]


def test_bad_decisions_are_refused_with_a_reason(case: ReviewCase) -> None:
    with pytest.raises(ConfigError, match="reviewer name is required"):
        _record(case, ESTIMATE, APPROVE, reviewer="  ")
    with pytest.raises(ConfigError, match="unknown decision"):
        _record(case, ESTIMATE, "delete")
    with pytest.raises(ConfigError, match="has no value"):
        _record(case, "metadata.nope", APPROVE)
    with pytest.raises(ConfigError, match="not a valid integer"):
        corrections.correct(case.ledger, item_id=case.item_id, path=N, reviewer="r", seen_seq=0, value_text="many")
    assert decisions.current_decisions(case.ledger, case.batch_id) == {}


def test_a_correction_is_typed_and_its_new_quote_grounded_on_the_spot(case: ReviewCase) -> None:
    trial = case.trial
    fixed = corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path=FORGED,
        reviewer="rita",
        seen_seq=0,
        value_text=f" {trial.ci_lower:.2f} ",
        quote=results_sentence(trial),
    )
    assert fixed.kind == decisions.RECORDED and fixed.current is not None
    assert fixed.current.value == pytest.approx(trial.ci_lower) and isinstance(fixed.current.value, float)
    assert fixed.current.grounding is not None
    assert fixed.current.grounding["status"] == VERIFIED and fixed.current.grounding["page"] == 1
    # A corrected quote with a number that is not in the paper is stored as unverified, not trusted.
    forged = corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path=N,
        reviewer="rita",
        seen_seq=0,
        value_text="999",
        quote="A total of 999 patients were randomized",
    )
    assert forged.current is not None and forged.current.grounding is not None
    assert forged.current.grounding["status"] == UNVERIFIED


def test_a_document_is_reviewed_when_every_value_has_a_decision(case: ReviewCase) -> None:
    paths = list(_values(case))
    decisions.record(
        case.ledger, item_id=case.item_id, path=paths[0], action=COMMENT, reviewer="r", seen_seq=0, comment="check"
    )
    [before] = batch_review(case.ledger, case.batch_id)
    assert before.decided == 0 and not before.reviewed and "0 of" in before.label
    for path in paths:
        _record(case, path, APPROVE)
    [after] = batch_review(case.ledger, case.batch_id)
    assert after.reviewed and after.decided == after.values == len(paths) and after.label == "reviewed by rita"
    assert after.verified >= 4 and after.unverified == 1


def test_workbook_and_csv_carry_final_value_decision_and_reviewer(case: ReviewCase, tmp_path: Path) -> None:
    trial = case.trial
    corrections.correct(
        case.ledger, item_id=case.item_id, path=FORGED, reviewer="rita", seen_seq=0, value_text=str(trial.ci_lower)
    )
    _record(case, ESTIMATE, APPROVE, reviewer="sam")
    path = write_workbook(case.ledger, case.batch_id, tmp_path / "reviewed.xlsx")
    book = openpyxl.load_workbook(path)
    sheet = book["Values"]
    header = [cell.value for cell in sheet[1]]
    rows = {
        r[header.index("field")]: dict(zip(header, r, strict=True))
        for r in sheet.iter_rows(min_row=2, values_only=True)
    }
    forged = rows["ci_lower"]
    assert forged["value"] == pytest.approx(0.11) and forged["final value"] == pytest.approx(trial.ci_lower)
    assert forged["decision"] == CORRECT and forged["decided by"] == "rita"
    assert rows["effect_estimate"]["decision"] == APPROVE and rows["effect_estimate"]["decided by"] == "sam"
    assert rows["nct_number"]["decision"] is None and rows["nct_number"]["final value"] == trial.nct_number
    letter = openpyxl.utils.get_column_letter(header.index(ROW_ID_COLUMN) + 1)
    assert sheet.column_dimensions[letter].hidden
    [validation] = sheet.data_validations.dataValidation
    assert validation.formula1 == '"approve,correct,not reported"'
    documents = book["Documents"]
    doc_header = [cell.value for cell in documents[1]]
    assert documents.cell(row=2, column=doc_header.index("review") + 1).value.startswith("not yet reviewed (2 of")
    assert documents.cell(row=2, column=doc_header.index("metadata.nct_number final") + 1).value == trial.nct_number
    outcome_sheet = book["Comparisons"]  # the hazard ratio is a printed comparison
    out_header = [cell.value for cell in outcome_sheet[1]]
    assert outcome_sheet.cell(row=2, column=out_header.index("ci_lower final") + 1).value == pytest.approx(
        trial.ci_lower
    )
    assert outcome_sheet.cell(row=2, column=out_header.index("ci_lower decision") + 1).value == "correct by rita"
    batch_rows = {r[0]: r[1] for r in book["Batch"].iter_rows(values_only=True) if r and r[0]}
    assert batch_rows["reviewed documents"] == "0 of 1" and batch_rows["not yet reviewed"] == case.pdf.name
    # Only a hazard ratio, no arm data: one row, the printed comparison, with the reviewer's corrected bound.
    [overall] = list(csv.DictReader(io.StringIO(meta_analysis_csv(case.ledger, case.batch_id))))
    assert overall["comparison"] == "comparisons.1" and overall["study"] == trial.nct_number
    assert float(overall["estimate"]) == pytest.approx(trial.hazard_ratio)
    assert float(overall["ci.lb"]) == pytest.approx(trial.ci_lower)
    assert overall["decision_estimate"] == "approve by sam" and overall["review"].startswith("not yet reviewed")


def test_a_version_1_batch_keeps_its_review_workbook_and_csv(v1_case: ReviewCase, tmp_path: Path) -> None:
    case, trial = v1_case, v1_case.trial
    assert _values(case)["outcomes.1.ci_lower"].status == UNVERIFIED
    corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path="outcomes.1.ci_lower",
        reviewer="rita",
        seen_seq=0,
        value_text=str(trial.ci_lower),
    )
    _record(case, "outcomes.1.effect_estimate", APPROVE, reviewer="sam")
    book = openpyxl.load_workbook(write_workbook(case.ledger, case.batch_id, tmp_path / "v1.xlsx"))
    outcome_sheet = book["Outcomes"]
    out_header = [cell.value for cell in outcome_sheet[1]]
    assert outcome_sheet.cell(row=2, column=out_header.index("ci_lower final") + 1).value == pytest.approx(
        trial.ci_lower
    )
    assert outcome_sheet.cell(row=2, column=out_header.index("ci_lower decision") + 1).value == "correct by rita"
    # Only a hazard ratio, no arm data: one study-level row, as version 1 always had it.
    [overall] = list(csv.DictReader(io.StringIO(meta_analysis_csv(case.ledger, case.batch_id))))
    assert overall["group"] == "overall" and overall["study"] == trial.nct_number
    assert float(overall["ci.lb"]) == pytest.approx(trial.ci_lower)
    assert overall["decision_estimate"] == "approve by sam"


def test_numbers_are_reassigned_to_a_declared_arm_only(three_arms: ReviewCase, tmp_path: Path) -> None:
    """Reassigning an entry's numbers to another arm is a correction of its arm reference: to a
    declared arm (named as declared, whatever the case or spacing typed), append-only, audited."""
    case = three_arms
    assert _values(case)["outcomes.2.arm"].value == "Haloperidol 2 mg"
    moved = corrections.correct(
        case.ledger, item_id=case.item_id, path="outcomes.2.arm", reviewer="rita", seen_seq=0, value_text=" saline "
    )
    assert moved.kind == decisions.RECORDED and moved.current is not None and moved.current.value == "Saline"
    with pytest.raises(ConfigError) as refused:
        corrections.correct(
            case.ledger,
            item_id=case.item_id,
            path="comparisons.1.comparator_arm",
            reviewer="rita",
            seen_seq=0,
            value_text="Haloperidol 5 mg",
        )
    assert "'Haloperidol 5 mg' is not an arm of this study" in str(refused.value)
    assert "'Haloperidol 1 mg', 'Haloperidol 2 mg', 'Saline'" in str(refused.value)
    # Back again, from the state the reviewer saw: both decisions stay in the audit trail.
    back = corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path="outcomes.2.arm",
        reviewer="sam",
        seen_seq=1,
        value_text="HALOPERIDOL 2 MG",
    )
    assert back.kind == decisions.RECORDED and back.current is not None and back.current.value == "Haloperidol 2 mg"
    trail = decisions.audit_trail(case.ledger, case.item_id, "outcomes.2.arm")
    assert [(row["reviewer"], json.loads(row["value_json"])) for row in trail] == [
        ("rita", "Saline"),
        ("sam", "Haloperidol 2 mg"),
    ]
    # An arm renamed in review is offered (and accepted) by its new name only.
    corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path="arms.3.arm_name",
        reviewer="rita",
        seen_seq=0,
        value_text="Sodium chloride",
    )
    with pytest.raises(ConfigError, match="'Saline' is not an arm"):
        corrections.correct(
            case.ledger, item_id=case.item_id, path="outcomes.1.arm", reviewer="rita", seen_seq=0, value_text="Saline"
        )
    # The Excel round trip checks the same rule before importing anything.
    exported = write_workbook(case.ledger, case.batch_id, tmp_path / "arms.xlsx")
    book = openpyxl.load_workbook(exported)
    sheet = book["Values"]
    header = [cell.value for cell in sheet[1]]
    for row in sheet.iter_rows(min_row=2):
        where = (
            row[header.index("module")].value,
            row[header.index("outcome")].value,
            row[header.index("field")].value,
        )
        if where == ("outcomes", 3, "arm"):
            row[header.index("decision")].value = "correct"
            row[header.index("corrected value")].value = "placebo"
    book.save(exported)
    with pytest.raises(ConfigError, match="'placebo' is not an arm of this study"):
        import_decisions(case.ledger, exported, reviewer="xena")


def _fill(path: Path, decisions_by_field: dict[str, tuple[str | None, object, str | None]]) -> Path:
    book = openpyxl.load_workbook(path)
    sheet = book["Values"]
    header = [cell.value for cell in sheet[1]]
    for row in sheet.iter_rows(min_row=2):
        name = row[header.index("field")].value
        if name in decisions_by_field:
            decision, value, comment = decisions_by_field[name]
            row[header.index("decision")].value = decision
            row[header.index("corrected value")].value = value
            row[header.index("comment")].value = comment
    book.save(path)
    return path


def test_excel_round_trip_applies_once_and_reports_conflicts(case: ReviewCase, tmp_path: Path) -> None:
    exported = write_workbook(case.ledger, case.batch_id, tmp_path / "batch.xlsx")
    _record(case, NCT, MARK_NOT_REPORTED, reviewer="browser-bob")  # decided in the browser after the export
    filled = _fill(
        exported,
        {
            "ci_lower": ("correct", case.trial.ci_lower, "typo in the model's answer"),
            "effect_estimate": ("Approve", None, None),
            "nct_number": ("approve", None, None),  # contradicts bob's decision made meanwhile
        },
    )
    report = import_decisions(case.ledger, filled, reviewer="xena")
    assert len(report.recorded) == 2 and report.comments == 1 and report.unchanged == 0
    [conflict] = report.conflicts
    assert "nct_number" in conflict and "browser-bob decided 'not reported'" in conflict
    current = decisions.current_decisions(case.ledger, case.batch_id)
    assert current[(case.item_id, NCT)].reviewer == "browser-bob"
    assert current[(case.item_id, FORGED)].value == pytest.approx(case.trial.ci_lower)
    assert current[(case.item_id, FORGED)].origin == "excel:batch.xlsx"
    again = import_decisions(case.ledger, filled, reviewer="xena")
    assert again.recorded == [] and again.unchanged == 2 and again.comments == 0 and len(again.conflicts) == 1
    rows = len(decisions.audit_trail(case.ledger, case.item_id, FORGED))
    assert rows == 2  # the comment and the correction, each once


def test_excel_import_refuses_tampered_ids_and_bad_values_naming_the_rows(case: ReviewCase, tmp_path: Path) -> None:
    exported = write_workbook(case.ledger, case.batch_id, tmp_path / "batch.xlsx")
    book = openpyxl.load_workbook(exported)
    sheet = book["Values"]
    header = [cell.value for cell in sheet[1]]
    id_col, decision_col = header.index(ROW_ID_COLUMN), header.index("decision")
    sheet.cell(row=2, column=decision_col + 1).value = "approve"
    original = sheet.cell(row=2, column=id_col + 1).value
    other_item = original.replace(f"|{case.item_id}|", f"|{case.item_id + 1000}|")
    sheet.cell(row=2, column=id_col + 1).value = other_item
    sheet.cell(row=3, column=decision_col + 1).value = "approve"
    sheet.cell(row=3, column=id_col + 1).value = sheet.cell(row=3, column=id_col + 1).value.replace("|0|", "|7|")
    sheet.cell(row=4, column=decision_col + 1).value = "maybe"
    sheet.cell(row=5, column=decision_col + 1).value = "correct"
    book.save(exported)
    with pytest.raises(ConfigError) as refused:
        import_decisions(case.ledger, exported, reviewer="xena")
    message = str(refused.value)
    assert "nothing imported" in message
    assert "row 2: unknown or tampered row id" in message and "row 3: unknown or tampered row id" in message
    assert "row 4: unknown decision 'maybe'" in message and "row 5: 'correct' needs the corrected value" in message
    assert decisions.current_decisions(case.ledger, case.batch_id) == {}
    not_a_workbook = tmp_path / "notes.xlsx"
    not_a_workbook.write_text("hello")
    with pytest.raises(ConfigError, match="not an Excel workbook"):
        import_decisions(case.ledger, not_a_workbook, reviewer="xena")


def _highlighted_pixels(png: bytes, rect: list[float]) -> int:
    import pymupdf

    pixmap = pymupdf.Pixmap(png)
    expected = [round(255 * (1 - 0.45 * (1 - c))) for c in HIGHLIGHT_FILL]  # fill over white paper
    x0, y0, x1, y1 = (int(v) for v in rect)
    hits = 0
    for x in range(x0, x1, 2):
        for y in range(y0, y1, 2):
            if all(abs(a - b) <= 12 for a, b in zip(pixmap.pixel(x, y), expected, strict=False)):
                hits += 1
    return hits


def _view(case: ReviewCase, entry: GroundedValue, page: int | None) -> PageImage:
    return page_image(
        case.ledger,
        item_id=case.item_id,
        entry=entry,
        grounding=None,
        page=page,
        documents_dir=case.settings.documents_dir,
        cache_dir=case.settings.home_dir / "cache",
    )


def test_the_page_image_highlights_the_quote_on_its_page(case: ReviewCase) -> None:
    entry = _values(case)[ESTIMATE]
    view = _view(case, entry, None)
    assert view.page == 1 and view.pages == 2 and len(view.rects) == 2  # the sentence wraps onto two lines
    assert all(_highlighted_pixels(view.png, rect) > 50 for rect in view.rects)
    other = _view(case, entry, 2)
    assert other.page == 2 and other.rects == []
    with pytest.raises(ConfigError, match="page 3 is not in this PDF"):
        _view(case, entry, 3)


def test_a_replaced_stored_copy_is_not_rendered(case: ReviewCase) -> None:
    item = get_item(case.ledger, case.item_id)
    assert item is not None
    [stored] = case.settings.documents_dir.glob("*.pdf")
    stored.write_bytes(stored.read_bytes().replace(b"%%EOF", b"%%EOF\n% changed"))
    with pytest.raises(PermanentError, match="has changed"):
        _view(case, _values(case)[NCT], None)
    with pytest.raises(PermanentError, match="outside the document store"):
        page_image(
            case.ledger,
            item_id=case.item_id,
            entry=_values(case)[NCT],
            grounding=None,
            page=None,
            documents_dir=case.settings.home_dir / "elsewhere",
            cache_dir=case.settings.home_dir / "cache2",
        )


def test_a_table_span_is_found_by_its_letters_and_digits(case: ReviewCase) -> None:
    trial = case.trial
    row = f"hazard ratio\t{trial.hazard_ratio:.2f};\t95% CI\t{trial.ci_lower:.2f}"
    _png, rects = render(case.pdf, 1, Span("table 1", 0, len(row), row))
    assert len(rects) == 1  # the cells are on one line of the page
    _png, none = render(case.pdf, 1, Span("table 1", 0, 9, "not there"))
    assert none == []


def test_review_import_command_reports_and_exits_by_outcome(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    from extraction_pipeline_tests.support.cli import run_cli

    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    case = make_case(settings, Ledger.connect(settings.ledger_url), fake_llm)
    exported = write_workbook(case.ledger, case.batch_id, tmp_path / "batch.xlsx")
    filled = _fill(exported, {"effect_estimate": ("approve", None, None), "nct_number": ("approve", None, None)})
    _record(case, NCT, MARK_NOT_REPORTED, reviewer="bob")  # decided elsewhere meanwhile
    first = run_cli(settings.home_dir, "review", "import", str(filled), "--reviewer", "xena")
    assert first.returncode == 1, first.stderr
    assert "recorded  row" in first.stdout and "CONFLICT  row" in first.stdout
    assert "1 decision(s) recorded, 0 unchanged, 0 comment(s), 1 conflict(s) not applied" in first.stdout
    again = run_cli(settings.home_dir, "review", "import", str(filled), "--reviewer", "xena", "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["recorded"] == 0
    assert json.loads(again.stdout)["unchanged"] == 1
    missing = run_cli(settings.home_dir, "review", "import", str(tmp_path / "nope.xlsx"), "--reviewer", "xena")
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "no such file" in missing.stderr
    nameless = run_cli(settings.home_dir, "review", "import", str(filled), "--reviewer", " ")
    assert nameless.returncode == 2


def test_an_interrupted_quote_is_highlighted_on_both_of_its_pages(case: ReviewCase) -> None:
    continued = {"page": 2, "source": "text", "start": 0, "end": len("Participants")}
    entry = replace(_values(case)[ESTIMATE], continued=continued)
    views = [_view(case, entry, page) for page in (1, 2)]
    assert len(views[0].rects) == 2 and len(views[1].rects) == 1
    assert _highlighted_pixels(views[1].png, views[1].rects[0]) > 20


def test_judgements_are_blue_in_the_workbook_and_explained_in_the_legend(tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline.core.verification.grounding import JUDGEMENT_NOT_FOUND, JUDGEMENT_SUPPORTED
    from extraction_pipeline_tests.support.ledgers import add_documents

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}")
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="j", project="p", user="u", document_ids=[doc]).id
    entry: dict[str, Any] = {
        "module": "risk_of_bias",
        "field": "randomization",
        "index": None,
        "quote": "q",
        "flags": [],
    }
    result = {
        "fields": {
            "risk_of_bias.randomization": {**entry, "value": "low", "status": JUDGEMENT_SUPPORTED},
            "risk_of_bias.overall": {**entry, "field": "overall", "value": "high", "status": JUDGEMENT_NOT_FOUND},
        }
    }
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result=result, usage=Usage("openai/x"))
    book = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "j.xlsx"))
    values = book["Values"]
    header = [c.value for c in values[1]]
    fills = {
        row[header.index("status")].value: row[header.index("status")].fill.start_color.rgb
        for row in values.iter_rows(min_row=2)
    }
    assert fills[JUDGEMENT_SUPPORTED].endswith("BDD7EE") and fills[JUDGEMENT_NOT_FOUND].endswith("FFC7CE")
    legend = {r[0] for r in book["Batch"].iter_rows(values_only=True) if r}
    assert {JUDGEMENT_SUPPORTED, JUDGEMENT_NOT_FOUND} <= legend
    documents = book["Documents"]
    doc_header = [c.value for c in documents[1]]
    row = [c.value for c in documents[2]]
    assert row[doc_header.index("values verified")] == 0 and row[doc_header.index("judgements")] == 2


def test_a_corrected_number_without_a_grounded_quote_is_never_shown_as_verified(case: ReviewCase) -> None:
    """Each final state says what supports it: the machine's verdict when approved, the corrected
    quote's when one was given, "reviewer's value, not grounded" when none was."""
    trial = case.trial
    assert _values(case)[ESTIMATE].status == VERIFIED
    corrections.correct(case.ledger, item_id=case.item_id, path=ESTIMATE, reviewer="rita", seen_seq=0, value_text="0.5")
    corrections.correct(
        case.ledger,
        item_id=case.item_id,
        path=FORGED,
        reviewer="rita",
        seen_seq=0,
        value_text=f"{trial.ci_lower:.2f}",
        quote=results_sentence(trial),
    )
    _record(case, N, APPROVE)
    [row] = [r for r in csv.DictReader(io.StringIO(meta_analysis_csv(case.ledger, case.batch_id))) if r["estimate"]][:1]
    assert (row["estimate"], row["status_estimate"]) == ("0.5", REVIEWER_UNGROUNDED)  # the CSV
    book = openpyxl.load_workbook(write_workbook(case.ledger, case.batch_id, case.settings.exports_dir / "r.xlsx"))
    sheet = book["Values"]
    header = [c.value for c in sheet[1]]
    finals = {
        (r[header.index("field")]): (r[header.index("status")], r[header.index("final status")])
        for r in sheet.iter_rows(min_row=2, values_only=True)
    }
    assert finals["effect_estimate"] == (VERIFIED, REVIEWER_UNGROUNDED)  # the machine's verdict stays its own
    assert finals["ci_lower"] == (UNVERIFIED, VERIFIED)  # the corrected quote's grounding
    assert finals["randomized_n"][1] == finals["randomized_n"][0]  # approved: the machine's
    status_column = header.index("final status") + 1
    fills = {
        sheet.cell(row=r, column=status_column).value: sheet.cell(row=r, column=status_column).fill.start_color.rgb
        for r in range(2, sheet.max_row + 1)
    }
    assert str(fills[REVIEWER_UNGROUNDED]).endswith("E4DFEC")  # its own colour
    outcomes = book["Comparisons"]
    o_header = [c.value for c in outcomes[1]]
    [first] = list(outcomes.iter_rows(min_row=2, max_row=2, values_only=True))
    assert first[o_header.index("effect_estimate final")] == 0.5
    assert first[o_header.index("effect_estimate final status")] == REVIEWER_UNGROUNDED


def test_a_document_with_nothing_extracted_is_never_reviewed() -> None:
    nothing = DocumentReview(item_id=1, document_id=1, filename="blank.pdf", status="completed", message=None)
    assert not nothing.reviewed and nothing.label == NOTHING_EXTRACTED == "nothing extracted — check the paper"
    done = replace(nothing, values=3, decided=3, reviewers=("rita",))
    assert done.reviewed and done.label == "reviewed by rita"
    assert not replace(done, decided=2).reviewed


def test_a_document_with_nothing_extracted_is_never_reviewed_whatever_a_reviewer_set_by_hand() -> None:
    from extraction_pipeline.core.review.progress import NOTHING_EXTRACTED, DocumentReview

    by_hand = DocumentReview(1, 1, "a.pdf", "completed", None, values=1, decided=1, reviewers=("Rita",), added=1)
    assert not by_hand.reviewed and by_hand.label == NOTHING_EXTRACTED
    checked = DocumentReview(1, 1, "a.pdf", "completed", None, values=3, decided=3, reviewers=("Rita",), added=1)
    assert checked.reviewed and checked.label == "reviewed by Rita"
