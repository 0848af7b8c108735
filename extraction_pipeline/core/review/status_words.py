"""What a value's status says to a reader: one rule for every page, sheet, CSV and count.

Grounding gives each value a status (``verified``, ``approximate``, ``unverified``, a judgement's,
``not reported``); the checks after it may raise flags on the same value (a number in another
outcome's row, an estimate outside its CI, events above the total). A flagged value is never
shown or counted as plain ``verified``: its status reads ``verified, flagged`` (any status with a
flag gets ", flagged"), and the counts put each value in exactly one tier:

- **verified**: verified and no flag (``trusted``);
- **verified but flagged**: verified, and a check raised at least one flag;
- **approximate**: quote found approximately, flagged or not (never trusted either way);
- **unverified**: flagged or not;
- **judgements**: Risk of Bias levels, outcome type, study label (any judgement status).

A value reported as absent (``not reported``) is in no tier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_STATUSES,
    JUDGEMENT_UNSUPPORTED,
    UNVERIFIED,
    VERIFIED,
)

FLAGGED_SUFFIX = ", flagged"
VERIFIED_BUT_FLAGGED = f"{VERIFIED}{FLAGGED_SUFFIX}"  # what a flagged verified value's status reads
# The colour of a flagged value (orange, as the check cells), unless its own status is already red.
FLAGGED = "flagged"
_RED = (UNVERIFIED, JUDGEMENT_NOT_FOUND, JUDGEMENT_UNSUPPORTED)


class Tier(StrEnum):
    VERIFIED = "verified"
    VERIFIED_FLAGGED = "verified but flagged"
    APPROXIMATE = "approximate"
    UNVERIFIED = "unverified"
    JUDGEMENT = "judgement"


def trusted(entry: GroundedValue) -> bool:
    """Does the value earn the word ``verified``: grounding verified it and no check flagged it?"""
    return entry.status == VERIFIED and not entry.flags


def shown_status(entry: GroundedValue) -> str:
    """The status as every surface writes it: grounding's word, with ", flagged" when a check
    raised a flag (``verified, flagged``)."""
    return f"{entry.status}{FLAGGED_SUFFIX}" if entry.flags else str(entry.status)


def is_flagged_status(text: str) -> bool:
    return text.endswith(FLAGGED_SUFFIX)


def colour_key(text: str) -> str:
    """The status whose colour a status text takes: a flagged one ``FLAGGED`` (orange), unless
    its own status is red (an unverified value stays red, flagged or not)."""
    if not is_flagged_status(text):
        return text
    base = text.removesuffix(FLAGGED_SUFFIX)
    return base if base in _RED else FLAGGED


def tier(entry: GroundedValue) -> Tier | None:
    """The one tier a value is counted in (None: reported as absent, counted nowhere)."""
    if entry.status in JUDGEMENT_STATUSES:
        return Tier.JUDGEMENT
    if entry.status == VERIFIED:
        return Tier.VERIFIED_FLAGGED if entry.flags else Tier.VERIFIED
    if entry.status == APPROXIMATE:
        return Tier.APPROXIMATE
    if entry.status == UNVERIFIED:
        return Tier.UNVERIFIED
    return None


@dataclass(frozen=True)
class StatusCounts:
    """Values per tier: each value counted once. ``approximate_flagged`` is the part of
    ``approximate`` that a check flagged (a breakdown, not another tier)."""

    verified: int = 0
    verified_flagged: int = 0
    approximate: int = 0
    approximate_flagged: int = 0
    unverified: int = 0
    judgements: int = 0

    @property
    def total(self) -> int:
        return self.verified + self.verified_flagged + self.approximate + self.unverified + self.judgements

    def summary(self) -> str:
        """The counts in one line: "12 verified · 1 verified but flagged · 2 approximate (1 flagged) ·
        1 unverified · 5 judgements"."""
        approximate = f"{self.approximate} approximate" + (
            f" ({self.approximate_flagged} flagged)" if self.approximate_flagged else ""
        )
        return " · ".join(
            (
                f"{self.verified} {Tier.VERIFIED}",
                f"{self.verified_flagged} {Tier.VERIFIED_FLAGGED}",
                approximate,
                f"{self.unverified} {Tier.UNVERIFIED}",
                f"{self.judgements} judgement{'' if self.judgements == 1 else 's'}",
            )
        )


def status_counts(entries: Iterable[GroundedValue]) -> StatusCounts:
    counted = {name: 0 for name in Tier}
    approximate_flagged = 0
    for entry in entries:
        found = tier(entry)
        if found is not None:
            counted[found] += 1
            approximate_flagged += found == Tier.APPROXIMATE and bool(entry.flags)
    return StatusCounts(
        verified=counted[Tier.VERIFIED],
        verified_flagged=counted[Tier.VERIFIED_FLAGGED],
        approximate=counted[Tier.APPROXIMATE],
        approximate_flagged=approximate_flagged,
        unverified=counted[Tier.UNVERIFIED],
        judgements=counted[Tier.JUDGEMENT],
    )
