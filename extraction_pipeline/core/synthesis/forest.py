"""The forest plot of one outcome, drawn with matplotlib the way metafor and RevMan draw it.

One row per study: its label (a link to its review page when ``link`` gives one), a square sized by
its random-effects weight on its 95% CI, its estimate [CI] and its weight. Below, three diamonds:
the common effect, DerSimonian–Laird and REML random effects, and REML's prediction interval as a
line; the header says k, tau², I² and Q. Ratio measures are drawn on the log scale, the axis
labelled in ratios.

A study whose numbers a reviewer has not all decided is drawn hollow: its values are the machine's,
and the picture must not look more certain than the review is.

The plot pools one comparison: its title names it (unless it is the proposed "intervention vs
comparator"), a study contributing several rows (several intervention arms) shows each row's arm,
and a footnote says where a shared comparator's participants were split between rows (Cochrane
Handbook §23.3.4).

The same figure is shown as SVG on the batch page, offered there as SVG, PNG and PDF, and put as a
PNG on the workbook's Synthesis sheet (``figures.render``).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extraction_pipeline.core.synthesis.batch import OutcomeSynthesis
from extraction_pipeline.core.synthesis.comparisons import DEFAULT_COMPARISON
from extraction_pipeline.core.synthesis.figures import FONT_SIZE, clean, mark, new_figure
from extraction_pipeline.core.synthesis.pooling import Estimate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Layout in inches, from the left: the study labels, the plot, estimate [CI], weight.
WIDTH = 8.2
LABEL_X = 0.08
PLOT_LEFT = 2.55
PLOT_WIDTH = 3.1
TEXT_X = PLOT_LEFT + PLOT_WIDTH + 0.15
ROW = 0.24
HEADER = 0.9  # title, heterogeneity, column headings
FOOTER = 0.62  # tick labels, legend
REVIEWED_FILL = "#1f4e79"
POOLED_FILL = "#444444"
MUTED = "#555555"
LINK = "#1d4ed8"
MAX_LABEL = 34
NOTE_LINE = 0.2  # inches per footnote line
NOTE_WIDTH = 110  # characters per footnote line


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


def _truncate(text: str, most: int = MAX_LABEL) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _pooled(outcome: OutcomeSynthesis) -> list[tuple[str, Estimate]]:
    result = outcome.result
    pooled: list[tuple[str, Estimate]] = [("Common effect", result.common)]
    if result.random_dl is not None:
        pooled.append(("Random effects (DL)", result.random_dl))
    if result.random_reml is not None:
        pooled.append(("Random effects (REML)", result.random_reml))
    return pooled


def _range(outcome: OutcomeSynthesis, pooled: list[tuple[str, Estimate]]) -> tuple[float, float]:
    """The axis' range on the analysis scale: every interval drawn, and no effect (0)."""
    result = outcome.result
    bounds = [row.effect.ci_lower for row in outcome.rows] + [row.effect.ci_upper for row in outcome.rows]
    bounds += [fit.ci_lower for _label, fit in pooled] + [fit.ci_upper for _label, fit in pooled]
    if result.prediction_interval is not None:
        bounds += list(result.prediction_interval)
    low, high = min(min(bounds), 0.0), max(max(bounds), 0.0)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    margin = (high - low) * 0.05
    return low - margin, high + margin


def forest_figure(outcome: OutcomeSynthesis, link: Callable[[int], str] | None = None) -> Figure:
    """``outcome``'s forest plot; ``link(item_id)`` gives a study's review page."""
    from matplotlib.transforms import blended_transform_factory

    result = outcome.result
    ratio = result.ratio
    pooled = _pooled(outcome)
    low, high = _range(outcome, pooled)
    # Rows on the plot's y axis, top down: the studies, half a row's gap, the pooled estimates,
    # the prediction interval.
    count = len(outcome.rows)
    pooled_y = [count + 0.5 + index for index in range(len(pooled))]
    interval_y = pooled_y[-1] + 1 if result.prediction_interval is not None else None
    last = interval_y if interval_y is not None else pooled_y[-1]
    rows_height = (last + 1.2) * ROW
    notes = [line for note in outcome.notes for line in textwrap.wrap(clean(note), NOTE_WIDTH)]
    footer = FOOTER + NOTE_LINE * len(notes)
    height = HEADER + rows_height + footer
    figure = new_figure(WIDTH, height)
    mark(figure, "forest-plot", f"Forest plot: {result.outcome}, {result.measure}")
    axes = figure.add_axes((PLOT_LEFT / WIDTH, footer / height, PLOT_WIDTH / WIDTH, rows_height / height))
    axes.set_xlim(low, high)
    axes.set_ylim(last + 0.7, -0.5)
    # Text columns: x in inches from the figure's left edge, y in rows, beside the plot.
    column = blended_transform_factory(figure.dpi_scale_trans, axes.transData)

    def write(x: float, y: float, text: str, **style: Any) -> None:
        axes.text(x, y, clean(text), transform=column, va="center", parse_math=False, **style)

    tau2 = result.tau2_reml if result.tau2_reml is not None else 0.0
    weights = [1 / (row.effect.variance + tau2) for row in outcome.rows]
    total_weight = sum(weights)
    top = figure.dpi_scale_trans
    compared = "" if outcome.comparison == DEFAULT_COMPARISON else f", {_truncate(clean(outcome.comparison), 60)}"
    title = f"{_truncate(clean(result.outcome), 80)}{compared} — {clean(result.measure)}, k = {result.k}"
    figure.text(LABEL_X, height - 0.22, title, transform=top, weight="bold", parse_math=False)
    if result.k >= 2 and result.q is not None and result.i2 is not None:
        heterogeneity = f"τ² (REML) {tau2:.4f} · I² {result.i2:.1f}% · Q {result.q:.2f} (df {result.q_df})"
        figure.text(LABEL_X, height - 0.44, heterogeneity, transform=top, color=MUTED, parse_math=False)
    headings = -1.3
    write(LABEL_X, headings, "Study", weight="bold")
    write(TEXT_X, headings, f"{result.measure} [95% CI]", weight="bold")
    write(WIDTH - LABEL_X, headings, "Weight", weight="bold", ha="right")
    for y, (row, weight) in enumerate(zip(outcome.rows, weights, strict=True)):
        effect = row.effect
        label = axes.text(LABEL_X, y, _truncate(clean(effect.study)), transform=column, va="center", parse_math=False)
        if link is not None and row.item_id is not None:
            label.set_url(link(row.item_id))
            label.set_color(LINK)
            mark(label, "study-link")
        axes.plot([effect.ci_lower, effect.ci_upper], [y, y], color="#333333", linewidth=1)
        state = "reviewed" if row.reviewed else "not reviewed"
        (square,) = axes.plot(
            [effect.estimate],
            [y],
            marker="s",
            markersize=4 + 8 * math.sqrt(weight / total_weight),
            markerfacecolor=REVIEWED_FILL if row.reviewed else "#ffffff",
            markeredgecolor=REVIEWED_FILL,
            markeredgewidth=1.3,
            linestyle="none",
            zorder=3,
        )
        mark(square, f"study {state.replace(' ', '-')}", f"{effect.study}: {state}")
        write(TEXT_X, y, shown(ratio, effect.estimate, effect.ci_lower, effect.ci_upper))
        write(WIDTH - LABEL_X, y, f"{100 * weight / total_weight:.1f}%", ha="right")
    for middle, (label_text, fit) in zip(pooled_y, pooled, strict=True):
        write(LABEL_X, middle, label_text, weight="bold")
        diamond = axes.fill(
            [fit.ci_lower, fit.estimate, fit.ci_upper, fit.estimate],
            [middle, middle - 0.3, middle, middle + 0.3],
            color=POOLED_FILL,
        )
        mark(diamond[0], "pooled", f"{label_text}: {shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper)}")
        write(TEXT_X, middle, shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper), weight="bold")
    if result.prediction_interval is not None and interval_y is not None:
        lower, upper = result.prediction_interval
        write(LABEL_X, interval_y, "Prediction interval (REML)", color=MUTED)
        (line,) = axes.plot([lower, upper], [interval_y, interval_y], color=MUTED, linewidth=2, dashes=(4, 3))
        mark(line, "prediction-interval", f"Prediction interval (REML): {interval(ratio, lower, upper)}")
        write(TEXT_X, interval_y, interval(ratio, lower, upper), color=MUTED)
    axes.axvline(0.0, color="#888888", linewidth=0.8, zorder=1)
    ticks = _ticks(low, high, ratio)
    axes.set_xticks(ticks, [_tick_label(tick, ratio) for tick in ticks])
    axes.set_yticks([])
    axes.tick_params(axis="x", labelsize=FONT_SIZE, colors="#333333")
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    legend = "filled: every number reviewed · hollow: not yet reviewed"
    figure.text(LABEL_X, 0.12 + NOTE_LINE * len(notes), legend, transform=top, color=MUTED, parse_math=False)
    for index, wrapped in enumerate(notes):
        at = 0.12 + NOTE_LINE * (len(notes) - 1 - index)
        note = figure.text(LABEL_X, at, wrapped, transform=top, parse_math=False)
        mark(note, "footnote")
    return figure
