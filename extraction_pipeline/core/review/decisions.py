"""Recording reviewers' decisions: append-only, and never two decisions from the same state.

Every decision names the state it was made from (``seen_seq``: the value's decision number the
reviewer was looking at, 0 for none). If another decision landed meanwhile and says something
else, the new one is refused as a conflict and the reviewer sees both; the same decision twice is
"unchanged" (re-importing a spreadsheet changes nothing). The ``seq`` UNIQUE constraint settles a
race between two writers the same way: one insert wins, the other is a conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.extraction.consensus import NEEDS_REVIEW
from extraction_pipeline.core.extraction.grounded import GroundedValue, fields_of
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import batch_items, review_decisions
from extraction_pipeline.core.review.values import ACTIONS, APPROVE, COMMENT, CORRECT, MARK_NOT_REPORTED, Decision

RECORDED, UNCHANGED, CONFLICT = "recorded", "unchanged", "conflict"
MAX_COMMENT_CHARS = 2000


@dataclass(frozen=True)
class Outcome:
    kind: str  # RECORDED | UNCHANGED | CONFLICT
    current: Decision | None  # the value's decision after this call
    message: str = ""


def _decision(row: Any) -> Decision:
    return Decision(
        id=row["id"],
        item_id=row["item_id"],
        path=row["path"],
        seq=row["seq"],
        action=row["action"],
        machine_value=_loads(row["machine_value_json"]),
        value=_loads(row["value_json"]),
        quote=row["quote"],
        grounding=_loads(row["grounding_json"]),
        comment=row["comment"],
        reviewer=row["reviewer"],
        origin=row["origin"],
        created_at=row["created_at"],
    )


def _loads(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def current_decisions(ledger: Ledger, batch_id: int) -> dict[tuple[int, str], Decision]:
    """(item id, path) -> the latest decision, for every decided value of the batch."""
    query = (
        select(review_decisions)
        .where(review_decisions.c.batch_id == batch_id, review_decisions.c.seq.is_not(None))
        .order_by(review_decisions.c.seq)
    )
    with ledger.engine.connect() as conn:
        return {(row["item_id"], row["path"]): _decision(row) for row in conn.execute(query).mappings()}


def comments_of(ledger: Ledger, batch_id: int) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """(item id, path) -> every comment (standalone or with a decision), oldest first."""
    query = (
        select(review_decisions)
        .where(review_decisions.c.batch_id == batch_id, review_decisions.c.comment.is_not(None))
        .order_by(review_decisions.c.id)
    )
    found: dict[tuple[int, str], list[dict[str, Any]]] = {}
    with ledger.engine.connect() as conn:
        for row in conn.execute(query).mappings():
            found.setdefault((row["item_id"], row["path"]), []).append(dict(row))
    return found


def audit_trail(ledger: Ledger, item_id: int, path: str) -> list[dict[str, Any]]:
    """Everything ever recorded about one value, oldest first."""
    query = (
        select(review_decisions)
        .where(review_decisions.c.item_id == item_id, review_decisions.c.path == path)
        .order_by(review_decisions.c.id)
    )
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def _latest(conn: Any, item_id: int, path: str) -> Decision | None:
    row = (
        conn.execute(
            select(review_decisions)
            .where(
                review_decisions.c.item_id == item_id,
                review_decisions.c.path == path,
                review_decisions.c.seq.is_not(None),
            )
            .order_by(review_decisions.c.seq.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return _decision(row) if row else None


def machine_entry(ledger: Ledger, item_id: int, path: str) -> tuple[int, GroundedValue]:
    """(batch id, the value's stored entry); ConfigError when the item has no such value."""
    with ledger.engine.connect() as conn:
        row = conn.execute(
            select(batch_items.c.batch_id, batch_items.c.result_json).where(batch_items.c.id == item_id)
        ).first()
    if row is None:
        raise ConfigError(f"unknown item {item_id}")
    fields = fields_of(json.loads(row.result_json) if row.result_json else None)
    if path not in fields:
        raise ConfigError(f"item {item_id} has no value {path!r}")
    return row.batch_id, fields[path]


def _disputed(ledger: Ledger, item_id: int, path: str) -> bool:
    """Did double extraction leave this value to a reviewer (a value only the second model gave)?"""
    with ledger.engine.connect() as conn:
        stored = conn.execute(select(batch_items.c.result_json).where(batch_items.c.id == item_id)).scalar()
    agreement = (json.loads(stored).get("agreement") or {}) if stored else {}
    return agreement.get(path) in NEEDS_REVIEW


def record(
    ledger: Ledger,
    *,
    item_id: int,
    path: str,
    action: str,
    reviewer: str,
    seen_seq: int,
    value: Any = None,
    quote: str | None = None,
    grounding: dict[str, Any] | None = None,
    comment: str | None = None,
    origin: str = "browser",
) -> Outcome:
    """Append a decision (or a comment) on one value. ``value``: the corrected value, already
    checked against the field's type (``corrections.correct`` does that)."""
    reviewer = " ".join((reviewer or "").split())
    if not reviewer:
        raise ConfigError("a reviewer name is required")
    if action not in ACTIONS:
        raise ConfigError(f"unknown decision {action!r}: use one of {', '.join(ACTIONS)}")
    comment = (comment or "").strip()[:MAX_COMMENT_CHARS] or None
    if action == COMMENT and not comment:
        raise ConfigError("a comment needs some text")
    if action == CORRECT and value is None:
        raise ConfigError("a correction needs the corrected value (or mark the value as not reported)")
    batch_id, entry = machine_entry(ledger, item_id, path)
    if action == APPROVE and not entry.reviewable and not _disputed(ledger, item_id, path):
        # A field the model left empty has nothing of the model's to approve (approving would
        # also wipe a value a reviewer set there): from the page and from a workbook alike.
        raise ConfigError("the model reported nothing here to approve: set the value, or mark it not reported")
    final = entry.value if action not in (CORRECT, MARK_NOT_REPORTED) else value
    row = {
        "batch_id": batch_id,
        "item_id": item_id,
        "path": path,
        "action": action,
        "machine_value_json": json.dumps(entry.value),
        "value_json": json.dumps(final) if action != COMMENT else None,
        "quote": quote if action == CORRECT else None,
        "grounding_json": json.dumps(grounding) if grounding is not None and action == CORRECT else None,
        "comment": comment,
        "reviewer": reviewer,
        "origin": origin[:300],
        "created_at": utcnow(),
    }
    with ledger.engine.connect() as conn:
        current = _latest(conn, item_id, path)
    if action == COMMENT:
        with ledger.engine.begin() as conn:
            conn.execute(insert(review_decisions).values(seq=None, **row))
        return Outcome(RECORDED, current, "comment added")
    if current is not None and current.same_outcome(action, final):
        return Outcome(UNCHANGED, current, f"already decided: {current.action} by {current.reviewer}")
    if (current.seq if current else 0) != seen_seq:
        return _conflict(current)
    try:
        with ledger.engine.begin() as conn:
            conn.execute(insert(review_decisions).values(seq=seen_seq + 1, **row))
            recorded = _latest(conn, item_id, path)
    except IntegrityError:
        with ledger.engine.connect() as conn:
            return _conflict(_latest(conn, item_id, path))
    return Outcome(RECORDED, recorded, f"{action} recorded")


def _conflict(current: Decision | None) -> Outcome:
    if current is None:  # a decision seen by the reviewer no longer exists: cannot happen append-only
        return Outcome(CONFLICT, None, "the value's decisions changed meanwhile; reload and decide again")
    when = current.created_at.strftime("%Y-%m-%d %H:%M") if current.created_at else "?"
    shown = json.dumps(current.value)
    return Outcome(
        CONFLICT,
        current,
        f"{current.reviewer} decided '{current.action}' ({shown}) at {when} UTC meanwhile; not overwritten",
    )


def latest_decision_id(ledger: Ledger, batch_id: int) -> int | None:
    """The id of the batch's newest review row (decision or comment), None before any review."""
    with ledger.engine.connect() as conn:
        found = conn.execute(
            select(func.max(review_decisions.c.id)).where(review_decisions.c.batch_id == batch_id)
        ).scalar()
    return int(found) if found is not None else None
