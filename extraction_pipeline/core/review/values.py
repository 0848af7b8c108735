"""Which extracted values a reviewer decides on, and what each one's final value is.

A reviewable value is one the Values sheet lists: every field the model answered (a value or at
least a quote, ``GroundedValue.reviewable``). Fields reported as absent need no decision; a
document is *reviewed* when every reviewable value has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from extraction_pipeline.core.extraction.consensus import NEEDS_REVIEW
from extraction_pipeline.core.extraction.grounded import GroundedValue, fields_of, second_fields_of
from extraction_pipeline.core.review.status_words import shown_status
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_SUPPORTED,
    JUDGEMENT_UNSUPPORTED,
    NOT_REPORTED,
    UNVERIFIED,
    VERIFIED,
    GroundingStatus,
)

APPROVE = "approve"
CORRECT = "correct"
MARK_NOT_REPORTED = "not reported"
COMMENT = "comment"
DECISIONS = (APPROVE, CORRECT, MARK_NOT_REPORTED)
ACTIONS = (*DECISIONS, COMMENT)
# Review order: what most needs a human first.
_STATUS_ORDER: dict[GroundingStatus, int] = {
    UNVERIFIED: 0,
    JUDGEMENT_NOT_FOUND: 0,
    JUDGEMENT_UNSUPPORTED: 0,
    APPROXIMATE: 2,
    JUDGEMENT_APPROXIMATE: 2,
    JUDGEMENT_SUPPORTED: 3,  # a judgement is the model's reading even with its quote found: before verified numbers
    VERIFIED: 4,
    NOT_REPORTED: 5,
}


@dataclass(frozen=True)
class ReviewableValue:
    """A value a reviewer decides on: the first model's grounded value and, with double
    extraction, how the second model's answer compares and what the adjudicator suggests."""

    path: str
    machine: GroundedValue
    agreement: str | None = None  # consensus.AGREE, DISAGREE, FIRST_ONLY, SECOND_ONLY; None: one model
    second: GroundedValue | None = None
    second_model: str | None = None
    suggestion: str | None = None

    @property
    def disputed(self) -> bool:
        return self.agreement in NEEDS_REVIEW

    @property
    def rank(self) -> tuple[int, int]:
        """Sort key: the two models' disagreements first, then unverified, flagged, approximate, verified."""
        if self.disputed:
            return -1, 0
        status_rank = _STATUS_ORDER.get(self.machine.status, 0)
        if self.machine.flags and status_rank > 1:
            status_rank = 1
        return status_rank, 0

    @property
    def needs_attention(self) -> bool:
        """Unverified, quote not found, flagged, or disputed."""
        return self.rank[0] <= 1


def reviewable_values(result_json: str | None) -> dict[str, ReviewableValue]:
    """path -> value for every value of a stored result that needs a decision; with double
    extraction a value only the second model found is reviewable too."""
    if not result_json:
        return {}
    result = json.loads(result_json)
    agreement: dict[str, str] = result.get("agreement") or {}
    second = second_fields_of(result)
    model = (result.get("second") or {}).get("model")
    found = {}
    for path, entry in fields_of(result).items():
        if not entry.reviewable and agreement.get(path) not in NEEDS_REVIEW:
            continue
        found[path] = ReviewableValue(
            path, entry, agreement.get(path), second.get(path), model, suggestion_of(result, path)
        )
    return found


def empty_paths(result_json: str | None) -> frozenset[str]:
    """The paths of the fields the model left empty (no value, no quote): a reviewer may set each
    one (a value with an optional quote, or "not reported"), and a value so set is a decided value
    like any other."""
    if not result_json:
        return frozenset()
    result = json.loads(result_json)
    reviewable = reviewable_values(result_json)
    return frozenset(path for path in fields_of(result) if path not in reviewable)


def in_review_order(values: dict[str, ReviewableValue]) -> list[ReviewableValue]:
    """What most needs a human first; the template's order among equals."""
    return [value for _, value in sorted(enumerate(values.values()), key=lambda pair: (pair[1].rank, pair[0]))]


def suggestion_of(result: dict[str, Any], path: str) -> str | None:
    """The adjudicator's suggestion for a disputed value, as text ("second (model): reason")."""
    adjudication = result.get("adjudication") or {}
    suggested = (adjudication.get("suggestions") or {}).get(path)
    if not suggested:
        return None
    reason = f": {suggested['reason']}" if suggested.get("reason") else ""
    return f"{suggested['choice']} ({adjudication.get('model')}){reason}"


@dataclass(frozen=True)
class Decision:
    """The latest decision on one value (comments aside)."""

    id: int
    item_id: int
    path: str
    seq: int
    action: str
    machine_value: Any
    value: Any  # the final value: the machine's (approve), the reviewer's (correct), None (not reported)
    quote: str | None
    grounding: dict[str, Any] | None
    comment: str | None
    reviewer: str
    origin: str
    created_at: Any

    def same_outcome(self, action: str, value: Any) -> bool:
        """Would deciding (action, value) change nothing?"""
        if action != self.action:
            return False
        return action != CORRECT or _comparable(value) == _comparable(self.value)


def _comparable(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


# A corrected number that no grounded quote supports: the reviewer's word, not the paper's.
REVIEWER_UNGROUNDED = "reviewer's value, not grounded"


def final_status(entry: GroundedValue | None, decision: Decision | None) -> str:
    """The status of the final value: the machine's when approved (or undecided) — "verified,
    flagged" when a check flagged it, approved or not —, the corrected quote's grounding when the
    reviewer gave one, else "reviewer's value, not grounded" (never the machine's "verified"
    beside a number the machine did not find)."""
    if decision is None or decision.action == APPROVE:
        return shown_status(entry) if entry else ""
    if decision.action == MARK_NOT_REPORTED:
        return str(NOT_REPORTED)
    grounding = decision.grounding or {}
    return str(grounding.get("status") or REVIEWER_UNGROUNDED)


def final_value(entry: GroundedValue | None, decision: Decision | None) -> Any:
    """The value a decision leaves: the reviewer's correction, nothing when marked not reported,
    else the machine's."""
    if decision is not None and decision.action == CORRECT:
        return decision.value
    if decision is not None and decision.action == MARK_NOT_REPORTED:
        return None
    return entry.value if entry else None


def decision_label(decision: Decision | None) -> str:
    if decision is None:
        return ""
    return f"{decision.action} by {decision.reviewer}"
