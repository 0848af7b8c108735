"""`extraction-pipeline synthesis` as a user runs it: a real process on a CSV in the project's
export format (metafor's dat.bcg, 13 BCG trials), the printed numbers, --json, and one-line errors."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.meta_analysis import combine_effects, effectsize_2proportions  # type: ignore[import-untyped]

from extraction_pipeline.core.export.meta_csv import COLUMNS
from extraction_pipeline_tests.core.test_synthesis import BCG
from extraction_pipeline_tests.support.cli import one_line_error, run_cli


@pytest.fixture(scope="module")
def bcg_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dat.bcg as the batch export writes it: a treatment and a control row per trial."""
    path = tmp_path_factory.mktemp("synthesis") / "batch-7-meta-analysis.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for number, (study, tpos, tneg, cpos, cneg) in enumerate(BCG, start=1):
            for group, events, total in (("treatment", tpos, tpos + tneg), ("control", cpos, cpos + cneg)):
                writer.writerow(
                    {
                        "study": study,
                        "document_id": number,
                        "filename": f"trial-{number}.pdf",
                        "outcome": 0,
                        # Named as papers do; the evaluation's normalization makes them one outcome.
                        "outcome_name": "Tuberculosis" if number % 2 else "tuberculosis at 5 years",
                        "outcome_type": "dichotomous",
                        "group": group,
                        "xi": events,
                        "ni": total,
                        "measure": "RR" if number < 5 else "",
                        "status_xi": "verified",
                        "review": "reviewed",
                    }
                )
    return path


def test_prints_pooled_risk_ratios_back_transformed(tmp_path: Path, bcg_csv: Path) -> None:
    out = run_cli(tmp_path, "synthesis", str(bcg_csv), check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "Tuberculosis - RR, k=13 (13 from arm data, 0 from reported estimates)"
    # metafor: FE -0.4303 [-0.5097, -0.3509]; DL -0.7141 [-1.0644, -0.3638]; REML -0.7145 [-1.0669, -0.3622].
    shown = " ".join(f"{math.exp(x):.2f}" for x in (-0.4303, -0.5097, -0.3509))
    assert shown == "0.65 0.60 0.70"
    assert "common effect:              RR 0.65 [0.60, 0.70]" in out
    assert "random effects, DL:         RR 0.49 [0.34, 0.70]  tau² 0.3088" in out
    assert "random effects, REML:       RR 0.49 [0.34, 0.70]  tau² 0.3132" in out
    assert "heterogeneity:              Q 152.23 (df 12), I² 92.1%" in out
    assert "prediction interval (REML): RR [0.15, 1.55]" in out
    assert "left out" not in out


def test_json_keeps_the_log_scale(tmp_path: Path, bcg_csv: Path) -> None:
    data = json.loads(run_cli(tmp_path, "synthesis", str(bcg_csv), "--json", check=True).stdout)
    assert data["left_out"] == []
    [result] = data["results"]
    assert (result["outcome"], result["measure"], result["scale"], result["k"]) == ("Tuberculosis", "RR", "log", 13)
    rounded = {
        name: [round(result[name][key], 4) for key in ("estimate", "ci_lower", "ci_upper")]
        for name in ("common", "random_dl", "random_reml")
    }
    assert rounded == {
        "common": [-0.4303, -0.5097, -0.3509],
        "random_dl": [-0.7141, -1.0644, -0.3638],
        "random_reml": [-0.7145, -1.0669, -0.3622],
    }
    assert round(result["q"], 2) == 152.23 and result["q_df"] == 12
    assert round(result["tau2_dl"], 4) == 0.3088 and round(result["tau2_reml"], 4) == 0.3132
    assert round(result["i2"], 2) == 92.12
    assert [round(x, 4) for x in result["prediction_interval"]] == [-1.8667, 0.4376]
    assert len(result["studies"]) == 13 and round(result["studies"][0]["estimate"], 4) == -0.8893


def test_measure_option_computes_odds_ratios(tmp_path: Path, bcg_csv: Path) -> None:
    data = json.loads(run_cli(tmp_path, "synthesis", str(bcg_csv), "--measure", "or", "--json", check=True).stdout)
    [result] = data["results"]
    assert result["measure"] == "OR"
    # Cross-checked against statsmodels called directly (DL), and metafor's DL fit of the log odds
    # ratios of dat.bcg: -0.7474 [-1.1242, -0.3706], tau² 0.3663.
    y, v = effectsize_2proportions(*np.array([(a, a + b, c, c + d) for _s, a, b, c, d in BCG], float).T, "odds-ratio")
    direct = combine_effects(y, v, method_re="dl")
    assert result["random_dl"]["estimate"] == pytest.approx(direct.mean_effect_re)
    assert result["tau2_dl"] == pytest.approx(direct.tau2)
    assert [round(result["random_dl"][key], 4) for key in ("estimate", "ci_lower", "ci_upper")] == [
        -0.7474,
        -1.1242,
        -0.3706,
    ]
    assert round(result["tau2_dl"], 4) == 0.3663
    # No means in the file: nothing to pool as an MD.
    one_line_error(
        run_cli(tmp_path, "synthesis", str(bcg_csv), "--measure", "MD"), 1, "no outcome with data to pool in MD"
    )


def test_one_study_and_left_out_rows_are_said(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text(
        ",".join(COLUMNS)
        + "\n"
        + "\n".join(
            ",".join(
                {"study": s, "outcome_name": n, "group": g, "measure": m, "estimate": e, "ci.lb": lb, "ci.ub": ub}.get(
                    column, ""
                )
                for column in COLUMNS
            )
            for s, n, g, m, e, lb, ub in (
                ("Lee 2019", "death", "overall", "HR", " 0.72 ", "0.60", "0.86"),
                ("Lee 2019", "pain", "treatment", "MD", "", "", ""),
            )
        )
        + "\n"
    )
    out = run_cli(tmp_path, "synthesis", str(path), check=True).stdout
    assert "death - HR, k=1 (0 from arm data, 1 from reported estimates)" in out
    assert "common effect:              HR 0.72 [0.60, 0.86]" in out
    assert "one study: nothing to pool" in out and "random effects, DL" not in out
    assert "left out: line 3: study 'Lee 2019', 'pain'" in out


def test_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    one_line_error(run_cli(tmp_path, "synthesis", str(tmp_path / "nothing.csv")), 2, "nothing.csv: no such file")
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF-1.7\n\xe2\x28\xa1\x00")
    one_line_error(run_cli(tmp_path, "synthesis", str(pdf)), 2, "not a UTF-8 text (CSV) file")
    other = tmp_path / "other.csv"
    other.write_text("name,value\nA,1\n")
    one_line_error(run_cli(tmp_path, "synthesis", str(other)), 2, "not the project's meta-analysis CSV")
    bad = tmp_path / "bad.csv"
    bad.write_text(
        ",".join(COLUMNS)
        + "\n"
        + ",".join(
            "12 0" if c == "xi" else "A" if c == "study" else "treatment" if c == "group" else "" for c in COLUMNS
        )
        + "\n"
    )
    one_line_error(run_cli(tmp_path, "synthesis", str(bad)), 2, "line 2: xi '12 0' is not a number")
    usage = run_cli(tmp_path, "synthesis", str(bad), "--measure", "HR")
    one_line_error(usage, 2, "argument --measure: invalid choice")


def _three_arm_csv(path: Path) -> Path:
    """A version-2 export: one three-arm study (two doses and saline) and one two-arm study."""
    arms = [
        ("Lee 2020", 1, "arms.1", "Haloperidol 1 mg", 10, 50),
        ("Lee 2020", 1, "arms.2", "Haloperidol 2 mg", 8, 48),
        ("Lee 2020", 1, "arms.3", "Saline", 20, 52),
        ("Kim 2021", 2, "arms.1", "Haloperidol", 12, 60),
        ("Kim 2021", 2, "arms.2", "Placebo", 22, 61),
    ]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for study, document, arm, name, events, total in arms:
            row = {"study": study, "document_id": document, "outcome": 1, "outcome_name": "delirium"}
            writer.writerow({**row, "group": name, "arm": arm, "xi": events, "ni": total})
    return path


def test_comparisons_are_proposed_written_edited_and_pooled_one_at_a_time(tmp_path: Path) -> None:
    data = _three_arm_csv(tmp_path / "batch-9-meta-analysis.csv")
    proposed = run_cli(tmp_path, "synthesis", str(data), "--json", check=True).stdout
    [result] = json.loads(proposed)["results"]
    assert result["k"] == 3 and result["comparison"] == "intervention vs comparator"
    assert "split evenly" in result["notes"][0]
    # Saline (20/52) split between the two doses: 10/26 each.
    first = result["studies"][0]
    assert first["study"] == "Lee 2020: Haloperidol 1 mg"
    assert first["estimate"] == pytest.approx(math.log((10 / 50) / (10 / 26)))

    mapping = tmp_path / "arms.csv"
    written = run_cli(tmp_path, "synthesis", str(data), "--write-arms", str(mapping), check=True).stdout
    assert "wrote 5 arm(s) of 1 comparison(s)" in written
    lines = mapping.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "comparison,study,arm,side,study_label,arm_name"
    assert "intervention vs comparator,1,arms.3,comparator,Lee 2020,Saline" in lines
    # The analyst's comparison: the 2 mg dose against saline, the 1 mg dose left out.
    edited = [line.replace("intervention vs comparator", "2 mg vs saline") for line in lines[1:]]
    edited = [line.replace("arms.1,intervention,Lee", "arms.1,none,Lee") for line in edited]
    mapping.write_text("\n".join([lines[0], *edited]) + "\n", encoding="utf-8")
    pooled = run_cli(tmp_path, "synthesis", str(data), "--arms", str(mapping), check=True).stdout
    assert pooled.splitlines()[0] == "delirium [2 mg vs saline] - RR, k=2 (2 from arm data, 0 from reported estimates)"
    assert "note:" not in pooled  # nothing shared, nothing split

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"2 mg vs saline": {"Lee 2020": {"Haloperidol 3 mg": "comparator"}}}), encoding="utf-8")
    one_line_error(
        run_cli(tmp_path, "synthesis", str(data), "--arms", str(bad)),
        2,
        "bad.json: '2 mg vs saline' > 'Lee 2020' > 'Haloperidol 3 mg': study 'Lee 2020' has no arm",
    )
    mapping.write_text("comparison,study,arm,side\nA vs B,1,arms.1,placebo\n", encoding="utf-8")
    one_line_error(
        run_cli(tmp_path, "synthesis", str(data), "--arms", str(mapping)),
        2,
        "arms.csv line 2: side 'placebo' is not one of intervention, comparator, none",
    )
