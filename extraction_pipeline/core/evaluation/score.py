"""A batch against a gold table, per arm number (one of events/total/mean/sd/n of one arm of one
outcome): per field, how many gold arm numbers were found, exactly right, wrong or missing, with
their precision and recall and every wrong one listed (document, outcome, arm, gold, extracted,
quote); and per field group (study, baseline, outcome numbers, Risk of Bias) its precision and
recall.

Documents are matched to gold studies by file name (stem), study id or NCT number; each gold row
(an outcome, an intervention and a comparator arm) to an extracted outcome and two of its arms by
``matching.match_comparisons``. A number two gold rows share (the comparator of "1 mg vs saline"
and of "2 mg vs saline") is one arm number, scored once. Documents are read through
``core.templates.arms``, so a batch of either template version is scored the same way. By
default the machine's values are scored (that is how models are compared); ``final`` scores the
values after review. Gold values only shown in figures are left out unless asked for (no
text-based extractor can read them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from extraction_pipeline.core.evaluation.gold import NUMBERS, SIDES, GoldOutcome
from extraction_pipeline.core.evaluation.matching import (
    ExtractedArm,
    ExtractedOutcome,
    Match,
    arm_words,
    equal,
    match_comparisons,
    normalize_name,
)
from extraction_pipeline.core.extraction.grounded import GroundedFields, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.templates.arms import arm_key_of, study_arms


@dataclass
class FieldScore:
    gold: int = 0
    found: int = 0
    right: int = 0
    wrong: int = 0

    @property
    def missing(self) -> int:
        return self.gold - self.found

    @property
    def precision(self) -> float | None:
        return self.right / self.found if self.found else None  # None: nothing extracted to judge

    @property
    def recall(self) -> float | None:
        return self.right / self.gold if self.gold else None


# The template's modules, as reviewers name them. A gold table carries values of some groups only
# (the corpus format: outcome numbers); the others are reported as having no gold values.
# Version 2's arms carry what version 1's baseline did (n, age, sex per arm); its comparisons carry
# the effects version 1 kept in the outcome entry.
FIELD_GROUPS = {
    "metadata": "study",
    "baseline": "baseline",
    "arms": "baseline",
    "outcomes": "outcome numbers",
    "comparisons": "outcome numbers",
    "risk_of_bias": "RoB",
}
NUMBERS_ONLY = {"outcomes", "comparisons"}  # of these, the numbers count (not names and arm references)


@dataclass
class GroupScore:
    """One field group. ``extracted``: values the batch has in the group (for a group with gold
    values: those that have a gold value to compare with); ``right``: equal to their gold value.
    Precision = right / extracted, recall = right / gold; neither means anything without gold."""

    gold: int = 0
    extracted: int = 0
    right: int = 0

    @property
    def precision(self) -> float | None:
        return self.right / self.extracted if self.gold and self.extracted else None  # None: nothing to judge

    @property
    def recall(self) -> float | None:
        return self.right / self.gold if self.gold else None

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"gold": self.gold, "extracted": self.extracted, "right": self.right}
        if not self.gold:
            return {**shown, "precision": None, "recall": None, "note": "no gold values"}
        return {**shown, "precision": self.precision, "recall": self.recall}


@dataclass
class Evaluation:
    # per arm-number field: events, total, mean, sd, n
    fields: dict[str, FieldScore] = field(default_factory=lambda: {name: FieldScore() for name in NUMBERS})
    wrong: list[dict[str, Any]] = field(default_factory=list)
    matches: list[tuple[str, Match]] = field(default_factory=list)  # (document filename, match)
    studies_not_in_batch: list[str] = field(default_factory=list)
    left_out_in_figures: int = 0
    # values the batch extracted per field group, over all its documents (what a group without
    # gold values reports)
    extracted_by_group: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(dict.fromkeys(FIELD_GROUPS.values()), 0)
    )

    def total(self) -> FieldScore:
        total = FieldScore()
        for score in self.fields.values():
            total.gold += score.gold
            total.found += score.found
            total.right += score.right
            total.wrong += score.wrong
        return total

    def groups(self) -> dict[str, GroupScore]:
        """Precision and recall per field group. The gold tables read so far carry outcome
        numbers only; a group without gold values keeps its count of extracted values."""
        scores = {name: GroupScore(extracted=count) for name, count in self.extracted_by_group.items()}
        total = self.total()
        if total.gold:
            scores[FIELD_GROUPS["outcomes"]] = GroupScore(gold=total.gold, extracted=total.found, right=total.right)
        return scores

    def as_dict(self) -> dict[str, Any]:
        def row(score: FieldScore) -> dict[str, Any]:
            return {
                "gold": score.gold,
                "found": score.found,
                "right": score.right,
                "wrong": score.wrong,
                "missing": score.missing,
                "precision": score.precision,
                "recall": score.recall,
            }

        return {
            "fields": {name: row(score) for name, score in self.fields.items() if score.gold},
            "total": row(self.total()),
            "groups": {name: score.as_dict() for name, score in self.groups().items()},
            "wrong": self.wrong,
            "matches": [
                {
                    "document": document,
                    "gold_outcome": m.gold.outcome,
                    "gold_intervention": m.gold.intervention,
                    "gold_comparator": m.gold.comparator,
                    "matched": m.why,
                }
                for document, m in self.matches
            ],
            "studies_not_in_batch": self.studies_not_in_batch,
            "left_out_in_figures": self.left_out_in_figures,
        }


def _study_keys(item: ItemListing, fields: GroundedFields) -> set[str]:
    keys = {PurePath(str(item["filename"])).stem.lower(), str(item["filename"]).lower()}
    for path in ("metadata.study_id", "metadata.nct_number"):
        value = fields[path].value if path in fields else None
        if value:
            keys.add(str(value).strip().lower())
    return keys


def extracted_outcomes(
    item: ItemListing, fields: GroundedFields, decided: dict[tuple[int, str], Any]
) -> list[ExtractedOutcome]:
    """The item's outcomes with their arms' numbers (the reviewers' where ``decided`` has them),
    read through the arms view: a reviewer who reassigned a number to another arm moved it."""

    def value(path: str) -> Any:
        decision = decided.get((item["id"], path))
        if decision is not None:
            return decision.value
        entry = fields.get(path)
        return entry.value if entry is not None else None

    study = study_arms(fields.keys(), value)
    found = []
    for outcome in study.outcomes:
        if not outcome.results:
            continue  # a comparison printed for an outcome without arm numbers: nothing to score
        arms = []
        for result in outcome.results:
            # an entry naming no declared arm is still that name's numbers
            key = result.arm or f"{result.entry}:{arm_key_of(result.arm_name)}"
            arm = ExtractedArm(key, study.arm_label(result.arm, result.arm_name))
            for name, path in result.paths.items():
                number = value(path)
                if name in NUMBERS and isinstance(number, int | float) and not isinstance(number, bool):
                    arm.values[name] = float(number)
                    arm.quotes[name] = fields[path].quote or "" if path in fields else ""
            arms.append(arm)
        index = int(outcome.entries[0].split(".")[1])
        found.append(
            ExtractedOutcome(item["document_id"], item["filename"], index, outcome.name or "", arms, study.version)
        )
    return found


def evaluate(
    ledger: Ledger, batch_id: int, gold: list[GoldOutcome], *, final: bool = False, include_figures: bool = False
) -> Evaluation:
    result = Evaluation()
    decided = current_decisions(ledger, batch_id) if final else {}
    documents = []
    for item in batch_item_rows(ledger, batch_id):
        fields = fields_of(json.loads(item["result_json"]) if item["result_json"] else None)
        documents.append((item, _study_keys(item, fields), extracted_outcomes(item, fields, decided)))
        _count_groups(result, item, fields, decided)
    scored = [g for g in gold if include_figures or not g.in_figure]
    if not include_figures:
        result.left_out_in_figures = len(_arm_numbers([g for g in gold if g.in_figure]))
    for study in dict.fromkeys(g.study for g in scored):
        rows = [g for g in scored if g.study == study]
        key = study.lower()
        document = next((d for d in documents if key in d[1] or (key and key in d[0]["filename"].lower())), None)
        if document is None:
            result.studies_not_in_batch.append(study)
            continue
        item, _keys, outcomes = document
        matches = match_comparisons(rows, outcomes)
        result.matches.extend((item["filename"], match) for match in matches)
        _score(result, item, matches)
    return result


def _count_groups(
    result: Evaluation, item: ItemListing, fields: GroundedFields, decided: dict[tuple[int, str], Any]
) -> None:
    for path, entry in fields.items():
        module = entry.module or path.split(".", 1)[0]  # an entry stored before templates: its path says
        group = FIELD_GROUPS.get(module)
        decision = decided.get((item["id"], path))
        value = decision.value if decision is not None else entry.value
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if group is not None and value is not None and (numeric or module not in NUMBERS_ONLY):
            result.extracted_by_group[group] += 1  # of the outcomes, their numbers only


def _arm_identity(gold: GoldOutcome, side: str, row: int) -> str:
    """Which arm a gold number belongs to, across the study's rows: its name's words, as arms are
    matched ("Dw 5% + quinine" is "Dw 5% with quinine"); a sheet without arm names: the row's
    side, so nothing is shared."""
    words = " ".join(sorted(arm_words(gold.arm_name(side))))
    return words if words else f"row {row}: {side}"


ArmNumber = tuple[str, str, str, str, float]  # study, outcome, arm, field, value


def _arm_numbers(rows: list[GoldOutcome]) -> dict[ArmNumber, list[tuple[int, str]]]:
    """The distinct gold arm numbers of ``rows``, each with the (row, side) places holding it."""
    numbers: dict[ArmNumber, list[tuple[int, str]]] = {}
    for row, gold in enumerate(rows):
        for side in SIDES:
            arm = _arm_identity(gold, side, row)
            for name, value in gold.arm_values(side).items():
                numbers.setdefault((gold.study, normalize_name(gold.outcome), arm, name, value), []).append((row, side))
    return numbers


def _score(result: Evaluation, item: ItemListing, matches: list[Match]) -> None:
    """Each distinct gold arm number once: scored where the first matched row holding it was
    matched (or missing when no row holding it was)."""
    numbers: dict[ArmNumber, tuple[Match, str, float] | None] = {}
    for key, places in _arm_numbers([match.gold for match in matches]).items():
        held = [(matches[row], side) for row, side in places if matches[row].arms is not None]
        numbers[key] = (held[0][0], held[0][1], key[-1]) if held else None
    for (_study, _outcome, _arm, name, gold_value), scored in numbers.items():
        score = result.fields[name]
        score.gold += 1
        if scored is None:
            continue
        match, side, _value = scored
        arm = match.arm(side)
        extracted = arm.values.get(name) if arm else None
        if arm is None or extracted is None:
            continue
        score.found += 1
        if equal(gold_value, extracted):
            score.right += 1
            continue
        score.wrong += 1
        result.wrong.append(
            {
                "document": item["filename"],
                "outcome": match.gold.outcome,
                "arm": match.gold.arm_name(side) or side,
                "extracted_arm": arm.name,
                "field": name,
                "gold": gold_value,
                "extracted": extracted,
                "quote": arm.quotes.get(name, ""),
            }
        )
