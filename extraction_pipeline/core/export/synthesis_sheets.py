"""The workbook's Synthesis and Risk of bias sheets: the batch's evidence as an analyst reads it.

Synthesis: one row per outcome, measure and comparison (the rows pooled — a multi-arm study may
give two, its shared comparator split between them as the notes say —, common effect, DL and REML
random effects with tau², I², Q, the prediction interval; ratios back-transformed) and, below, the
forest plot of every outcome with two studies or more, the same figure as the batch page's, as a PNG. Risk of
bias: the traffic-light table as coloured cells (one row per study, one column per domain) with the
robvis-style pictures below it (the traffic-light picture up to TRAFFIC_LIGHT_MAX_STUDIES
studies). Both use the final values, after review.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.cells import write_row
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.synthesis.batch import BatchSynthesis, batch_synthesis
from extraction_pipeline.core.synthesis.figures import PNG_DPI, render
from extraction_pipeline.core.synthesis.forest import forest_figure, interval, shown
from extraction_pipeline.core.synthesis.risk_of_bias import (
    COLOURS,
    SYMBOLS,
    RiskOfBias,
    batch_risk_of_bias,
    summary_figure,
    traffic_light_figure,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SYNTHESIS_COLUMNS = (
    "outcome",
    "measure",
    "studies",
    "reviewed studies",
    "common effect [95% CI]",
    "random effects DL [95% CI]",
    "random effects REML [95% CI]",
    "tau² (DL)",
    "tau² (REML)",
    "I² (%)",
    "Q",
    "prediction interval (REML)",
    # Appended, so the columns above stay where readers found them.
    "comparison",
    "notes",
)
# Beyond this many studies the traffic-light picture is left out: the table above it already is
# the traffic light, one coloured row per study, and a picture of hundreds of rows is unreadable
# and costs seconds of drawing (2.5 s for 40 studies) that the batch's workbook waits for.
TRAFFIC_LIGHT_MAX_STUDIES = 50
SCREEN_DPI = 96  # Excel's pixel; the PNG is drawn at PNG_DPI and shown at the figure's size
PALETTE_COLOURS = 64  # the pictures use a handful of colours and their anti-aliasing


def write_synthesis_sheets(workbook: Any, ledger: Ledger, batch_id: int) -> None:
    """Add the Synthesis sheet, and the Risk of bias sheet when the template assesses it."""
    try:
        synthesis = batch_synthesis(ledger, batch_id)
    except ConfigError as exc:
        # A value the CSV reader refuses must not cost the reviewer the whole workbook.
        sheet = workbook.create_sheet("Synthesis")
        write_row(sheet, 1, ["The batch's values could not be pooled", str(exc)])
    else:
        _write_synthesis(workbook.create_sheet("Synthesis"), synthesis)
    rob = batch_risk_of_bias(ledger, batch_id)
    if rob is not None and rob.studies:
        _write_risk_of_bias(workbook.create_sheet("Risk of bias"), rob)


def _fit(ratio: bool, fit: Any) -> str:
    return shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper) if fit is not None else ""


def _round(value: float | None, digits: int) -> float | str:
    return round(value, digits) if value is not None and math.isfinite(value) else ""


def _write_synthesis(sheet: Any, synthesis: BatchSynthesis) -> None:
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    sheet.append(list(SYNTHESIS_COLUMNS))
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for row, outcome in enumerate(synthesis.outcomes, start=2):
        result = outcome.result
        ratio = result.ratio
        prediction = interval(ratio, *result.prediction_interval) if result.prediction_interval else ""
        write_row(
            sheet,
            row,
            [
                result.outcome,
                result.measure,
                result.k,
                sum(1 for row in outcome.rows if row.reviewed),
                _fit(ratio, result.common),
                _fit(ratio, result.random_dl),
                _fit(ratio, result.random_reml),
                _round(result.tau2_dl, 4),
                _round(result.tau2_reml, 4),
                _round(result.i2, 1),
                _round(result.q, 2),
                prediction,
                outcome.comparison,
                "; ".join(outcome.notes),
            ],
        )
    for index in range(1, len(SYNTHESIS_COLUMNS) + 1):
        sheet.column_dimensions[get_column_letter(index)].width = 34 if index == 1 else 22
    row = sheet.max_row + 2
    if not synthesis.outcomes:
        sheet.cell(row=row, column=1, value="No outcome has data to pool (events, means or an estimate with its CI).")
        row += 2
    for note in synthesis.left_out:
        write_row(sheet, row, [f"left out: {note}"])
        row += 1
    row += 1
    sheet.cell(row=row, column=1, value="Forest plots (filled: every number reviewed; hollow: not yet reviewed)")
    sheet.cell(row=row, column=1).font = Font(bold=True)
    row += 1
    for outcome in synthesis.pooled:
        row = _picture(sheet, forest_figure(outcome), f"A{row}", row)


def _small_png(figure: Figure) -> bytes:
    """The figure as a PNG with a palette: a third of the size of full colour, so a batch's
    pictures do not outweigh its data."""
    from PIL import Image

    full = Image.open(io.BytesIO(render(figure, "png"))).convert("RGB")
    small = io.BytesIO()
    full.convert("P", palette=Image.Palette.ADAPTIVE, colors=PALETTE_COLOURS).save(small, format="PNG", optimize=True)
    return small.getvalue()


def _picture(sheet: Any, figure: Figure, anchor: str, row: int) -> int:
    """Place the figure as a PNG at ``anchor``; returns the first row below it."""
    from openpyxl.drawing.image import Image

    image = Image(io.BytesIO(_small_png(figure)))
    # Drawn at PNG_DPI for sharpness, shown at the figure's own size on a screen.
    scale = SCREEN_DPI / PNG_DPI
    image.width, image.height = image.width * scale, image.height * scale
    sheet.add_image(image, anchor)
    return row + math.ceil(float(image.height) / 20) + 2  # a default row is 20 px high


def _write_risk_of_bias(sheet: Any, rob: RiskOfBias) -> None:
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter

    sheet.append(["study", *(domain.short for domain in rob.domains)])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for row, study in enumerate(rob.studies, start=2):
        cells = write_row(
            sheet,
            row,
            [
                study.study,
                *(
                    f"{SYMBOLS[j.level]} {j.level}" + ("" if j.reviewed else " (not reviewed)")
                    for j in study.judgements
                ),
            ],
        )
        for column, judgement in enumerate(study.judgements, start=2):
            cell = cells[column - 1]
            colour = COLOURS[judgement.level].lstrip("#")
            if judgement.reviewed:
                cell.fill = PatternFill("solid", start_color=colour, end_color=colour)
            else:
                cell.font = Font(color=colour, bold=True)  # a ring on the page, coloured text here
            cell.alignment = Alignment(horizontal="center")
    sheet.column_dimensions["A"].width = 30
    for index in range(2, len(rob.domains) + 2):
        sheet.column_dimensions[get_column_letter(index)].width = 22
    row = sheet.max_row + 2
    for domain in rob.domains:
        write_row(sheet, row, [f"{domain.short}: {domain.title}"])
        row += 1
    row += 1
    if len(rob.studies) <= TRAFFIC_LIGHT_MAX_STUDIES:
        row = _picture(sheet, traffic_light_figure(rob), f"A{row}", row)
    else:
        note = f"{len(rob.studies)} studies: the table above is the traffic light"
        sheet.cell(row=row, column=1, value=f"{note} (no picture beyond {TRAFFIC_LIGHT_MAX_STUDIES})")
        row += 2
    _picture(sheet, summary_figure(rob), f"A{row}", row)
