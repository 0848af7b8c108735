"""The forest plot of one outcome, drawn as SVG the way metafor and RevMan draw it.

One row per study: its label (a link to its review page when ``link`` gives one), a square sized by
its random-effects weight on its 95% CI, its estimate [CI] and its weight. Below, three diamonds:
the common effect, DerSimonian–Laird and REML random effects, and REML's prediction interval as a
line; the header says k, tau², I² and Q. Ratio measures are drawn on a log axis labelled in ratios.

A study whose numbers a reviewer has not all decided is drawn hollow: its values are the machine's,
and the picture must not look more certain than the review is.

The same SVG is shown inline on the batch page and, turned into a PNG by PyMuPDF, put on the
workbook's Synthesis sheet, so both show one drawing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from extraction_pipeline.core.synthesis.batch import OutcomeSynthesis
from extraction_pipeline.core.synthesis.pooling import Estimate
from extraction_pipeline.core.synthesis.svg import attribute, text

LABEL_WIDTH = 230
PLOT_WIDTH = 300
TEXT_WIDTH = 200
WEIGHT_WIDTH = 60
WIDTH = LABEL_WIDTH + PLOT_WIDTH + TEXT_WIDTH + WEIGHT_WIDTH
ROW = 22
HEADER = 58
FONT = 'font-family="Helvetica, Arial, sans-serif" font-size="12"'
REVIEWED_FILL = "#1f4e79"
POOLED_FILL = "#444444"
MAX_LABEL = 34


def _number(value: float) -> str:
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def shown(ratio: bool, estimate: float, lower: float, upper: float) -> str:
    """An estimate and its CI as printed: ratios back-transformed from the log scale."""
    return f"{_number(math.exp(estimate) if ratio else estimate)} {interval(ratio, lower, upper)}"


def interval(ratio: bool, lower: float, upper: float) -> str:
    """A CI or prediction interval as printed, "[0.34, 0.70]"."""
    if ratio:
        lower, upper = math.exp(lower), math.exp(upper)
    return f"[{_number(lower)}, {_number(upper)}]"


def _ticks(low: float, high: float, ratio: bool) -> list[float]:
    """Axis ticks on the analysis scale: round ratios on a log axis, round steps on a linear one."""
    if ratio:
        # Doublings (0.25, 0.5, 1, 2) over a narrow range, 1-2-5 steps (0.1, 0.2, 0.5, 1) over a
        # wider one, powers of ten over a wide one; then every other tick (keeping 1) until at
        # most seven remain.
        series = (
            [2.0**k for k in range(-12, 13)],
            [m * 10.0**e for e in range(-4, 5) for m in (1, 2, 5)],
            [10.0**e for e in range(-6, 7)],
        )
        inside = []
        for ticks in series:
            inside = [math.log(t) for t in ticks if low <= math.log(t) <= high]
            if len(inside) <= 7:
                break
        while len(inside) > 7:
            one = inside.index(min(inside, key=abs))
            inside = inside[one % 2 :: 2]
        if len(inside) < 3:
            # A narrow range (0.5 to 1.05): round ratios on a linear step, placed on the log axis.
            return [math.log(t) for t in _ticks(math.exp(low), math.exp(high), False) if t > 0]
        return inside
    span = high - low
    raw = span / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step) + 1)]


def _tick_label(value: float, ratio: bool) -> str:
    if ratio:
        shown_value = math.exp(value)
        return f"{shown_value:g}" if shown_value >= 0.1 else f"{shown_value:.2g}"
    return f"{value:g}"


def _truncate(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def forest_svg(outcome: OutcomeSynthesis, link: Callable[[int], str] | None = None) -> str:
    """The SVG text of ``outcome``'s forest plot; ``link(item_id)`` gives a study's review page."""
    result = outcome.result
    ratio = result.ratio
    pooled: list[tuple[str, Estimate]] = [("Common effect", result.common)]
    if result.random_dl is not None:
        pooled.append(("Random effects (DL)", result.random_dl))
    if result.random_reml is not None:
        pooled.append(("Random effects (REML)", result.random_reml))
    bounds = [row.effect.ci_lower for row in outcome.rows] + [row.effect.ci_upper for row in outcome.rows]
    bounds += [fit.ci_lower for _label, fit in pooled] + [fit.ci_upper for _label, fit in pooled]
    if result.prediction_interval is not None:
        bounds += list(result.prediction_interval)
    low, high = min(min(bounds), 0.0), max(max(bounds), 0.0)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    margin = (high - low) * 0.05
    low, high = low - margin, high + margin
    x0 = LABEL_WIDTH

    def x(value: float) -> float:
        return x0 + (value - low) / (high - low) * PLOT_WIDTH

    tau2 = result.tau2_reml if result.tau2_reml is not None else 0.0
    weights = [1 / (row.effect.variance + tau2) for row in outcome.rows]
    total_weight = sum(weights)
    parts = [
        f'<text x="4" y="16" {FONT} font-weight="bold">{text(_truncate_long(result.outcome))} — '
        f"{text(result.measure)}, k = {result.k}</text>",
    ]
    if result.k >= 2 and result.q is not None and result.i2 is not None:
        heterogeneity = f"τ² (REML) {tau2:.4f} · I² {result.i2:.1f}% · Q {result.q:.2f} (df {result.q_df})"
        parts.append(f'<text x="4" y="32" {FONT} fill="#555555">{text(heterogeneity)}</text>')
    column_y = HEADER - 8
    parts += [
        f'<text x="4" y="{column_y}" {FONT} font-weight="bold">Study</text>',
        f'<text x="{x0 + PLOT_WIDTH + 8}" y="{column_y}" {FONT} font-weight="bold">'
        f"{text(result.measure)} [95% CI]</text>",
        f'<text x="{WIDTH - 4}" y="{column_y}" {FONT} font-weight="bold" text-anchor="end">Weight</text>',
    ]
    y = HEADER
    for row, weight in zip(outcome.rows, weights, strict=True):
        y += ROW
        effect = row.effect
        label = f'<text x="4" y="{y + 4}" {FONT}>{text(_truncate(effect.study))}</text>'
        if link is not None and row.item_id is not None:
            label = f'<a href={attribute(link(row.item_id))} class="study-link">{label}</a>'
        parts.append(label)
        parts.append(
            f'<line x1="{x(effect.ci_lower):.1f}" y1="{y}" x2="{x(effect.ci_upper):.1f}" y2="{y}" '
            'stroke="#333333" stroke-width="1"/>'
        )
        side = 4 + 8 * math.sqrt(weight / total_weight)
        fill = REVIEWED_FILL if row.reviewed else "#ffffff"
        state = "reviewed" if row.reviewed else "not reviewed"
        parts.append(
            f'<rect x="{x(effect.estimate) - side / 2:.1f}" y="{y - side / 2:.1f}" width="{side:.1f}" '
            f'height="{side:.1f}" fill="{fill}" stroke="{REVIEWED_FILL}" stroke-width="1.5" '
            f'class="study {state.replace(" ", "-")}"><title>{text(effect.study)}: {state}</title></rect>'
        )
        parts.append(
            f'<text x="{x0 + PLOT_WIDTH + 8}" y="{y + 4}" {FONT}>'
            f"{text(shown(ratio, effect.estimate, effect.ci_lower, effect.ci_upper))}</text>"
        )
        parts.append(
            f'<text x="{WIDTH - 4}" y="{y + 4}" {FONT} text-anchor="end">{100 * weight / total_weight:.1f}%</text>'
        )
    y += ROW // 2
    for label, fit in pooled:
        y += ROW
        middle, left, right = x(fit.estimate), x(fit.ci_lower), x(fit.ci_upper)
        parts.append(f'<text x="4" y="{y + 4}" {FONT} font-weight="bold">{text(label)}</text>')
        parts.append(
            f'<polygon points="{left:.1f},{y} {middle:.1f},{y - 6} {right:.1f},{y} {middle:.1f},{y + 6}" '
            f'fill="{POOLED_FILL}"/>'
        )
        parts.append(
            f'<text x="{x0 + PLOT_WIDTH + 8}" y="{y + 4}" {FONT} font-weight="bold">'
            f"{text(shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper))}</text>"
        )
    if result.prediction_interval is not None:
        lower, upper = result.prediction_interval
        y += ROW
        parts.append(f'<text x="4" y="{y + 4}" {FONT} fill="#555555">Prediction interval (REML)</text>')
        parts.append(
            f'<line x1="{x(lower):.1f}" y1="{y}" x2="{x(upper):.1f}" y2="{y}" stroke="#555555" '
            'stroke-width="2" stroke-dasharray="4 3"/>'
        )
        parts.append(
            f'<text x="{x0 + PLOT_WIDTH + 8}" y="{y + 4}" {FONT} fill="#555555">'
            f"{text(interval(ratio, lower, upper))}</text>"
        )
    axis_y = y + ROW
    null = x(0.0)
    parts.append(
        f'<line x1="{null:.1f}" y1="{HEADER + ROW // 2}" x2="{null:.1f}" y2="{axis_y}" stroke="#888888" '
        'stroke-width="1"/>'
    )
    parts.append(f'<line x1="{x0}" y1="{axis_y}" x2="{x0 + PLOT_WIDTH}" y2="{axis_y}" stroke="#333333"/>')
    for tick in _ticks(low, high, ratio):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{axis_y}" x2="{x(tick):.1f}" y2="{axis_y + 4}" stroke="#333333"/>')
        parts.append(
            f'<text x="{x(tick):.1f}" y="{axis_y + 17}" {FONT} text-anchor="middle">'
            f"{text(_tick_label(tick, ratio))}</text>"
        )
    legend = "filled: every number reviewed · hollow: not yet reviewed"
    parts.append(f'<text x="4" y="{axis_y + 40}" {FONT} fill="#555555">{text(legend)}</text>')
    height = axis_y + 50
    opening = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" class="forest-plot">',
        f"<title>{text(f'Forest plot: {result.outcome}, {result.measure}')}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
    ]
    return "\n".join([*opening, *parts, "</svg>"])


def _truncate_long(text: str) -> str:
    return text if len(text) <= 80 else text[:79] + "…"
