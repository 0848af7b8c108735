"""Sensors: publish documents as partitions, dispatch CLI batches, and aggregate batches.

The ledger is the source of truth; sensors only read it, apply core decisions, and ask Dagster
for runs with deterministic run keys (so a repeated tick never launches a duplicate run).
"""

import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus
from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.dispatch import PendingDocument, plan_runs, run_key
from extraction_pipeline.core.ledger import ItemStatus, Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batches import BATCH_RUN_TAG, BATCH_UID_RUN_TAG, close_if_done, open_batches
from extraction_pipeline.core.ledger.breakers import breaker_state
from extraction_pipeline.core.ledger.documents import document_partition_keys, documents_after, partition_key_of
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.queries import active_items, undispatched_items, unexported_batches
from extraction_pipeline.core.ledger.schema import BatchOrigin
from extraction_pipeline.core.parsing import parsed_contents
from extraction_pipeline.core.reconcile import TERMINAL_RUN_STATUSES, Action, ItemView, Limits, RunInfo, judge_item
from extraction_pipeline.defs.binding import (
    BACKFILL_TAG,
    ITEM_TAG,
    ROUND_TAG,
    USER_TAG,
    item_run_tags,
)
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job, extract_parsed_documents_job
from extraction_pipeline.defs.partitions import (
    DOCUMENTS_PARTITIONS,
    DOCUMENTS_PER_RUN,
    batch_partition_key,
    batches_partitions,
    documents_partitions,
)
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource

# Items dispatched per tick: the daemon pays ~0.2 s per run it creates, and the other sensors wait
# behind the tick, so a large batch is launched over several ticks.
DISPATCH_PER_TICK = 200
LLM_POOL = "llm"
DEFAULT_LLM_SLOTS = 5
# A dispatched item with no run after this long was lost between the sensor and the run queue
# (e.g. the tick timed out after the ledger was updated): it is dispatched again.
DISPATCH_LOST_SECONDS = 300
# Documents registered within this window may still have uncommitted lower ids (PostgreSQL
# sequences commit out of order): the partition cursor stays behind them.
CURSOR_SETTLE_SECONDS = 60
EXPORT_MAX_ATTEMPTS = 3
EXPORT_RETRY_SECONDS = 60
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"  # a run of several consecutive documents
RANGE_END_TAG = "dagster/asset_partition_range_end"
EXPORT_VERSION_TAG = "extraction/export_version"


def described_sensor(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.SensorDefinition]:
    """``@dg.sensor`` whose UI description is the function's docstring (Dagster ignores it), and
    whose tick waits out a ledger database outage (skips with the cause; the next tick retries)
    instead of failing."""

    def wrap(fn: Callable[..., Any]) -> dg.SensorDefinition:
        @functools.wraps(fn)
        def tolerant(*args: Any, **params: Any) -> Any:
            try:
                return fn(*args, **params)
            except SQLAlchemyError as exc:
                if not is_database_outage(exc):
                    raise
                return dg.SensorResult(skip_reason=f"{describe_database_outage(exc)}; the next tick retries")

        return dg.sensor(name=fn.__name__, description=inspect.cleandoc(fn.__doc__ or ""), **kwargs)(tolerant)

    return wrap


@described_sensor(minimum_interval_seconds=10, default_status=dg.DefaultSensorStatus.RUNNING)
def document_partitions_sensor(context: dg.SensorEvaluationContext, ledger: LedgerResource) -> dg.SensorResult:
    """Makes every registered PDF selectable in the UI (as a `documents` partition), so an analyst
    can launch a backfill over any set of documents. Cursor: the last document id published."""
    last_id = int(context.cursor or 0)
    new_docs = documents_after(ledger.ledger(), last_id)
    if not new_docs:
        return dg.SensorResult(skip_reason="no new documents")
    settled = utcnow() - timedelta(seconds=CURSOR_SETTLE_SECONDS)
    cursor = max((doc["id"] for doc in new_docs if doc["created_at"] < settled), default=last_id)
    keys = [partition_key_of(doc["id"], doc["partition_key"]) for doc in new_docs]
    # Adding an existing partition is a no-op, so re-sending unsettled ones is harmless.
    return dg.SensorResult(
        dynamic_partitions_requests=[documents_partitions.build_add_request(keys)],
        cursor=str(cursor),
    )


@described_sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def stray_partitions_sensor(context: dg.SensorEvaluationContext, ledger: LedgerResource) -> dg.SensorResult:
    """Keeps the document list in the launch dialog honest: a `documents` partition typed by hand
    in the UI, or left by a document that is no longer in the ledger, is removed within a minute,
    so nobody launches a run for something that is not a registered PDF."""
    keys = context.instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    registered = document_partition_keys(ledger.ledger())
    stray = sorted(key for key in keys if key not in registered)
    if not stray:
        return dg.SensorResult(skip_reason=f"{len(keys)} partition(s), all registered documents")
    context.log.warning(f"removing {len(stray)} partition(s) that are not registered documents: {stray[:10]}")
    return dg.SensorResult(dynamic_partitions_requests=[documents_partitions.build_delete_request(stray)])


@described_sensor(
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
    jobs=[extract_documents_job, extract_parsed_documents_job],
)
def batch_dispatcher(
    context: dg.SensorEvaluationContext,
    ledger: LedgerResource,
    llm: LLMResource,
    settings: PipelineSettingsResource,
) -> dg.SensorResult:
    """Starts the extraction of batches created from the command line, and of any document that
    must run again (its runs died, or someone asked for a retry): one run per document, tagged
    with user, batch, document and filename. Run keys are deterministic per item and dispatch
    round, so a document is never launched twice for the same round. While the model's provider
    is failing (its circuit breaker is open) nothing new is launched."""
    db = ledger.ledger()
    model = llm.config()
    if not model.is_offline:
        breaker = breaker_state(db, model.effective_model)
        if breaker is not None and breaker.is_open():
            return dg.SensorResult(skip_reason=f"dispatch paused: {breaker.describe()}")
    items = undispatched_items(db, DISPATCH_PER_TICK)
    if not items:
        return dg.SensorResult(skip_reason="nothing to dispatch")
    keys = {item["id"]: partition_key_of(item["document_id"], item["partition_key"]) for item in items}
    existing = context.instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS)
    known = set(existing)
    # Partitions this tick adds go at the end, in document order (the order they are added in).
    new_keys = list(dict.fromkeys(keys[item["id"]] for item in sorted(items, key=lambda i: i["document_id"])))
    new_keys = [key for key in new_keys if key not in known]
    position = {key: index for index, key in enumerate([*existing, *new_keys])}
    by_id = {item["id"]: item for item in items}
    pending = [
        PendingDocument(item["id"], keys[item["id"]], item["batch_uid"], item["dispatch_round"]) for item in items
    ]
    runs = plan_runs(pending, position, per_run=DOCUMENTS_PER_RUN, slots=_llm_slots(context.instance))
    parsed = parsed_contents(db, [item["sha256"] for item in items], settings.parse_options().limits.parser_version)
    run_requests = [_run_request([by_id[doc.item_id] for doc in run], run, parsed) for run in runs]
    item_states.mark_dispatched(db, [item["id"] for item in items])
    context.log.info(f"dispatching {len(items)} item(s) in {len(run_requests)} run(s)")
    requests = [documents_partitions.build_add_request(new_keys)] if new_keys else []
    return dg.SensorResult(run_requests=run_requests, dynamic_partitions_requests=requests)


def _llm_slots(instance: dg.DagsterInstance) -> int:
    """The `llm` pool's limit: how many runs a batch is spread over (5 when it cannot be read)."""
    try:
        slots = instance.event_log_storage.get_concurrency_info(LLM_POOL).slot_count
    except Exception:  # storage without pools: spreading is only an optimisation
        return DEFAULT_LLM_SLOTS
    return slots if slots and slots > 0 else DEFAULT_LLM_SLOTS


def _run_request(items: list[dict[str, Any]], documents: list[PendingDocument], parsed: set[str]) -> dg.RunRequest:
    """One run for one document (tagged with it), or for a range of consecutive documents of one
    batch (tagged with the batch; each document is reported as its own materialization). When
    every document's parse is cached the run has no parse step: it never waits for a `pdf_parse`
    slot (the run queue holds back a run whose first step's pool is full)."""
    job = extract_parsed_documents_job if all(item["sha256"] in parsed for item in items) else extract_documents_job
    first = items[0]
    tags = item_run_tags(
        batch_id=first["batch_id"],
        batch_uid=first["batch_uid"],
        item_id=first["id"],
        document_key=documents[0].partition_key,
        filename=first["filename"],
        user=first["user"],
        several=len(documents) > 1,
    )
    tags[ROUND_TAG] = str(first["dispatch_round"])
    if len(documents) == 1:
        return dg.RunRequest(
            run_key=run_key(documents), partition_key=documents[0].partition_key, tags=tags, job_name=job.name
        )
    tags[RANGE_START_TAG] = documents[0].partition_key
    tags[RANGE_END_TAG] = documents[-1].partition_key
    return dg.RunRequest(run_key=run_key(documents), tags=tags, job_name=job.name)


def _run_records(instance: dg.DagsterInstance, batch: dict[str, Any]) -> list[dg.RunRecord]:
    """Every extraction run that worked (or was launched to work) on this batch: the dispatcher's
    runs (and Dagster's retries of them) carry the batch uid; a UI backfill's runs carry the
    backfill id (the uid only once a step has bound them)."""
    filters = [dg.RunsFilter(tags={BATCH_UID_RUN_TAG: batch["uid"]})]
    if batch["origin"] == BatchOrigin.BACKFILL:
        filters.append(dg.RunsFilter(tags={BACKFILL_TAG: batch["origin_ref"]}))
    elif batch["origin"] == BatchOrigin.RUN:
        filters.append(dg.RunsFilter(run_ids=[batch["origin_ref"]]))
    records: dict[str, dg.RunRecord] = {}
    for runs_filter in filters:
        for record in instance.get_run_records(runs_filter):
            if record.dagster_run.job_name != export_batch_job.name:
                records[record.dagster_run.run_id] = record
    return list(records.values())


class _PartitionOrder:
    """The document partitions in order, read at most once per tick, and only when a run covers
    a range of them (a run of several documents)."""

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


def _run_partitions(run: dg.DagsterRun, order: _PartitionOrder) -> list[str]:
    key = run.tags.get(PARTITION_TAG)
    if key is not None:
        return [key]
    start, end = run.tags.get(RANGE_START_TAG), run.tags.get(RANGE_END_TAG)
    if start is None or end is None:
        return []
    return order.between(start, end)


def _runs_by_round(records: list[dg.RunRecord], order: _PartitionOrder) -> dict[tuple[str, int], list[RunInfo]]:
    """Runs grouped by (document partition, dispatch round); a run of several documents counts
    for each; runs without a round tag (a UI backfill's own runs) belong to round 0."""
    runs: dict[tuple[str, int], list[RunInfo]] = defaultdict(list)
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
        for key in _run_partitions(run, order):
            runs[(key, dispatch_round)].append(info)
    return runs


def _backfill_over(instance: dg.DagsterInstance, batch: dict[str, Any]) -> bool:
    if batch["origin"] != BatchOrigin.BACKFILL:
        return True
    backfill = instance.get_backfill(batch["origin_ref"])
    # Imported from its module: `dg.BulkActionStatus` does not exist and crashed every tick.
    return backfill is None or backfill.status != BulkActionStatus.REQUESTED


def _dispatched_by_us(batch: dict[str, Any], item: dict[str, Any]) -> bool:
    return bool(batch["origin"] == BatchOrigin.DISPATCH or item["dispatch_round"] > 0)


def _item_view(item: dict[str, Any]) -> ItemView:
    return ItemView(
        id=item["id"],
        status=item["status"],
        message=item["message"],
        dispatch_round=item["dispatch_round"],
        retry_round=item["retry_round"],
    )


def _item_runs(instance: dg.DagsterInstance, item: dict[str, Any]) -> list[dg.DagsterRun]:
    """Every run known to work on this item, whatever its job or round: those tagged with it
    (dispatcher runs, bound runs and their retries) and the run that holds it."""
    runs = {
        r.dagster_run.run_id: r.dagster_run
        for r in instance.get_run_records(dg.RunsFilter(tags={ITEM_TAG: str(item["id"])}))
    }
    if item["run_id"] and item["run_id"] not in runs:
        holder = instance.get_run_by_id(item["run_id"])
        if holder is not None:
            runs[holder.run_id] = holder
    return list(runs.values())


def _live_run(instance: dg.DagsterInstance, item: dict[str, Any]) -> dg.DagsterRun | None:
    """A queued or working run of this item, if any: then nothing may requeue, fail or sweep it."""
    return next((run for run in _item_runs(instance, item) if run.status.value not in TERMINAL_RUN_STATUSES), None)


def _reconcile_batch(
    context: dg.SensorEvaluationContext, db: Ledger, batch: dict[str, Any], limits: Limits
) -> dict[str, int]:
    """Requeue or fail the batch's active items whose runs are all gone; returns counts."""
    counts = {"requeued": 0, "failed": 0}
    items = active_items(db, batch["id"])
    if not items:
        return counts
    runs = _runs_by_round(_run_records(context.instance, batch), _PartitionOrder(context.instance))
    launch_over = _backfill_over(context.instance, batch)
    now, now_naive = time.time(), utcnow()  # epoch seconds for Dagster's run times, naive UTC for the ledger
    for item in items:
        key = partition_key_of(item["document_id"], item["partition_key"])
        item_runs = runs.get((key, item["dispatch_round"]), [])
        if _dispatched_by_us(batch, item) and not item_runs:
            dispatched = item["dispatched_at"]
            lost = dispatched is not None and (now_naive - dispatched).total_seconds() > DISPATCH_LOST_SECONDS
            if (
                lost
                and _live_run(context.instance, item) is None
                and item_states.redispatch_lost(db, item["id"], dispatched_at=dispatched)
            ):
                context.log.warning(f"item {item['id']}: dispatched but no run appeared; dispatching again")
            continue  # the dispatcher (re)launches it: never fail an item that never had a run
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
                counts["requeued"] += 1
        elif item_states.fail(
            db, item["id"], message=verdict.message, from_status=ItemStatus(item["status"]), run_id=item["run_id"]
        ):
            context.log.warning(f"item {item['id']} -> error: {verdict.message}")
            counts["failed"] += 1
    return counts


def _sweep(context: dg.SensorEvaluationContext, db: Ledger, stale_minutes: float) -> int:
    """The last resort for items stuck in ``extracting`` whose runs Dagster no longer knows at
    all (deleted, or a ledger pointed at another instance). An item with any run is left to that
    run (alive) or to the reconcile (ended: it requeues the document); a stopped or slow worker
    keeps its document."""
    idle = timedelta(minutes=stale_minutes)
    swept = 0
    for item in item_states.stale_items(db, idle=idle):
        runs = _item_runs(context.instance, item)
        alive = [run for run in runs if run.status.value not in TERMINAL_RUN_STATUSES]
        if alive:
            context.log.warning(
                f"item {item['id']} has made no progress for over {stale_minutes:g} min but run "
                f"{alive[0].run_id} is {alive[0].status.value}: left to that run"
            )
            continue
        if runs:
            continue  # its runs ended: the reconcile decides (requeue, or error with the cause)
        if item_states.sweep(db, item, idle=idle, reason="no run of it is known to Dagster"):
            swept += 1
    return swept


def _export_requests(context: dg.SensorEvaluationContext, db: Ledger) -> list[dg.RunRequest]:
    """One export run per closed batch without a current workbook; a failed export is retried
    (new run key per attempt) after a pause, at most EXPORT_MAX_ATTEMPTS times per version."""
    requests = []
    now = time.time()
    for batch in unexported_batches(db):
        version = str(int(batch["export_version"] or 0) + 1)
        records = context.instance.get_run_records(
            dg.RunsFilter(
                job_name=export_batch_job.name, tags={BATCH_UID_RUN_TAG: batch["uid"], EXPORT_VERSION_TAG: version}
            )
        )
        if any(r.dagster_run.status.value not in TERMINAL_RUN_STATUSES for r in records):
            continue  # an export is queued or running
        if len(records) >= EXPORT_MAX_ATTEMPTS:
            continue  # given up: `extraction-pipeline batch export` writes it by hand
        last_end = max((r.end_time or 0.0 for r in records), default=0.0)
        if records and now - last_end < EXPORT_RETRY_SECONDS:
            continue
        key = batch_partition_key(batch["id"])
        requests.append(
            dg.RunRequest(
                run_key=f"export-{batch['uid']}-v{version}-{len(records)}",
                partition_key=key,
                tags={BATCH_RUN_TAG: str(batch["id"]), BATCH_UID_RUN_TAG: batch["uid"], EXPORT_VERSION_TAG: version},
            )
        )
    return requests


@described_sensor(
    minimum_interval_seconds=10,
    default_status=dg.DefaultSensorStatus.RUNNING,
    job=export_batch_job,
)
def batch_aggregator(
    context: dg.SensorEvaluationContext, ledger: LedgerResource, settings: PipelineSettingsResource
) -> dg.SensorResult:
    """Closes batches: puts documents whose runs died back in the queue (within their retry
    budget), fails those that cannot be finished, sweeps items stuck with no live run, marks a
    batch completed once nothing is pending or extracting, and launches its workbook export."""
    db = ledger.ledger()
    swept = _sweep(context, db, settings.stale_minutes)
    if swept:
        context.log.warning(f"swept {swept} stale item(s)")
    limits = settings.reconcile_limits()
    for batch in open_batches(db):
        _reconcile_batch(context, db, batch, limits)
        if close_if_done(db, batch["id"]):
            context.log.info(f"batch {batch['id']} completed")
    requests = _export_requests(context, db)
    if not requests:
        return dg.SensorResult(skip_reason="no batch to export")
    keys = sorted({request.partition_key for request in requests if request.partition_key})
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[batches_partitions.build_add_request(keys)],
    )
