"""Effect sizes and pooling against published results (metafor's dat.bcg) and hand-checkable cases,
and the reading of the project's meta-analysis CSV."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.meta_analysis import (  # type: ignore[import-untyped]
    combine_effects,
    effectsize_2proportions,
    effectsize_smd,
)

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.meta_csv import COLUMNS
from extraction_pipeline.core.synthesis import (
    StudyEffect,
    binary_effect,
    continuous_effect,
    parse_meta_csv,
    pool,
    read_meta_csv,
    reml_tau2,
    reported_effect,
)

# metafor's dat.bcg (Colditz et al. 1994): BCG vaccine trials, tpos, tneg, cpos, cneg.
BCG = (
    ("Aronson 1948", 4, 119, 11, 128),
    ("Ferguson & Simes 1949", 6, 300, 29, 274),
    ("Rosenthal et al 1960", 3, 228, 11, 209),
    ("Hart & Sutherland 1977", 62, 13536, 248, 12619),
    ("Frimodt-Moller et al 1973", 33, 5036, 47, 5761),
    ("Stein & Aronson 1953", 180, 1361, 372, 1079),
    ("Vandiviere et al 1973", 8, 2537, 10, 619),
    ("TPT Madras 1980", 505, 87886, 499, 87892),
    ("Coetzee & Berjak 1968", 29, 7470, 45, 7232),
    ("Rosenthal et al 1961", 17, 1699, 65, 1600),
    ("Comstock et al 1974", 186, 50448, 141, 27197),
    ("Comstock & Webster 1969", 5, 2493, 3, 2338),
    ("Comstock et al 1976", 27, 16886, 29, 17825),
)


def bcg_effects(measure: str = "RR") -> list[StudyEffect]:
    return [
        binary_effect(name, "tb", measure, tpos, tpos + tneg, cpos, cpos + cneg) for name, tpos, tneg, cpos, cneg in BCG
    ]


def test_bcg_log_risk_ratios_are_metafors_escalc() -> None:
    # escalc(measure="RR", ai=tpos, bi=tneg, ci=cpos, di=cneg, data=dat.bcg): yi and vi of trials 1, 6, 12.
    effects = bcg_effects()
    for index, yi, vi in ((0, -0.8893, 0.3256), (5, -0.7861, 0.0069), (11, 0.4459, 0.5325)):
        assert round(effects[index].estimate, 4) == yi
        assert round(effects[index].variance, 4) == vi


def test_bcg_pooled_matches_metafor() -> None:
    result = pool(bcg_effects())
    assert result.k == 13 and result.measure == "RR" and result.ratio
    # rma(yi, vi, method="FE"): estimate -0.4303, CI -0.5097 to -0.3509, Q(df = 12) = 152.2330.
    assert round(result.common.estimate, 4) == -0.4303
    assert (round(result.common.ci_lower, 4), round(result.common.ci_upper, 4)) == (-0.5097, -0.3509)
    assert result.q is not None and round(result.q, 2) == 152.23 and result.q_df == 12
    # rma(yi, vi, method="DL"): -0.7141, CI -1.0644 to -0.3638, tau² 0.3088, I² 92.12%.
    assert result.random_dl is not None
    assert round(result.random_dl.estimate, 4) == -0.7141
    assert (round(result.random_dl.ci_lower, 4), round(result.random_dl.ci_upper, 4)) == (-1.0644, -0.3638)
    assert result.tau2_dl is not None and round(result.tau2_dl, 4) == 0.3088
    assert result.i2 is not None and round(result.i2, 2) == 92.12
    # rma(yi, vi) (REML, metafor's default): -0.7145, CI -1.0669 to -0.3622, tau² 0.3132, se 0.1798.
    assert result.random_reml is not None
    assert round(result.random_reml.estimate, 4) == -0.7145
    assert (round(result.random_reml.ci_lower, 4), round(result.random_reml.ci_upper, 4)) == (-1.0669, -0.3622)
    assert round(result.random_reml.se, 4) == 0.1798
    assert result.tau2_reml is not None and round(result.tau2_reml, 4) == 0.3132
    # The prediction interval is REML's mu ± z·sqrt(se² + tau²).
    assert result.prediction_interval is not None
    half = 1.959963984540054 * math.sqrt(result.random_reml.se**2 + result.tau2_reml)
    assert result.prediction_interval == pytest.approx((-0.7145323 - half, -0.7145323 + half), abs=1e-6)
    assert round(result.prediction_interval[0], 4) == -1.8667 and round(result.prediction_interval[1], 4) == 0.4376


def test_reml_tau2_is_the_maximum_of_the_restricted_likelihood() -> None:
    effects = bcg_effects()
    y = [e.estimate for e in effects]
    v = [e.variance for e in effects]
    tau2 = reml_tau2(y, v)

    def loglik(t: float) -> float:
        w = 1 / (np.asarray(v) + t)
        mu = float(w @ np.asarray(y) / w.sum())
        return float(-0.5 * (np.log(np.asarray(v) + t).sum() + math.log(w.sum()) + w @ (np.asarray(y) - mu) ** 2))

    assert loglik(tau2) > loglik(tau2 - 1e-3) and loglik(tau2) > loglik(tau2 + 1e-3)


def test_events_effects_by_hand_and_by_statsmodels() -> None:
    # 10/100 vs 20/100.
    rr = binary_effect("A", "death", "RR", 10, 100, 20, 100)
    assert rr.estimate == pytest.approx(math.log(0.5)) and rr.variance == pytest.approx(
        1 / 10 - 1 / 100 + 1 / 20 - 1 / 100
    )
    odds = binary_effect("A", "death", "OR", 10, 100, 20, 100)
    assert odds.estimate == pytest.approx(math.log((10 / 90) / (20 / 80)))
    assert odds.variance == pytest.approx(1 / 10 + 1 / 90 + 1 / 20 + 1 / 80)
    rd = binary_effect("A", "death", "RD", 10, 100, 20, 100)
    assert rd.estimate == pytest.approx(-0.1) and rd.variance == pytest.approx(0.1 * 0.9 / 100 + 0.2 * 0.8 / 100)
    for effect, statistic in ((rr, "risk-ratio"), (odds, "odds-ratio"), (rd, "diff")):
        estimate, variance = effectsize_2proportions(10, 100, 20, 100, statistic=statistic)
        assert (effect.estimate, effect.variance) == pytest.approx((estimate, variance))
        assert effect.source == "arms" and effect.measure in ("RR", "OR", "RD")
        assert effect.ci_lower == pytest.approx(effect.estimate - 1.959964 * effect.se)


def test_zero_cell_gets_half_added_to_that_study_only() -> None:
    # metafor's escalc default (add = 1/2, to = "only0"): 0.5/51 vs 5.5/51.
    rr = binary_effect("A", "death", "RR", 0, 50, 5, 50)
    assert rr.estimate == pytest.approx(math.log(0.5 / 5.5))
    assert rr.variance == pytest.approx(1 / 0.5 - 1 / 51 + 1 / 5.5 - 1 / 51)
    # ... and a study without a zero cell keeps its counts (statsmodels' own zero_correction=0.5
    # would shift it to log(4.5/123 / (11.5/139)) = -0.816).
    assert round(binary_effect("A", "tb", "RR", 4, 123, 11, 139).estimate, 4) == -0.8893


def test_means_effects_by_hand_and_by_statsmodels() -> None:
    md = continuous_effect("A", "pain", "MD", 10, 2, 20, 8, 3, 30)
    assert md.estimate == pytest.approx(2.0) and md.variance == pytest.approx(4 / 20 + 9 / 30)
    smd = continuous_effect("A", "pain", "SMD", 10, 2, 20, 8, 3, 30)
    pooled_sd = math.sqrt((4 * 19 + 9 * 29) / 48)
    assert smd.estimate == pytest.approx((1 - 3 / (4 * 50 - 9)) * 2 / pooled_sd)
    estimate, variance = effectsize_smd(10, 2, 20, 8, 3, 30)
    assert (smd.estimate, smd.variance) == pytest.approx((estimate, variance))
    assert round(smd.estimate, 4) == 0.7430


def test_reported_estimates_take_their_se_from_the_ci() -> None:
    hr = reported_effect("A", "death", "HR", 0.72, 0.60, 0.86)
    assert hr.estimate == pytest.approx(math.log(0.72)) and hr.source == "reported"
    assert hr.se == pytest.approx((math.log(0.86) - math.log(0.60)) / (2 * 1.959964), rel=1e-6)
    assert (hr.ci_lower, hr.ci_upper) == pytest.approx((math.log(0.60), math.log(0.86)))
    md = reported_effect("A", "pain", "MD", 2.0, 0.5, 3.5)
    assert md.estimate == 2.0 and md.se == pytest.approx(3.0 / (2 * 1.959964), rel=1e-6)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: binary_effect("A", "x", "RR", 0, 0, 3, 10), "the treatment arm has 0 participants"),
        (lambda: binary_effect("A", "x", "RR", 12, 10, 3, 10), "12 events exceed the 10 participants"),
        (lambda: binary_effect("A", "x", "RR", -1, 10, 3, 10), "events cannot be negative"),
        (lambda: binary_effect("A", "x", "MD", 1, 10, 3, 10), "'MD' is not a measure for events"),
        (lambda: binary_effect("A", "x", "RD", 0, 10, 0, 10), "no usable variance"),
        (lambda: continuous_effect("A", "x", "MD", 1, -2, 10, 1, 2, 10), "a standard deviation cannot be negative"),
        (lambda: continuous_effect("A", "x", "SMD", 1, 2, 0, 1, 2, 10), "the treatment arm has n = 0"),
        (lambda: continuous_effect("A", "x", "MD", 1, 0, 10, 1, 0, 10), "no usable variance"),
        (lambda: reported_effect("A", "x", "HR", 0.5, 0.6, 0.9), "lies outside its own CI"),
        (lambda: reported_effect("A", "x", "MD", 1.0, 2.0, 0.5), "empty or reversed"),
        (lambda: reported_effect("A", "x", "OR", 0.5, 0.0, 0.9), "must be above 0"),
        (lambda: reported_effect("A", "x", "ratio", 0.5, 0.4, 0.9), "unknown effect measure"),
    ],
)
def test_unusable_input_is_refused_with_the_reason(make: object, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        make()  # type: ignore[operator]


def test_one_study_is_reported_without_pooling() -> None:
    only = reported_effect("A", "death", "HR", 0.72, 0.60, 0.86)
    result = pool([only])
    assert result.k == 1 and result.q_df == 0
    assert result.random_dl is None and result.random_reml is None and result.prediction_interval is None
    assert result.tau2_dl is None and result.tau2_reml is None and result.i2 is None and result.q is None
    assert (result.common.estimate, result.common.ci_lower) == (only.estimate, only.ci_lower)
    assert result.as_dict()["random_reml"] is None


def test_nothing_or_mixed_measures_are_refused() -> None:
    with pytest.raises(ConfigError, match="no study to pool"):
        pool([])
    with pytest.raises(ConfigError, match="cannot pool RR with OR"):
        pool([binary_effect("A", "x", "RR", 1, 10, 2, 10), binary_effect("B", "x", "OR", 1, 10, 2, 10)])


def test_homogeneous_studies_give_tau2_zero_not_statsmodels_negative_dl() -> None:
    # y = 0 and 0.5, v = 1: Q = 0.125 < df = 1, so DL's (Q - df) / C is negative before truncation.
    effects = [reported_effect(s, "x", "MD", y, y - 1.959964, y + 1.959964) for s, y in (("A", 0.0), ("B", 0.5))]
    raw = combine_effects(np.array([0.0, 0.5]), np.array([e.variance for e in effects]), method_re="dl")
    assert raw.tau2 < 0
    result = pool(effects)
    assert result.tau2_dl == 0.0 and result.tau2_reml == 0.0 and result.i2 == 0.0
    assert result.random_dl == result.common and result.random_reml == result.common
    assert result.common.estimate == pytest.approx(0.25)
    # Identical effects (Q = 0) pool without a division warning (warnings are errors in the tests).
    same = pool([reported_effect(s, "x", "MD", 1.0, 0.5, 1.5) for s in ("A", "B")])
    assert same.q == pytest.approx(0.0) and same.i2 == 0.0


def _csv(rows: list[dict[str, object]], sep: str = ",") -> str:
    lines = [sep.join(COLUMNS)]
    for row in rows:
        lines.append(sep.join(str(row.get(column, "")) for column in COLUMNS))
    return "\n".join(lines) + "\n"


def _arms(
    study: str, name: str, t: dict[str, object], c: dict[str, object], **common: object
) -> list[dict[str, object]]:
    base = {"study": study, "outcome": 0, "outcome_name": name, **common}
    return [{**base, "group": "treatment", **t}, {**base, "group": "control", **c}]


def test_csv_groups_studies_by_normalized_outcome_name_and_measure() -> None:
    text = _csv(
        _arms(
            "Smith 2020",
            "HbA1c at 12 weeks",
            {"mi": " 7.1 ", "sdi": "1.0", "ni": "50"},
            {"mi": "7.6", "sdi": "1.2", "ni": 50},
        )
        + _arms(
            "Jones 2021",
            "glycated haemoglobin",
            {"mi": "7.0", "sdi": "0.9", "ni": 40},
            {"mi": "7.4", "sdi": "1.1", "ni": 42},
        )
        + _arms("Smith 2020", "mortality", {"xi": 3, "ni": 50}, {"xi": 6, "ni": 50}, measure="OR")
        + [
            {
                "study": "Lee 2019",
                "outcome": 1,
                "outcome_name": "Mortality",
                "group": "overall",
                "measure": "OR",
                "estimate": "0.5",
                "ci.lb": "0.25",
                "ci.ub": "1.0",
            }
        ]
        + [{"study": "Lee 2019", "outcome": 2, "outcome_name": "pain", "group": "treatment", "ni": 30}]
    )
    data = parse_meta_csv(text)
    groups = {(g.name, g.measure): g for g in data.groups}
    assert set(groups) == {("HbA1c at 12 weeks", "MD"), ("mortality", "OR")}
    hba1c = groups["HbA1c at 12 weeks", "MD"].effects
    assert [e.study for e in hba1c] == ["Smith 2020", "Jones 2021"]
    assert hba1c[0].estimate == pytest.approx(-0.5) and hba1c[1].estimate == pytest.approx(-0.4)
    mortality = groups["mortality", "OR"].effects
    assert [(e.study, e.source) for e in mortality] == [("Smith 2020", "arms"), ("Lee 2019", "reported")]
    assert mortality[1].estimate == pytest.approx(math.log(0.5))
    assert len(data.left_out) == 1 and data.left_out[0].startswith("line 9: study 'Lee 2019', 'pain'")
    # Asked for SMD, the means become SMDs and the events are not that analysis.
    smd = parse_meta_csv(text, "SMD")
    assert [(g.name, g.measure, len(g.effects)) for g in smd.groups] == [("HbA1c at 12 weeks", "SMD", 2)]


def test_csv_as_a_spreadsheet_saves_it(tmp_path: Path) -> None:
    rows = _arms("A", "death", {"xi": 10, "ni": 100}, {"xi": 20, "ni": 100})
    path = tmp_path / "edited.csv"
    path.write_bytes(("\ufeff" + _csv(rows, sep=";") + ";" * (len(COLUMNS) - 1) + "\n").replace("\n", "\r\n").encode())
    data = read_meta_csv(path)
    assert [(g.name, g.measure) for g in data.groups] == [("death", "RR")]
    assert data.groups[0].effects[0].estimate == pytest.approx(math.log(0.5))


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        (_arms("A", "death", {"xi": "1O", "ni": 100}, {"xi": 20, "ni": 100}), r"line 2: xi '1O' is not a number"),
        (_arms("A", "death", {"xi": "nan", "ni": 100}, {"xi": 20, "ni": 100}), r"line 2: xi 'nan' is not a number"),
        (
            _arms("A", "death", {"xi": 10, "ni": 0}, {"xi": 0, "ni": 100}),
            r"lines 2, 3: study 'A': the treatment arm has 0",
        ),
        (
            _arms("A", "pain", {"mi": 1, "sdi": -1, "ni": 9}, {"mi": 1, "sdi": 1, "ni": 9}),
            "lines 2, 3: .*cannot be negative",
        ),
        (
            [
                {
                    "study": "A",
                    "outcome_name": "death",
                    "group": "overall",
                    "measure": "HR",
                    "estimate": 2,
                    "ci.lb": 0.5,
                    "ci.ub": 0.9,
                }
            ],
            "line 2: .*outside its own CI",
        ),
        (_arms("A", "death", {"xi": 1, "ni": 9}, {"xi": 1, "ni": 9}) * 2, "lines 2 and 4: two treatment rows"),
        (
            _arms("A", "death at 30 days", {"xi": 1, "ni": 9}, {"xi": 1, "ni": 9})
            + [
                {**row, "outcome": 1, "outcome_name": "death at 90 days"}
                for row in _arms("A", "d", {"xi": 2, "ni": 9}, {"xi": 1, "ni": 9})
            ],
            "lines 2, 3 and lines 4, 5: study 'A' reports 'death at 30 days' and 'death at 90 days', one outcome",
        ),
        # A group that is no version-1 role is an arm's name (version 2); a row must name its arm.
        ([{"study": "A", "outcome_name": "death", "group": " "}], "line 2: no group"),
    ],
)
def test_csv_refuses_what_it_cannot_read_with_the_line(rows: list[dict[str, object]], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_meta_csv(_csv(rows))


def test_csv_without_the_projects_columns_or_not_a_csv(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not the project's meta-analysis CSV: no column .*xi"):
        parse_meta_csv("study,outcome_name,group\nA,death,treatment\n")
    binary = tmp_path / "paper.pdf"
    binary.write_bytes(b"%PDF-1.7\n\xff\xfe\x00\x01")
    with pytest.raises(ConfigError, match="not a UTF-8 text"):
        read_meta_csv(binary)
    with pytest.raises(ConfigError, match="no such file"):
        read_meta_csv(tmp_path / "missing.csv")


def test_the_batch_pages_reading_leaves_out_one_bad_study_and_keeps_same_named_papers_apart() -> None:
    """``strict=False`` (the batch page, the workbook): one impossible value leaves out its study,
    named, instead of the whole batch's plots; two papers labelled alike are two studies."""
    text = _csv(
        _arms("Smith 2020", "death", {"xi": 10, "ni": 100}, {"xi": 20, "ni": 100}, document_id=1)
        + _arms("Smith 2020", "death", {"xi": 12, "ni": 90}, {"xi": 18, "ni": 95}, document_id=2)
        + _arms("Lee 2019", "death", {"xi": 120, "ni": 100}, {"xi": 20, "ni": 100}, document_id=3)
        + [
            {
                "study": "Kim 2018",
                "outcome": 1,
                "outcome_name": "death",
                "group": "overall",
                "document_id": 4,
                "measure": "HR",
                "estimate": "0.9",
                "ci.lb": "0.95",
                "ci.ub": "0.7",
            }
        ]
    )
    with pytest.raises(ConfigError, match="exceed"):
        parse_meta_csv(text)  # the command line refuses, naming the lines
    data = parse_meta_csv(text, strict=False)
    [rr] = [g for g in data.groups if g.measure == "RR"]
    assert [e.study for e in rr.effects] == ["Smith 2020", "Smith 2020"]
    assert [s.document_id for s in rr.sources] == [1, 2]
    assert len(data.left_out) == 2
    assert "120 events exceed the 100 participants" in data.left_out[0]
    assert "empty or reversed" in data.left_out[1]


def test_a_study_with_no_events_in_either_arm_is_not_estimable_and_left_out_unless_kept() -> None:
    """RevMan's rule by default (0/38 vs 0/39 says nothing about a ratio); metafor's 0.5
    continuity correction when asked. A zero in one arm only is pooled with the correction."""
    text = _csv(
        _arms("Adams 2018", "vomiting", {"xi": 0, "ni": 38}, {"xi": 0, "ni": 39})
        + _arms("Baker 2019", "vomiting", {"xi": 0, "ni": 40}, {"xi": 4, "ni": 40})
        + _arms("Clark 2020", "vomiting", {"xi": 6, "ni": 50}, {"xi": 11, "ni": 50})
    )
    data = parse_meta_csv(text)
    [group] = data.groups
    assert [effect.study for effect in group.effects] == ["Baker 2019", "Clark 2020"]
    [note] = data.left_out
    assert "study 'Adams 2018', 'vomiting': 0/38 vs 0/39" in note and "not estimable as an RR" in note
    kept = parse_meta_csv(text, keep_double_zero=True)
    [group] = kept.groups
    assert [effect.study for effect in group.effects] == ["Adams 2018", "Baker 2019", "Clark 2020"]
    assert kept.left_out == ()
    # metafor's escalc(add=1/2, to="only0"): log((0.5/39) / (0.5/40)) for Adams
    assert group.effects[0].estimate == pytest.approx(math.log((0.5 / 39) / (0.5 / 40)))


def test_left_out_rows_are_grouped_by_why_with_the_studies_to_fix_them_never_line_numbers() -> None:
    from extraction_pipeline.core.synthesis.batch import grouped_problems

    text = _csv(
        _arms("Adams 2018", "vomiting", {"xi": 0, "ni": 38}, {"xi": 0, "ni": 39}, document_id=1)
        + _arms("Baker 2019", "vomiting", {"xi": 0, "ni": 40}, {"xi": 0, "ni": 40}, document_id=2)
        + _arms("Clark 2020", "", {"xi": 6, "ni": 50}, {"xi": 11, "ni": 50}, document_id=3)
    )
    problems = grouped_problems(parse_meta_csv(text, strict=False).left_out, text, {1: 11, 2: 12, 3: 13})
    said = {problem.sentence: problem.studies for problem in problems}
    assert said == {
        "2 studies with no events in either arm (or every participant had one): not estimable as a ratio, left out "
        "of the pooling as RevMan does (the command's --keep-double-zero pools them)": (
            ("Adams 2018", 11),
            ("Baker 2019", 12),
        ),
        "2 outcome rows without an outcome name (or a study name), so nothing to pool with: name them on the review "
        "pages": (("Clark 2020", 13),),
    }


def test_a_row_naming_no_arm_is_left_out_on_the_batch_page_and_refused_by_the_command() -> None:
    printed_only = {
        "study": "Dunn 2017",
        "outcome": 0,
        "outcome_name": "vomiting",
        "measure": "RR",
        "estimate": "0.5",
        "ci.lb": "0.2",
        "ci.ub": "1.1",
    }
    text = _csv([printed_only, *_arms("Clark 2020", "vomiting", {"xi": 6, "ni": 50}, {"xi": 11, "ni": 50})])
    with pytest.raises(ConfigError, match="line 2: no group"):
        parse_meta_csv(text)  # the command: the file is the analyst's to fix
    lenient = parse_meta_csv(text, strict=False)  # the batch page: the rest is pooled, the row said
    assert [effect.study for group in lenient.groups for effect in group.effects] == ["Clark 2020"]
    assert lenient.left_out == (
        "line 2: a row naming no arm (neither its name nor its id), so nothing to compare it "
        "with: name it on the review page",
    )
