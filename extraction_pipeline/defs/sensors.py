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
from extraction_pipeline.core.ledger.batches import BATCH_RUN_TAG, close_if_done, open_batches
from extraction_pipeline.core.ledger.documents import documents_after, partition_key
from extraction_pipeline.core.ledger.queries import active_items, undispatched_items, unexported_batches
from extraction_pipeline.core.ledger.schema import BatchOrigin
from extraction_pipeline.core.reconcile import RunInfo, judge_item
from extraction_pipeline.defs.binding import (
    DOCUMENT_TAG,
    FILENAME_TAG,
    ITEM_TAG,
    USER_TAG,
)
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job
from extraction_pipeline.defs.partitions import batch_partition_key, batches_partitions, documents_partitions
from extraction_pipeline.defs.resources import LedgerResource, PipelineSettingsResource

DISPATCH_PER_TICK = 500
# A dispatched item with no run after this long was lost between the sensor and the run queue.
DISPATCH_LOST_SECONDS = 300
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
    keys = [partition_key(doc["id"]) for doc in new_docs]
    return dg.SensorResult(
        dynamic_partitions_requests=[documents_partitions.build_add_request(keys)],
        cursor=str(new_docs[-1]["id"]),
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
            run_key=f"batch-{item['batch_id']}-item-{item['id']}",
            partition_key=key,
            tags={
                BATCH_RUN_TAG: str(item["batch_id"]),
                ITEM_TAG: str(item["id"]),
                DOCUMENT_TAG: key,
                FILENAME_TAG: item["filename"][:200],
                USER_TAG: item["user"],
            },
        )
        for item, key in zip(items, keys, strict=True)
    ]
    item_states.mark_dispatched(db, [item["id"] for item in items])
    context.log.info(f"dispatching {len(items)} item(s)")
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[documents_partitions.build_add_request(sorted(set(keys)))],
    )


def _runs_by_document(instance: dg.DagsterInstance, tag: tuple[str, str]) -> dict[str, list[RunInfo]]:
    records = instance.get_run_records(dg.RunsFilter(tags={tag[0]: tag[1]}))
    runs: dict[str, list[RunInfo]] = defaultdict(list)
    for record in records:
        key = record.dagster_run.tags.get(PARTITION_TAG)
        if key is None:
            continue
        runs[key].append(
            RunInfo(
                run_id=record.dagster_run.run_id,
                status=record.dagster_run.status.value,
                created_at=record.create_timestamp.timestamp(),
                ended_at=record.end_time,
            )
        )
    return runs


def _launch_finished(instance: dg.DagsterInstance, batch: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Per item: will no further run be launched for it by whoever launches this batch?"""
    origin = batch["origin"]
    if origin == BatchOrigin.BACKFILL:
        backfill = instance.get_backfill(batch["run_tag_value"])
        over = backfill is None or backfill.status != dg.BulkActionStatus.REQUESTED
        return lambda item: over
    if origin == BatchOrigin.DISPATCH:
        now = utcnow()
        return lambda item: (
            item["dispatched_at"] is not None and (now - item["dispatched_at"]).total_seconds() > DISPATCH_LOST_SECONDS
        )
    return lambda item: True


def _reconcile_batch(context: dg.SensorEvaluationContext, db: Ledger, batch: dict[str, Any], grace: float) -> int:
    items = active_items(db, batch["id"])
    if not items:
        return 0
    runs = _runs_by_document(context.instance, (batch["run_tag_key"], batch["run_tag_value"]))
    now = time.time()
    launch_finished = _launch_finished(context.instance, batch)
    failed = 0
    for item in items:
        verdict = judge_item(
            item_id=item["id"],
            item_status=item["status"],
            item_message=item["message"],
            runs=runs.get(partition_key(item["document_id"]), []),
            now=now,
            grace_seconds=grace,
            launcher_finished=launch_finished(item),
        )
        if verdict and item_states.fail(
            db, verdict.item_id, message=verdict.message, from_status=ItemStatus(verdict.from_status)
        ):
            context.log.warning(f"item {verdict.item_id} -> error: {verdict.message}")
            failed += 1
    return failed


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
    to_export = unexported_batches(db)
    if not to_export:
        return dg.SensorResult(skip_reason="no batch to export")
    keys = [batch_partition_key(batch_id) for batch_id in to_export]
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"export-{key}", partition_key=key) for key in keys],
        dynamic_partitions_requests=[batches_partitions.build_add_request(keys)],
    )
