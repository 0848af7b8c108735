"""Exports per arm and per comparison, and pooling one comparison at a time, on really extracted
batches (SQLite and PostgreSQL): a three-arm trial (two doses against saline) beside two-arm ones,
and a batch frozen on the two-arm template of earlier releases."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import openpyxl
import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.meta_csv import COLUMNS, meta_analysis_csv
from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthesis import binary_effect, pool
from extraction_pipeline.core.synthesis.batch import add_comparison, batch_synthesis, set_sides
from extraction_pipeline.core.synthesis.figures import svg_text
from extraction_pipeline.core.synthesis.forest import forest_figure
from extraction_pipeline_tests.support.arms_case import make_arms_batch, three_arm_trial, two_arm_trial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import ReviewCase, make_batch, synthesis_answer, synthesis_answer_v1
from extraction_pipeline_tests.support.svg import classed, parse, texts


@pytest.fixture
def cases(ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer) -> list[ReviewCase]:
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    trials = [three_arm_trial(3), two_arm_trial(4, (12, 60), (22, 61)), two_arm_trial(5, (30, 150), (41, 148))]
    return make_arms_batch(settings, Ledger.connect(ledger_url), fake_llm, trials)


def _document(case: ReviewCase) -> int:
    return next(
        int(row["document_id"]) for row in batch_item_rows(case.ledger, case.batch_id) if row["id"] == case.item_id
    )


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_csv_has_a_row_per_arm_and_per_printed_comparison(cases: list[ReviewCase]) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    rows = _rows(meta_analysis_csv(ledger, batch_id))
    assert tuple(rows[0]) == COLUMNS
    three = [row for row in rows if row["document_id"] == str(_document(cases[0]))]
    arms = [(r["group"], r["arm"], r["xi"], r["ni"], r["status_xi"]) for r in three if not r["comparison"]]
    assert arms == [
        ("Haloperidol 1 mg", "arms.1", "10", "50", "verified"),
        ("Haloperidol 2 mg", "arms.2", "8", "48", "verified"),
        ("Saline", "arms.3", "20", "52", "verified"),
    ]
    assert {r["outcome"] for r in three} == {"1"} and {r["outcome_name"] for r in three} == {"delirium"}
    printed = [
        (r["comparison"], r["group"], r["arm"], r["comparator"], r["comparator_arm"]) for r in three if r["comparison"]
    ]
    assert printed == [
        ("comparisons.1", "Haloperidol 1 mg", "arms.1", "Saline", "arms.3"),
        ("comparisons.2", "Haloperidol 2 mg", "arms.2", "Saline", "arms.3"),
    ]
    first = next(r for r in three if r["comparison"] == "comparisons.1")
    assert (first["measure"], first["estimate"], first["ci.lb"], first["ci.ub"]) == ("RR", "0.52", "0.27", "0.99")
    assert first["status_estimate"] == "verified" and first["xi"] == first["ni"] == ""
    assert {r["intervention"] for r in three if r["arm"] == "arms.3"} == {"saline iv"}


def test_the_workbook_has_arms_and_comparisons_sheets(cases: list[ReviewCase], tmp_path: Path) -> None:
    book = openpyxl.load_workbook(write_workbook(cases[0].ledger, cases[0].batch_id, tmp_path / "b.xlsx"))
    assert {"Documents", "Outcomes", "Arms", "Comparisons", "Values", "Synthesis"} <= set(book.sheetnames)

    def sheet(name: str) -> list[dict[str, object]]:
        rows = list(book[name].iter_rows(values_only=True))
        return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]

    arms = sheet("Arms")
    assert [(r["study"], r["arm"], r["randomized_n"], r["randomized_n status"]) for r in arms][:3] == [
        (cases[0].trial.nct_number, "Haloperidol 1 mg", 50, "verified"),
        (cases[0].trial.nct_number, "Haloperidol 2 mg", 48, "verified"),
        (cases[0].trial.nct_number, "Saline", 52, "verified"),
    ]
    assert len(arms) == 7
    outcomes = sheet("Outcomes")
    assert [(r["arm"], r["events"], r["total"]) for r in outcomes][:3] == [
        ("Haloperidol 1 mg", 10, 50),
        ("Haloperidol 2 mg", 8, 48),
        ("Saline", 20, 52),
    ]
    assert "arm_name" not in next(iter(outcomes))  # arms have a sheet of their own
    comparisons = sheet("Comparisons")
    assert [
        (r["arm compared"], r["compared with"], r["effect_estimate"], r["effect_estimate status"]) for r in comparisons
    ] == [
        ("Haloperidol 1 mg", "Saline", 0.52, "verified"),
        ("Haloperidol 2 mg", "Saline", 0.43, "verified"),
    ]
    synthesis = sheet("Synthesis")[0]
    assert synthesis["comparison"] == "intervention vs comparator" and synthesis["studies"] == 4
    assert "split evenly" in str(synthesis["notes"])


def test_two_doses_share_saline_split_as_the_handbook_says(cases: list[ReviewCase]) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    synthesis = batch_synthesis(ledger, batch_id)
    [outcome] = synthesis.outcomes
    assert outcome.comparison == "intervention vs comparator" and outcome.result.measure == "RR"
    study = cases[0].trial.nct_number
    labels = [row.effect.study for row in outcome.rows]
    assert labels == [
        f"{study}: Haloperidol 1 mg",
        f"{study}: Haloperidol 2 mg",
        cases[1].trial.nct_number,
        cases[2].trial.nct_number,
    ]
    # Saline's 20/52 split in two: each dose against 10/26, so no participant counts twice.
    by_hand = pool(
        [
            binary_effect("a", "d", "RR", 10, 50, 10, 26),
            binary_effect("b", "d", "RR", 8, 48, 10, 26),
            binary_effect("c", "d", "RR", 12, 60, 22, 61),
            binary_effect("e", "d", "RR", 30, 150, 41, 148),
        ]
    )
    assert [row.effect.estimate for row in outcome.rows] == pytest.approx([e.estimate for e in by_hand.studies])
    assert outcome.result.common.estimate == pytest.approx(by_hand.common.estimate)
    assert outcome.rows[0].effect.estimate == pytest.approx(math.log((10 / 50) / (10 / 26)))
    [note] = outcome.notes
    assert "Saline (n 52, 20 events) is the comparator of 2 arms" in note and "§23.3.4" in note
    svg = parse(svg_text(forest_figure(outcome)))
    drawn = " ".join(texts(svg))
    assert "Cochrane Handbook §23.3.4" in drawn and f"{study}: Haloperidol 2 mg" in drawn
    assert len(classed(svg, "footnote")) >= 1
    # The proposal, as the page shows it: saline the comparator, both doses interventions.
    [proposed] = synthesis.comparisons
    assert [(a.name, a.side) for a in proposed.studies[0].arms] == [
        ("Haloperidol 1 mg", "intervention"),
        ("Haloperidol 2 mg", "intervention"),
        ("Saline", "comparator"),
    ]


def test_an_analysts_comparison_pools_only_the_arms_it_assigns(cases: list[ReviewCase]) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    add_comparison(ledger, batch_id, "haloperidol 2 mg vs saline", "rita")
    with pytest.raises(ConfigError, match="already has a comparison"):
        add_comparison(ledger, batch_id, "haloperidol 2 mg vs saline", "rita")
    document = _document(cases[0])
    documents = {row.document_id for view in batch_synthesis(ledger, batch_id).comparisons for row in view.studies}
    assert document in documents
    changed = set_sides(ledger, batch_id, "haloperidol 2 mg vs saline", {(document, "arms.1"): "none"}, "rita")
    assert changed == 1
    assert set_sides(ledger, batch_id, "haloperidol 2 mg vs saline", {(document, "arms.1"): "none"}, "rita") == 0
    with pytest.raises(ConfigError, match=r"has no arm 'arms\.9'"):
        set_sides(ledger, batch_id, "haloperidol 2 mg vs saline", {(document, "arms.9"): "none"}, "rita")
    with pytest.raises(ConfigError, match="side 'placebo' is not one of"):
        set_sides(ledger, batch_id, "haloperidol 2 mg vs saline", {(document, "arms.1"): "placebo"}, "rita")
    synthesis = batch_synthesis(ledger, batch_id)
    named = next(o for o in synthesis.outcomes if o.comparison == "haloperidol 2 mg vs saline")
    # The 1 mg arm is out: the 2 mg arm alone against all of saline, nothing split.
    assert named.rows[0].effect.study == cases[0].trial.nct_number and named.notes == ()
    assert named.rows[0].effect.estimate == pytest.approx(math.log((8 / 48) / (20 / 52)))
    assert "haloperidol 2 mg vs saline — RR, k = 3" in " ".join(texts(parse(svg_text(forest_figure(named)))))
    # The proposed comparison is unchanged.
    default = next(o for o in synthesis.outcomes if o.comparison == "intervention vs comparator")
    assert default.result.k == 4


def test_a_batch_of_the_two_arm_template_pools_as_before(
    ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    cases = make_batch(settings, Ledger.connect(ledger_url), fake_llm, [3, 4], answer=synthesis_answer_v1, version=1)
    rows = _rows(meta_analysis_csv(cases[0].ledger, cases[0].batch_id))
    assert [(r["group"], r["arm"], r["comparison"], r["measure"]) for r in rows] == [
        ("overall", "", "outcomes.1", "HR")
    ] * 2
    [outcome] = batch_synthesis(cases[0].ledger, cases[0].batch_id).outcomes
    assert outcome.result.k == 2 and [row.effect.study for row in outcome.rows] == [c.trial.nct_number for c in cases]
    assert outcome.rows[0].effect.estimate == pytest.approx(math.log(cases[0].trial.hazard_ratio))
    book = openpyxl.load_workbook(write_workbook(cases[0].ledger, cases[0].batch_id, tmp_path / "v1.xlsx"))
    comparisons = list(book["Comparisons"].iter_rows(values_only=True))
    header = comparisons[0]
    first = dict(zip(header, comparisons[1], strict=True))
    assert (first["comparison id"], first["arm id"], first["comparator id"]) == ("outcomes.1", "treatment", "control")
    assert first["effect_estimate"] == cases[0].trial.hazard_ratio


def test_studies_reporting_only_an_effect_have_their_arms_on_sides_too(
    ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    # Two trials that print only a hazard ratio (drug vs placebo): no per-arm numbers, the arms
    # named by the comparison. The analyst must be able to move them like any study's arms.
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(ledger_url)
    first, second = make_batch(settings, ledger, fake_llm, [21, 22], synthesis_answer)
    batch_id = first.batch_id
    [proposed] = batch_synthesis(ledger, batch_id).comparisons
    listed = {study.document_id: [(arm.name, arm.side) for arm in study.arms] for study in proposed.studies}
    assert listed == {
        _document(case): [(case.trial.drug, "intervention"), ("placebo", "comparator")] for case in (first, second)
    }
    pooled = next(o for o in batch_synthesis(ledger, batch_id).outcomes if o.result.measure == "HR")
    assert pooled.result.k == 2
    add_comparison(ledger, batch_id, "without the second trial", "rita")
    moved = {(_document(second), arm): "none" for arm in ("arms.1", "arms.2")}
    assert set_sides(ledger, batch_id, "without the second trial", moved, "rita") == 2
    named = [o for o in batch_synthesis(ledger, batch_id).outcomes if o.comparison == "without the second trial"]
    assert [(o.result.k, [row.effect.study for row in o.rows]) for o in named] == [(1, [first.trial.nct_number])]
