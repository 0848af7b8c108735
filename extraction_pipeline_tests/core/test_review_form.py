"""The extraction form a reviewer reads: study fields, arms side by side, Risk of Bias as one row
of domains, one row per outcome; each cell's value and colour are what is true of it now."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.review.form import SectionKind, build_form
from extraction_pipeline.core.review.values import (
    APPROVE,
    CORRECT,
    MARK_NOT_REPORTED,
    REVIEWER_UNGROUNDED,
    Decision,
    ReviewableValue,
)
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.verification.grounding import NOT_REPORTED, UNVERIFIED, VERIFIED, GroundingStatus


def _value(path: str, value: Any, status: GroundingStatus = VERIFIED) -> ReviewableValue:
    parts = path.split(".")
    module, index = parts[0], int(parts[1]) if len(parts) == 3 else None
    entry = GroundedValue(module, index, parts[-1], value, f"... {value} ...", status, 1.0, "quote found", page=2)
    return ReviewableValue(path, entry)


def _decision(path: str, action: str, value: Any, grounding: dict[str, Any] | None = None) -> Decision:
    return Decision(1, 7, path, 1, action, None, value, None, grounding, None, "Rita", "browser", datetime.now(UTC))


VALUES = {
    v.path: v
    for v in (
        _value("metadata.nct_number", "NCT01234567"),
        _value("baseline.n_treatment", 120),
        _value("baseline.n_control", 118),
        _value("baseline.treatment_name", "drug"),
        _value("risk_of_bias.randomization", "low"),
        _value("outcomes.1.outcome_name", "mortality"),
        _value("outcomes.1.events_treatment", 12),
        _value("outcomes.1.total_treatment", 120),
        _value("outcomes.1.ci_lower", 0.11, UNVERIFIED),
        _value("outcomes.2.outcome_name", "HbA1c"),
        _value("outcomes.2.mean_treatment", 7.1),
    )
}


def test_the_form_follows_the_template_one_row_per_outcome() -> None:
    form = build_form(RCT_TEMPLATE, VALUES, {})
    assert [(s.module, s.kind) for s in form.sections] == [
        ("metadata", SectionKind.FIELDS),
        ("baseline", SectionKind.ARMS),
        ("risk_of_bias", SectionKind.DOMAINS),
        ("outcomes", SectionKind.ROWS),
    ]
    outcomes = form.section("outcomes")
    assert outcomes is not None
    assert [(row.index, row.label) for row in outcomes.rows] == [(1, "mortality"), (2, "HbA1c")]
    first = outcomes.rows[0]
    assert first.cell("events_treatment").value == 12  # type: ignore[union-attr]
    assert not first.cell("p_value").present  # type: ignore[union-attr]  # nothing extracted: shown as a dash
    baseline = form.section("baseline")
    assert baseline is not None
    rows = {row.label: row for row in baseline.rows}
    assert rows["arm"].cell("treatment").value == "drug"  # type: ignore[union-attr]
    assert (rows["n"].cell("treatment").value, rows["n"].cell("control").value) == (120, 118)  # type: ignore[union-attr]
    domains = form.section("risk_of_bias")
    assert domains is not None and len(domains.rows) == 1
    assert domains.rows[0].cell("randomization").value == "low"  # type: ignore[union-attr]
    # Every value the model gave is a cell of the form, once.
    assert sorted(c.path for c in form.cells()) == sorted(VALUES)


def test_each_cell_shows_only_true_states() -> None:
    decided = {
        "outcomes.1.ci_lower": _decision("outcomes.1.ci_lower", CORRECT, 0.42),  # no new quote
        "outcomes.1.events_treatment": _decision("outcomes.1.events_treatment", APPROVE, 12),
        "outcomes.2.mean_treatment": _decision("outcomes.2.mean_treatment", MARK_NOT_REPORTED, None),
    }
    form = build_form(RCT_TEMPLATE, VALUES, decided)
    outcomes = form.section("outcomes")
    assert outcomes is not None
    corrected = outcomes.rows[0].cell("ci_lower")
    assert corrected is not None
    # The reviewer's number, not grounded: never the machine's verdict beside it.
    assert (corrected.value, corrected.status, corrected.decided) == (0.42, REVIEWER_UNGROUNDED, True)
    approved = outcomes.rows[0].cell("events_treatment")
    assert approved is not None and (approved.value, approved.status) == (12, VERIFIED)
    dropped = outcomes.rows[1].cell("mean_treatment")
    assert dropped is not None and (dropped.value, dropped.status) == (None, NOT_REPORTED)
    grounded = build_form(
        RCT_TEMPLATE,
        VALUES,
        {"outcomes.1.ci_lower": _decision("outcomes.1.ci_lower", CORRECT, 0.42, {"status": "verified", "page": 2})},
    )
    cell = grounded.section("outcomes").rows[0].cell("ci_lower")  # type: ignore[union-attr]
    assert cell is not None and cell.status == VERIFIED  # a correction with its own grounded quote
    # "Approve the outcome" covers what is still undecided in that row only.
    assert outcomes.rows[0].undecided_paths == ["outcomes.1.outcome_name", "outcomes.1.total_treatment"]


def test_values_outside_the_template_are_listed_not_lost() -> None:
    legacy = {
        "effect_size": ReviewableValue(
            "effect_size", GroundedValue(None, None, "effect_size", 0.8, "q", VERIFIED, 1.0, "")
        )
    }
    form = build_form(RCT_TEMPLATE, legacy, {})
    other = form.section("other")
    assert other is not None and [c.path for c in form.cells()] == ["effect_size"]
