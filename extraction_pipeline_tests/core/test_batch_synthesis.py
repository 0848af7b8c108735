"""A batch's forest plots and risk-of-bias pictures, from really extracted documents (SQLite and
PostgreSQL): reviewed values are the ones pooled, unreviewed studies are drawn hollow, a reviewer's
label pools differently named outcomes as one, and the workbook carries both as sheets."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import openpyxl
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.values import APPROVE
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthesis import pool, reported_effect
from extraction_pipeline.core.synthesis.batch import batch_synthesis, set_outcome_label
from extraction_pipeline.core.synthesis.figures import render, svg_text
from extraction_pipeline.core.synthesis.forest import forest_figure
from extraction_pipeline.core.synthesis.risk_of_bias import (
    HIGH,
    LOW,
    NO_INFORMATION,
    SOME_CONCERNS,
    batch_risk_of_bias,
    summary_figure,
    traffic_light_figure,
)
from extraction_pipeline.core.synthetic import SyntheticTrial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import ReviewCase, make_batch, results_sentence, synthesis_answer
from extraction_pipeline_tests.support.svg import classed, parse, study_links, texts, titles

ESTIMATE = "comparisons.1.effect_estimate"
BOUNDS = ("comparisons.1.ci_lower", "comparisons.1.ci_upper")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REVIEWED_RGB = (0x1F, 0x4E, 0x79)  # forest.REVIEWED_FILL


def _answer(trial: SyntheticTrial) -> str:
    # One trial judged at high risk from randomization, so the pictures have two colours there.
    return synthesis_answer(trial, randomization=HIGH if trial.index == 5 else LOW)


@pytest.fixture
def cases(ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer) -> list[ReviewCase]:
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    return make_batch(settings, Ledger.connect(ledger_url), fake_llm, [3, 4, 5], answer=_answer)


def _approve(case: ReviewCase, path: str) -> None:
    outcome = decisions.record(
        case.ledger, item_id=case.item_id, path=path, action=APPROVE, reviewer="rita", seen_seq=0
    )
    assert outcome.kind == decisions.RECORDED


def test_the_batch_pools_its_studies_reported_hazard_ratios(cases: list[ReviewCase]) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    synthesis = batch_synthesis(ledger, batch_id)
    assert [o.result.outcome for o in synthesis.outcomes] == ["hospitalization or death"]
    outcome = synthesis.outcomes[0]
    assert outcome.result.measure == "HR" and outcome.result.k == 3 and outcome.pooled
    by_hand = pool(
        [
            reported_effect(c.trial.nct_number, "x", "HR", c.trial.hazard_ratio, c.trial.ci_lower, c.trial.ci_upper)
            for c in cases
        ]
    )
    assert outcome.result.common.estimate == pytest.approx(by_hand.common.estimate)
    assert outcome.result.tau2_reml == pytest.approx(by_hand.tau2_reml)
    assert [row.effect.study for row in outcome.rows] == [c.trial.nct_number for c in cases]
    assert [row.item_id for row in outcome.rows] == [c.item_id for c in cases]
    assert not any(row.reviewed for row in outcome.rows)


def test_reviewed_values_are_pooled_and_drawn_filled(cases: list[ReviewCase]) -> None:
    first, second, third = cases
    for path in (ESTIMATE, *BOUNDS):
        _approve(first, path)
    _approve(third, ESTIMATE)  # its CI bounds undecided: not a reviewed study yet
    # The reviewer corrects the second study's estimate: the corrected number is the one pooled.
    corrected = round(second.trial.hazard_ratio - 0.02, 2)
    fixed = corrections.correct(
        second.ledger,
        item_id=second.item_id,
        path=ESTIMATE,
        reviewer="rita",
        seen_seq=0,
        value_text=str(corrected),
        quote=results_sentence(second.trial),
    )
    assert fixed.kind == decisions.RECORDED
    for path in BOUNDS:
        _approve(second, path)
    outcome = batch_synthesis(first.ledger, first.batch_id).outcomes[0]
    assert [row.reviewed for row in outcome.rows] == [True, True, False]
    assert outcome.rows[1].effect.estimate == pytest.approx(math.log(corrected))

    figure = forest_figure(outcome, link=lambda item_id: f"/extraction/batches/{first.batch_id}/documents/{item_id}")
    svg = parse(svg_text(figure))
    assert len(classed(svg, "study reviewed")) == 2 and len(classed(svg, "study not-reviewed")) == 1
    assert f"{cases[2].trial.nct_number}: not reviewed" in titles(svg)
    assert study_links(svg) == [f"/extraction/batches/{first.batch_id}/documents/{c.item_id}" for c in cases]
    drawn = texts(svg)
    assert "Random effects (REML)" in drawn and any("I²" in text for text in drawn)
    assert "hospitalization or death — HR, k = 3" in drawn
    # The corrected study's estimate [CI], back-transformed, beside its row.
    assert any(text.startswith(f"{corrected:.2f} [") for text in drawn)
    png = render(figure, "png")
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5_000
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
        # Hollow: the unreviewed study's square is white inside, the reviewed ones are filled.
        centres = [_square_centre(figure, index, width, height) for index in range(3)]
        fills = [image.convert("RGB").getpixel(centre) for centre in centres]
    assert fills == [REVIEWED_RGB, REVIEWED_RGB, (255, 255, 255)]


def _square_centre(figure: Figure, index: int, width: int, height: int) -> tuple[int, int]:
    """Where study ``index``'s square is drawn, in the PNG's pixels (matplotlib's y points up)."""
    squares = [line for line in figure.axes[0].get_lines() if line.get_marker() == "s"]
    x_px, y_px = figure.axes[0].transData.transform(np.asarray(squares[index].get_xydata())[0])
    scale = width / figure.bbox.width  # the PNG is drawn at a higher resolution than the figure
    return round(x_px * scale), round(height - y_px * scale)


def test_a_reviewers_label_pools_differently_named_outcomes_as_one(
    ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)

    def answer(trial: SyntheticTrial) -> str:
        text = synthesis_answer(trial)
        return text.replace("hospitalization or death", "death or hospital admission") if trial.index == 5 else text

    cases = make_batch(settings, Ledger.connect(ledger_url), fake_llm, [3, 4, 5], answer=answer)
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    assert sorted(o.result.k for o in batch_synthesis(ledger, batch_id).outcomes) == [1, 2]
    set_outcome_label(ledger, batch_id, "death or hospital admission", "Hospitalization or death (composite)", "rita")
    set_outcome_label(ledger, batch_id, "hospitalization or death", "Hospitalization or death (composite)", "rita")
    synthesis = batch_synthesis(ledger, batch_id)
    assert [(o.result.outcome, o.result.k) for o in synthesis.outcomes] == [("Hospitalization or death (composite)", 3)]
    assert set(synthesis.outcomes[0].names) == {"hospitalization or death", "death or hospital admission"}
    # An empty label gives the outcome back its own name.
    set_outcome_label(ledger, batch_id, "death or hospital admission", "", "rita")
    assert sorted(o.result.k for o in batch_synthesis(ledger, batch_id).outcomes) == [1, 2]
    with pytest.raises(ConfigError, match="letters or digits"):
        set_outcome_label(ledger, batch_id, "hospitalization or death", "--", "rita")
    with pytest.raises(ConfigError, match="at most"):
        set_outcome_label(ledger, batch_id, "hospitalization or death", "x" * 201, "rita")


def test_risk_of_bias_traffic_lights_and_summary(cases: list[ReviewCase]) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    _approve(cases[0], "risk_of_bias.randomization")
    rob = batch_risk_of_bias(ledger, batch_id)
    assert rob is not None
    assert [d.short for d in rob.domains] == ["D1", "D2", "D3", "D4", "D5", "Overall"]
    assert [s.study for s in rob.studies] == [c.trial.nct_number for c in cases]
    randomization = [s.judgements[0] for s in rob.studies]
    assert [j.level for j in randomization] == [LOW, LOW, HIGH]
    assert [j.reviewed for j in randomization] == [True, False, False]
    assert {s.judgements[1].level for s in rob.studies} == {SOME_CONCERNS}
    assert {s.judgements[5].level for s in rob.studies} == {NO_INFORMATION}  # not answered
    summary = dict((d.short, counts) for d, counts in rob.summary())
    assert summary["D1"] == {LOW: 2, SOME_CONCERNS: 0, HIGH: 1, NO_INFORMATION: 0}
    lights = parse(svg_text(traffic_light_figure(rob, link=lambda item_id: f"/r/{item_id}")))
    assert len(classed(lights, "judgement low")) == 2 and len(classed(lights, "judgement high")) == 1
    assert study_links(lights) == [f"/r/{c.item_id}" for c in cases]
    tooltips = titles(lights)
    assert f"{cases[0].trial.nct_number}, Bias arising from the randomization process: low, reviewed" in tooltips
    assert f"{cases[1].trial.nct_number}, Bias arising from the randomization process: low, not reviewed" in tooltips
    assert {"D1", "Overall", "D5: Bias in selection of the reported result"} <= set(texts(lights))
    drawing = summary_figure(rob)
    bars = parse(svg_text(drawing))
    assert len(classed(bars, "share low")) == 1 and "Bias arising from the randomization process: 2 of 3 low" in (
        titles(bars)
    )
    # The bars' lengths are the shares: D1 two thirds low, one third high.
    first_bar = [bar.get_width() for bar in drawing.axes[0].patches[:2] if isinstance(bar, Rectangle)]
    assert first_bar == pytest.approx([2 / 3, 1 / 3])
    assert render(drawing, "png").startswith(PNG_SIGNATURE)
    assert render(drawing, "pdf").startswith(b"%PDF")


def test_the_workbook_has_synthesis_and_risk_of_bias_sheets(cases: list[ReviewCase], tmp_path: Path) -> None:
    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    _approve(cases[0], "risk_of_bias.randomization")
    path = write_workbook(ledger, batch_id, tmp_path / "batch.xlsx")
    book = openpyxl.load_workbook(path)
    synthesis = book["Synthesis"]
    header = [cell.value for cell in synthesis[1]]
    row = dict(zip(header, [cell.value for cell in synthesis[2]], strict=False))
    result = batch_synthesis(ledger, batch_id).outcomes[0].result
    assert row["outcome"] == "hospitalization or death" and row["measure"] == "HR" and row["studies"] == 3
    assert row["tau² (REML)"] == pytest.approx(round(result.tau2_reml or 0.0, 4))
    assert str(row["common effect [95% CI]"]).startswith(f"{math.exp(result.common.estimate):.2f} [")
    assert len(synthesis._images) == 1  # the one pooled outcome's forest plot
    rob = book["Risk of bias"]
    assert [cell.value for cell in rob[1]][:3] == ["study", "D1", "D2"]
    first = [cell.value for cell in rob[2]]
    assert first[0] == cases[0].trial.nct_number and first[1] == "+ low"
    assert rob.cell(row=2, column=2).fill.start_color.rgb.endswith("02C100")  # reviewed: filled
    assert rob.cell(row=3, column=2).value == "+ low (not reviewed)"
    assert len(rob._images) == 2  # traffic lights and the summary bars


def test_beyond_the_cap_the_risk_of_bias_table_stands_for_the_traffic_light_picture(
    cases: list[ReviewCase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More studies than TRAFFIC_LIGHT_MAX_STUDIES: the coloured table is the traffic light, the
    summary picture stays, and a line says why the other picture is not there."""
    from extraction_pipeline.core.export import synthesis_sheets

    ledger, batch_id = cases[0].ledger, cases[0].batch_id
    monkeypatch.setattr(synthesis_sheets, "TRAFFIC_LIGHT_MAX_STUDIES", 2)
    rob = openpyxl.load_workbook(write_workbook(ledger, batch_id, tmp_path / "batch.xlsx"))["Risk of bias"]
    studies = sum(1 for row in rob.iter_rows(min_row=2, max_col=1) if str(row[0].value or "").startswith("NCT"))
    assert studies > 2 and len(rob._images) == 1  # the summary bars only
    notes = [str(cell.value) for row in rob.iter_rows(max_col=1) for cell in row if cell.value]
    assert f"{studies} studies: the table above is the traffic light (no picture beyond 2)" in notes
