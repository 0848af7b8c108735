"""Which extracted values a reviewer decides on, and what each one's final value is.

A reviewable value is one the Values sheet lists: every field the model answered (a value or at
least a quote). Fields reported as absent need no decision; a document is *reviewed* when every
reviewable value has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from extraction_pipeline.core.extraction.consensus import NEEDS_REVIEW
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_SUPPORTED,
    JUDGEMENT_UNSUPPORTED,
    NOT_REPORTED,
    UNVERIFIED,
    VERIFIED,
)

APPROVE = "approve"
CORRECT = "correct"
MARK_NOT_REPORTED = "not reported"
COMMENT = "comment"
DECISIONS = (APPROVE, CORRECT, MARK_NOT_REPORTED)
ACTIONS = (*DECISIONS, COMMENT)
# Review order: what most needs a human first.
_STATUS_ORDER: dict[str, int] = {
    UNVERIFIED: 0,
    JUDGEMENT_NOT_FOUND: 0,
    JUDGEMENT_UNSUPPORTED: 0,
    APPROXIMATE: 2,
    JUDGEMENT_APPROXIMATE: 2,
    JUDGEMENT_SUPPORTED: 3,  # a judgement is the model's reading even with its quote found: before verified numbers
    VERIFIED: 4,
    NOT_REPORTED: 5,
}


def is_reviewable(entry: dict[str, Any]) -> bool:
    return entry.get("status") != NOT_REPORTED or entry.get("value") is not None


def reviewable_values(result_json: str | None) -> dict[str, dict[str, Any]]:
    """path -> entry for every value of a stored result that needs a decision. With double
    extraction each entry also carries ``agreement`` and the second model's entry (``second``),
    and a value only the second model found is reviewable too."""
    if not result_json:
        return {}
    result = json.loads(result_json)
    fields: dict[str, Any] = result.get("fields", {})
    agreement: dict[str, str] = result.get("agreement") or {}
    second: dict[str, Any] = (result.get("second") or {}).get("fields", {})
    model = (result.get("second") or {}).get("model")
    found = {}
    for path, entry in fields.items():
        if not is_reviewable(entry) and agreement.get(path) not in NEEDS_REVIEW:
            continue
        found[path] = {
            **entry,
            "agreement": agreement.get(path),
            "second": second.get(path),
            "second_model": model,
            "suggestion": suggestion_of(result, path),
        }
    return found


def suggestion_of(result: dict[str, Any], path: str) -> str | None:
    """The adjudicator's suggestion for a disputed value, as text ("second (model): reason")."""
    adjudication = result.get("adjudication") or {}
    suggested = (adjudication.get("suggestions") or {}).get(path)
    if not suggested:
        return None
    reason = f": {suggested['reason']}" if suggested.get("reason") else ""
    return f"{suggested['choice']} ({adjudication.get('model')}){reason}"


def review_rank(entry: dict[str, Any]) -> tuple[int, int]:
    """Sort key: the two models' disagreements first, then unverified, flagged, approximate, verified."""
    if entry.get("agreement") in NEEDS_REVIEW:
        return -1, 0
    status_rank = _STATUS_ORDER.get(str(entry.get("status")), 0)
    if entry.get("flags") and status_rank > 1:
        status_rank = 1
    return status_rank, 0


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


def decision_label(decision: Decision | None) -> str:
    if decision is None:
        return ""
    return f"{decision.action} by {decision.reviewer}"
