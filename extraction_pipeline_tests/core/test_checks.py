"""Plausibility checks: each impossible combination is flagged on its field path, with the reason."""

from __future__ import annotations

from extraction_pipeline.core.verification.checks import check_values


def _outcome(number: int, **values: object) -> dict[str, object]:
    return {f"outcomes.{number}.{name}": value for name, value in values.items()}


def test_consistent_values_raise_no_flag() -> None:
    values = {
        "metadata.randomized_n": 412,
        "baseline.n_treatment": 206,
        "baseline.n_control": 206,
        "baseline.male_percent_treatment": 48.5,
        **_outcome(1, effect_measure="HR", effect_estimate=0.72, ci_lower=0.6, ci_upper=0.86, p_value=0.003),
        **_outcome(2, events_treatment=30, total_treatment=206, events_control=45, total_control=206),
        **_outcome(3, mean_treatment=-1.2, sd_treatment=1.2, n_treatment=200, mean_control=0.4, sd_control=1.1),
    }
    assert check_values(values) == {}


def test_estimate_outside_its_ci_and_reversed_bounds() -> None:
    assert check_values(_outcome(1, effect_estimate=0.5, ci_lower=0.6, ci_upper=0.86)) == {
        "outcomes.1.effect_estimate": ["estimate 0.5 lies outside its own CI 0.6 to 0.86"]
    }
    assert check_values(_outcome(2, effect_estimate=0.7, ci_lower=0.9, ci_upper=0.6)) == {
        "outcomes.2.ci_lower": ["lower bound 0.9 is above the upper bound 0.6"]
    }


def test_each_outcome_is_checked_on_its_own() -> None:
    # Outcome 1's CI must not be compared with outcome 2's estimate.
    values = {**_outcome(1, ci_lower=0.6, ci_upper=0.86), **_outcome(2, effect_estimate=1.5)}
    assert check_values(values) == {}


def test_ratios_must_be_positive() -> None:
    flags = check_values(_outcome(1, effect_measure="OR", effect_estimate=-0.2, ci_lower=-0.5, ci_upper=0.1))
    assert flags["outcomes.1.effect_estimate"] == ["a ratio (OR) must be positive, got -0.2"]
    assert "outcomes.1.ci_upper" not in flags
    assert check_values(_outcome(1, effect_measure="MD", effect_estimate=-0.2, ci_lower=-0.5, ci_upper=0.1)) == {}


def test_counts_sds_percentages_and_p_values() -> None:
    flags = check_values(
        {
            **_outcome(1, events_treatment=31, total_treatment=30, total_control=-4, sd_control="-1.5", p_value=1.3),
            "metadata.randomized_n": 60.5,
            "baseline.male_percent_control": 130,
        }
    )
    assert flags["outcomes.1.events_treatment"] == ["31 events exceed the 30 participants of the treatment arm"]
    assert flags["outcomes.1.total_control"] == ["cannot be negative, got -4"]
    assert flags["outcomes.1.sd_control"] == ["cannot be negative, got -1.5"]
    assert flags["outcomes.1.p_value"] == ["a p-value must be between 0 and 1, got 1.3"]
    assert "a count must be a whole number, got 60.5" in flags["metadata.randomized_n"]
    assert flags["baseline.male_percent_control"] == ["a percentage must be between 0 and 100, got 130"]


def test_arm_sizes_against_the_randomized_total() -> None:
    def check(n_treatment: int | None, n_control: int | None) -> dict[str, list[str]]:
        values = {"metadata.randomized_n": 100, "baseline.n_treatment": n_treatment, "baseline.n_control": n_control}
        return check_values(values)

    assert check(60, 50) == {"metadata.randomized_n": ["arm sizes add up to 110, more than the 100 randomized"]}
    assert check(150, None) == {
        "baseline.n_treatment": ["150 in the treatment arm exceed the 100 randomized in the trial"]
    }
    assert check(45, 50) == {"metadata.randomized_n": ["arm sizes add up to 95, not the 100 randomized"]}
    assert check(50, 50) == {}
    assert check(45, None) == {}  # an arm not reported: no sum check
    # Outcome-level analysed totals need not add up to the randomized total, but no arm exceeds it.
    assert check_values({"metadata.randomized_n": 100, **_outcome(1, n_treatment=40, n_control=40)}) == {}
    over = check_values({"metadata.randomized_n": 100, **_outcome(2, total_control=500)})
    assert over == {"outcomes.2.total_control": ["500 in the control arm exceed the 100 randomized in the trial"]}


def _three_arms() -> dict[str, object]:
    return {
        "metadata.randomized_n": 90,
        "arms.1.arm_name": "Haloperidol 1 mg",
        "arms.1.randomized_n": 30,
        "arms.2.arm_name": "Haloperidol 2 mg",
        "arms.2.randomized_n": 30,
        "arms.3.arm_name": "Saline",
        "arms.3.randomized_n": 30,
    }


def test_a_three_arm_answer_in_its_own_terms_raises_no_flag() -> None:
    values = {
        **_three_arms(),
        # Subgroup arms are arms too, but not part of the randomized total.
        "arms.4.arm_name": "Saline",
        "arms.4.subgroup": "women",
        "arms.4.randomized_n": 14,
        **_outcome(1, outcome_name="PONV", arm="haloperidol 1 MG", events=5, total=30),
        **_outcome(2, outcome_name="PONV", arm="Saline (women)", events=9, total=14),
        "comparisons.1.arm": "Haloperidol 2 mg",
        "comparisons.1.comparator_arm": "Saline",
        "comparisons.1.effect_estimate": 0.4,
        "comparisons.1.ci_lower": 0.2,
        "comparisons.1.ci_upper": 0.9,
    }
    assert check_values(values) == {}


def test_an_entry_naming_an_arm_the_answer_does_not_declare_is_flagged_there() -> None:
    values = {
        **_three_arms(),
        **_outcome(1, outcome_name="PONV", arm="Haloperidol 3 mg", events=5, total=30),
        "comparisons.1.arm": "Haloperidol 1 mg",
        "comparisons.1.comparator_arm": "Placebo",
    }
    declared = "declared: 'Haloperidol 1 mg', 'Haloperidol 2 mg', 'Saline'"
    assert check_values(values) == {
        "outcomes.1.arm": [f"names the arm 'Haloperidol 3 mg', which is not one of the study's arms ({declared})"],
        "comparisons.1.comparator_arm": [f"names the arm 'Placebo', which is not one of the study's arms ({declared})"],
    }
    lone = check_values(_outcome(1, arm="Drug", events=1, total=2))
    assert lone == {
        "outcomes.1.arm": ["names the arm 'Drug', which is not one of the study's arms (the answer declares no arms)"]
    }


def test_per_arm_numbers_are_checked_in_each_entry_and_arms_against_the_total() -> None:
    values = {
        **_three_arms(),
        "arms.3.randomized_n": 40,  # 30 + 30 + 40 = 100, not the 90 randomized
        "arms.2.male_percent": 140,
        "arms.1.analysed_n": 95,
        **_outcome(1, arm="Saline", events=12, total=10, sd=-1),
        "comparisons.1.arm": "Saline",
        "comparisons.1.comparator_arm": "saline",
    }
    assert check_values(values) == {
        "metadata.randomized_n": ["the 3 arms' sizes add up to 100, more than the 90 randomized"],
        "arms.2.male_percent": ["a percentage must be between 0 and 100, got 140"],
        "arms.1.analysed_n": ["95 in the arm exceed the 90 randomized in the trial"],
        "outcomes.1.events": ["12 events exceed the 10 participants of the arm"],
        "outcomes.1.sd": ["cannot be negative, got -1"],
        "comparisons.1.comparator_arm": ["compares the arm 'Saline' with itself"],
    }


def test_numbers_that_name_no_arm_are_flagged_when_the_study_declares_its_arms() -> None:
    values = {
        **_three_arms(),
        **_outcome(1, outcome_name="PONV", events=5, total=30),  # no arm
        **_outcome(2, outcome_name="PONV", arm="Saline", events=9, total=30),
        "comparisons.1.arm": "Haloperidol 1 mg",
        "comparisons.1.effect_estimate": 0.5,
    }
    declared = "declared: 'Haloperidol 1 mg', 'Haloperidol 2 mg', 'Saline'"
    assert check_values(values) == {
        "outcomes.1.events": [f"these numbers name no arm ({declared})"],
        "outcomes.1.total": [f"these numbers name no arm ({declared})"],
        "comparisons.1.effect_estimate": [f"the comparison does not name its comparator arm ({declared})"],
    }
    # An answer that declares no arms (a model, or a template, that does not speak in arms) is not
    # held to references it never made.
    assert check_values({**_outcome(1, events=5, total=30), "comparisons.1.effect_estimate": 0.5}) == {}
