"""Sensors: publish documents as partitions, dispatch CLI batches, and aggregate batches.

The ledger is the source of truth; sensors only read it, apply core decisions, and ask Dagster
for runs with deterministic run keys (so a repeated tick never launches a duplicate run).
"""

import functools
import inspect
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.backoff import RetrySchedule
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batches import (
    BATCH_RUN_TAG,
    BATCH_UID_RUN_TAG,
    close_if_done,
    open_batches,
    record_export_failure,
)
from extraction_pipeline.core.ledger.breakers import breaker_state
from extraction_pipeline.core.ledger.documents import document_partition_keys, documents_after, partition_key_of
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.queries import last_settling_run, undispatched_items, unexported_batches
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing
from extraction_pipeline.core.ledger.schema import BatchOrigin
from extraction_pipeline.core.pdf.parsing import parsed_contents
from extraction_pipeline.core.runs.dispatch import PendingDocument, plan_runs, run_key, runs_at_once, usable_cores
from extraction_pipeline.core.runs.reconcile import TERMINAL_RUN_STATUSES
from extraction_pipeline.core.settings import DEFAULT_LLM_SLOTS
from extraction_pipeline.defs.aggregation import (
    ENDED_RUNS_MARGIN_SECONDS,
    RANGE_END_TAG,
    RANGE_START_TAG,
    AggregatorCursor,
    Settled,
    backfill_over,
    item_runs,
    reconcile_batch,
    reconcile_ended_runs,
)
from extraction_pipeline.defs.binding import DOCUMENTS_TAG, ROUND_TAG, item_run_tags
from extraction_pipeline.defs.executor import on_celery
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job, extract_parsed_documents_job
from extraction_pipeline.defs.llm_slots import llm_pool_size_or
from extraction_pipeline.defs.partitions import (
    DOCUMENTS_PARTITIONS,
    batch_partition_key,
    batches_partitions,
    documents_partitions,
)
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.run_queue import analyst_run_limit

# Items read per tick: a whole batch is planned at once, so that it is spread over the runs its
# analyst gets at once rather than launched 200 at a time, each 200 spread again (waves of runs).
DISPATCH_PER_TICK = 10_000
# Runs requested per tick: the daemon pays ~0.2 s per run it creates, and the other sensors wait
# behind the tick, so many small runs (a small EXTRACTION_DOCUMENTS_PER_RUN) go over several ticks.
RUNS_PER_TICK = 100
# Documents registered within this window may still have uncommitted lower ids (PostgreSQL
# sequences commit out of order): the partition cursor stays behind them.
CURSOR_SETTLE_SECONDS = 60
EXPORT_VERSION_TAG = "extraction/export_version"
# The run that settled a batch's last document writes its workbook in seconds (defs/assets.py):
# past this, the aggregator exports it whatever that run is doing.
CLOSING_RUN_EXPORT_SECONDS = 120.0


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
    # A batch starts this soon after `batch create`; an idle tick is one indexed query.
    minimum_interval_seconds=2,
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
    must run again (its runs died, or someone asked for a retry): a batch spread over the runs its
    analyst gets at once (no more than the machine's cores unless steps run on Celery), each of at
    least 5 and up to `EXTRACTION_DOCUMENTS_PER_RUN` (default 400) consecutive documents, tagged
    with user and batch (a run of one also with document and filename). Run keys are deterministic per set of items and
    dispatch round, so a document is never launched twice for the same round. While the model's
    provider is failing (its circuit breaker is open) nothing new is launched. Cursor: when it
    last dispatched; documents marked dispatched after that by a tick whose runs never reached
    Dagster are dispatched again."""
    db = ledger.ledger()
    _redispatch_lost(context, db)
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
    parsed = parsed_contents(db, [item["sha256"] for item in items], settings.parse_options().limits.parser_version)
    dispatched_at = utcnow()
    planned = plan_runs(pending, position, per_run=settings.documents_per_run, runs_at_once=_runs_at_once(context))[
        :RUNS_PER_TICK
    ]
    # Only items this tick marked are launched, each run cut where one was not (so that no run's
    # range spans a document it did not mark): an evaluation that outlived its timeout cannot get
    # a document launched twice.
    marked = item_states.mark_dispatched(db, [doc.item_id for run in planned for doc in run], at=dispatched_at)
    runs = [
        piece
        for run in planned
        for piece in plan_runs(
            [doc for doc in run if doc.item_id in marked], position, per_run=len(run), runs_at_once=1
        )
    ]
    run_requests = [_run_request([by_id[doc.item_id] for doc in run], run, parsed) for run in runs]
    context.log.info(f"dispatching {len(marked)} item(s) in {len(run_requests)} run(s)")
    requests = [documents_partitions.build_add_request(new_keys)] if new_keys else []
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=requests,
        cursor=json.dumps({"dispatched_at": dispatched_at.isoformat()}),
    )


def _redispatch_lost(context: dg.SensorEvaluationContext, db: Ledger) -> None:
    """Items marked dispatched after the cursor's time were marked by a tick whose result (runs
    and cursor, stored together by Dagster) never landed, e.g. an evaluation that timed out:
    forget those dispatches so this tick launches them again."""
    if not context.cursor:
        return
    try:
        last = datetime.fromisoformat(json.loads(context.cursor)["dispatched_at"])
    except (ValueError, KeyError, TypeError):
        context.log.warning(f"unreadable dispatcher cursor {context.cursor!r}: ignored")
        return
    lost = item_states.dispatched_after(db, last)
    for item in lost:
        if item["dispatched_at"] is not None:  # always: dispatched after the cursor's time
            item_states.redispatch_lost(db, item["id"], dispatched_at=item["dispatched_at"])
    if lost:
        context.log.warning(f"{len(lost)} item(s) dispatched by a tick whose runs never started: dispatching again")


def _runs_at_once(context: dg.SensorEvaluationContext) -> int:
    """``runs_at_once`` (core/runs/dispatch.py) of the `llm` pool (5 when it cannot be read), the
    analyst's run limit (the per-user tag limit and ``max_concurrent_runs``) and, unless the steps
    go to Celery workers, this machine's cores (the default launcher runs every run here)."""
    slots = llm_pool_size_or(context.instance, DEFAULT_LLM_SLOTS)
    try:
        repository = context.repository_def
        elsewhere = repository is not None and on_celery(repository.get_job(extract_documents_job.name))
    except Exception:  # spreading is only an optimisation: as the default executor
        elsewhere = False
    return runs_at_once(slots, analyst_run_limit(context.instance), None if elsewhere else usable_cores())


def _run_request(items: list[ItemListing], documents: list[PendingDocument], parsed: set[str]) -> dg.RunRequest:
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
    if len(documents) > 1:
        tags[DOCUMENTS_TAG] = ",".join(str(item["document_id"]) for item in items)
    if len(documents) == 1:
        return dg.RunRequest(
            run_key=run_key(documents), partition_key=documents[0].partition_key, tags=tags, job_name=job.name
        )
    tags[RANGE_START_TAG] = documents[0].partition_key
    tags[RANGE_END_TAG] = documents[-1].partition_key
    return dg.RunRequest(run_key=run_key(documents), tags=tags, job_name=job.name)


def _sweep(context: dg.SensorEvaluationContext, db: Ledger, stale_minutes: float) -> int:
    """The last resort for items stuck in ``extracting`` whose runs Dagster no longer knows at
    all (deleted, or a ledger pointed at another instance). An item with any run is left to that
    run (alive) or to the reconcile (ended: it requeues the document); a stopped or slow worker
    keeps its document."""
    idle = timedelta(minutes=stale_minutes)
    swept = 0
    for item in item_states.stale_items(db, idle=idle):
        runs = item_runs(context.instance, item)
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


def _export_requests(
    context: dg.SensorEvaluationContext, db: Ledger, schedule: RetrySchedule, closed_now: set[int]
) -> list[dg.RunRequest]:
    """One export run per closed batch without its workbook (but a batch whose last document's
    run is still going is left to that run, which closed it and is writing it; ``closed_now``:
    the batches this tick closed). A failed export is tried again, with backoff (``schedule``'s base
    doubling up to its cap), for as long as it takes: the batch says why meanwhile ("export
    failed: no space left on device"), and its workbook appears on its own once the cause is
    gone. An export run that died without saying why is recorded as such."""
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
        attempts = len(records)
        if not attempts and batch["id"] not in closed_now and _closing_run_exports(context, db, batch):
            continue
        if attempts:
            last = max(records, key=lambda r: r.end_time or 0.0)
            _note_silent_failure(db, batch, last)
            # Jitter seeded by batch and attempt: every tick computes the same wait.
            wait = schedule.delay(attempts - 1, random.Random(f"{batch['uid']}:{attempts}"))  # noqa: S311
            if now - (last.end_time or 0.0) < wait:
                continue
            context.log.warning(
                f"batch {batch['id']}: export attempt {attempts + 1} (the last said: "
                f"{batch['export_error'] or 'nothing'})"
            )
        key = batch_partition_key(batch["id"])
        requests.append(
            dg.RunRequest(
                run_key=f"export-{batch['uid']}-v{version}-{attempts}",
                partition_key=key,
                tags={BATCH_RUN_TAG: str(batch["id"]), BATCH_UID_RUN_TAG: batch["uid"], EXPORT_VERSION_TAG: version},
            )
        )
    return requests


def _closing_run_exports(context: dg.SensorEvaluationContext, db: Ledger, batch: BatchRow) -> bool:
    """Whether the run that settled the batch's last document is still going, closed it less than
    ``CLOSING_RUN_EXPORT_SECONDS`` ago and has recorded no export failure: it is writing the
    workbook (defs/assets.py). Once it ends without having recorded it (killed), the aggregator
    exports."""
    if batch["export_error"] or (batch["export_attempts"] or 0) > 0:
        return False
    closed = batch["completed_at"]
    if closed is None or time.time() - closed.replace(tzinfo=UTC).timestamp() > CLOSING_RUN_EXPORT_SECONDS:
        return False  # a closing run writes it in seconds: one still going has something else to do
    run_id = last_settling_run(db, batch["id"])
    run = context.instance.get_run_by_id(run_id) if run_id else None
    return run is not None and run.status.value not in TERMINAL_RUN_STATUSES


def _note_silent_failure(db: Ledger, batch: BatchRow, last: dg.RunRecord) -> None:
    """An export run that failed without recording why (killed, its process lost) leaves the
    batch's reason older than the run: say what is known instead of nothing."""
    if last.dagster_run.status.value == "SUCCESS":
        return
    failed_at = batch["export_failed_at"]
    recorded = failed_at.replace(tzinfo=UTC).timestamp() if failed_at is not None else 0.0
    if recorded >= (last.start_time or last.create_timestamp.timestamp()):
        return  # the run recorded its own reason
    record_export_failure(
        db,
        batch["id"],
        f"the export run {last.dagster_run.run_id[:8]} ended {last.dagster_run.status.value} "
        "before writing the workbook",
    )


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
    batch completed once nothing is pending or extracting, and launches its workbook export.
    Cursor: when it last looked, so each tick reads only the runs that ended since (a tick costs
    what changed, not what exists), and which ended UI backfills it already settled."""
    db = ledger.ledger()
    started = time.time()
    swept = _sweep(context, db, settings.stale_minutes)
    if swept:
        context.log.warning(f"swept {swept} stale item(s)")
    limits = settings.reconcile_limits()
    batches = open_batches(db)
    open_ids = {batch["id"] for batch in batches}
    state = AggregatorCursor.read(context.cursor, warn=context.log.warning)
    settled = Settled()
    if state is None:  # nothing known yet (first tick, reset cursor): every open batch in full
        for batch in batches:
            reconcile_batch(context, db, batch, limits, settled)
        state = AggregatorCursor(checked_at=started, read_in_full=dict.fromkeys(open_ids, started))
        state.backfills_settled = {
            batch["id"]
            for batch in batches
            if batch["origin"] == BatchOrigin.BACKFILL and backfill_over(context.instance, batch)
        }
    else:
        since = state.checked_at - limits.grace_seconds - ENDED_RUNS_MARGIN_SECONDS
        reconcile_ended_runs(context, db, batches, since, limits, settled)
        for batch in batches:
            # A backfill that stopped launching: its documents that never got a run fail now, once.
            pending_backfill = batch["origin"] == BatchOrigin.BACKFILL and batch["id"] not in state.backfills_settled
            if pending_backfill and backfill_over(context.instance, batch):
                reconcile_batch(context, db, batch, limits, settled)
                state.backfills_settled.add(batch["id"])
        if (due := state.due_for_full_read(batches, started)) is not None:
            reconcile_batch(context, db, due, limits, settled)
            state.read_in_full[due["id"]] = started
    closed_now: set[int] = set()
    for batch in batches:
        if close_if_done(db, batch["id"]):
            context.log.info(f"batch {batch['id']} completed")
            open_ids.discard(batch["id"])
            closed_now.add(batch["id"])
    state.forget_all_but(open_ids)  # the cursor remembers open batches only
    if settled.requeued or settled.failed:
        context.log.info(
            f"read {settled.runs_read} run(s), judged {settled.items_judged} item(s): "
            f"{settled.requeued} requeued, {settled.failed} failed"
        )
    state.checked_at = started
    cursor = state.dump()
    requests = _export_requests(context, db, settings.export_retry_schedule(), closed_now)
    if not requests:
        return dg.SensorResult(skip_reason="no batch to export", cursor=cursor)
    keys = sorted({request.partition_key for request in requests if request.partition_key})
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[batches_partitions.build_add_request(keys)],
        cursor=cursor,
    )
