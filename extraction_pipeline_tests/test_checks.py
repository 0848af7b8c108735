"""Plausibility checks: each impossible combination is flagged on its field, with the reason."""

from __future__ import annotations

from extraction_pipeline.core.checks import check_fields


def test_consistent_values_raise_no_flag() -> None:
    values = {
        "effect_measure": "HR",
        "effect_estimate": 0.72,
        "ci_lower": 0.6,
        "ci_upper": 0.86,
        "randomized_n": 412,
        "intervention_events": 30,
        "intervention_group_size": 206,
        "comparator_events": 45,
        "comparator_group_size": 206,
        "p_value": 0.003,
        "intervention_standard_deviation": 1.2,
    }
    assert check_fields(values) == {}


def test_estimate_outside_its_ci_and_reversed_bounds() -> None:
    assert check_fields({"effect_estimate": 0.5, "ci_lower": 0.6, "ci_upper": 0.86}) == {
        "effect_estimate": ["estimate 0.5 lies outside its own CI 0.6 to 0.86"]
    }
    assert check_fields({"effect_estimate": 0.7, "ci_lower": 0.9, "ci_upper": 0.6}) == {
        "ci_lower": ["lower bound 0.9 is above the upper bound 0.6"]
    }


def test_ratios_must_be_positive() -> None:
    flags = check_fields({"effect_measure": "OR", "effect_estimate": -0.2, "ci_lower": -0.5, "ci_upper": 0.1})
    assert flags["effect_estimate"] == ["a ratio (OR) must be positive, got -0.2"]
    assert "ci_upper" not in flags


def test_counts_sds_and_p_values() -> None:
    flags = check_fields(
        {
            "intervention_events": 31,
            "intervention_group_size": 30,
            "comparator_group_size": -4,
            "comparator_standard_deviation": "-1.5",
            "p_value": 1.3,
            "randomized_n": 60.5,
        }
    )
    assert flags["intervention_events"] == ["31 events exceed the 30 participants of the arm"]
    assert flags["comparator_group_size"] == ["cannot be negative, got -4"]
    assert flags["comparator_standard_deviation"] == ["cannot be negative, got -1.5"]
    assert flags["p_value"] == ["a p-value must be between 0 and 1, got 1.3"]
    assert "a count must be a whole number, got 60.5" in flags["randomized_n"]


def test_arm_sizes_against_the_randomized_total() -> None:
    over = check_fields({"randomized_n": 100, "intervention_group_size": 60, "comparator_group_size": 50})
    assert over == {"randomized_n": ["arm sizes add up to 110, more than the 100 randomized"]}
    under = check_fields({"randomized_n": 100, "intervention_group_size": 45, "comparator_group_size": 50})
    assert under == {"randomized_n": ["arm sizes add up to 95, not the 100 randomized"]}
    assert check_fields({"randomized_n": 100, "intervention_group_size": 45}) == {}  # not reported: no check
