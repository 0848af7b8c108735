"""The printed effect, its 95% CI and its p-value recomputed from the arm numbers, and an outcome's
size against its arm's: the plausibility checks over one answer's values (path -> value), as a
batch runs them."""

from __future__ import annotations

import math
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


# The 95% CI and the p-value. Reference values are computed here with the textbook formulas, not
# by the module: a Wald interval on the log scale for ratios, on the raw scale for differences.
Z = 1.959964


def _normal_p(z: float) -> float:
    """Two-sided p of a standard normal statistic."""
    return math.erfc(abs(z) / math.sqrt(2))


def _comparison_fields(measure: str, ci: tuple[float, float], **fields: Any) -> dict[str, Any]:
    return {"effect_measure": measure, "ci_lower": ci[0], "ci_upper": ci[1], **fields}


def _ratio_ci(log_estimate: float, se: float) -> tuple[float, float]:
    return round(math.exp(log_estimate - Z * se), 2), round(math.exp(log_estimate + Z * se), 2)


def _binary_ci(measure: str, e1: int, n1: int, e2: int, n2: int) -> tuple[float, float]:
    """The unadjusted 95% CI a paper computes the standard way, rounded as it prints it."""
    if measure == "RR":
        return _ratio_ci(math.log(e1 / n1 / (e2 / n2)), math.sqrt(1 / e1 - 1 / n1 + 1 / e2 - 1 / n2))
    if measure == "OR":
        log_or = math.log(e1 * (n2 - e2) / (e2 * (n1 - e1)))
        return _ratio_ci(log_or, math.sqrt(1 / e1 + 1 / (n1 - e1) + 1 / e2 + 1 / (n2 - e2)))
    p1, p2 = e1 / n1, e2 / n2
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    return round(p1 - p2 - Z * se, 3), round(p1 - p2 + Z * se, 3)


@pytest.mark.parametrize("measure", ["RR", "OR", "RD"])
def test_an_unadjusted_ci_from_the_arm_counts_raises_nothing(measure: str) -> None:
    ci = _binary_ci(measure, 42, 402, 41, 388)  # RR 0.66-1.49, OR 0.62-1.55, RD -0.042-0.039
    flags = check_values(
        _answer(_comparison_fields(measure, ci), {"events": 42, "total": 402}, {"events": 41, "total": 388})
    )
    assert flags == {}, (measure, ci, flags)


def test_a_risk_difference_in_percentage_points_is_read_as_printed() -> None:
    # 66/94 vs 43/93: RD 24.0% (10.3% to 37.7%), Wald's interval in percentage points.
    p1, p2 = 66 / 94, 43 / 93
    se = math.sqrt(p1 * (1 - p1) / 94 + p2 * (1 - p2) / 93)
    ci = (round(100 * (p1 - p2 - Z * se), 1), round(100 * (p1 - p2 + Z * se), 1))
    values = _answer(
        _comparison_fields("RD", ci, effect_estimate=round(100 * (p1 - p2), 1)),
        {"events": 66, "total": 94},
        {"events": 43, "total": 93},
    )
    assert check_values(values) == {}, ci


def test_a_mean_difference_ci_by_students_t_raises_nothing() -> None:
    m1, sd1, n1, m2, sd2, n2 = 4.6, 2.1, 50, 5.1, 2.0, 49
    pooled = math.sqrt(((n1 - 1) * sd1**2 + (n2 - 1) * sd2**2) / (n1 + n2 - 2))
    t97 = 1.98472  # the t distribution's 97.5th percentile with 97 degrees of freedom
    half = t97 * pooled * math.sqrt(1 / n1 + 1 / n2)
    ci = (round(m1 - m2 - half, 2), round(m1 - m2 + half, 2))
    values = _answer(
        _comparison_fields("MD", ci, effect_estimate=round(m1 - m2, 2)),
        {"mean": m1, "sd": sd1, "n": n1},
        {"mean": m2, "sd": sd2, "n": n2},
    )
    assert check_values(values) == {}, ci


def test_a_standardized_mean_difference_ci_raises_nothing() -> None:
    # Hedges' g with the textbook variance (Borenstein et al. 2009): N/(n1 n2) + d²/(2N), times J².
    m1, sd1, n1, m2, sd2, n2 = 24.1, 5.2, 32, 20.3, 6.1, 30
    big_n = n1 + n2
    d = (m1 - m2) / math.sqrt(((n1 - 1) * sd1**2 + (n2 - 1) * sd2**2) / (big_n - 2))
    j = 1 - 3 / (4 * big_n - 9)
    se = j * math.sqrt(big_n / (n1 * n2) + d**2 / (2 * big_n))
    ci = (round(j * d - Z * se, 2), round(j * d + Z * se, 2))
    values = _answer(
        _comparison_fields("SMD", ci, effect_estimate=round(j * d, 2)),
        {"mean": m1, "sd": sd1, "n": n1},
        {"mean": m2, "sd": sd2, "n": n2},
    )
    assert check_values(values) == {}, ci


def test_a_ci_from_another_rows_numbers_is_flagged_naming_both_intervals() -> None:
    # 0.65-1.51 is printed for 42/402 vs 41/388; the arm numbers here are another outcome's.
    flags = check_values(
        _answer(
            {"effect_measure": "RR", "effect_estimate": 0.98, "ci_lower": 0.65, "ci_upper": 1.51},
            {"events": 148, "total": 406},
            {"events": 146, "total": 393},
        )
    )
    interval = (
        "the printed 95% CI 0.65–1.51 is not the 0.818–1.18 the arm numbers give (148/406 vs 146/393): an arm "
        "number is from another row, time point or population, or the printed interval is adjusted"
    )
    assert flags["comparisons.1.ci_lower"] == [interval]
    assert flags["comparisons.1.ci_upper"] == [interval]
    # One sentence per disagreement on each arm number, though both bounds disagree; the estimate
    # (0.98 against 0.981) agrees.
    for path in ("outcomes.1.events", "outcomes.1.total", "outcomes.2.events", "outcomes.2.total"):
        assert flags[path] == [interval]
    assert "comparisons.1.effect_estimate" not in flags


def test_a_ci_given_without_an_estimate_is_still_checked() -> None:
    printed = {"effect_measure": "odds ratio", "ci_lower": 0.62, "ci_upper": 1.55}
    right = _answer(printed, {"events": 42, "total": 402}, {"events": 41, "total": 388})
    assert check_values(right) == {}
    wrong = check_values(_answer(printed, {"events": 12, "total": 402}, {"events": 41, "total": 388}))
    assert set(wrong) == {
        "comparisons.1.ci_lower",
        "comparisons.1.ci_upper",
        "outcomes.1.events",
        "outcomes.1.total",
        "outcomes.2.events",
        "outcomes.2.total",
    }
    assert wrong["comparisons.1.ci_upper"][0].startswith("the printed 95% CI 0.62–1.55 is not the 0.135–0.504")


def test_a_mean_difference_ci_with_the_wrong_spread_is_flagged() -> None:
    # The paper's interval -1.02 to -0.22 beside "SDs" of 0.1: the table gives standard errors.
    flags = check_values(
        _answer(
            {"effect_measure": "MD", "ci_lower": -1.02, "ci_upper": -0.22},
            {"mean": 2.7, "sd": 0.1, "n": 47},
            {"mean": 3.4, "sd": 0.1, "n": 45},
        )
    )
    assert set(flags) == {
        "comparisons.1.ci_lower",
        "comparisons.1.ci_upper",
        *(f"outcomes.{entry}.{kind}" for entry in (1, 2) for kind in ("mean", "sd", "n")),
    }
    assert "the printed 95% CI -1.02 to -0.22 is not the -0.741 to -0.659" in flags["outcomes.1.sd"][0]


def test_a_ci_at_its_printed_precision_or_from_unrounded_means_raises_nothing() -> None:
    # RR 0.66-1.49 printed to one decimal.
    rounded = _answer(
        {"effect_measure": "RR", "ci_lower": 0.7, "ci_upper": 1.5},
        {"events": 42, "total": 402},
        {"events": 41, "total": 388},
    )
    assert check_values(rounded) == {}
    # Means and SDs printed as whole numbers (12 and 11, SD 3), the CI computed from the unrounded
    # 12.46 (SD 3.04) and 10.54 (SD 2.96), 30 per arm, with Student's t (58 df: 2.0017).
    half = 2.0017 * math.sqrt(((3.04**2 + 2.96**2) / 2) * (2 / 30))
    ci = (round(12.46 - 10.54 - half, 2), round(12.46 - 10.54 + half, 2))
    whole = _answer(
        _comparison_fields("MD", ci, effect_estimate=1.92),
        {"mean": 12, "sd": 3, "n": 30},
        {"mean": 11, "sd": 3, "n": 30},
    )
    assert check_values(whole) == {}, ci
    # The same interval beside another row's means, 5 apart, is not theirs: it excludes their 5.
    apart = _answer(_comparison_fields("MD", ci), {"mean": 15, "sd": 3, "n": 30}, {"mean": 10, "sd": 3, "n": 30})
    flags = check_values(apart)
    assert {"comparisons.1.ci_lower", "comparisons.1.ci_upper"} <= set(flags)
    assert "is not the 3.48–6.52 the arm numbers give" in flags["comparisons.1.ci_lower"][0]


def _chi_square_p(e1: int, n1: int, e2: int, n2: int) -> float:
    """Pearson's chi-square test of two proportions (1 df: p = erfc(sqrt(chi2 / 2)))."""
    pooled = (e1 + e2) / (n1 + n2)
    chi2 = (e1 / n1 - e2 / n2) ** 2 / (pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return math.erfc(math.sqrt(chi2 / 2))


@pytest.mark.parametrize("measure", ["RR", "OR", "RD"])
def test_a_p_value_the_arm_numbers_give_raises_nothing(measure: str) -> None:
    # Chi-square p-values as printed: 0.96 for 42/402 vs 41/388, "p<0.001" for 148/406 vs 41/388.
    for drug, placebo in (((42, 402), (41, 388)), ((148, 406), (41, 388))):
        p = max(round(_chi_square_p(*drug, *placebo), 3), 0.001)
        values = _answer(
            {"effect_measure": measure, "p_value": p},
            {"events": drug[0], "total": drug[1]},
            {"events": placebo[0], "total": placebo[1]},
        )
        assert check_values(values) == {}, (drug, placebo, p)


def test_a_mean_difference_p_value_the_arm_numbers_give_raises_nothing() -> None:
    # Student's t on 4.2 (SD 1.2, n 22) vs 2.1 (SD 1.1, n 20) gives "p<0.001"; on 74.1 (SD 12.2,
    # n 22) vs 78.1 (SD 6.4, n 20), 0.20.
    for drug, placebo, p in (((4.2, 1.2, 22), (2.1, 1.1, 20), 0.001), ((74.1, 12.2, 22), (78.1, 6.4, 20), 0.2)):
        values = _answer(
            {"effect_measure": "MD", "p_value": p},
            dict(zip(("mean", "sd", "n"), drug, strict=True)),
            dict(zip(("mean", "sd", "n"), placebo, strict=True)),
        )
        assert check_values(values) == {}, (drug, placebo)


def test_a_p_value_far_on_the_other_side_of_005_is_flagged() -> None:
    # 4.6 (SD 2.1, n 50) vs 4.8 (SD 2.0, n 49): z = 0.2 / 0.41, p about 0.63.
    se = math.sqrt(2.1**2 / 50 + 2.0**2 / 49)
    assert 0.6 < _normal_p(0.2 / se) < 0.65
    flags = check_values(
        _answer(
            {"effect_measure": "MD", "p_value": 0.001},
            {"mean": 4.6, "sd": 2.1, "n": 50},
            {"mean": 4.8, "sd": 2.0, "n": 49},
        )
    )
    sentence = (
        "the printed p ≤ 0.001 is not the p 0.63 the arm numbers give (4.6 (SD 2.1, n 50) vs 4.8 (SD 2.0, n 49)): an"
        " arm number is from another row, time point or population, or the printed p tests something else (an"
        " adjusted model, a change from baseline)"
    )
    assert flags == {
        path: [sentence]
        for path in ("comparisons.1.p_value", *(f"outcomes.{e}.{k}" for e in (1, 2) for k in ("mean", "sd", "n")))
    }
    # The other way: a printed p of 0.912 beside counts whose risks differ (148/406 vs 41/388).
    other = check_values(
        _answer({"effect_measure": "RR", "p_value": 0.912}, {"events": 148, "total": 406}, {"events": 41, "total": 388})
    )
    assert other["comparisons.1.p_value"][0].startswith("the printed p 0.912 is not the p < 0.001 the arm numbers give")


def test_a_p_value_near_005_is_not_flagged_whichever_side_it_falls() -> None:
    # 30/200 vs 45/200: the Wald test on log RR gives p about 0.06, a chi-square or an exact test 0.04-0.08.
    log_rr = math.log(30 / 45)
    recomputed = _normal_p(log_rr / math.sqrt(1 / 30 - 1 / 200 + 1 / 45 - 1 / 200))
    assert 0.05 < recomputed < 0.07
    for measure in ("RR", "OR", "RD"):
        values = _answer(
            {"effect_measure": measure, "p_value": 0.04}, {"events": 30, "total": 200}, {"events": 45, "total": 200}
        )
        assert check_values(values) == {}, measure


def test_a_skewed_measure_or_an_empty_cell_leaves_the_p_value_alone() -> None:
    # An SD above its mean (a length of stay): papers test it by ranks, which can disagree widely.
    skewed = _answer(
        {"effect_measure": "MD", "p_value": 0.004},
        {"mean": 9.9, "sd": 14.8, "n": 40},
        {"mean": 9.1, "sd": 9.9, "n": 41},
    )
    assert check_values(skewed) == {}
    # 0/4 vs 4/7: Yates's chi-square gives 0.21, the Wald test of the RD (one arm without variance) 0.002.
    empty = _answer({"effect_measure": "RD", "p_value": 0.21}, {"events": 0, "total": 4}, {"events": 4, "total": 7})
    assert check_values(empty) == {}


@pytest.mark.parametrize(
    ("printed", "drug_mean", "flagged"),
    [
        (0.01, 4.8, True),  # p<0.01 printed, about 0.63 recomputed
        (0.02, 4.8, False),
        (0.3, 6.6, True),  # about 1e-6 recomputed
        (0.15, 6.6, False),
    ],
)
def test_only_a_split_beyond_001_and_020_flags_a_p_value(printed: float, drug_mean: float, flagged: bool) -> None:
    values = _answer(
        {"effect_measure": "SMD", "p_value": printed},
        {"mean": drug_mean, "sd": 2.1, "n": 50},
        {"mean": 4.6, "sd": 2.0, "n": 49},
    )
    assert ("comparisons.1.p_value" in check_values(values)) is flagged


def test_a_comparison_given_twice_says_its_disagreement_once_on_each_arm_number() -> None:
    comparison = {"effect_measure": "RR", "ci_lower": 0.65, "ci_upper": 1.51}
    values = _answer(comparison, {"events": 148, "total": 406}, {"events": 146, "total": 393})
    values.update(
        {k.replace("comparisons.1.", "comparisons.2."): v for k, v in values.items() if k.startswith("comparisons.1.")}
    )
    flags = check_values(values)
    assert set(flags) >= {"comparisons.1.ci_lower", "comparisons.2.ci_lower"}
    assert len(flags["outcomes.1.events"]) == 1
