"""Sensors: publish documents as partitions, dispatch CLI batches, and aggregate batches.

The ledger is the source of truth; sensors only read it, apply core decisions, and ask Dagster
for runs with deterministic run keys (so a repeated tick never launches a duplicate run).
"""

import inspect
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import dagster as dg

from extraction_pipeline.core.ledger import ItemStatus, Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batches import BATCH_RUN_TAG, BATCH_UID_RUN_TAG, close_if_done, open_batches
from extraction_pipeline.core.ledger.documents import documents_after, partition_key
from extraction_pipeline.core.ledger.queries import active_items, undispatched_items, unexported_batches
from extraction_pipeline.core.ledger.schema import BatchOrigin
from extraction_pipeline.core.reconcile import TERMINAL_RUN_STATUSES, RunInfo, judge_item
from extraction_pipeline.defs.binding import BACKFILL_TAG, item_run_tags
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job
from extraction_pipeline.defs.partitions import batch_partition_key, batches_partitions, documents_partitions
from extraction_pipeline.defs.resources import LedgerResource, PipelineSettingsResource

DISPATCH_PER_TICK = 500
# A dispatched item with no run after this long was lost between the sensor and the run queue
# (e.g. the tick timed out after the ledger was updated): it is dispatched again.
DISPATCH_LOST_SECONDS = 300
# Documents registered within this window may still have uncommitted lower ids (PostgreSQL
# sequences commit out of order): the partition cursor stays behind them.
CURSOR_SETTLE_SECONDS = 60
EXPORT_MAX_ATTEMPTS = 3
EXPORT_RETRY_SECONDS = 60
PARTITION_TAG = "dagster/partition"


def described_sensor(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.SensorDefinition]:
    """``@dg.sensor`` whose UI description is the function's docstring (Dagster ignores it)."""

    def wrap(fn: Callable[..., Any]) -> dg.SensorDefinition:
        return dg.sensor(name=fn.__name__, description=inspect.cleandoc(fn.__doc__ or ""), **kwargs)(fn)

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
    keys = [partition_key(doc["id"]) for doc in new_docs]
    # Adding an existing partition is a no-op, so re-sending unsettled ones is harmless.
    return dg.SensorResult(
        dynamic_partitions_requests=[documents_partitions.build_add_request(keys)],
        cursor=str(cursor),
    )


@described_sensor(
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
    job=extract_documents_job,
)
def batch_dispatcher(context: dg.SensorEvaluationContext, ledger: LedgerResource) -> dg.SensorResult:
    """Starts the extraction of batches created from the command line: one run per document,
    tagged with user, batch, document and filename. Run keys are deterministic per item, so a
    document is never launched twice by this sensor."""
    db = ledger.ledger()
    items = undispatched_items(db, BatchOrigin.DISPATCH, DISPATCH_PER_TICK)
    if not items:
        return dg.SensorResult(skip_reason="nothing to dispatch")
    keys = [partition_key(item["document_id"]) for item in items]
    run_requests = [
        dg.RunRequest(
            run_key=f"{item['batch_uid']}-item-{item['id']}",
            partition_key=key,
            tags=item_run_tags(
                batch_id=item["batch_id"],
                batch_uid=item["batch_uid"],
                item_id=item["id"],
                document_key=key,
                filename=item["filename"],
                user=item["user"],
            ),
        )
        for item, key in zip(items, keys, strict=True)
    ]
    item_states.mark_dispatched(db, [item["id"] for item in items])
    context.log.info(f"dispatching {len(items)} item(s)")
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[documents_partitions.build_add_request(sorted(set(keys)))],
    )


def _run_records(instance: dg.DagsterInstance, batch: dict[str, Any]) -> list[dg.RunRecord]:
    """Every run that worked (or was launched to work) on this batch."""
    origin = batch["origin"]
    if origin == BatchOrigin.BACKFILL:
        runs_filter = dg.RunsFilter(tags={BACKFILL_TAG: batch["origin_ref"]})
    elif origin == BatchOrigin.RUN:
        runs_filter = dg.RunsFilter(run_ids=[batch["origin_ref"]])
    else:
        runs_filter = dg.RunsFilter(tags={BATCH_UID_RUN_TAG: batch["uid"]}, job_name=extract_documents_job.name)
    return list(instance.get_run_records(runs_filter))


def _runs_by_document(records: list[dg.RunRecord]) -> dict[str, list[RunInfo]]:
    runs: dict[str, list[RunInfo]] = defaultdict(list)
    for record in records:
        run = record.dagster_run
        key = run.tags.get(PARTITION_TAG)
        if key is not None:
            runs[key].append(
                RunInfo(run.run_id, run.status.value, record.create_timestamp.timestamp(), record.end_time)
            )
    return runs


def _backfill_over(instance: dg.DagsterInstance, batch: dict[str, Any]) -> bool:
    if batch["origin"] != BatchOrigin.BACKFILL:
        return True
    backfill = instance.get_backfill(batch["origin_ref"])
    return backfill is None or backfill.status != dg.BulkActionStatus.REQUESTED


def _reconcile_batch(context: dg.SensorEvaluationContext, db: Ledger, batch: dict[str, Any], grace: float) -> int:
    items = active_items(db, batch["id"])
    if not items:
        return 0
    runs = _runs_by_document(_run_records(context.instance, batch))
    launch_over = _backfill_over(context.instance, batch)
    now = time.time()
    failed = 0
    for item in items:
        item_runs = runs.get(partition_key(item["document_id"]), [])
        if batch["origin"] == BatchOrigin.DISPATCH and not item_runs:
            dispatched = item["dispatched_at"]
            lost = dispatched is not None and (utcnow() - dispatched).total_seconds() > DISPATCH_LOST_SECONDS
            if lost and item_states.redispatch_lost(db, item["id"], dispatched_at=dispatched):
                context.log.warning(f"item {item['id']}: dispatched but no run appeared; dispatching again")
            continue  # the dispatcher (re)launches it: never fail an item that never had a run
        verdict = judge_item(
            item_id=item["id"],
            item_status=item["status"],
            item_message=item["message"],
            runs=item_runs,
            now=now,
            grace_seconds=grace,
            launcher_finished=launch_over,
        )
        if verdict is None:
            continue
        # Conditional on the holder we judged: a retry that took the item over meanwhile wins.
        status = ItemStatus(verdict.from_status)
        if item_states.fail(db, verdict.item_id, message=verdict.message, from_status=status, run_id=item["run_id"]):
            context.log.warning(f"item {verdict.item_id} -> error: {verdict.message}")
            failed += 1
    return failed


def _export_requests(context: dg.SensorEvaluationContext, db: Ledger) -> list[dg.RunRequest]:
    """One export run per closed batch without a workbook; a failed export is retried (new run
    key per attempt) after a pause, at most EXPORT_MAX_ATTEMPTS times."""
    requests = []
    now = time.time()
    for batch in unexported_batches(db):
        records = context.instance.get_run_records(
            dg.RunsFilter(job_name=export_batch_job.name, tags={BATCH_UID_RUN_TAG: batch["uid"]})
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
                run_key=f"export-{batch['uid']}-{len(records)}",
                partition_key=key,
                tags={BATCH_RUN_TAG: str(batch["id"]), BATCH_UID_RUN_TAG: batch["uid"]},
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
    """Closes batches: sweeps items stuck in extraction, fails items whose runs died or were
    canceled (so nothing waits forever), marks a batch completed once nothing is pending or
    extracting, and launches its workbook export."""
    db = ledger.ledger()
    swept = item_states.sweep_stale(db, idle=timedelta(minutes=settings.stale_minutes))
    if swept:
        context.log.warning(f"swept {swept} stale item(s)")
    for batch in open_batches(db):
        _reconcile_batch(context, db, batch, settings.reconcile_grace_seconds)
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
