"""The analyst's comparisons of a batch, as the batch page records them: which side each study's
arm is on in each comparison (``arm_sides``, appended like review decisions; the latest row per
arm holds). What a side means and what is proposed when no row says is ``core.synthesis.comparisons``'."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import insert, select

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.database import utcnow
from extraction_pipeline.core.ledger.schema import arm_sides

DEFINED = "defined"  # the side of a row that declares a comparison (no document, no arm)
REMOVED = "removed"  # the side of a row that takes a comparison back (its sides go with it)


@dataclass(frozen=True)
class StoredSide:
    comparison: str
    document_id: int
    arm: str
    arm_name: str
    side: str


@dataclass(frozen=True)
class StoredComparisons:
    """The comparisons in the order they were first named, and the sides in force."""

    names: tuple[str, ...]
    sides: tuple[StoredSide, ...]


def define_comparison(ledger: Ledger, batch_id: int, name: str, reviewer: str) -> None:
    _mark(ledger, batch_id, name, DEFINED, reviewer)


def remove_comparison(ledger: Ledger, batch_id: int, name: str, reviewer: str) -> None:
    """Take a comparison back: appended like the rest, so who removed it and when stays on record;
    naming it again later starts from the proposed sides."""
    _mark(ledger, batch_id, name, REMOVED, reviewer)


def _mark(ledger: Ledger, batch_id: int, name: str, side: str, reviewer: str) -> None:
    """A row about the comparison itself (no document, no arm)."""
    with ledger.engine.begin() as conn:
        conn.execute(
            insert(arm_sides).values(
                batch_id=batch_id,
                comparison=name,
                document_id=None,
                arm="",
                arm_name="",
                side=side,
                reviewer=reviewer,
                decided_at=utcnow(),
            )
        )


def record_sides(ledger: Ledger, batch_id: int, sides: Iterable[StoredSide], reviewer: str) -> int:
    """Append the sides that differ from the ones in force; returns how many were recorded."""
    current = {(s.comparison, s.document_id, s.arm): s.side for s in stored_comparisons(ledger, batch_id).sides}
    rows = [
        {
            "batch_id": batch_id,
            "comparison": side.comparison,
            "document_id": side.document_id,
            "arm": side.arm,
            "arm_name": side.arm_name,
            "side": side.side,
            "reviewer": reviewer,
            "decided_at": utcnow(),
        }
        for side in sides
        if current.get((side.comparison, side.document_id, side.arm)) != side.side
    ]
    if rows:
        with ledger.engine.begin() as conn:
            conn.execute(insert(arm_sides), rows)
    return len(rows)


def stored_comparisons(ledger: Ledger, batch_id: int) -> StoredComparisons:
    statement = select(arm_sides).where(arm_sides.c.batch_id == batch_id).order_by(arm_sides.c.id)
    names: dict[str, None] = {}
    latest: dict[tuple[str, int, str], StoredSide] = {}
    with ledger.engine.connect() as conn:
        for row in conn.execute(statement).mappings():
            if row["side"] == REMOVED:
                names.pop(row["comparison"], None)
                latest = {key: side for key, side in latest.items() if key[0] != row["comparison"]}
                continue
            names.setdefault(row["comparison"], None)
            if row["document_id"] is None:
                continue
            key = (row["comparison"], int(row["document_id"]), row["arm"])
            latest[key] = StoredSide(
                row["comparison"], int(row["document_id"]), row["arm"], row["arm_name"], row["side"]
            )
    return StoredComparisons(tuple(names), tuple(latest.values()))
