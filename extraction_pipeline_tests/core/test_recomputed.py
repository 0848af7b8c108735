"""The printed effect recomputed from the arm numbers, and an outcome's size against its arm's:
the plausibility checks over one answer's values (path -> value), as a batch runs them."""

from __future__ import annotations

from typing import Any

import pytest

from extraction_pipeline.core.verification.checks import check_values
from extraction_pipeline.core.verification.recomputed import measure_of


def _answer(comparison: dict[str, Any], drug: dict[str, Any], placebo: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {
        "arms.1.arm_name": "Progesterone",
        "arms.1.randomized_n": 406,
        "arms.2.arm_name": "Placebo",
        "arms.2.randomized_n": 393,
        "outcomes.1.outcome_name": "Respiratory distress syndrome",
        "outcomes.1.arm": "Progesterone",
        "outcomes.2.outcome_name": "Respiratory distress syndrome",
        "outcomes.2.arm": "Placebo",
        "comparisons.1.outcome_name": "Respiratory distress syndrome",
        "comparisons.1.arm": "Progesterone",
        "comparisons.1.comparator_arm": "Placebo",
    }
    values.update({f"outcomes.1.{k}": v for k, v in drug.items()})
    values.update({f"outcomes.2.{k}": v for k, v in placebo.items()})
    values.update({f"comparisons.1.{k}": v for k, v in comparison.items()})
    return values


def test_a_printed_risk_ratio_the_arm_counts_give_raises_nothing() -> None:
    # 42/402 vs 41/388: RR 0.9887 prints as 0.99; OR 0.988, RD -0.0012.
    for measure, estimate in (("RR", 0.99), ("OR", 0.99), ("RD", -0.001)):
        flags = check_values(
            _answer(
                {"effect_measure": measure, "effect_estimate": estimate},
                {"events": 42, "total": 402},
                {"events": 41, "total": 388},
            )
        )
        assert flags == {}, (measure, flags)


def test_an_arm_count_from_another_row_breaks_the_printed_effect_and_every_number_involved_says_so() -> None:
    flags = check_values(
        _answer(
            {"effect_measure": "RR", "effect_estimate": 0.99},
            {"events": 148, "total": 402},
            {"events": 41, "total": 388},
        )
    )
    involved = {
        "comparisons.1.effect_estimate",
        "outcomes.1.events",
        "outcomes.1.total",
        "outcomes.2.events",
        "outcomes.2.total",
    }
    assert set(flags) == involved
    [sentence] = flags["comparisons.1.effect_estimate"]
    assert "the printed RR 0.99 is not the 3.48 the arm numbers give (148/402 vs 41/388)" in sentence


def test_a_mean_difference_allows_for_the_rounding_of_the_printed_means() -> None:
    # Means printed to one decimal: 4.6 - 5.1 = -0.5, printed by the paper from unrounded means as -0.44.
    ok = check_values(
        _answer(
            {"effect_measure": "MD", "effect_estimate": -0.44},
            {"mean": 4.6, "sd": 2.1, "n": 50},
            {"mean": 5.1, "sd": 2.0, "n": 49},
        )
    )
    assert ok == {}
    off = check_values(
        _answer(
            {"effect_measure": "mean difference", "effect_estimate": -1.2},
            {"mean": 4.6, "sd": 2.1, "n": 50},
            {"mean": 5.1, "sd": 2.0, "n": 49},
        )
    )
    assert set(off) == {"comparisons.1.effect_estimate", "outcomes.1.mean", "outcomes.2.mean"}
    assert "is adjusted" in off["outcomes.1.mean"][0]


def test_hazard_ratios_and_missing_numbers_are_not_recomputed() -> None:
    assert (
        check_values(
            _answer(
                {"effect_measure": "HR", "effect_estimate": 3.0},
                {"events": 42, "total": 402},
                {"events": 41, "total": 388},
            )
        )
        == {}
    )
    assert (
        check_values(
            _answer({"effect_measure": "RR", "effect_estimate": 3.0}, {"events": 42}, {"events": 41, "total": 388})
        )
        == {}
    )


def test_an_outcome_total_above_the_number_randomized_to_its_arm_is_flagged() -> None:
    flags = check_values(_answer({}, {"events": 42, "total": 453}, {"events": 41, "total": 388}))
    assert flags == {"outcomes.1.total": ["453 is more than the 406 randomized to 'Progesterone'"]}


@pytest.mark.parametrize(
    ("printed", "measure"),
    [("Risk ratio", "RR"), ("odds-ratio", "OR"), ("Mean difference", "MD"), ("SMD", "SMD"), ("HR", None), ("", None)],
)
def test_measure_names(printed: str, measure: str | None) -> None:
    assert measure_of(printed) == measure


def test_an_outcome_total_that_is_neither_the_randomized_nor_the_analysed_size_is_flagged() -> None:
    sizes = {"arms.1.analysed_n": 402, "arms.2.analysed_n": 388}
    analysed = check_values({**_answer({}, {"events": 42, "total": 402}, {"events": 41, "total": 393}), **sizes})
    assert analysed == {}  # the analysed 402, the randomized 393: both sizes of their arms
    other = check_values({**_answer({}, {"events": 4, "total": 40}, {"events": 41, "total": 388}), **sizes})
    assert other == {
        "outcomes.1.total": [
            "40 is not a size of 'Progesterone' (406 randomized, 402 analysed): the size of a subgroup, another "
            "population, or of those with this outcome measured"
        ]
    }
