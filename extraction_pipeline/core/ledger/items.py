"""The item state machine.

    pending --claim--> extracting --complete--> completed
       ^                   |
       +---- release ------+ (transient error, before the error is raised for retry)
                           +--- fail / sweep / reconcile ---> error

Every transition is a single conditional UPDATE that names the state it leaves (and, for the
transitions a worker makes, the run that holds the item). A transition that matches no row
changes nothing and returns ``False``: a duplicate or late execution can never overwrite a
finished item or steal one that is being worked on.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, insert, select, update

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.rows import ItemRow, item_row
from extraction_pipeline.core.ledger.schema import ItemStatus, batch_items, item_history
from extraction_pipeline.core.usage import Usage

MAX_MESSAGE_CHARS = 2000
# Starts the message of an item released after a transient error (it will be retried).
TRANSIENT_MESSAGE_PREFIX = "transient, will retry: "
DISPATCHER = "dispatcher"  # batch_items.dispatched_by of the batch_dispatcher sensor's marks


def _truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 1] + "…"


def _transition(
    ledger: Ledger, item_id: int, where: list[Any], values: dict[str, Any], *, noted: tuple[str, str] | None = None
) -> bool:
    """``noted``: (event, what happened) appended to the item's history with the transition, in
    the same transaction: the document's story is told when it completes (``journey``)."""
    now = utcnow()
    statement = update(batch_items).where(and_(batch_items.c.id == item_id, *where)).values(updated_at=now, **values)
    with ledger.engine.begin() as conn:
        before = None
        if noted is not None:
            before = conn.execute(select(batch_items).where(batch_items.c.id == item_id)).mappings().first()
        if conn.execute(statement).rowcount != 1:
            return False
        if noted is not None and before is not None:
            event, message = noted
            row = history_row(item_row(before), event, str(values.get("status", before["status"])), message, "run", now)
            conn.execute(insert(item_history).values(**{**row, "message": _truncate(message)}))
        return True


def claim(ledger: Ledger, item_id: int, *, run_id: str, worker: str, dispatch_round: int | None = None) -> bool:
    """pending -> extracting. Only the caller that wins this update may call the LLM.

    ``dispatch_round``: the round the run was launched for. A run of an older round (e.g. a late
    automatic retry of a run whose item has since been requeued) must not take the item from the
    newer round's run."""
    now = utcnow()
    where = [batch_items.c.status == ItemStatus.PENDING]
    if dispatch_round is not None:
        where.append(batch_items.c.dispatch_round == dispatch_round)
    return _transition(
        ledger,
        item_id,
        where,
        {
            "status": ItemStatus.EXTRACTING,
            "run_id": run_id,
            "worker": worker,
            "started_at": now,
            "attempts": batch_items.c.attempts + 1,
            "message": None,
        },
    )


def take_over(ledger: Ledger, item_id: int, *, dead_run_id: str, run_id: str, worker: str) -> bool:
    """extracting (held by a run whose worker died) -> extracting (held by its retry run).

    Only Dagster's automatic retry of the crashed run calls this, naming the crashed run id,
    so a healthy holder can never be displaced.
    """
    return _transition(
        ledger,
        item_id,
        [batch_items.c.status == ItemStatus.EXTRACTING, batch_items.c.run_id == dead_run_id],
        {
            "run_id": run_id,
            "worker": worker,
            "started_at": utcnow(),
            "attempts": batch_items.c.attempts + 1,
            "message": f"taken over from run {dead_run_id}, whose worker died",
        },
        noted=("taken over", f"its run's worker died (run {dead_run_id}); Dagster's retry of the run took it over"),
    )


def usage_increments(usage: Usage) -> dict[str, Any]:
    """The item's counters, each raised by what ``usage`` adds (in the UPDATE itself: two runs
    adding at once both count)."""
    return {
        "tokens_in": batch_items.c.tokens_in + usage.tokens_in,
        "tokens_out": batch_items.c.tokens_out + usage.tokens_out,
        "cost_usd": batch_items.c.cost_usd + usage.cost_usd,
        "cached_tokens": batch_items.c.cached_tokens + usage.cached_tokens,
        "saved_usd": batch_items.c.saved_usd + usage.saved_usd,
        "cache_written_tokens": batch_items.c.cache_written_tokens + usage.cache_written_tokens,
        "abandoned_calls": batch_items.c.abandoned_calls + usage.abandoned_calls,
    }


def complete(ledger: Ledger, item_id: int, *, run_id: str, result: dict[str, Any], usage: Usage) -> bool:
    """extracting (held by ``run_id``) -> completed, with the result and its cost, and in its
    message what it went through on the way (``journey``), if anything."""
    return _transition(
        ledger,
        item_id,
        [batch_items.c.status == ItemStatus.EXTRACTING, batch_items.c.run_id == run_id],
        {
            "message": _completed_message(ledger, item_id, result),
            "status": ItemStatus.COMPLETED,
            "finished_at": utcnow(),
            "failing_since": None,
            "result_json": json.dumps(result, ensure_ascii=False),
            "model": usage.model,
            **usage_increments(usage),
        },
    )


def release(
    ledger: Ledger, item_id: int, *, run_id: str, message: str, usage: Usage | None = None, failing: bool = True
) -> bool:
    """extracting -> pending after a transient error, *before* the error is raised for retry.

    ``failing``: the document's call failed (rate limit, outage); ``failing_since`` then records
    when the streak began. An interrupted run hands the document back without that mark."""
    values: dict[str, Any] = {"status": ItemStatus.PENDING, "message": _truncate(message)}
    if failing:
        values["failing_since"] = func.coalesce(batch_items.c.failing_since, utcnow())
    if usage is not None:
        values.update(usage_increments(usage))
    cause = message.removeprefix(TRANSIENT_MESSAGE_PREFIX)
    return _transition(
        ledger,
        item_id,
        [batch_items.c.status == ItemStatus.EXTRACTING, batch_items.c.run_id == run_id],
        values,
        noted=("transient", cause) if failing else ("handed back", f"handed back unfinished: {cause}"),
    )


ANY_RUN = "*"


def fail(
    ledger: Ledger,
    item_id: int,
    *,
    message: str,
    from_status: ItemStatus = ItemStatus.EXTRACTING,
    run_id: str | None = ANY_RUN,
    usage: Usage | None = None,
    by_run: str | None = None,
) -> bool:
    """``from_status`` -> error with a message. Permanent: nothing retries an errored item.

    ``run_id`` names the run that must still hold the item (``None``: no run ever claimed it);
    the default ``ANY_RUN`` does not check the holder. ``by_run``: the run that found the cause
    (recorded on an item no run had claimed yet, e.g. a PDF that failed to parse)."""
    where: list[Any] = [batch_items.c.status == from_status]
    if run_id is None:
        where.append(batch_items.c.run_id.is_(None))
    elif run_id != ANY_RUN:
        where.append(batch_items.c.run_id == run_id)
    values: dict[str, Any] = {"status": ItemStatus.ERROR, "message": _truncate(message), "finished_at": utcnow()}
    if by_run is not None:
        values["run_id"] = by_run
    if usage is not None:
        values.update(model=usage.model, **usage_increments(usage))
    return _transition(ledger, item_id, where, values)


def stale_items(ledger: Ledger, *, idle: timedelta, now: datetime | None = None) -> list[ItemRow]:
    """Items ``extracting`` with no update for ``idle``: candidates for the sweep. The clock is
    ``updated_at`` (when extraction last moved), never the batch's creation time, so queue time
    never counts. Whether one is really abandoned depends on its run (the sensor asks Dagster)."""
    now = now or utcnow()
    statement = select(batch_items).where(
        batch_items.c.status == ItemStatus.EXTRACTING, batch_items.c.updated_at < now - idle
    )
    with ledger.engine.connect() as conn:
        return [item_row(row) for row in conn.execute(statement).mappings()]


def sweep(ledger: Ledger, item: ItemRow, *, idle: timedelta, reason: str) -> bool:
    """extracting -> error for a stale item whose run is known to be gone. Conditional on the
    holder and on ``updated_at`` as read, so an item that moved meanwhile is left alone."""
    minutes = idle.total_seconds() / 60
    message = f"swept: extracting with no progress for over {minutes:g} min; {reason}"
    return _transition(
        ledger,
        item["id"],
        [
            batch_items.c.status == ItemStatus.EXTRACTING,
            _holder_is(item["run_id"]),
            batch_items.c.updated_at == item["updated_at"],
        ],
        {"status": ItemStatus.ERROR, "message": _truncate(message), "finished_at": utcnow()},
    )


def _holder_is(run_id: str | None) -> Any:
    return batch_items.c.run_id.is_(None) if run_id is None else batch_items.c.run_id == run_id


def requeue(
    ledger: Ledger, item: ItemRow, *, message: str, actor: str = "batch_aggregator", event: str = "requeue"
) -> bool:
    """pending/extracting (as read, same holder) -> pending in a new dispatch round: every run of
    the item ended without finishing it (worker died, run interrupted), and the cause was not the
    document's. The dispatcher launches a fresh run; the history keeps what happened."""
    now = utcnow()
    statement = (
        update(batch_items)
        .where(
            batch_items.c.id == item["id"],
            batch_items.c.status == item["status"],
            _holder_is(item["run_id"]),
            batch_items.c.dispatch_round == item["dispatch_round"],
        )
        .values(
            status=ItemStatus.PENDING,
            dispatched_at=None,
            dispatch_round=batch_items.c.dispatch_round + 1,
            message=_truncate(message),
            updated_at=now,
        )
    )
    with ledger.engine.begin() as conn:
        if conn.execute(statement).rowcount != 1:
            return False
        conn.execute(insert(item_history).values(**history_row(item, event, ItemStatus.PENDING, message, actor, now)))
    return True


def history_row(item: ItemRow, event: str, to_status: str, message: str, actor: str, now: datetime) -> dict[str, Any]:
    return {
        "item_id": item["id"],
        "batch_id": item["batch_id"],
        "event": event,
        "from_status": item["status"],
        "to_status": to_status,
        "run_id": item["run_id"],
        "attempts": item["attempts"],
        "message": _truncate(f"{message} (was: {item['message'] or item['status']})"),
        "actor": actor[:200],
        "created_at": now,
    }


def add_usage(ledger: Ledger, item_id: int, usage: Usage) -> None:
    """Count tokens and cost that were paid for but whose result was discarded (the item was no
    longer this run's). Bookkeeping, not a state change: money spent is never lost."""
    statement = update(batch_items).where(batch_items.c.id == item_id).values(**usage_increments(usage))
    with ledger.engine.begin() as conn:
        conn.execute(statement)


def note_waited(ledger: Ledger, item_id: int, *, run_id: str, cause: str) -> None:
    """The item's call was refused for the provider's rate limit and waits to be sent again, in
    the same attempt (``cause``: the refusal). Told in its story, not a transition: it stays
    ``extracting``, held by ``run_id``."""
    now = utcnow()
    with ledger.engine.begin() as conn:
        item = (
            conn.execute(
                select(batch_items).where(
                    batch_items.c.id == item_id,
                    batch_items.c.status == ItemStatus.EXTRACTING,
                    batch_items.c.run_id == run_id,
                )
            )
            .mappings()
            .first()
        )
        if item is None:
            return
        message = f"waited out: {cause}"
        row = history_row(item_row(item), "waited", ItemStatus.EXTRACTING, message, "run", now)
        conn.execute(insert(item_history).values(**{**row, "message": _truncate(message)}))


def item_history_of(ledger: Ledger, item_id: int) -> list[dict[str, Any]]:
    statement = select(item_history).where(item_history.c.item_id == item_id).order_by(item_history.c.id)
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(statement).mappings()]


# What each history event means for the document, when it is told as a story.
_JOURNEY_EVENTS = ("transient", "waited", "handed back", "taken over", "resumed", "requeue", "retry")


def _completed_message(ledger: Ledger, item_id: int, result: dict[str, Any]) -> str | None:
    """A completed document's message (what ``history`` shows): its ``journey``, and each answer
    cut at the output limit and asked again in smaller questions (the result's notes, which the
    workbook names too)."""
    cuts = [str(note["cut"]) for note in result.get("parts") or [] if isinstance(note, dict) and note.get("cut")]
    told = journey(ledger, item_id)
    if not cuts:
        return told
    return _truncate("; ".join([told or "completed", *cuts]) if told else f"completed after: {'; '.join(cuts)}")


RETRIED_ERROR_CHARS = 300  # of a retried document's error in its story, so who retried it stays in


def journey(ledger: Ledger, item_id: int) -> str | None:
    """What a document went through before completing, in words, from its history: "completed on
    attempt 3, after: HTTP 429 RateLimitError: Rate limit reached (2 times); dispatched again
    (round 1): run 1f2e… ended FAILURE while extracting (its worker died or was stopped)". None
    when nothing happened on the way (the document completed at its first attempt)."""
    with ledger.engine.connect() as conn:
        attempts = conn.execute(select(batch_items.c.attempts).where(batch_items.c.id == item_id)).scalar()
        rows = conn.execute(
            select(item_history.c.event, item_history.c.message)
            .where(item_history.c.item_id == item_id, item_history.c.event.in_(_JOURNEY_EVENTS))
            .order_by(item_history.c.id)
        ).all()
    if not rows:
        return None
    told: dict[str, int] = {}
    for event, message in rows:
        # A requeue's history also says what the item was before (" (was: ...)"): the cause is
        # enough. A retry's is not: what the document failed with is part of its story.
        cause, _, was = (message or "").partition(" (was: ")
        if event == "retry" and was:
            cause = f"{was.removesuffix(')')[:RETRIED_ERROR_CHARS]}; {cause}"
        told[cause] = told.get(cause, 0) + 1
    parts = [cause if count == 1 else f"{cause} ({count} times)" for cause, count in told.items()]
    return _truncate(f"completed on attempt {attempts or 1}, after: {'; '.join(parts)}")


def resume(ledger: Ledger, item_id: int, *, run_id: str, worker: str) -> bool:
    """extracting (held by ``run_id``) -> extracting: the same run re-entering after a step retry
    whose previous attempt failed before it could release the item (e.g. the database was down).
    A run never executes one step twice at the same time, so this cannot create a duplicate."""
    return _transition(
        ledger,
        item_id,
        [batch_items.c.status == ItemStatus.EXTRACTING, batch_items.c.run_id == run_id],
        {"worker": worker, "attempts": batch_items.c.attempts + 1},
        noted=("resumed", "its attempt could not reach the ledger database; the same run resumed it"),
    )


def redispatch_lost(ledger: Ledger, item_id: int, *, dispatched_at: datetime) -> bool:
    """Forget a dispatch that never produced a run, so the dispatcher requests it again."""
    statement = (
        update(batch_items)
        .where(
            batch_items.c.id == item_id,
            batch_items.c.status == ItemStatus.PENDING,
            batch_items.c.dispatched_at == dispatched_at,
        )
        .values(dispatched_at=None, dispatched_by=None, updated_at=utcnow())
    )
    with ledger.engine.begin() as conn:
        return conn.execute(statement).rowcount == 1


def mark_dispatched(ledger: Ledger, item_ids: list[int], *, at: datetime | None = None) -> set[int]:
    """Record that a run is being requested for these pending, undispatched items (bookkeeping,
    not a state change). Returns the ids marked: an item another tick marked first is not."""
    if not item_ids:
        return set()
    at = at or utcnow()
    with ledger.engine.begin() as conn:
        wanted = id_in(batch_items.c.id, conn.dialect.name, item_ids)
        conn.execute(
            update(batch_items)
            .where(
                wanted,
                batch_items.c.status == ItemStatus.PENDING,
                batch_items.c.dispatched_at.is_(None),
            )
            .values(dispatched_at=at, dispatched_by=DISPATCHER)
        )
        marked = conn.execute(select(batch_items.c.id).where(wanted, batch_items.c.dispatched_at == at))
        return set(marked.scalars())


def dispatched_after(ledger: Ledger, after: datetime) -> list[ItemRow]:
    """Pending items the dispatcher marked after ``after`` (indexed on status and dispatched_at);
    not those a run launched from the UI took itself."""
    statement = select(batch_items).where(
        batch_items.c.status == ItemStatus.PENDING,
        batch_items.c.dispatched_at > after,
        batch_items.c.dispatched_by == DISPATCHER,
    )
    with ledger.engine.connect() as conn:
        return [item_row(row) for row in conn.execute(statement).mappings()]


def get_item(ledger: Ledger, item_id: int) -> ItemRow | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(batch_items).where(batch_items.c.id == item_id)).mappings().first()
    return item_row(row) if row else None


def find_item(ledger: Ledger, *, batch_id: int, document_id: int) -> ItemRow | None:
    statement = select(batch_items).where(batch_items.c.batch_id == batch_id, batch_items.c.document_id == document_id)
    with ledger.engine.connect() as conn:
        row = conn.execute(statement).mappings().first()
    return item_row(row) if row else None
