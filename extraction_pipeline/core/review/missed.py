"""What a reviewer does with a document's "possibly missed" list: dismiss an item, or turn it into
a value.

The list is the recall check's (``core.verification.recall``), stored with the document's result.
Dismissing says "read it, nothing was left out". Turning an item into a value corrects one of the
document's values with the number the item shows (its row or sentence as the quote, grounded on
the spot, as every correction is), so it reaches the form, the CSV and the workbook like any
decision; the item is then marked as turned into that value. Both are appended, never updated;
the latest per item holds, and an item can be reopened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import insert, select

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.database import utcnow
from extraction_pipeline.core.ledger.schema import batch_items, missed_reviews
from extraction_pipeline.core.review.form import field_title
from extraction_pipeline.core.verification.recall import PossiblyMissed


class MissedAction(StrEnum):
    DISMISSED = "dismissed"
    ADDED = "turned into a value"
    REOPENED = "reopened"


@dataclass(frozen=True)
class MissedReview:
    action: MissedAction
    reviewer: str
    decided_at: datetime
    path: str | None = None

    @property
    def label(self) -> str:
        if self.action == MissedAction.ADDED:
            return f"turned into {field_title(self.path or '')} by {self.reviewer}"
        return f"{self.action.value} by {self.reviewer}"

    @property
    def open(self) -> bool:
        return self.action == MissedAction.REOPENED


def missed_of(result_json: str | None) -> list[PossiblyMissed] | None:
    """The stored list; None for a result from before the recall check (never checked)."""
    if not result_json:
        return None
    stored = json.loads(result_json).get("possibly_missed")
    if stored is None:
        return None
    return [PossiblyMissed.from_dict(entry) for entry in stored]


def record_missed_review(
    ledger: Ledger, *, item_id: int, key: str, action: MissedAction, reviewer: str, path: str | None = None
) -> MissedReview:
    """Record ``action`` on the item's listed ``key``; refused for a key the list does not hold."""
    with ledger.engine.connect() as conn:
        result_json = conn.execute(select(batch_items.c.result_json).where(batch_items.c.id == item_id)).scalar()
    listed = missed_of(result_json) or []
    if key not in {item.key for item in listed}:
        raise ConfigError(f"item {item_id} lists no possibly missed {key!r}")
    reviewer = " ".join((reviewer or "").split())
    if not reviewer:
        raise ConfigError("a reviewer name is required")
    now = utcnow()
    with ledger.engine.begin() as conn:
        conn.execute(
            insert(missed_reviews).values(
                item_id=item_id, key=key, action=action.value, path=path, reviewer=reviewer, decided_at=now
            )
        )
    return MissedReview(action, reviewer, now, path)


def current_missed_reviews(ledger: Ledger, item_ids: list[int]) -> dict[tuple[int, str], MissedReview]:
    """(item id, key) -> the latest review, for the given items; reopened items are left out."""
    if not item_ids:
        return {}
    statement = select(missed_reviews).where(missed_reviews.c.item_id.in_(item_ids)).order_by(missed_reviews.c.id)
    latest: dict[tuple[int, str], MissedReview] = {}
    with ledger.engine.connect() as conn:
        for row in conn.execute(statement).mappings():
            latest[(row["item_id"], row["key"])] = MissedReview(
                MissedAction(row["action"]), row["reviewer"], row["decided_at"], row["path"]
            )
    return {key: review for key, review in latest.items() if not review.open}
