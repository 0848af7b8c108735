"""The extraction form a reviewer reads: study fields, the arms as columns, Risk of Bias as one row
of domains, one row per outcome with a column group per arm and its comparisons under it; each
cell's value and colour are what is true of it now. Version-1 results keep their two arm columns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.review.form import UNDECLARED, SectionKind, build_form
from extraction_pipeline.core.review.values import (
    APPROVE,
    CORRECT,
    MARK_NOT_REPORTED,
    REVIEWER_UNGROUNDED,
    Decision,
    ReviewableValue,
)
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE, RCT_TEMPLATE_V1
from extraction_pipeline.core.verification.grounding import NOT_REPORTED, UNVERIFIED, VERIFIED, GroundingStatus


def _value(path: str, value: Any, status: GroundingStatus = VERIFIED) -> ReviewableValue:
    parts = path.split(".")
    module, index = parts[0], int(parts[1]) if len(parts) == 3 else None
    entry = GroundedValue(module, index, parts[-1], value, f"... {value} ...", status, 1.0, "quote found", page=2)
    return ReviewableValue(path, entry)


def _decision(path: str, action: str, value: Any, grounding: dict[str, Any] | None = None) -> Decision:
    return Decision(1, 7, path, 1, action, None, value, None, grounding, None, "Rita", "browser", datetime.now(UTC))


def _values(*pairs: tuple[str, Any] | tuple[str, Any, GroundingStatus]) -> dict[str, ReviewableValue]:
    return {pair[0]: _value(*pair) for pair in pairs}


# A three-arm trial: two doses and placebo; mortality per arm (one entry per arm), two comparisons.
THREE_ARMS = _values(
    ("metadata.nct_number", "NCT01234567"),
    ("arms.1.arm_name", "Drug 1 mg"),
    ("arms.1.randomized_n", 40),
    ("arms.2.arm_name", "Drug 2 mg"),
    ("arms.2.randomized_n", 41),
    ("arms.3.arm_name", "Placebo"),
    ("arms.3.randomized_n", 39),
    ("arms.3.age", 61.5),
    ("risk_of_bias.randomization", "low"),
    ("outcomes.1.outcome_name", "mortality"),
    ("outcomes.1.timepoint", "12 weeks"),
    ("outcomes.1.arm", "Drug 1 mg"),
    ("outcomes.1.events", 4),
    ("outcomes.1.total", 40),
    ("outcomes.2.outcome_name", "mortality"),
    ("outcomes.2.timepoint", "12 weeks"),
    ("outcomes.2.arm", "drug 2 MG"),  # case and spacing do not matter
    ("outcomes.2.events", 5),
    ("outcomes.2.total", 41, UNVERIFIED),
    ("outcomes.3.outcome_name", "mortality"),
    ("outcomes.3.timepoint", "12 weeks"),
    ("outcomes.3.arm", "Placebo"),
    ("outcomes.3.events", 9),
    ("outcomes.3.total", 39),
    ("outcomes.4.outcome_name", "HbA1c"),
    ("outcomes.4.arm", "Placebo"),
    ("outcomes.4.mean", 7.1),
    ("outcomes.4.sd", 1.2),
    ("comparisons.1.outcome_name", "mortality"),
    ("comparisons.1.timepoint", "12 weeks"),
    ("comparisons.1.arm", "Drug 1 mg"),
    ("comparisons.1.comparator_arm", "Placebo"),
    ("comparisons.1.effect_measure", "RR"),
    ("comparisons.1.effect_estimate", 0.43),
    ("comparisons.2.outcome_name", "mortality"),
    ("comparisons.2.timepoint", "12 weeks"),
    ("comparisons.2.arm", "Drug 2 mg"),
    ("comparisons.2.comparator_arm", "Placebo"),
    ("comparisons.2.p_value", 0.04),
)


def test_the_form_shows_arms_as_columns_and_outcomes_per_arm() -> None:
    form = build_form(RCT_TEMPLATE, THREE_ARMS, {})
    assert [(s.module, s.kind) for s in form.sections] == [
        ("metadata", SectionKind.FIELDS),
        ("arms", SectionKind.ARMS),
        ("risk_of_bias", SectionKind.DOMAINS),
        ("outcomes", SectionKind.OUTCOMES),  # comparisons are shown under their outcome
    ]
    arms = form.section("arms")
    assert arms is not None
    assert [(c.key, c.label) for c in arms.columns] == [
        ("arms.1", "Drug 1 mg"),
        ("arms.2", "Drug 2 mg"),
        ("arms.3", "Placebo"),
    ]
    rows = {row.label: row for row in arms.rows}
    assert [rows["randomized n"].cell(key).value for key in ("arms.1", "arms.2", "arms.3")] == [40, 41, 39]  # type: ignore[union-attr]
    assert rows["age"].cell("arms.3").value == 61.5 and not rows["age"].cell("arms.1").present  # type: ignore[union-attr]
    outcomes = form.section("outcomes")
    assert outcomes is not None
    assert [c.key for c in outcomes.columns] == ["arms.1", "arms.2", "arms.3"]
    mortality, hba1c = outcomes.outcomes
    assert (mortality.key, mortality.label, hba1c.label) == ("outcomes.1", "mortality", "HbA1c")
    # One column group per arm: each entry's numbers under the arm it names.
    assert {key: (r.cell("events").value, r.cell("total").value) for key, r in mortality.arms.items()} == {  # type: ignore[union-attr]
        "arms.1": (4, 40),
        "arms.2": (5, 41),
        "arms.3": (9, 39),
    }
    assert mortality.result("arms.2").cell("total").status == UNVERIFIED  # type: ignore[union-attr]
    assert mortality.result("arms.2").dichotomous and not mortality.result("arms.2").continuous  # type: ignore[union-attr]
    assert list(hba1c.arms) == ["arms.3"] and hba1c.result("arms.3").continuous  # type: ignore[union-attr]
    # The comparisons printed for the outcome, under it, named by their arms.
    assert [(c.key, c.label) for c in mortality.comparisons] == [
        ("comparisons.1", "Drug 1 mg vs Placebo"),
        ("comparisons.2", "Drug 2 mg vs Placebo"),
    ]
    assert mortality.comparisons[0].cell("effect_estimate").value == 0.43  # type: ignore[union-attr]
    assert not mortality.comparisons[0].cell("ci_lower").present  # type: ignore[union-attr]  # shown as a dash
    assert hba1c.comparisons == ()
    # Every value the model gave is a cell of the form, once; the arm references can be reassigned.
    shown = [c.path for c in form.cells()]
    assert sorted(shown) == sorted(THREE_ARMS) and len(shown) == len(set(shown))
    assert form.arm_references == {
        *(f"outcomes.{n}.arm" for n in range(1, 5)),
        *(f"comparisons.{n}.{side}" for n in (1, 2) for side in ("arm", "comparator_arm")),
    }
    # "Approve the outcome" covers its arms' numbers and its comparisons.
    assert {"outcomes.3.events", "comparisons.2.p_value", "outcomes.2.outcome_name"} <= set(mortality.undecided_paths)


def test_a_reassigned_entry_moves_its_numbers_to_the_chosen_arm() -> None:
    form = build_form(RCT_TEMPLATE, THREE_ARMS, {})
    cell = form.section("outcomes").outcomes[1].result("arms.3").arm  # type: ignore[union-attr]
    assert cell is not None and cell.path == "outcomes.4.arm"
    assert [(c.name, c.selected) for c in form.arm_choices(cell)] == [
        ("Drug 1 mg", False),
        ("Drug 2 mg", False),
        ("Placebo", True),
    ]
    moved = build_form(RCT_TEMPLATE, THREE_ARMS, {"outcomes.4.arm": _decision("outcomes.4.arm", CORRECT, "Drug 2 mg")})
    hba1c = moved.section("outcomes").outcomes[1]  # type: ignore[union-attr]
    assert list(hba1c.arms) == ["arms.2"] and hba1c.result("arms.2").cell("mean").value == 7.1  # type: ignore[union-attr]
    assert hba1c.result("arms.2").arm.decided  # type: ignore[union-attr]
    # An entry moved onto an arm the outcome already has numbers for becomes an outcome row of its own.
    clash = build_form(RCT_TEMPLATE, THREE_ARMS, {"outcomes.2.arm": _decision("outcomes.2.arm", CORRECT, "Placebo")})
    rows = clash.section("outcomes").outcomes  # type: ignore[union-attr]
    assert [(row.key, list(row.arms)) for row in rows] == [
        ("outcomes.1", ["arms.1", "arms.3"]),
        ("outcomes.3", ["arms.3"]),
        ("outcomes.4", ["arms.3"]),
    ]
    assert sorted(c.path for c in clash.cells()) == sorted(THREE_ARMS)


def test_numbers_naming_an_undeclared_arm_get_a_column_of_their_own() -> None:
    values = {**THREE_ARMS, "outcomes.4.arm": _value("outcomes.4.arm", "Drug 5 mg")}
    outcomes = build_form(RCT_TEMPLATE, values, {}).section("outcomes")
    assert outcomes is not None
    assert [(c.key, c.label, c.declared) for c in outcomes.columns][-1] == (
        f"{UNDECLARED}drug 5 mg",
        "Drug 5 mg (not declared)",
        False,
    )
    assert outcomes.outcomes[1].result(f"{UNDECLARED}drug 5 mg").cell("mean").value == 7.1  # type: ignore[union-attr]


def test_each_cell_shows_only_true_states() -> None:
    decided = {
        "comparisons.1.effect_estimate": _decision("comparisons.1.effect_estimate", CORRECT, 0.42),  # no new quote
        "outcomes.1.events": _decision("outcomes.1.events", APPROVE, 4),
        "outcomes.4.mean": _decision("outcomes.4.mean", MARK_NOT_REPORTED, None),
    }
    form = build_form(RCT_TEMPLATE, THREE_ARMS, decided)
    outcomes = form.section("outcomes")
    assert outcomes is not None
    mortality, hba1c = outcomes.outcomes
    corrected = mortality.comparisons[0].cell("effect_estimate")
    assert corrected is not None
    # The reviewer's number, not grounded: never the machine's verdict beside it.
    assert (corrected.value, corrected.status, corrected.decided) == (0.42, REVIEWER_UNGROUNDED, True)
    approved = mortality.result("arms.1").cell("events")  # type: ignore[union-attr]
    assert approved is not None and (approved.value, approved.status) == (4, VERIFIED)
    dropped = hba1c.result("arms.3").cell("mean")  # type: ignore[union-attr]
    assert dropped is not None and (dropped.value, dropped.status) == (None, NOT_REPORTED)
    path = "comparisons.1.effect_estimate"
    grounded = build_form(
        RCT_TEMPLATE, THREE_ARMS, {path: _decision(path, CORRECT, 0.42, {"status": "verified", "page": 2})}
    )
    cell = grounded.section("outcomes").outcomes[0].comparisons[0].cell("effect_estimate")  # type: ignore[union-attr]
    assert cell is not None and cell.status == VERIFIED  # a correction with its own grounded quote
    # "Approve the outcome" covers what is still undecided in that outcome only.
    assert hba1c.undecided_paths == ["outcomes.4.outcome_name", "outcomes.4.arm", "outcomes.4.sd"]


V1_VALUES = _values(
    ("metadata.nct_number", "NCT01234567"),
    ("baseline.n_treatment", 120),
    ("baseline.n_control", 118),
    ("baseline.treatment_name", "drug"),
    ("risk_of_bias.randomization", "low"),
    ("outcomes.1.outcome_name", "mortality"),
    ("outcomes.1.events_treatment", 12),
    ("outcomes.1.total_treatment", 120),
    ("outcomes.1.ci_lower", 0.11, UNVERIFIED),
    ("outcomes.2.outcome_name", "HbA1c"),
    ("outcomes.2.mean_treatment", 7.1),
)


def test_a_version_1_form_keeps_two_arm_columns_named_by_the_baseline() -> None:
    decided = {
        "outcomes.1.ci_lower": _decision("outcomes.1.ci_lower", CORRECT, 0.42),
        "outcomes.1.events_treatment": _decision("outcomes.1.events_treatment", APPROVE, 12),
    }
    form = build_form(RCT_TEMPLATE_V1, V1_VALUES, decided)
    assert [(s.module, s.kind) for s in form.sections] == [
        ("metadata", SectionKind.FIELDS),
        ("baseline", SectionKind.ARMS),
        ("risk_of_bias", SectionKind.DOMAINS),
        ("outcomes", SectionKind.OUTCOMES),
    ]
    baseline = form.section("baseline")
    assert baseline is not None
    assert [(c.key, c.label) for c in baseline.columns] == [("treatment", "drug"), ("control", "control")]
    rows = {row.label: row for row in baseline.rows}
    assert rows["arm"].cell("treatment").value == "drug"  # type: ignore[union-attr]
    assert (rows["n"].cell("treatment").value, rows["n"].cell("control").value) == (120, 118)  # type: ignore[union-attr]
    outcomes = form.section("outcomes")
    assert outcomes is not None and [c.label for c in outcomes.columns] == ["drug", "control"]
    mortality, hba1c = outcomes.outcomes
    assert (mortality.key, mortality.label, hba1c.label) == ("outcomes.1", "mortality", "HbA1c")
    events = mortality.result("treatment").cell("events")  # type: ignore[union-attr]
    assert events is not None and (events.path, events.field, events.value) == (
        "outcomes.1.events_treatment",
        "events_treatment",
        12,
    )
    assert not mortality.result("control").dichotomous  # type: ignore[union-attr]  # nothing extracted: dashes
    [effect] = mortality.comparisons
    assert effect.label == "drug vs control" and effect.cell("ci_lower").status == REVIEWER_UNGROUNDED  # type: ignore[union-attr]
    assert not effect.cell("p_value").present  # type: ignore[union-attr]
    assert form.arm_references == frozenset()  # version 1 has no arm references to reassign
    assert mortality.undecided_paths == ["outcomes.1.outcome_name", "outcomes.1.total_treatment"]
    assert sorted(c.path for c in form.cells()) == sorted(V1_VALUES)


def test_values_outside_the_template_are_listed_not_lost() -> None:
    legacy = {
        "effect_size": ReviewableValue(
            "effect_size", GroundedValue(None, None, "effect_size", 0.8, "q", VERIFIED, 1.0, "")
        )
    }
    form = build_form(RCT_TEMPLATE, legacy, {})
    other = form.section("other")
    assert other is not None and [c.path for c in form.cells()] == ["effect_size"]
