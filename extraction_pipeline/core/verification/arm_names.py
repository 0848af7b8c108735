"""Which arm a text names: by the declared arms' own words, their letter ("Drug A"), or a word every
trial uses ("placebo", "intervention"); and which arms are comparison arms.
"""

from __future__ import annotations

import functools
import re

from rapidfuzz import fuzz

from extraction_pipeline.core.verification.claimed import Claim
from extraction_pipeline.core.verification.places import Place
from extraction_pipeline.core.verification.vocabulary import COMPOUND, WORD, Vocabulary, stems, tokens

# Words that name no particular arm ("the placebo group", "patients in the intervention arm").
ARM_GENERIC = {
    "group",
    "groups",
    "arm",
    "arms",
    "patients",
    "patient",
    "participants",
    "subjects",
    "the",
    "and",
    "with",
    "for",
    "who",
    "received",
    "receive",
    "receiving",
    "treated",
    "treatment",
    "day",
    "dose",
    "daily",
}


# Arm names that are time points, not arms ("baseline" as the comparator of a before-after row).
# ... and "baseline (active drug, smokers)": the same group before treatment.
TIME_ARM = re.compile(
    r"^\s*(?:baseline|pre-?treatment|pre-?intervention|before(?: treatment)?|week 0|day 0)\s*(?:\([^)]*\))?\s*$", re.I
)


NEGATED = re.compile(r"\b(?:no|non|not|without)\s+(?:an?\s+|the\s+)?[\w-]+", re.IGNORECASE)


ARM_WORD = re.compile(r"\b(?:placebo|control|controls|intervention|sham|usual|standard)\b", re.IGNORECASE)


CONTROL_WORDS = {"control", "controls", "controlled"}


# Words naming a comparison arm every trial may have ("placebo", "usual care").
CONTROL_ARM = re.compile(r"\b(placebo|controls?|sham|usual care|standard care|no treatment)\b", re.IGNORECASE)
CONTROL_IN_TEXT = re.compile(
    r"\b(placebo|sham|usual care|standard care|no treatment|controls"
    r"|control(?= (?:group|arm|patients|participants|subjects|condition)))\b",
    re.IGNORECASE,
)


ACTIVE_ARM = re.compile(r"\b(?:intervention|experimental|treatment|active|treated)\b", re.IGNORECASE)


# An arm named by a letter or number after a word: "Drug A", "Group 2" (the letter alone is no word).
LETTERED = re.compile(r"\b([A-Za-z]{2,})\s+([A-Z]|\d{1,2})\b(?![.,]\d)")


GROUP_WORDS = 6  # a group's line is a name and its size, not a sentence


ARM_GROUP = re.compile(r"\b(?:n\s*=|groups?\b|arms?\b)", re.IGNORECASE)


def whose(claim: Claim) -> str:
    """The declared arm whose people the claimed number is of: an arm that is a time point
    ("baseline") is the other arm's people before treatment, when there is one other arm."""
    others = [arm for arm in claim.arms if arm != claim.arm and not TIME_ARM.match(arm)]
    return others[0] if TIME_ARM.match(claim.arm) and len(others) == 1 else claim.arm


def arm_stems(claim: Claim, vocabulary: Vocabulary) -> dict[str, frozenset[str]]:
    """Each declared arm's distinguishing stems: its words that not every arm shares."""
    return _distinguishing(claim.arms, vocabulary)


@functools.lru_cache(maxsize=8)  # a few papers at once: each key holds its paper
def _distinguishing(arms: tuple[str, ...], vocabulary: Vocabulary) -> dict[str, frozenset[str]]:
    # Asked for every word of every place checked: computed once per paper and set of arms.
    every = {arm: arm_words(arm, vocabulary) for arm in arms if not TIME_ARM.match(arm)}
    shared = set.intersection(*every.values()) if every else set()
    return {arm: frozenset(words - shared) for arm, words in every.items()}


def arm_words(text: str, vocabulary: Vocabulary) -> set[str]:
    """The words that can name an arm in ``text``: its stems (negations left out) and its lettered
    names ("drug a")."""
    plain = NEGATED.sub(" ", text)
    found = vocabulary.stems_of(plain, ARM_GENERIC)
    if "contr" in found and not {token.lower() for token in tokens(plain)} & CONTROL_WORDS:
        found.discard("contr")  # "Controller medicine", "contraception": no control arm
    lettered = {f"{match.group(1).lower()[:5]} {match.group(2).lower()}" for match in LETTERED.finditer(text)}
    amounts = {f"{m.group(1)} {UNIT[m.group(2).lower()[:2]]}" for m in AMOUNT.finditer(text)}
    coded = {f"{m.group(1)} {UNIT[m.group(2).lower()]}" for m in CODED.finditer(text)}
    return found | lettered | amounts | coded


# An arm's code with its number and unit inside ("SD48W": 48 weeks) and the amount an arm's name
# gives ("for 48 weeks", "2 mg"): arms of one drug differ by it. Number and unit go together, so
# a column "After 2 weeks" names no "2 mg" arm.
CODED = re.compile(r"\b[A-Z]{1,4}(\d{1,3})([WD])\b")
UNIT = {
    "w": "w",
    "we": "w",
    "wk": "w",
    "d": "d",
    "da": "d",
    "mo": "mo",
    "mg": "mg",
    "g": "g",
    "µg": "µg",
    "μg": "µg",
    "ml": "ml",
    "iu": "iu",
}
AMOUNT = re.compile(r"\b(\d{1,4})\s*(mg|g|µg|μg|ml|iu|weeks?|wks?|days?|months?)\b", re.IGNORECASE)
# A dose as printed in a list of groups ("dextrose 5%", "10 mg"): its number and unit as written.
DOSE = re.compile(r"\d+(?:\.\d+)?\s*(?:%|mg|g|µg|μg|ml|iu)\b|\d+(?:\.\d+)?%", re.IGNORECASE)


def named_arms(text: str, claim: Claim, vocabulary: Vocabulary) -> set[str]:
    """The declared arms ``text`` names by a word of their own ("No intervention" names none)."""
    found = arm_words(text, vocabulary)
    return {arm for arm, words in arm_stems(claim, vocabulary).items() if words and words & found}


def mentions(text: str, claim: Claim, vocabulary: Vocabulary) -> list[tuple[int, str | None]]:
    """Where ``text`` speaks of an arm: (offset, the declared arm it names), in order; the arm is
    None for a word of an arm that does not tell which ("Vitamin" of two vitamin arms,
    "placebo" not declared)."""
    every = {arm: vocabulary.stems_of(NEGATED.sub(" ", arm), ARM_GENERIC) for arm in claim.arms}
    words_of_arms = set().union(*every.values()) if every else set()
    found: list[tuple[int, str | None]] = []
    plain = NEGATED.sub(lambda m: " " * len(m.group()), text)
    for match in WORD.finditer(plain):
        named = named_arms(match.group(), claim, vocabulary)
        if len(named) == 1:
            found.append((match.start(), next(iter(named))))
        elif named or ARM_WORD.fullmatch(match.group()) or (stems(match.group(), ARM_GENERIC) & words_of_arms):
            found.append((match.start(), None))
    # "drug A": the lettered name tells which arm its first word ("drug", of both arms) does not;
    # "F-URS": a hyphenated abbreviation names its arm whole, where its parts name none.
    by_offset = dict(found)
    for match in [*LETTERED.finditer(plain), *COMPOUND.finditer(plain)]:
        named = named_arms(match.group(), claim, vocabulary)
        if len(named) == 1:
            by_offset[match.start()] = next(iter(named))
            for inside in range(match.start() + 1, match.end()):  # its parts say no more than it does
                by_offset.pop(inside, None)
    return sorted(by_offset.items())


def names_an_arm(text: str, claim: Claim, vocabulary: Vocabulary) -> bool:
    """Does ``text`` name a declared arm, or an arm in words every trial uses?"""
    return bool(named_arms(text, claim, vocabulary)) or bool(
        re.search(r"\b(?:placebo|control|controls|intervention|sham|usual care|standard care)\b", text, re.I)
    )


def arm_groups(place: Place) -> list[str]:
    """The group lines above a table row that speak of an arm, nearest first (the nearest is the row's)."""
    return [
        line
        for line in place.groups
        if len(line.split()) <= GROUP_WORDS and (ARM_GROUP.search(line) or CONTROL_ARM.search(line))
    ]


def undeclared_arm(text: str, claim: Claim, sentence: bool = False) -> str | None:
    """A comparison arm ``text`` names ("Placebo, n = 28") when no declared arm could be it: no
    declared arm is a comparison arm by its words ("Control", "Placbeo", "without the drug"). In
    running text "control" alone is often an outcome ("glycaemic control", "pain control"): there
    it counts only as "controls" or with a group word ("the control group")."""
    found = (CONTROL_IN_TEXT if sentence else CONTROL_ARM).search(text)
    if found is None or any(comparison_arm(arm) for arm in claim.arms):
        return None
    return found.group(1).lower()


def comparison_arm(arm: str) -> bool:
    """Is ``arm`` named as a comparison arm: a control word (allowing a typo), or a negation
    ("no reminder", "without the drug")?"""
    if NEGATED.search(arm) or CONTROL_ARM.search(arm):
        return True
    control_words = ("placebo", "control", "sham", "usual", "standard")
    return any(fuzz.ratio(word.lower(), known) >= 80 for word in WORD.findall(arm) for known in control_words)


def header_arm(label: str, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """The declared arm a table header names: by its own words, or in a two-arm trial by "control"
    (the one comparison arm) or "intervention" (the other)."""
    if undeclared_arm(label, claim):
        return None  # "Non-smokers (placebo, n = 27)": a group the answer did not declare
    named = named_arms(label, claim, vocabulary)
    if len(named) == 1:
        return next(iter(named))
    groups = [arm for arm in claim.arms if not TIME_ARM.match(arm)]
    if not named and len(groups) == 1 and arm_words(label, vocabulary) & arm_words(groups[0], vocabulary):
        return groups[0]  # one group against its own baseline: a header naming it by a word of its name
    if named or len(claim.arms) != 2:
        return None
    comparison = [arm for arm in claim.arms if comparison_arm(arm)]
    if len(comparison) != 1:
        return None
    if CONTROL_ARM.search(label):
        return comparison[0]
    if ACTIVE_ARM.search(label):
        return next(arm for arm in claim.arms if arm != comparison[0])
    return None


def of_the_trials_arms(label: str, claim: Claim, vocabulary: Vocabulary) -> bool:
    """Does a header speak of the declared arms, not of a population they share a word with? Where
    every arm's name holds a word ("vitamin" of "vitamin E, smokers" and "vitamin E, nonsmokers"),
    a header without it ("Smokers (n = 58)" of a baseline table) counts everyone who smokes."""
    if CONTROL_ARM.search(label) or ACTIVE_ARM.search(label):
        return True  # "Control", "Intervention": the trial's own arms
    every = [arm_words(arm, vocabulary) for arm in claim.arms if not TIME_ARM.match(arm)]
    shared = set.intersection(*every) if every else set()
    return not shared or bool(shared & arm_words(label, vocabulary))
