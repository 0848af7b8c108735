"""The arms view: any document's fields, of either RCT base version, read as arms, outcomes
(one result per arm) and comparisons."""

from __future__ import annotations

from extraction_pipeline.core.templates.arms import StudyArms, arm_key_of, study_arms


def _view(values: dict[str, object], decided: dict[str, object] | None = None) -> StudyArms:
    final = {**values, **(decided or {})}
    return study_arms(values, final.get)


THREE_ARMS = {
    "arms.1.arm_name": "H1",
    "arms.1.intervention": "haloperidol 1 mg",
    "arms.1.randomized_n": 40,
    "arms.2.arm_name": "H2",
    "arms.2.intervention": "haloperidol 2 mg",
    "arms.3.arm_name": "Saline",
    "outcomes.1.outcome_name": "PONV",
    "outcomes.1.timepoint": "0-24 h",
    "outcomes.1.arm": "H1",
    "outcomes.1.events": 8,
    "outcomes.1.total": 40,
    "outcomes.2.outcome_name": "ponv",
    "outcomes.2.timepoint": "0-24 h",
    "outcomes.2.arm": "saline",
    "outcomes.2.events": 19,
    "outcomes.2.total": 41,
    "outcomes.3.outcome_name": "PONV",
    "outcomes.3.timepoint": "2-24 h",  # another time point: another outcome
    "outcomes.3.arm": "H2",
    "outcomes.3.events": 4,
    "comparisons.1.outcome_name": "PONV",
    "comparisons.1.timepoint": "0-24 h",
    "comparisons.1.arm": "H1",
    "comparisons.1.comparator_arm": "Saline",
    "comparisons.1.effect_estimate": 0.43,
    "comparisons.2.outcome_name": "Rescue antiemetic",
    "comparisons.2.arm": "H2",
    "comparisons.2.comparator_arm": "Placebo",
}


def test_a_three_arm_answer_reads_as_outcomes_with_one_result_per_arm() -> None:
    view = _view(THREE_ARMS)
    assert view.version == 2
    assert [(arm.key, arm.name) for arm in view.arms] == [("arms.1", "H1"), ("arms.2", "H2"), ("arms.3", "Saline")]
    assert view.arm("arms.1").paths["randomized_n"] == "arms.1.randomized_n"  # type: ignore[union-attr]
    first, second, only_effect = view.outcomes
    assert (first.name, first.timepoint, first.entries) == ("PONV", "0-24 h", ("outcomes.1", "outcomes.2"))
    assert first.result("arms.3").paths["events"] == "outcomes.2.events"  # type: ignore[union-attr]
    assert first.result("arms.2") is None
    [comparison] = first.comparisons
    assert (comparison.arm, comparison.comparator, comparison.key) == ("arms.1", "arms.3", "comparisons.1")
    assert (second.timepoint, [r.arm for r in second.results]) == ("2-24 h", ["arms.2"])
    # A comparison of an outcome with no per-arm numbers is an outcome of its own; its unknown arm says so.
    assert (only_effect.name, only_effect.results, only_effect.key) == ("Rescue antiemetic", (), "comparisons.2")
    assert (only_effect.comparisons[0].comparator, only_effect.comparisons[0].comparator_name) == ("", "Placebo")
    assert view.undeclared == ("comparisons.2.comparator_arm",)


def test_a_reviewers_decision_moves_the_numbers_to_another_arm_and_regroups() -> None:
    view = _view(THREE_ARMS, {"outcomes.1.arm": "H2", "outcomes.3.timepoint": "0-24 h"})
    first, again, _effect = view.outcomes
    assert [(r.arm, r.entry) for r in first.results] == [("arms.2", "outcomes.1"), ("arms.3", "outcomes.2")]
    assert first.result("arms.1") is None
    # The same arm twice for one outcome and time point is two outcomes, never one merged row.
    assert [(r.arm, r.entry) for r in again.results] == [("arms.2", "outcomes.3")]


def test_subgroup_arms_are_labelled_with_their_subgroup() -> None:
    view = _view(
        {
            "arms.1.arm_name": "Drug",
            "arms.1.subgroup": "women",
            "arms.2.arm_name": "Drug (men)",
            "arms.2.subgroup": "men",
            "outcomes.1.outcome_name": "Pain",
            "outcomes.1.arm": "Drug (women)",
        }
    )
    assert [arm.label for arm in view.arms] == ["Drug (women)", "Drug (men)"]
    assert view.outcomes[0].results[0].arm == "arms.1" and view.undeclared == ()


def test_a_two_arm_answer_of_the_first_base_reads_as_two_arms_and_one_comparison() -> None:
    view = _view(
        {
            "baseline.treatment_name": "Drug",
            "baseline.n_treatment": 206,
            "baseline.control_name": None,
            "outcomes.1.outcome_name": "Death",
            "outcomes.1.events_treatment": 30,
            "outcomes.1.total_treatment": 206,
            "outcomes.1.events_control": 45,
            "outcomes.1.effect_estimate": 0.72,
            "outcomes.2.outcome_name": "Pain",
            "outcomes.2.mean_control": 3.1,
        }
    )
    assert view.version == 1
    assert [(arm.key, arm.name) for arm in view.arms] == [("treatment", "Drug"), ("control", "control")]
    assert view.arm("treatment").paths == {  # type: ignore[union-attr]
        "arm_name": "baseline.treatment_name",
        "randomized_n": "baseline.n_treatment",
    }
    death, pain = view.outcomes
    assert death.result("treatment").paths == {  # type: ignore[union-attr]
        "events": "outcomes.1.events_treatment",
        "total": "outcomes.1.total_treatment",
    }
    assert [(c.key, c.arm, c.comparator, c.paths) for c in death.comparisons] == [
        ("outcomes.1", "treatment", "control", {"effect_estimate": "outcomes.1.effect_estimate"})
    ]
    assert pain.comparisons == () and pain.result("control").paths == {"mean": "outcomes.2.mean_control"}  # type: ignore[union-attr]


def test_arm_names_match_regardless_of_case_and_punctuation_but_not_of_words_or_numbers() -> None:
    assert arm_key_of("Haloperidol, 1 mg") == arm_key_of("haloperidol 1 MG") == "haloperidol 1 mg"
    assert arm_key_of("Haloperidol 1 mg") != arm_key_of("Haloperidol 2 mg")
    assert arm_key_of("0.5 mg/kg") != arm_key_of("5 mg/kg")
