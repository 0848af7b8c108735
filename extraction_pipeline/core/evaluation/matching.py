"""Which extracted comparison is which gold row, and why.

A gold row is one comparison: an outcome, an intervention arm and a comparator arm, with numbers
for both arms. An extracted comparison is an extracted outcome with two of its arms' results. A
pair is scored on three kinds of evidence:

- the outcome names, after normalizing spelling (haemoglobin/hemoglobin), expanding common
  abbreviations (HbA1c, BMI, SBP, ...) and dropping timepoints ("at 12 weeks"): rapidfuzz's
  token-set ratio, 0-100, or 100 when one name is the other's acronym;
- the arm names, word by word (0-100): arms of one trial differ by a word or a number ("1 mg" /
  "2 mg", "smokers" / "nonsmokers", "left" / "right"), which a fuzzy ratio would call equal; two
  names printing different numbers (doses, durations, pressures) are different arms (0);
- the numbers: how many gold values the extracted arms carry in the same field.

score = outcome name + 10 x both arm names + 25 per equal value: an arm is the one its name says
(a model that put the 2 mg numbers under the 1 mg arm is scored wrong there, not matched by its
numbers), and the numbers decide between arms the names cannot tell apart. A pair is accepted with an outcome name
score of at least 70, or two equal values, or one equal value and a name score of at least 50;
and each arm with an arm name score of at least 50 or one equal value of its own (a gold sheet
without arm names: by the values, or by position when the outcome has just two arms; a version-1
document's arms are its treatment and control). Pairs are taken best first, each extracted
comparison at most once. Every match says which evidence carried it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from extraction_pipeline.core.evaluation.gold import SIDES, GoldOutcome

VALUE_WEIGHT = 25
ARM_WEIGHT = 10
NAME_ENOUGH, NAME_WITH_ONE_VALUE, VALUES_ENOUGH = 70, 50, 2
ARM_ENOUGH = 50
# Words that do not tell one arm from another ("control group" is "control"; "+" is "with").
ARM_FILLER = {"a", "an", "the", "of", "and", "with", "group", "groups", "arm", "arms"}
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
class ExtractedArm:
    """One arm's numbers for one extracted outcome: ``key`` identifies the arm in its document
    (``arms.2``; ``treatment`` / ``control`` in version 1), ``name`` is what a reviewer reads."""

    key: str
    name: str
    values: dict[str, float] = field(default_factory=dict)  # events/total/mean/sd/n
    quotes: dict[str, str] = field(default_factory=dict)


@dataclass
class ExtractedOutcome:
    document_id: int
    filename: str
    index: int  # the number of its first entry (``outcomes.N``)
    name: str
    arms: list[ExtractedArm] = field(default_factory=list)
    version: int = 2


@dataclass(frozen=True)
class Match:
    """A gold row and the extracted comparison it was matched to (``extracted`` None: nothing
    qualifies). ``arms``: the extracted arm of each side, intervention then comparator."""

    gold: GoldOutcome
    extracted: ExtractedOutcome | None
    name_score: int
    equal_values: int
    arms: tuple[ExtractedArm, ExtractedArm] | None = None
    arm_scores: tuple[int, int] = (0, 0)

    def arm(self, side: str) -> ExtractedArm | None:
        return self.arms[SIDES.index(side)] if self.arms else None

    @property
    def why(self) -> str:
        if self.extracted is None or self.arms is None:
            return "no extracted comparison matches (outcome, arms or numbers)"
        shown = (
            f"extracted #{self.extracted.index} {self.extracted.name!r}"
            if self.extracted.name
            else (f"extracted #{self.extracted.index} (unnamed)")
        )
        arms = f"{self.arms[0].name!r} vs {self.arms[1].name!r}"
        if self.extracted.version == 1:
            arms += " (by role)"
        elif self.gold.intervention or self.gold.comparator:
            arms += f" (arm names {self.arm_scores[0]}/100, {self.arm_scores[1]}/100)"
        return f"{shown}, {arms}: name {self.name_score}/100, {self.equal_values} equal value(s)"


def normalize_name(name: str) -> str:
    # NFKC first: PDF text prints ligatures ("ﬂexion"), which [a-z] would cut to "exion".
    text = TIMEPOINT.sub(" ", unicodedata.normalize("NFKC", name).lower())
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
    return round(fuzz.token_set_ratio(_singular(a), _singular(b)))


def _singular(text: str) -> str:
    """Words without a plural "s" ("ER visit" and "ER visits" are one name), as ``_stem`` drops it."""
    return " ".join(word[:-1] if _plural(word) else word for word in text.split())


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith("ss") and not word.isdigit()


def equal(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def arm_words(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.casefold())) - ARM_FILLER


def arm_score(gold: str, extracted: str) -> int:
    """How surely two arm names name the same arm, 0-100: the mean of the words they share out of
    the shorter name's (a gold "control" is the paper's "control group, standard care") and out of
    all their words (the word that tells "smokers" from "nonsmokers" counts); 0 when both print
    numbers and they differ ("1 mg" / "2 mg")."""
    a, b = arm_words(gold), arm_words(extracted)
    numbers_a, numbers_b = {w for w in a if w.isdigit()}, {w for w in b if w.isdigit()}
    if not a or not b or (numbers_a and numbers_b and numbers_a != numbers_b):
        return 0
    shared = len(a & b)
    return round(100 * (shared / min(len(a), len(b)) + shared / len(a | b)) / 2)


def _equal_side(gold: GoldOutcome, side: str, arm: ExtractedArm) -> int:
    return sum(
        1 for name, value in gold.arm_values(side).items() if name in arm.values and equal(value, arm.values[name])
    )


def _arm_pairs(gold: GoldOutcome, outcome: ExtractedOutcome) -> list[tuple[ExtractedArm, ExtractedArm, bool]]:
    """The outcome's ordered arm pairs a gold row may be, each with whether the pair stands by
    position alone (no arm names to compare)."""
    if outcome.version == 1:
        by_key = {arm.key: arm for arm in outcome.arms}
        pair = (by_key.get("treatment"), by_key.get("control"))
        return [(pair[0], pair[1], True)] if pair[0] and pair[1] else []
    by_position = not (gold.intervention or gold.comparator) and len(outcome.arms) == 2
    return [(a, b, by_position) for a in outcome.arms for b in outcome.arms if a is not b]


def match_comparisons(gold: list[GoldOutcome], extracted: list[ExtractedOutcome]) -> list[Match]:
    """One Match per gold row (``extracted`` None when nothing qualifies), in gold order."""
    candidates = []
    for g, row in enumerate(gold):
        for e, outcome in enumerate(extracted):
            names = name_score(row.outcome, outcome.name)
            for p, (arm, comparator, by_position) in enumerate(_arm_pairs(row, outcome)):
                sides = (arm, comparator)
                by_side = list(zip(SIDES, sides, strict=True))
                values = [_equal_side(row, side, extracted_arm) for side, extracted_arm in by_side]
                scores = [arm_score(row.arm_name(side), extracted_arm.name) for side, extracted_arm in by_side]
                arms_hold = by_position or all(s >= ARM_ENOUGH or v >= 1 for s, v in zip(scores, values, strict=True))
                equal_values = sum(values)
                outcome_holds = (
                    names >= NAME_ENOUGH
                    or equal_values >= VALUES_ENOUGH
                    or (equal_values >= 1 and names >= NAME_WITH_ONE_VALUE)
                )
                if arms_hold and outcome_holds:
                    score = names + ARM_WEIGHT * sum(scores) + VALUE_WEIGHT * equal_values
                    candidates.append((score, g, e, p, names, equal_values, sides, (scores[0], scores[1])))
    chosen: dict[int, Match] = {}
    taken: set[tuple[int, int]] = set()
    for _score, g, e, p, names, equal_values, sides, arm_scores in sorted(
        candidates, key=lambda c: (-c[0], c[1], c[2], c[3])
    ):
        if g in chosen or (e, p) in taken:
            continue
        chosen[g] = Match(gold[g], extracted[e], names, equal_values, sides, arm_scores)
        taken.add((e, p))
    return [chosen.get(g, Match(row, None, 0, 0)) for g, row in enumerate(gold)]


# Words that name no outcome ("the incidence of ... at 24 h" keeps "incid", "24", "h").
NAME_FILLER = {"a", "an", "the", "of", "and", "or", "in", "at", "on", "for", "to", "with", "by", "from", "vs", "versus"}
NAME_STEM = 5  # word forms by their first letters: "complication" and "complications"


def name_words(name: str) -> set[str]:
    """An outcome name's words as stems, abbreviations spelled out, numbers whole; time words kept
    ("Mortality at 28 days" has "28" and "days", where ``normalize_name`` drops them)."""
    text = name.lower()
    for british, american in SPELLING:
        text = text.replace(british, american)
    words = " ".join(ABBREVIATIONS.get(word, word) for word in re.findall(r"[a-z0-9]+", text)).split()
    return {_stem(word) for word in words if word not in NAME_FILLER}


def _stem(word: str) -> str:
    if word.isdigit():
        return word
    if _plural(word):
        word = word[:-1]  # "days" and "28-day"
    return word[:NAME_STEM]


def label_names(label: str, name: str, names: Iterable[str]) -> bool:
    """Does a label (a table row's, a sentence's) name the outcome ``name``, among the outcome
    names ``names`` of the same paper? It must be like the name (``name_score`` >= NAME_ENOUGH); against each
    other name sharing a word with it, hold a word that sets the name apart ("Systolic" against
    "Diastolic blood pressure"), and not hold all that sets the other apart while holding nothing
    of its own: "Mortality at 28 days" names "Mortality at 28 days", not "Mortality", when the paper
    has both. An acronym of the
    name in the label ("SBP") holds all its words."""
    if name_score(name, label) < NAME_ENOUGH:
        return False
    own, said = name_words(name), name_words(label)
    spelled = normalize_name(name)
    if any(_acronym(token, spelled) for token in normalize_name(label).split()):
        said |= own
    for other in names:
        theirs = name_words(other)
        if theirs == own or not theirs & own:
            continue  # the same name, or one that shares no word with it: nothing to tell apart
        mine, its = own - theirs, theirs - own
        if mine and not mine & said:
            return False  # nothing that sets this name apart from the other is in the label
        if its and its <= said and not mine & said:
            return False  # the label holds what sets the other apart, and nothing of this one's
    return True
