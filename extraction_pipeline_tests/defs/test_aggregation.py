"""The aggregator follows a cursor: a tick reads the runs that ended since the last one (and
their families), not every run of every open batch; the dispatcher finds its own lost dispatches
through its cursor. Real Dagster instance, real ledger file."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
from dagster._core.storage.runs.schema import RunsTable

from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.schema import ItemStatus, batch_items
from extraction_pipeline.defs.sensors import batch_aggregator, batch_dispatcher
from extraction_pipeline_tests.support.dagster_runs import (
    batch_tags,
    failed_run,
    register_trials,
    resources_for,
)


def _aged(instance: dg.DagsterInstance, run_id: str, seconds: float) -> None:
    """Make a run look as if it ended ``seconds`` ago (its row's update time and end time)."""
    ended = datetime.now(UTC) - timedelta(seconds=seconds)
    storage = instance.run_storage
    with storage.connect() as conn:  # type: ignore[attr-defined]
        conn.execute(
            RunsTable.update()
            .where(RunsTable.c.run_id == run_id)
            .values(update_timestamp=ended.replace(tzinfo=None), end_time=ended.timestamp())
        )


def _cursor(checked_at: float, backfills: tuple[int, ...] = (), read_in_full: dict[int, float] | None = None) -> str:
    full = {str(batch): at for batch, at in (read_in_full or {}).items()}
    return json.dumps({"checked_at": checked_at, "backfills": list(backfills), "read_in_full": full})


def _tick(instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, cursor: str | None, grace: float = 0.0) -> str:
    result = batch_aggregator(
        dg.build_sensor_context(
            instance=instance, resources=resources_for(home_ledger, home, grace=grace), cursor=cursor
        )
    )
    assert isinstance(result, dg.SensorResult) and result.cursor
    return result.cursor


def _statuses(home_ledger: Ledger, batch: int) -> list[tuple[str, int]]:
    return [(row["status"], row["dispatch_round"]) for row in batch_item_rows(home_ledger, batch)]


def test_a_tick_with_a_cursor_reads_the_runs_that_ended_since_not_every_run(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    first, second = (row["id"] for row in batch_item_rows(home_ledger, batch))
    tags = batch_tags(home_ledger, batch)
    old = failed_run(instance, {**tags, "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, first, run_id=old, worker="w")
    _aged(instance, old, 3600)  # ended an hour before the last tick: that tick saw it
    new = failed_run(instance, {**tags, "dagster/partition": "doc-2-trial-002"})
    states.claim(home_ledger, second, run_id=new, worker="w")
    before = time.time()
    cursor = _tick(instance, home_ledger, home, _cursor(before - 10))
    # The run that ended since the last tick: its document goes back in the queue (round 1).
    # The hour-old one is not read again (a tick costs what changed, not what exists).
    assert _statuses(home_ledger, batch) == [("extracting", 0), ("pending", 1)]
    assert json.loads(cursor)["checked_at"] >= before
    # Without a cursor (first tick, reset cursor) every open batch is read in full: both settled.
    _tick(instance, home_ledger, home, None)
    assert _statuses(home_ledger, batch) == [("pending", 1), ("pending", 1)]


def test_an_ended_run_is_read_again_until_its_grace_period_is_over(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    [item] = (row["id"] for row in batch_item_rows(home_ledger, batch))
    dead = failed_run(instance, {**batch_tags(home_ledger, batch), "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, item, run_id=dead, worker="w")
    cursor = _tick(instance, home_ledger, home, _cursor(time.time() - 10), grace=1.5)
    assert _statuses(home_ledger, batch) == [("extracting", 0)]  # Dagster's run retry may still come
    time.sleep(2.0)
    # Nothing else ended meanwhile; the run is still within the window the next tick reads.
    _tick(instance, home_ledger, home, cursor, grace=1.5)
    assert _statuses(home_ledger, batch) == [("pending", 1)]


def test_a_run_of_several_documents_names_them_and_each_is_settled(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 4)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    instance.event_log_storage.set_concurrency_slots("llm", 1)  # one slot: one run of all four
    resources = resources_for(home_ledger, home)
    dispatched = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(dispatched, dg.SensorResult)
    [request] = dispatched.run_requests or []
    assert request.tags["extraction/documents"] == ",".join(map(str, doc_ids))
    assert "extraction/item" not in request.tags
    ids = [row["id"] for row in batch_item_rows(home_ledger, batch)]
    dead = failed_run(instance, dict(request.tags))  # its worker died after claiming two of them
    for item in ids[:2]:
        states.claim(home_ledger, item, run_id=dead, worker="w")
    _tick(instance, home_ledger, home, _cursor(time.time() - 10))
    assert _statuses(home_ledger, batch) == [("pending", 1)] * 4  # claimed or not, all four again


def test_the_dispatcher_launches_again_what_a_lost_tick_marked(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 3)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    instance.event_log_storage.set_concurrency_slots("llm", 3)
    resources = resources_for(home_ledger, home, per_run=1)
    landed = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(landed, dg.SensorResult) and landed.cursor and len(landed.run_requests or []) == 3
    ids = [row["id"] for row in batch_item_rows(home_ledger, batch)]
    # A later tick marked the last item again (after a retry put it back) and its result was lost.
    with home_ledger.engine.begin() as conn:
        conn.execute(
            batch_items.update()
            .where(batch_items.c.id == ids[2])
            .values(dispatched_at=utcnow() + timedelta(seconds=1), dispatch_round=1)
        )
    again = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources, cursor=landed.cursor))
    assert isinstance(again, dg.SensorResult)
    assert [r.tags["extraction/item"] for r in again.run_requests or []] == [str(ids[2])]
    # A tick that landed is not dispatched again: its cursor names it.
    quiet = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources, cursor=again.cursor))
    assert isinstance(quiet, dg.SensorResult) and not quiet.run_requests


def test_an_item_already_marked_is_not_marked_or_launched_twice(home_ledger: Ledger, home: Path) -> None:
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    ids = [row["id"] for row in batch_item_rows(home_ledger, batch)]
    assert states.mark_dispatched(home_ledger, ids[:1]) == {ids[0]}
    assert states.mark_dispatched(home_ledger, ids) == {ids[1]}  # the first was marked by another tick
    assert states.mark_dispatched(home_ledger, ids) == set()


def test_each_open_batch_is_still_read_in_full_every_quarter_hour(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    """The safety net for what no run's end announces (a run deleted, a run whose end fell
    outside every window): one batch per tick, once its last full read is 15 minutes old."""
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    [item] = (row["id"] for row in batch_item_rows(home_ledger, batch))
    old = failed_run(instance, {**batch_tags(home_ledger, batch), "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, item, run_id=old, worker="w")
    _aged(instance, old, 3600)
    now = time.time()
    recent = _tick(instance, home_ledger, home, _cursor(now - 10, read_in_full={batch: now - 60}))
    assert _statuses(home_ledger, batch) == [("extracting", 0)]  # read in full a minute ago: not yet
    assert json.loads(recent)["read_in_full"] == {str(batch): now - 60}
    due = _tick(instance, home_ledger, home, _cursor(now - 10, read_in_full={batch: now - 901}))
    assert _statuses(home_ledger, batch) == [("pending", 1)]
    assert json.loads(due)["read_in_full"][str(batch)] >= now


def test_a_run_launched_from_the_ui_taking_its_document_is_not_a_lost_dispatch(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    from extraction_pipeline.core.ledger.reopening import retry_failed

    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    resources = resources_for(home_ledger, home)
    landed = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(landed, dg.SensorResult) and len(landed.run_requests or []) == 1
    [item] = (row["id"] for row in batch_item_rows(home_ledger, batch))
    states.claim(home_ledger, item, run_id="r1", worker="w")
    states.fail(home_ledger, item, message="bad answer", from_status=ItemStatus.EXTRACTING, run_id="r1")
    # Re-executed from the UI: that run takes the document back itself (after the cursor's time).
    retry_failed(home_ledger, batch, actor="ann", document_ids=[doc], allow_superseded=True, launched_by_caller=True)
    again = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources, cursor=landed.cursor))
    assert isinstance(again, dg.SensorResult) and not again.run_requests
    row = batch_item_rows(home_ledger, batch)[0]
    assert (row["status"], row["dispatched_by"], row["dispatch_round"]) == ("pending", "run", 1)
