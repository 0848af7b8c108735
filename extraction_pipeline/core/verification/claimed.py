"""What a quoted number is claimed to be: of which outcome, arm and time point, as which kind of value."""

from __future__ import annotations

from dataclasses import dataclass

from extraction_pipeline.core.templates.arms import RESULT_FIELDS


@dataclass(frozen=True)
class Claim:
    """What a number is claimed to be: of which outcome, arm and time point, among which arms."""

    outcome: str
    arm: str
    arms: tuple[str, ...]  # every declared arm (the claim's among them)
    kind: str  # events, total, mean, sd, n
    timepoint: str = ""


# The numbers of an arm's result whose place is checked.
PLACED_KINDS = RESULT_FIELDS


COUNTS = ("events", "total", "n")


@dataclass(frozen=True)
class PlacedNumber:
    """A verified arm number with where its quote is and what it is claimed to be."""

    path: str
    kind: str  # events, total, mean, sd, n
    value: object
    page: int
    start: int
    end: int
    outcome: str
    arm: str
    timepoint: str = ""
    total: object = None  # the same entry's total (for the percentage beside events)
