"""The batch's Risk-of-Bias 2 judgements drawn as robvis draws them: a traffic-light table (study ×
domain, one coloured circle with its symbol per judgement) and a summary bar per domain (the share
of studies at low risk, some concerns, high risk, no information).

Judgements are the final ones: a reviewer's decision replaces the model's. A judgement no reviewer
has decided is drawn as a ring (its colour around a white centre), as the forest plot draws an
unreviewed study hollow; a domain the model left unanswered is "no information", with nothing to
review. Both pictures are SVG, shown inline on the batch page and, as PNG, on the workbook's Risk
of bias sheet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from extraction_pipeline.core.export.meta_csv import final_value, study_label
from extraction_pipeline.core.extraction.grounded import GroundedFields, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.templates import definition_of, template_of_batch
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.values import Decision
from extraction_pipeline.core.synthesis.svg import attribute, text

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
FONT = 'font-family="Helvetica, Arial, sans-serif" font-size="12"'


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
        studies.append(StudyRisk(str(study_label(fields, mine, item["filename"])), int(item["id"]), judgements))
    return RiskOfBias(domains, tuple(studies))


def _judgement(fields: GroundedFields, decided: dict[str, Decision], path: str) -> Judgement:
    """The final judgement; one the model never gave and no reviewer added has nothing to review."""
    entry = fields.get(path)
    answered = entry is not None and entry.value is not None
    return Judgement(_level(final_value(fields, decided, path)), path in decided or not answered)


def _circle(x: float, y: float, judgement: Judgement, where: str) -> str:
    colour = COLOURS[judgement.level]
    state = "reviewed" if judgement.reviewed else "not reviewed"
    inner = colour if judgement.reviewed else "#ffffff"
    symbol_colour = "#ffffff" if judgement.reviewed else "#000000"
    return (
        f'<g class="judgement {judgement.level.replace(" ", "-")}"><title>{text(where)}: {judgement.level}, '
        f"{state}</title>"
        f'<circle cx="{x}" cy="{y}" r="10" fill="{inner}" stroke="{colour}" stroke-width="4"/>'
        f'<text x="{x}" y="{y + 5}" {FONT} font-size="15" font-weight="bold" text-anchor="middle" '
        f'fill="{symbol_colour}">{SYMBOLS[judgement.level]}</text></g>'
    )


def traffic_light_svg(rob: RiskOfBias, link: Callable[[int], str] | None = None) -> str:
    """Study × domain circles, with the domains' titles and the symbols' meaning below."""
    label_width, column, row = 220, 52, 28
    width = label_width + column * len(rob.domains) + 10
    parts = []
    y = 24
    for index, domain in enumerate(rob.domains):
        x = label_width + column * index + column / 2
        parts.append(f'<text x="{x}" y="{y}" {FONT} font-weight="bold" text-anchor="middle">{domain.short}</text>')
    for study in rob.studies:
        y += row
        label = f'<text x="4" y="{y + 4}" {FONT}>{text(study.study[:32])}</text>'
        if link is not None:
            label = f'<a href={attribute(link(study.item_id))} class="study-link">{label}</a>'
        parts.append(label)
        for index, (domain, judgement) in enumerate(zip(rob.domains, study.judgements, strict=True)):
            x = label_width + column * index + column / 2
            parts.append(_circle(x, y, judgement, f"{study.study}, {domain.title}"))
    y += row
    for domain in rob.domains:
        y += 16
        parts.append(f'<text x="4" y="{y}" {FONT} fill="#555555">{domain.short}: {text(domain.title)}</text>')
    y += 22
    legend = " · ".join(f"{SYMBOLS[level]} {level}" for level in LEVELS) + " · ring: not yet reviewed"
    parts.append(f'<text x="4" y="{y}" {FONT} fill="#555555">{text(legend)}</text>')
    return _svg(max(width, 560), y + 10, "Risk of bias: traffic-light plot", parts)


def summary_svg(rob: RiskOfBias) -> str:
    """One bar per domain: the share of studies at each level (unweighted, as robvis' default)."""
    label_width, bar_width, row = 330, 360, 26
    parts = []
    y = 10
    total = max(len(rob.studies), 1)
    for domain, counts in rob.summary():
        y += row
        parts.append(f'<text x="4" y="{y + 4}" {FONT}>{text(domain.title)}</text>')
        x = float(label_width)
        for level in LEVELS:
            share = counts[level] / total
            if share == 0:
                continue
            w = bar_width * share
            parts.append(
                f'<rect x="{x:.1f}" y="{y - 9}" width="{w:.1f}" height="18" fill="{COLOURS[level]}" '
                f'stroke="#ffffff" class="share {level.replace(" ", "-")}"><title>{text(domain.title)}: '
                f"{counts[level]} of {len(rob.studies)} {level}</title></rect>"
            )
            x += w
    y += row + 6
    x = float(label_width)
    for level in LEVELS:
        parts.append(f'<rect x="{x:.0f}" y="{y - 10}" width="12" height="12" fill="{COLOURS[level]}"/>')
        parts.append(f'<text x="{x + 16:.0f}" y="{y}" {FONT}>{level}</text>')
        x += 16 + 7 * len(level) + 18  # about 7 px per character at 12 px Helvetica
    for share in (0, 25, 50, 75, 100):
        x = label_width + bar_width * share / 100
        parts.append(f'<text x="{x}" y="{y + 20}" {FONT} text-anchor="middle" fill="#555555">{share}%</text>')
    return _svg(label_width + bar_width + 30, y + 30, "Risk of bias: summary per domain", parts)


def _svg(width: float, height: float, title: str, parts: list[str]) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" class="rob-plot">',
            f"<title>{text(title)}</title>",
            f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
            *parts,
            "</svg>",
        ]
    )
