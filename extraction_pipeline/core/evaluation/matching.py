"""Which extracted outcome is which gold outcome, and why.

Names differ between a gold sheet and a paper ("HbA1c at 12 weeks" / "glycated haemoglobin"), so a
pair is scored on two kinds of evidence:

- the names, after normalizing spelling (haemoglobin/hemoglobin), expanding common abbreviations
  (HbA1c, BMI, SBP, ...) and dropping timepoints ("at 12 weeks"): rapidfuzz's token-set ratio,
  0-100, or 100 when one name is the other's acronym;
- the numbers: how many gold values the extracted outcome carries in the same field.

score = name + 25 per equal value. A pair is accepted with a name score of at least 70, or two
equal values, or one equal value and a name score of at least 50; pairs are taken best first, each
outcome at most once. Every match says which evidence carried it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from extraction_pipeline.core.evaluation.gold import GoldOutcome

VALUE_WEIGHT = 25
NAME_ENOUGH, NAME_WITH_ONE_VALUE, VALUES_ENOUGH = 70, 50, 2
ABBREVIATIONS = {
    "hba1c": "glycated hemoglobin",
    "a1c": "glycated hemoglobin",
    "glycosylated": "glycated",
    "bmi": "body mass index",
    "sbp": "systolic blood pressure",
    "dbp": "diastolic blood pressure",
    "bp": "blood pressure",
    "ldl": "low density lipoprotein",
    "hdl": "high density lipoprotein",
    "qol": "quality of life",
    "hrqol": "health related quality of life",
    "los": "length of stay",
    "icu": "intensive care unit",
    "ae": "adverse events",
    "aes": "adverse events",
}
SPELLING = (("haem", "hem"), ("oedema", "edema"), ("anaem", "anem"), ("randomis", "randomiz"), ("tumour", "tumor"))
TIMEPOINT = re.compile(
    r"\b(?:at|after|over|by|to)?\s*(?:\d+|one|two|three|six|twelve)[\s-]*(?:day|week|month|year|hour|h)s?\b"
    r"(?:\s*(?:follow[\s-]?up|post[\s-]?(?:op|operative|treatment)))?",
    re.IGNORECASE,
)


@dataclass
class ExtractedOutcome:
    document_id: int
    filename: str
    index: int
    name: str
    values: dict[str, float] = field(default_factory=dict)
    quotes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Match:
    gold: GoldOutcome
    extracted: ExtractedOutcome | None
    name_score: int
    equal_values: int

    @property
    def why(self) -> str:
        if self.extracted is None:
            return "no extracted outcome matches (name or numbers)"
        shown = (
            f"extracted #{self.extracted.index} {self.extracted.name!r}"
            if self.extracted.name
            else (f"extracted #{self.extracted.index} (unnamed)")
        )
        return f"{shown}: name {self.name_score}/100, {self.equal_values} equal value(s)"


def normalize_name(name: str) -> str:
    text = TIMEPOINT.sub(" ", name.lower())
    for british, american in SPELLING:
        text = text.replace(british, american)
    words = re.findall(r"[a-z0-9]+", text)
    return " ".join(ABBREVIATIONS.get(word, word) for word in words)


def _acronym(short: str, long: str) -> bool:
    initials = "".join(word[0] for word in long.split() if word)
    return len(short) >= 2 and " " not in short and short == initials


def name_score(gold: str, extracted: str) -> int:
    from rapidfuzz import fuzz  # lazy: only evaluation pays for it

    a, b = normalize_name(gold), normalize_name(extracted)
    if not a or not b:
        return 0
    if _acronym(a, b) or _acronym(b, a):
        return 100
    return round(fuzz.token_set_ratio(a, b))


def equal(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _equal_values(gold: GoldOutcome, extracted: ExtractedOutcome) -> int:
    return sum(
        1 for name, value in gold.values.items() if name in extracted.values and equal(value, extracted.values[name])
    )


def match_outcomes(gold: list[GoldOutcome], extracted: list[ExtractedOutcome]) -> list[Match]:
    """One Match per gold outcome (``extracted`` None when nothing qualifies), in gold order."""
    candidates = []
    for g, gold_outcome in enumerate(gold):
        for e, outcome in enumerate(extracted):
            names = name_score(gold_outcome.outcome, outcome.name)
            values = _equal_values(gold_outcome, outcome)
            accepted = names >= NAME_ENOUGH or values >= VALUES_ENOUGH or (values >= 1 and names >= NAME_WITH_ONE_VALUE)
            if accepted:
                candidates.append((names + VALUE_WEIGHT * values, g, e, names, values))
    chosen: dict[int, Match] = {}
    taken: set[int] = set()
    for _score, g, e, names, values in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if g in chosen or e in taken:
            continue
        chosen[g] = Match(gold[g], extracted[e], names, values)
        taken.add(e)
    return [chosen.get(g, Match(gold_outcome, None, 0, 0)) for g, gold_outcome in enumerate(gold)]
