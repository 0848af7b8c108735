"""The forest plot of one outcome, drawn with matplotlib the way metafor and RevMan draw it.

One row per study: its label ("Author Year", the study id the form holds; a link to its review
page when ``link`` gives one), the arms' numbers it was computed from (RevMan's data columns:
events and total, or mean, SD and total, of each side, headed by the sides' names), a square sized
by its random-effects weight on its 95% CI, its estimate [CI] and its weight. A study with no events
in either arm is drawn with its numbers and "Not estimable", and not pooled. Below, three diamonds:
the common effect (with the sides' totals, and total events, in the data columns), DerSimonian–Laird
and REML random effects, and REML's prediction interval as a line; the header says k, tau², I² and
Q. Under the axis, "Favours …" on each side of the line of no effect, named after the comparison's
sides (RevMan's default: the intervention on the left, where a ratio below 1 or a difference below
0 lies). Ratio measures are drawn on the log scale, the axis labelled in ratios.

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
import re
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extraction_pipeline.core.synthesis.batch import OutcomeSynthesis, StudyRow
from extraction_pipeline.core.synthesis.comparisons import DEFAULT_COMPARISON
from extraction_pipeline.core.synthesis.csv_input import EVENTS, ArmNumbers
from extraction_pipeline.core.synthesis.figures import FONT_SIZE, clean, mark, new_figure
from extraction_pipeline.core.synthesis.pooling import Estimate
from extraction_pipeline.core.templates.arms import arm_key_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Layout in inches, from the left: the study labels, the arms' numbers, the plot, estimate [CI],
# weight.
LABEL_X = 0.08
LABEL_WIDTH = 2.47
NUMBER_WIDTH = 0.55  # one data column (events, total, mean, SD)
PLOT_WIDTH = 3.1
ESTIMATE_WIDTH = 1.85
WEIGHT_WIDTH = 0.62
ROW = 0.24
HEADER = 0.9  # title, heterogeneity, column headings
SIDES_HEADER = 0.2  # the sides' names over their data columns
FOOTER = 0.78  # tick labels, "Favours …", legend
FAVOURS_BELOW = 0.36  # inches from the axis line down to the "Favours …" labels
MAX_SIDE = 30
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


def _arm_number(value: float) -> str:
    """An arm's number as entered: counts whole, means and SDs to the digits they carry (a split
    comparator's half a participant stays "19.5")."""
    return f"{value:.6g}"


def side_names(comparison: str, rows: list[StudyRow]) -> tuple[str, str]:
    """The comparison's two sides in words, for "Favours …" and the data columns' headings: the
    parts of the analyst's "A vs B" (turned round when they name the arms of the other sides:
    "placebo vs high dose" still puts the high dose on the intervention side), else the arms' one
    name on each side when every study agrees (every comparator a "placebo"), else the side's role."""

    def agreed(found: list[str], role: str) -> str:
        if not found or len({name.casefold() for name in found}) > 1:
            return role
        return Counter(found).most_common(1)[0][0]  # the spelling most studies use

    intervention = [row.sides[0] for row in rows if row.sides[0]]
    comparator = [row.sides[1] for row in rows if row.sides[1]]
    parts = [part.strip() for part in re.split(r"\s+(?:vs\.?|versus)\s+", comparison, maxsplit=1, flags=re.I)]
    if comparison != DEFAULT_COMPARISON and len(parts) == 2 and all(parts):
        first, second = parts
        forward = _names(first, intervention) or _names(second, comparator)
        backward = _names(first, comparator) or _names(second, intervention)
        return (second, first) if backward and not forward else (first, second)
    return agreed(intervention, "intervention"), agreed(comparator, "comparator")


def _names(part: str, arms: list[str]) -> bool:
    """Whether every word of ``part`` is in some arm's name ("high dose" in "haloperidol high dose")."""
    words = set(arm_key_of(part).split())
    return bool(words) and any(words <= set(arm_key_of(arm).split()) for arm in arms)


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


def _data_columns(rows: list[StudyRow]) -> tuple[str, ...]:
    """The data columns of each side: events and total, or mean, SD and total; none when every
    study gives only a printed estimate."""
    kinds = [row.arms.kind for row in rows if row.arms is not None]
    if not kinds:
        return ()
    return ("Events", "Total") if kinds[0] == EVENTS else ("Mean", "SD", "Total")


@dataclass(frozen=True)
class _Totals:
    """What RevMan prints under the studies: each side's participants on the pooled line, and each
    side's events on a "Total events" line (events data only)."""

    sizes: tuple[tuple[str, ...], tuple[str, ...]]
    events: tuple[tuple[str, ...], tuple[str, ...]] | None


def _totals(rows: list[StudyRow]) -> _Totals | None:
    """The pooled studies' totals; None when one of them has no arm data (a total of some studies
    would mislead)."""
    data = [row.arms for row in rows]
    known = [arms for arms in data if arms is not None]
    if not data or len(known) < len(data):
        return None
    width = len(known[0].intervention)

    def summed(side: int, index: int) -> str:
        return _arm_number(sum((arms.intervention if side == 0 else arms.comparator)[index] for arms in known))

    def only(index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        line = tuple(tuple(summed(side, i) if i == index else "" for i in range(width)) for side in (0, 1))
        return line[0], line[1]

    return _Totals(only(width - 1), only(0) if known[0].kind == EVENTS else None)


def forest_figure(outcome: OutcomeSynthesis, link: Callable[[int], str] | None = None) -> Figure:
    """``outcome``'s forest plot; ``link(item_id)`` gives a study's review page."""
    from matplotlib.transforms import ScaledTranslation, blended_transform_factory

    result = outcome.result
    ratio = result.ratio
    pooled = _pooled(outcome)
    low, high = _range(outcome, pooled)
    studies = [*outcome.rows, *outcome.not_estimable]
    columns = _data_columns(studies)
    # Columns in inches from the figure's left edge.
    numbers_left = LABEL_X + LABEL_WIDTH
    plot_left = numbers_left + 2 * len(columns) * NUMBER_WIDTH + (0.12 if columns else 0)
    text_x = plot_left + PLOT_WIDTH + 0.15
    width = text_x + ESTIMATE_WIDTH + WEIGHT_WIDTH
    # Rows on the plot's y axis, top down: the studies pooled, those not estimable, half a row's
    # gap, the pooled estimates, the prediction interval.
    count = len(studies)
    totals = _totals(studies)  # RevMan counts a not-estimable study's participants and events too
    pooled_y = [count + 0.5 + index for index in range(len(pooled))]
    interval_y = pooled_y[-1] + 1 if result.prediction_interval is not None else None
    last = interval_y if interval_y is not None else pooled_y[-1]
    events_y = last + 1 if totals is not None and totals.events is not None else None
    last = events_y if events_y is not None else last
    rows_height = (last + 1.2) * ROW
    notes = [line for note in outcome.notes for line in textwrap.wrap(clean(note), NOTE_WIDTH)]
    footer = FOOTER + NOTE_LINE * len(notes)
    header = HEADER + (SIDES_HEADER if columns else 0)
    height = header + rows_height + footer
    figure = new_figure(width, height)
    mark(figure, "forest-plot", f"Forest plot: {result.outcome}, {result.measure}")
    axes = figure.add_axes((plot_left / width, footer / height, PLOT_WIDTH / width, rows_height / height))
    axes.set_xlim(low, high)
    axes.set_ylim(last + 0.7, -0.5)
    # Text columns: x in inches from the figure's left edge, y in rows, beside the plot.
    column = blended_transform_factory(figure.dpi_scale_trans, axes.transData)

    def write(x: float, y: float, text: str, **style: Any) -> Any:
        return axes.text(x, y, clean(text), transform=column, va="center", parse_math=False, **style)

    def column_right(side: int, index: int) -> float:
        """The right edge of a side's data column (numbers right-aligned, as in RevMan)."""
        return numbers_left + (side * len(columns) + index + 1) * NUMBER_WIDTH - 0.05

    def write_numbers(y: float, sides: tuple[tuple[str, ...], tuple[str, ...]], **style: Any) -> None:
        for side, values in enumerate(sides):
            for index, value in enumerate(values):
                if value:
                    write(column_right(side, index), y, value, ha="right", **style)

    def arm_cells(arms: ArmNumbers) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return tuple(_arm_number(v) for v in arms.intervention), tuple(_arm_number(v) for v in arms.comparator)

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
    favoured = side_names(outcome.comparison, studies)
    headings = -1.3
    write(LABEL_X, headings, "Study", weight="bold")
    if columns:
        for side, name in enumerate(favoured):
            middle = numbers_left + (side + 0.5) * len(columns) * NUMBER_WIDTH
            heading = write(
                middle, headings - 0.85, _truncate(clean(name), 7 * len(columns)), weight="bold", ha="center"
            )
            mark(heading, "side-heading", name)
        write_numbers(headings, (columns, columns), weight="bold")
    write(text_x, headings, f"{result.measure} [95% CI]", weight="bold")
    write(width - LABEL_X, headings, "Weight (REML)", weight="bold", ha="right")

    def write_label(y: float, row: StudyRow) -> None:
        label = write(LABEL_X, y, _truncate(clean(row.effect.study)))
        if link is not None and row.item_id is not None:
            label.set_url(link(row.item_id))
            label.set_color(LINK)
            mark(label, "study-link")

    # The studies in the file's order, a not-estimable one in its place among them (RevMan's).
    ordered = sorted(
        [
            *((row, weight) for row, weight in zip(outcome.rows, weights, strict=True)),
            *((r, None) for r in outcome.not_estimable),
        ],
        key=lambda pair: pair[0].line,
    )
    for y, (row, weight) in enumerate(ordered):
        if weight is None:
            write_label(y, row)
            if row.arms is not None:
                write_numbers(y, arm_cells(row.arms))
            estimable = write(text_x, y, "Not estimable", color=MUTED)
            mark(estimable, "not-estimable", f"{row.effect.study}: no events in either arm, not pooled")
            continue
        effect = row.effect
        write_label(y, row)
        if row.arms is not None:
            write_numbers(y, arm_cells(row.arms))
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
        write(text_x, y, shown(ratio, effect.estimate, effect.ci_lower, effect.ci_upper))
        write(width - LABEL_X, y, f"{100 * weight / total_weight:.1f}%", ha="right")
    for middle, (label_text, fit) in zip(pooled_y, pooled, strict=True):
        write(LABEL_X, middle, label_text, weight="bold")
        if totals is not None and middle == pooled_y[0]:
            write_numbers(middle, totals.sizes, weight="bold")
        diamond = axes.fill(
            [fit.ci_lower, fit.estimate, fit.ci_upper, fit.estimate],
            [middle, middle - 0.3, middle, middle + 0.3],
            color=POOLED_FILL,
        )
        mark(diamond[0], "pooled", f"{label_text}: {shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper)}")
        write(text_x, middle, shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper), weight="bold")
    # The weights are REML's: their 100% stands on its line.
    reml_y = next((y for y, (label, _fit) in zip(pooled_y, pooled, strict=True) if "REML" in label), pooled_y[0])
    write(width - LABEL_X, reml_y, "100.0%", ha="right", weight="bold")
    if totals is not None and totals.events is not None and events_y is not None:
        write(LABEL_X, events_y, "Total events")
        write_numbers(events_y, totals.events)
    if result.prediction_interval is not None and interval_y is not None:
        lower, upper = result.prediction_interval
        write(LABEL_X, interval_y, "Prediction interval (REML)", color=MUTED)
        (line,) = axes.plot([lower, upper], [interval_y, interval_y], color=MUTED, linewidth=2, dashes=(4, 3))
        mark(line, "prediction-interval", f"Prediction interval (REML): {interval(ratio, lower, upper)}")
        write(text_x, interval_y, interval(ratio, lower, upper), color=MUTED)
    axes.axvline(0.0, color="#888888", linewidth=0.8, zorder=1)
    ticks = _ticks(low, high, ratio)
    axes.set_xticks(ticks, [_tick_label(tick, ratio) for tick in ticks])
    axes.set_yticks([])
    axes.tick_params(axis="x", labelsize=FONT_SIZE, colors="#333333")
    for edge in ("top", "right", "left"):
        axes.spines[edge].set_visible(False)
    # "Favours …" either side of the line of no effect, under the tick labels.
    below = blended_transform_factory(axes.transData, axes.transAxes) + ScaledTranslation(
        0, -FAVOURS_BELOW, figure.dpi_scale_trans
    )
    gap = (high - low) * 0.02
    for x, align, name in ((-gap, "right", favoured[0]), (gap, "left", favoured[1])):
        favours = axes.text(
            x, 0, f"Favours {_truncate(clean(name), MAX_SIDE)}", transform=below, ha=align, va="top", parse_math=False
        )
        mark(favours, "favours", f"Favours {name}")
    legend = "filled: every number reviewed · hollow: not yet reviewed"
    figure.text(LABEL_X, 0.12 + NOTE_LINE * len(notes), legend, transform=top, color=MUTED, parse_math=False)
    for index, wrapped in enumerate(notes):
        at = 0.12 + NOTE_LINE * (len(notes) - 1 - index)
        note = figure.text(LABEL_X, at, wrapped, transform=top, parse_math=False)
        mark(note, "footnote")
    return figure
