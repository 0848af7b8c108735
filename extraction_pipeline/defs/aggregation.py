"""How the batch aggregator reads Dagster's runs to settle the items whose runs are gone.

Two ways, one judgement (``core/reconcile.judge_item``):

- **in full** (``reconcile_batch``): every run of a batch against every active item of it. Done
  once per batch when nothing is known yet (the aggregator's first tick, or a reset cursor), and
  once when a UI backfill stops launching (its documents that never got a run fail then);
- **by change** (``reconcile_ended_runs``): only the runs that ended since the last tick (Dagster's
  ``update_timestamp``, indexed), their families (automatic retries and re-executions share a
  root run), and the active items those runs worked on. A tick's cost follows what changed, not
  how many runs and items exist: that is what keeps it flat at 100,000 items.

An ended run is looked at on every tick for ``grace_seconds`` (+ a margin) after it ended, because
the judge waits that long for Dagster's run retry before requeueing its documents; no other list
of items to watch is kept.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import ROOT_RUN_ID_TAG

from extraction_pipeline.core.ledger import ItemStatus, Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batches import BATCH_UID_RUN_TAG
from extraction_pipeline.core.ledger.documents import document_id_from_partition
from extraction_pipeline.core.ledger.queries import active_items
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing, ItemRow
from extraction_pipeline.core.ledger.schema import BatchOrigin
from extraction_pipeline.core.runs.reconcile import TERMINAL_RUN_STATUSES, Action, ItemView, Limits, RunInfo, judge_item
from extraction_pipeline.defs.binding import BACKFILL_TAG, DOCUMENTS_TAG, ITEM_TAG, ROUND_TAG, USER_TAG
from extraction_pipeline.defs.jobs import export_batch_job
from extraction_pipeline.defs.partitions import DOCUMENTS_PARTITIONS

# A dispatched item with no run after this long was lost between the sensor and the run queue:
# it is dispatched again. Only the full reconcile applies it (the dispatcher finds its own lost
# dispatches through its cursor).
DISPATCH_LOST_SECONDS = 300
# Runs that ended this long before the previous tick are read again: a run's end is committed a
# little after its update_timestamp is taken, and ticks are not exactly periodic.
ENDED_RUNS_MARGIN_SECONDS = 30
# Each open batch is also read in full this often, one batch per tick at most: the safety net for
# what no run's end announces (a queued run deleted from the UI, a tick that outlived its timeout).
FULL_READ_SECONDS = 900
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"  # a run of several consecutive documents
RANGE_END_TAG = "dagster/asset_partition_range_end"
_TERMINAL = [dg.DagsterRunStatus(status) for status in sorted(TERMINAL_RUN_STATUSES)]


@dataclass
class Settled:
    """What a reconcile did, for the tick's log line."""

    requeued: int = 0
    failed: int = 0
    runs_read: int = 0
    items_judged: int = 0
    batches: set[int] = field(default_factory=set)


class _PartitionOrder:
    """The document partitions in order, read at most once per tick, and only when a run covers
    a range of them without naming its documents (a UI backfill's run of several documents)."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._instance = instance
        self._keys: list[str] | None = None
        self._index: dict[str, int] = {}

    def between(self, start: str, end: str) -> list[str]:
        if self._keys is None:
            self._keys = list(self._instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS))
            self._index = {key: index for index, key in enumerate(self._keys)}
        first, last = self._index.get(start), self._index.get(end)
        if first is None or last is None:
            return list(dict.fromkeys([start, end]))  # a partition removed since: its ends at least
        return self._keys[first : last + 1]


def _run_documents(run: dg.DagsterRun, order: _PartitionOrder) -> list[int]:
    """The document ids a run works on: its partition, the documents the dispatcher named on a
    run of several, or the partitions of its range."""
    named = run.tags.get(DOCUMENTS_TAG)
    if named:
        return [int(part) for part in named.split(",") if part.isdigit()]
    key = run.tags.get(PARTITION_TAG)
    if key is not None:
        keys = [key]
    else:
        start, end = run.tags.get(RANGE_START_TAG), run.tags.get(RANGE_END_TAG)
        keys = order.between(start, end) if start is not None and end is not None else []
    return [doc_id for doc_id in map(document_id_from_partition, keys) if doc_id is not None]


def _runs_by_round(records: Iterable[dg.RunRecord], order: _PartitionOrder) -> dict[tuple[int, int], list[RunInfo]]:
    """Runs grouped by (document id, dispatch round); a run of several documents counts for
    each; runs without a round tag (a UI backfill's own runs) belong to round 0."""
    runs: dict[tuple[int, int], list[RunInfo]] = defaultdict(list)
    for record in records:
        run = record.dagster_run
        round_text = run.tags.get(ROUND_TAG, "0")
        dispatch_round = int(round_text) if round_text.isdigit() else 0
        info = RunInfo(
            run.run_id,
            run.status.value,
            record.create_timestamp.timestamp(),
            record.end_time,
            run.tags.get(USER_TAG),
        )
        for doc_id in _run_documents(run, order):
            runs[(doc_id, dispatch_round)].append(info)
    return runs


def _batch_run_records(instance: dg.DagsterInstance, batch: BatchRow) -> list[dg.RunRecord]:
    """Every extraction run that worked (or was launched to work) on this batch: the dispatcher's
    runs (and Dagster's retries of them) carry the batch uid; a UI backfill's runs carry the
    backfill id (the uid only once a step has bound them)."""
    filters = [dg.RunsFilter(tags={BATCH_UID_RUN_TAG: batch["uid"]})]
    origin_ref = batch["origin_ref"]
    if batch["origin"] == BatchOrigin.BACKFILL and origin_ref:
        filters.append(dg.RunsFilter(tags={BACKFILL_TAG: origin_ref}))
    elif batch["origin"] == BatchOrigin.RUN and origin_ref:
        filters.append(dg.RunsFilter(run_ids=[origin_ref]))
    records: dict[str, dg.RunRecord] = {}
    for runs_filter in filters:
        for record in instance.get_run_records(runs_filter):
            if record.dagster_run.job_name != export_batch_job.name:
                records[record.dagster_run.run_id] = record
    return list(records.values())


def backfill_over(instance: dg.DagsterInstance, batch: BatchRow) -> bool:
    """Whether whoever launches this batch's runs will launch no more: always, for the
    dispatcher's batches; for a UI backfill, once it left REQUESTED (or was deleted)."""
    if batch["origin"] != BatchOrigin.BACKFILL or not batch["origin_ref"]:
        return True
    backfill = instance.get_backfill(batch["origin_ref"])
    # Imported from its module: `dg.BulkActionStatus` does not exist and crashed every tick.
    return backfill is None or backfill.status != BulkActionStatus.REQUESTED


def item_runs(instance: dg.DagsterInstance, item: ItemRow) -> list[dg.DagsterRun]:
    """Every run known to work on this item, whatever its job or round: those tagged with it
    (single-document runs and their retries) and the run that holds it."""
    runs = {
        r.dagster_run.run_id: r.dagster_run
        for r in instance.get_run_records(dg.RunsFilter(tags={ITEM_TAG: str(item["id"])}))
    }
    if item["run_id"] and item["run_id"] not in runs:
        holder = instance.get_run_by_id(item["run_id"])
        if holder is not None:
            runs[holder.run_id] = holder
    return list(runs.values())


def _live_run(instance: dg.DagsterInstance, item: ItemRow) -> dg.DagsterRun | None:
    """A queued or working run of this item, if any: then nothing may requeue, fail or sweep it."""
    return next((run for run in item_runs(instance, item) if run.status.value not in TERMINAL_RUN_STATUSES), None)


def _item_view(item: ItemRow) -> ItemView:
    return ItemView(
        id=item["id"],
        status=item["status"],
        message=item["message"],
        dispatch_round=item["dispatch_round"],
        retry_round=item["retry_round"],
    )


def _dispatched_by_us(batch: BatchRow, item: ItemRow) -> bool:
    return bool(batch["origin"] == BatchOrigin.DISPATCH or item["dispatch_round"] > 0)


def _settle(
    context: dg.SensorEvaluationContext,
    db: Ledger,
    batch: BatchRow,
    items: list[ItemListing],
    runs: dict[tuple[int, int], list[RunInfo]],
    limits: Limits,
    settled: Settled,
    *,
    lost_dispatches: bool,
) -> None:
    """Judge ``items`` against their current round's ``runs`` and apply the verdicts."""
    launch_over = backfill_over(context.instance, batch)
    now, now_naive = time.time(), utcnow()  # epoch seconds for Dagster's run times, naive UTC for the ledger
    for item in items:
        item_runs = runs.get((item["document_id"], item["dispatch_round"]), [])
        if _dispatched_by_us(batch, item) and not item_runs:
            dispatched = item["dispatched_at"]
            lost = dispatched is not None and (now_naive - dispatched).total_seconds() > DISPATCH_LOST_SECONDS
            if (
                lost_dispatches
                and lost
                and dispatched is not None
                and _live_run(context.instance, item) is None
                and item_states.redispatch_lost(db, item["id"], dispatched_at=dispatched)
            ):
                context.log.warning(f"item {item['id']}: dispatched but no run appeared; dispatching again")
            continue  # the dispatcher (re)launches it: never fail an item that never had a run
        settled.items_judged += 1
        verdict = judge_item(_item_view(item), runs=item_runs, now=now, launcher_finished=launch_over, limits=limits)
        if verdict is None:
            continue
        if (live := _live_run(context.instance, item)) is not None:
            # A run of another job or round (a UI materialization, a late retry) still works on it.
            context.log.info(f"item {item['id']}: run {live.run_id} is {live.status.value}; left to it")
            continue
        # Conditional on the state and holder we judged: a retry that took the item over wins.
        if verdict.action == Action.REQUEUE:
            if item_states.requeue(db, item, message=verdict.message):
                context.log.warning(f"item {item['id']} requeued: {verdict.message}")
                settled.requeued += 1
        elif item_states.fail(
            db, item["id"], message=verdict.message, from_status=ItemStatus(item["status"]), run_id=item["run_id"]
        ):
            context.log.warning(f"item {item['id']} -> error: {verdict.message}")
            settled.failed += 1


def reconcile_batch(
    context: dg.SensorEvaluationContext, db: Ledger, batch: BatchRow, limits: Limits, settled: Settled
) -> None:
    """Every active item of the batch against every run of it (see the module docstring)."""
    items = active_items(db, batch["id"])
    if not items:
        return
    records = _batch_run_records(context.instance, batch)
    settled.runs_read += len(records)
    runs = _runs_by_round(records, _PartitionOrder(context.instance))
    _settle(context, db, batch, items, runs, limits, settled, lost_dispatches=True)


def _batches_of_run(run: dg.DagsterRun, open_batches: list[BatchRow]) -> list[BatchRow]:
    """The open batches a run may have worked for (a backfill makes one batch per project)."""
    uid, backfill = run.tags.get(BATCH_UID_RUN_TAG), run.tags.get(BACKFILL_TAG)
    root = run.tags.get(ROOT_RUN_ID_TAG, run.run_id)
    found = []
    for batch in open_batches:
        if (
            batch["uid"] == uid
            or (backfill is not None and batch["origin"] == BatchOrigin.BACKFILL and batch["origin_ref"] == backfill)
            or (batch["origin"] == BatchOrigin.RUN and batch["origin_ref"] in (run.run_id, root))
        ):
            found.append(batch)
    return found


def _families(instance: dg.DagsterInstance, roots: set[str]) -> list[dg.RunRecord]:
    """The root runs and every run re-executed from them (Dagster's automatic retries included)."""
    records: dict[str, dg.RunRecord] = {}
    ordered = sorted(roots)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        for runs_filter in (dg.RunsFilter(run_ids=chunk), dg.RunsFilter(tags={ROOT_RUN_ID_TAG: chunk})):
            for record in instance.get_run_records(runs_filter):
                if record.dagster_run.job_name != export_batch_job.name:
                    records[record.dagster_run.run_id] = record
    return list(records.values())


def reconcile_ended_runs(
    context: dg.SensorEvaluationContext,
    db: Ledger,
    open_batches: list[BatchRow],
    since: float,
    limits: Limits,
    settled: Settled,
) -> None:
    """Settle the active items of the runs that ended after ``since`` (epoch seconds)."""
    if not open_batches:
        return
    ended = context.instance.get_run_records(
        dg.RunsFilter(statuses=_TERMINAL, updated_after=datetime.fromtimestamp(since, tz=UTC))
    )
    settled.runs_read += len(ended)
    roots: dict[int, set[str]] = defaultdict(set)
    by_id = {batch["id"]: batch for batch in open_batches}
    for record in ended:
        run = record.dagster_run
        if run.job_name == export_batch_job.name:
            continue
        for batch in _batches_of_run(run, open_batches):
            roots[batch["id"]].add(run.tags.get(ROOT_RUN_ID_TAG, run.run_id))
    order = _PartitionOrder(context.instance)
    for batch_id, batch_roots in roots.items():
        family = _families(context.instance, batch_roots)
        settled.runs_read += len(family)
        runs = _runs_by_round(family, order)
        document_ids = sorted({doc_id for doc_id, _ in runs})
        items = active_items(db, batch_id, document_ids=document_ids)
        if items:
            settled.batches.add(batch_id)
            _settle(context, db, by_id[batch_id], items, runs, limits, settled, lost_dispatches=False)


@dataclass
class AggregatorCursor:
    """The aggregator's memory between ticks, as JSON: when the last tick began, which open
    backfill batches were settled in full after their backfill ended, and when each open batch
    was last read in full."""

    checked_at: float
    backfills_settled: set[int] = field(default_factory=set)
    read_in_full: dict[int, float] = field(default_factory=dict)

    @classmethod
    def read(cls, text: str | None, *, warn: Callable[[str], None]) -> AggregatorCursor | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(
                checked_at=float(data["checked_at"]),
                backfills_settled={int(b) for b in data.get("backfills", [])},
                read_in_full={int(b): float(t) for b, t in data.get("read_in_full", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            warn(f"unreadable aggregator cursor {text!r}: every open batch is read in full")
            return None

    def dump(self) -> str:
        return json.dumps(
            {
                "checked_at": self.checked_at,
                "backfills": sorted(self.backfills_settled),
                "read_in_full": {str(b): t for b, t in sorted(self.read_in_full.items())},
            }
        )

    def forget_all_but(self, open_ids: set[int]) -> None:
        self.backfills_settled &= open_ids
        self.read_in_full = {b: t for b, t in self.read_in_full.items() if b in open_ids}

    def due_for_full_read(self, batches: list[BatchRow], now: float) -> BatchRow | None:
        """The open batch read in full longest ago, if that is over FULL_READ_SECONDS ago (a batch
        first seen now counts from now: its runs are new, so run ends announce them)."""
        for batch in batches:
            self.read_in_full.setdefault(batch["id"], now)
        oldest = min(batches, key=lambda batch: self.read_in_full[batch["id"]], default=None)
        if oldest is None or now - self.read_in_full[oldest["id"]] < FULL_READ_SECONDS:
            return None
        return oldest
