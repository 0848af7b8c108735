"""The batch's Risk-of-Bias 2 judgements drawn as robvis draws them: a traffic-light table (study ×
domain, one coloured circle with its symbol per judgement) and a summary bar per domain (the share
of studies at low risk, some concerns, high risk, no information).

Judgements are the final ones: a reviewer's decision replaces the model's. A judgement no reviewer
has decided is drawn as a ring (its colour around a white centre), as the forest plot draws an
unreviewed study hollow; a domain the model left unanswered is "no information", with nothing to
review. Both pictures are matplotlib figures: SVG on the batch page (offered there as SVG, PNG and
PDF too), PNG on the workbook's Risk of bias sheet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from extraction_pipeline.core.export.meta_csv import final_value, study_label
from extraction_pipeline.core.extraction.grounded import GroundedFields, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.templates import definition_of, template_of_batch
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.values import Decision
from extraction_pipeline.core.synthesis.figures import clean, mark, new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MODULE = "risk_of_bias"
LOW, SOME_CONCERNS, HIGH, NO_INFORMATION = "low", "some concerns", "high", "no information"
LEVELS = (LOW, SOME_CONCERNS, HIGH, NO_INFORMATION)
# robvis' RoB 2 colours and symbols.
COLOURS = {LOW: "#02C100", SOME_CONCERNS: "#E2DF07", HIGH: "#BF0000", NO_INFORMATION: "#4EA1F7"}
SYMBOLS = {LOW: "+", SOME_CONCERNS: "−", HIGH: "×", NO_INFORMATION: "?"}
TITLES = {
    "randomization": "Bias arising from the randomization process",
    "deviations": "Bias due to deviations from intended interventions",
    "missing_data": "Bias due to missing outcome data",
    "measurement": "Bias in measurement of the outcome",
    "reporting": "Bias in selection of the reported result",
    "overall": "Overall risk of bias",
}
MUTED = "#555555"
LINK = "#1d4ed8"
LEGEND = " · ".join(f"{SYMBOLS[level]} {level}" for level in LEVELS)


@dataclass(frozen=True)
class Domain:
    field: str  # the template's field name, "randomization"
    short: str  # the column heading, "D1" … or "Overall"
    title: str


@dataclass(frozen=True)
class Judgement:
    level: str  # one of LEVELS
    reviewed: bool


@dataclass(frozen=True)
class StudyRisk:
    study: str
    item_id: int
    judgements: tuple[Judgement, ...]  # parallel to RiskOfBias.domains


@dataclass(frozen=True)
class RiskOfBias:
    domains: tuple[Domain, ...]
    studies: tuple[StudyRisk, ...]

    def summary(self) -> list[tuple[Domain, dict[str, int]]]:
        """Per domain, how many studies are at each level."""
        counts = []
        for index, domain in enumerate(self.domains):
            levels = [study.judgements[index].level for study in self.studies]
            counts.append((domain, {level: levels.count(level) for level in LEVELS}))
        return counts


def _level(value: object) -> str:
    word = str(value).strip().lower() if value is not None else ""
    return word if word in (LOW, SOME_CONCERNS, HIGH) else NO_INFORMATION


def batch_risk_of_bias(ledger: Ledger, batch_id: int) -> RiskOfBias | None:
    """The batch's judgements per completed document; None when its template has no Risk of Bias
    module (a project that does not assess it)."""
    template = definition_of(template_of_batch(ledger, batch_id))
    module = next((m for m in template.modules if m.name == MODULE), None)
    if module is None:
        return None
    names = [f.name for f in module.fields]
    numbered = [name for name in names if name != "overall"]
    domains = tuple(
        Domain(name, "Overall" if name == "overall" else f"D{numbered.index(name) + 1}", TITLES.get(name, name))
        for name in names
    )
    decided = current_decisions(ledger, batch_id)
    studies = []
    for item in batch_item_rows(ledger, batch_id):
        if item["status"] != "completed" or not item["result_json"]:
            continue
        fields = fields_of(json.loads(item["result_json"]))
        mine: dict[str, Decision] = {path: d for (item_id, path), d in decided.items() if item_id == item["id"]}
        judgements = tuple(_judgement(fields, mine, f"{MODULE}.{domain.field}") for domain in domains)
        studies.append(StudyRisk(str(study_label(fields, mine, item)), int(item["id"]), judgements))
    return RiskOfBias(domains, tuple(studies))


def _judgement(fields: GroundedFields, decided: dict[str, Decision], path: str) -> Judgement:
    """The final judgement; one the model never gave and no reviewer added has nothing to review."""
    entry = fields.get(path)
    answered = entry is not None and entry.value is not None
    return Judgement(_level(final_value(fields, decided, path)), path in decided or not answered)


def _truncate(text: str, most: int = 32) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def traffic_light_figure(rob: RiskOfBias, link: Callable[[int], str] | None = None) -> Figure:
    """Study × domain circles, with the domains' titles and the symbols' meaning below."""
    # Laid out in inches from the top left corner: an axes covering the figure, y pointing down.
    label_width, column, row, line = 2.4, 0.6, 0.36, 0.21
    width = max(label_width + column * len(rob.domains) + 0.15, 6.2)
    table = 0.35 + row * len(rob.studies)
    height = table + 0.2 + line * len(rob.domains) + 0.35
    figure = new_figure(width, height)
    mark(figure, "rob-plot", "Risk of bias: traffic-light plot")
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(height, 0)
    axes.set_axis_off()
    for index, domain in enumerate(rob.domains):
        x = label_width + column * (index + 0.5)
        axes.text(x, 0.2, domain.short, ha="center", va="center", weight="bold", parse_math=False)
    for number, study in enumerate(rob.studies):
        y = 0.35 + row * (number + 0.5)
        label = axes.text(0.08, y, _truncate(clean(study.study)), va="center_baseline", parse_math=False)
        if link is not None:
            label.set_url(link(study.item_id))
            label.set_color(LINK)
            mark(label, "study-link")
        for index, (domain, judgement) in enumerate(zip(rob.domains, study.judgements, strict=True)):
            _circle(axes, label_width + column * (index + 0.5), y, judgement, f"{study.study}, {domain.title}")
    y = table + 0.2
    for domain in rob.domains:
        axes.text(0.08, y, f"{domain.short}: {clean(domain.title)}", va="center", color=MUTED, parse_math=False)
        y += line
    legend = f"{LEGEND} · ring: not yet reviewed"
    axes.text(0.08, y + 0.12, legend, va="center", color=MUTED, parse_math=False)
    return figure


def _circle(axes: Axes, x: float, y: float, judgement: Judgement, where: str) -> None:
    """One judgement: a filled circle with its symbol in white, or a ring when not yet reviewed."""
    colour = COLOURS[judgement.level]
    state = "reviewed" if judgement.reviewed else "not reviewed"
    (circle,) = axes.plot(
        [x],
        [y],
        marker="o",
        markersize=17,
        markerfacecolor=colour if judgement.reviewed else "#ffffff",
        markeredgecolor=colour,
        markeredgewidth=3,
        linestyle="none",
    )
    mark(circle, f"judgement {judgement.level.replace(' ', '-')}", f"{where}: {judgement.level}, {state}")
    symbol = "#ffffff" if judgement.reviewed else "#000000"
    axes.text(
        x, y, SYMBOLS[judgement.level], ha="center", va="center_baseline", fontsize=11, weight="bold", color=symbol
    )


def summary_figure(rob: RiskOfBias) -> Figure:
    """One bar per domain: the share of studies at each level (unweighted, as robvis' default)."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import PercentFormatter
    from matplotlib.transforms import blended_transform_factory

    label_width, bar_width, row, top, bottom = 3.5, 3.6, 0.32, 0.12, 0.75
    width = label_width + bar_width + 0.35
    height = top + row * len(rob.domains) + bottom
    figure = new_figure(width, height)
    mark(figure, "rob-plot", "Risk of bias: summary per domain")
    axes = figure.add_axes((label_width / width, bottom / height, bar_width / width, row * len(rob.domains) / height))
    axes.set_xlim(0, 1)
    axes.set_ylim(len(rob.domains) - 0.5, -0.5)
    titles = blended_transform_factory(figure.dpi_scale_trans, axes.transData)
    total = max(len(rob.studies), 1)
    for y, (domain, counts) in enumerate(rob.summary()):
        axes.text(0.08, y, clean(domain.title), transform=titles, va="center", parse_math=False)
        left = 0.0
        for level in LEVELS:
            share = counts[level] / total
            if share == 0:
                continue
            (bar,) = axes.barh(y, share, left=left, height=0.7, color=COLOURS[level], edgecolor="#ffffff")
            title = f"{domain.title}: {counts[level]} of {len(rob.studies)} {level}"
            mark(bar, f"share {level.replace(' ', '-')}", title)
            left += share
    axes.set_xticks([0, 0.25, 0.5, 0.75, 1])
    axes.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    axes.tick_params(axis="x", colors=MUTED)
    axes.set_yticks([])
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    handles = [Patch(color=COLOURS[level], label=level) for level in LEVELS]
    figure.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.08 / width, 0.02),
        ncol=len(LEVELS),
        frameon=False,
        handlelength=1,
        columnspacing=1.5,
    )
    return figure
