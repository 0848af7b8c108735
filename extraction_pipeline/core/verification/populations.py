"""Whose number it is: a claim for a subgroup (females, "when the patients had BMI > 30") or a
group named by what it lacks ("nonsmokers") needs a place that names that group, not the whole
sample or the opposite group.
"""

from __future__ import annotations

import re

from extraction_pipeline.core.verification.arm_names import whose
from extraction_pipeline.core.verification.claimed import Claim
from extraction_pipeline.core.verification.kinds import shown
from extraction_pipeline.core.verification.places import TABLE, Place
from extraction_pipeline.core.verification.vocabulary import Vocabulary, stems

# The part of a claim that narrows it to some of the arm's people: "SVR when the patients had
# BMI > 30 kg/m2", "quality of life - females".
SUBGROUP = re.compile(
    r"\b(?:if|when|in|among|for)\s+(?:the\s+)?(?:patients|participants|subjects|those|people|children|infants)"
    r"\s+(?:who\s+)?(?:had|have|has|with|having|were|are)\s+(?P<what>.+)$",
    re.IGNORECASE,
)
FEMALE = re.compile(r"\b(?:females?|women|woman|girls?)\b", re.IGNORECASE)
MALE = re.compile(r"\b(?:males?|men|man|boys?)\b", re.IGNORECASE)
# Where a paper names its whole population ("... in genotype 2 patients"): the first page's start.
TITLE_CHARS = 1500


def subgroup_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """A number claimed for a subgroup (the outcome or arm says "- females", "if the patients had
    the TT genotype") quoted from a place that does not name that subgroup: the whole sample's
    number, or another subgroup's. A qualifier the paper's title page names whole is the trial's
    population, not a subgroup."""
    context = (
        " ".join([place.row_label, *place.headings, *place.groups, *place.columns, place.caption])
        if place.kind == TABLE
        else f"{place.before} {place.sentence}"
    )
    if place.kind != TABLE and place.sentence[:1].islower():
        return None  # a sentence whose start is on another page or column: who it is about is not seen
    claimed = f"{claim.outcome} {claim.arm} {whose(claim) if whose(claim) != claim.arm else ''}"
    # The column's headers and the group line over the rows say whose number it is.
    contrary = opposed(claimed, " ".join([*place.columns, *place.groups[:1]])) if place.kind == TABLE else None
    if contrary:
        return f"the claim is for '{contrary[0]}'; the quoted place is for '{contrary[1]}'"
    title = vocabulary.parsed.pages_text[0][:TITLE_CHARS] if vocabulary.parsed.pages_text else ""
    for sex, word in ((FEMALE, "female"), (MALE, "male")):
        if sex.search(claimed) and not sex.search(context) and not sex.search(title):
            return f"the claim is for {word} participants; the quoted place does not name them"
    found = SUBGROUP.search(claim.outcome)
    if found is None:
        return None
    wanted = vocabulary.stems_of(found.group("what"))
    if not wanted or wanted <= stems(title) or wanted & vocabulary.stems_of(context):
        return None
    return f"the claim is for patients who had {shown(found.group('what'))}; the quoted place does not name them"


# "Non-smokers", "nonsmokers", "without diabetes", "no history": a group defined by what it lacks.
NEGATED_WORD = re.compile(r"\b(?:non[- ]?|without\s+|no\s+)([a-z]{3,})", re.IGNORECASE)


def opposed(claimed: str, context: str) -> tuple[str, str] | None:
    """A group the claim names ("smokers") where the place names its opposite ("Nonsmokers"), or
    the reverse: (the claim's words, the place's). A place naming both says nothing."""

    def split(text: str) -> tuple[dict[str, str], dict[str, str]]:
        negated = {m.group(1).lower()[:5]: m.group() for m in NEGATED_WORD.finditer(text)}
        rest = NEGATED_WORD.sub(" ", text)
        plain = {word.lower()[:5]: word for word in re.findall(r"[A-Za-z]{3,}", rest)}
        return plain, negated

    claim_plain, claim_negated = split(claimed)
    place_plain, place_negated = split(context)
    for stem, word in claim_plain.items():
        if stem in place_negated and stem not in place_plain and stem not in claim_negated:
            return word, place_negated[stem]
    for stem, words in claim_negated.items():
        if stem in place_plain and stem not in place_negated and stem not in claim_plain:
            return words, place_plain[stem]
    return None
