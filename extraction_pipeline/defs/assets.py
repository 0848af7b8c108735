"""Assets: a document's parsed text, its grounded extraction, and a batch's workbook."""

import contextlib
import math
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg

from extraction_pipeline.core.errors import InternalError, PermanentError, TransientError
from extraction_pipeline.core.export.closing import (
    ExportError,
    ExportResult,
    failure_reason,
    warm_up,
    worth_warming_up,
    write_batch_workbook,
)
from extraction_pipeline.core.export.workbook import NOTHING_FOUND, answer_label, write_workbook
from extraction_pipeline.core.extraction.claiming import INTERRUPTED_MESSAGE, hand_back
from extraction_pipeline.core.extraction.extract import ExtractionOutcome, OutcomeStatus, extract_item
from extraction_pipeline.core.extraction.follow_up import found_by_follow_up
from extraction_pipeline.core.ledger import ItemStatus, Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batch_jobs import WAITING_PHASES, provider_batch_phase
from extraction_pipeline.core.ledger.batches import active_count, close_if_done, get_batch, record_export_failure
from extraction_pipeline.core.ledger.budgets import Budget, LedgerBudget, configure
from extraction_pipeline.core.ledger.queries import Progress, extracting_count, progress
from extraction_pipeline.core.ledger.rows import DocumentRow, ItemRow
from extraction_pipeline.core.ledger.schema import BatchStatus
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document, parse_documents
from extraction_pipeline.core.runs.interrupts import interrupts_deferred
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.defs.binding import Binding, bind_document, crashed_parent_run
from extraction_pipeline.defs.executor import EXPORT_QUEUE, LLM_QUEUE, PARSE_QUEUE, on_celery, queue_tags
from extraction_pipeline.defs.in_flight import each_document
from extraction_pipeline.defs.llm_slots import LLMSlotGate, call_lanes, lanes_to_open, llm_pool_size_or
from extraction_pipeline.defs.partitions import (
    batch_id_from_partition,
    batch_partition_key,
    batches_partitions,
    documents_backfill_policy,
    documents_partitions,
)
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.step_retries import (
    clear_waiting,
    retry_database_outages,
    retry_or_give_up,
    say_waiting,
    wait_for_breaker,
)
from extraction_pipeline.web.urls import csv_url, workbook_url


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _parse_or_fail(
    context: dg.AssetExecutionContext,
    ledger: LedgerResource,
    settings: PipelineSettingsResource,
    document: DocumentRow,
    item_id: int,
) -> ParsedDocument:
    try:
        return parse_document(
            ledger.ledger(),
            sha256=document["sha256"],
            stored_path=document["stored_path"],
            options=settings.parse_options(),
        )
    except PermanentError as exc:
        raise _parse_failed(context, ledger, item_id, exc) from exc


def _parse_failed(
    context: dg.AssetExecutionContext, ledger: LedgerResource, item_id: int, exc: PermanentError
) -> dg.Failure:
    """A broken PDF fails this document only, permanently; the rest of the batch goes on."""
    db, run_id, message = ledger.ledger(), context.run.run_id, f"parse failed: {exc}"
    item_states.fail(db, item_id, message=message, from_status=ItemStatus.PENDING, by_run=run_id)
    item_states.fail(db, item_id, message=message, from_status=ItemStatus.EXTRACTING, run_id=run_id)
    return dg.Failure(f"parse failed: {exc}", allow_retries=False)


def _not_extracted(item: ItemRow) -> dg.Failure:
    """An errored item ends the run as a failure: Dagster never shows success for a document the
    ledger says failed (ARCHITECTURE.md, invariant)."""
    return dg.Failure(
        f"not extracted: the document is in error: {item['message']}",
        allow_retries=False,
        metadata={"item": item["id"], "item_status": item["status"]},
    )


@dg.asset(
    partitions_def=documents_partitions,
    # Runs of the default size here; definitions.py sets the configured one.
    backfill_policy=documents_backfill_policy(Settings.documents_per_run),
    pool="pdf_parse",
    op_tags=queue_tags(PARSE_QUEUE),  # on Celery: the workers serving `pdf_parse` (defs/executor.py)
    group_name="extraction",
    kinds={"pdf"},
)
def parsed_document(
    context: dg.AssetExecutionContext, ledger: LedgerResource, settings: PipelineSettingsResource
) -> dg.MaterializeResult[None]:
    """The text of one registered trial PDF, page by page — what the extraction reads and what
    every quote is checked against. Parsed once per content (cached by sha256 + parser version).
    A broken PDF fails its own document (its item is `error`, its extraction fails); the other
    documents of the run go on. The documents of a run not parsed yet are read by one child
    process after another (pdf/isolation.run_each), not one process each."""
    keys = context.partition_keys  # read once: each read asks Dagster's storage
    failures: list[dg.Failure] = []
    metadata: dict[str, dict[str, Any]] = {}
    to_parse: list[tuple[str, Binding]] = []
    for key in keys:
        try:
            binding = _bound_for_parsing(context, ledger, settings, key, keys)
        except dg.Failure as failure:
            failures.append(failure)
            metadata[key] = {"status": f"not parsed: {failure.description}"}
            continue
        if binding.item["status"] == ItemStatus.COMPLETED:
            metadata[key] = {"skipped": "item already completed", "batch": binding.batch_id}
        else:
            to_parse.append((key, binding))
    with retry_database_outages(context, settings.retry_schedule()):
        documents = [(b.document["sha256"], b.document["stored_path"]) for _, b in to_parse]
        verdicts = parse_documents(ledger.ledger(), documents, settings.parse_options())
        for (key, binding), verdict in zip(to_parse, verdicts, strict=True):
            if isinstance(verdict, PermanentError):
                broken = _parse_failed(context, ledger, binding.item["id"], verdict)
                failures.append(broken)
                metadata[key] = {"status": f"not parsed: {broken.description}"}
            else:
                metadata[key] = {
                    "batch": binding.batch_id,
                    "filename": binding.document["filename"],
                    **verdict.metadata(),
                }
    for key in keys:
        context.add_asset_metadata(metadata[key], partition_key=key)
    if len(failures) == len(keys):
        # Nothing left to extract in this run: the run says why (one document: its own failure).
        raise failures[0] if len(failures) == 1 else _several_failed(failures, len(keys))
    clear_waiting(context)
    return dg.MaterializeResult()


def _bound_for_parsing(
    context: dg.AssetExecutionContext,
    ledger: LedgerResource,
    settings: PipelineSettingsResource,
    key: str,
    run_keys: Sequence[str],
) -> Binding:
    with retry_database_outages(context, settings.retry_schedule()):
        binding = bind_document(context, ledger.ledger(), key, run_keys=run_keys)
    if binding.item["status"] == ItemStatus.ERROR:
        raise _not_extracted(binding.item)
    return binding


def _internal_traceback(failure: dg.Failure) -> str:
    """A bug's traceback, for the run's log: the failure's one line tells the analyst what
    happened, this is for whoever fixes it. (Of several documents' failures the run raises one
    new failure, which carries no document's traceback.)"""
    cause = failure.__cause__
    if not isinstance(cause, InternalError):
        return ""
    return "\n" + "".join(traceback.format_exception(cause)).rstrip()


def _several_failed(failures: list[dg.Failure], documents: int) -> dg.Failure:
    lines = "; ".join(str(failure.description) for failure in failures[:20])
    return dg.Failure(
        f"{len(failures)} of {documents} document(s) of this run not extracted (the others were): {lines}",
        allow_retries=False,
    )


@dg.asset(
    partitions_def=documents_partitions,
    backfill_policy=documents_backfill_policy(Settings.documents_per_run),
    deps=[parsed_document],
    # No step-level pool: each model call holds one slot of the `llm` pool for exactly its own
    # duration (defs/llm_slots.py), so a run of several documents never sits on a slot between
    # calls, and the pool's limit is the number of calls in flight.
    op_tags=queue_tags(LLM_QUEUE),
    group_name="extraction",
    kinds={"llm"},
    # Each document is reported as its own materialization when it is done (several per run).
    output_required=False,
)
def extracted_document(
    context: dg.AssetExecutionContext, ledger: LedgerResource, llm: LLMResource, settings: PipelineSettingsResource
) -> Iterator[dg.AssetMaterialization]:
    """The structured data of one trial as its batch's frozen template asks (study details,
    baseline per arm, Risk of Bias, every reported outcome, project fields), each value with its
    verbatim quote, page, verification status and plausibility checks, recorded on the batch item.
    Each model call waits for its share of the provider's token and request budget (one for the
    whole instance) instead of being refused; an answer cut at its output limit is asked again in
    smaller questions. Rate limits, provider outages and database restarts are waited out (30 min
    by default).
    A run may carry several documents: each is materialized as soon as it is done, and one
    document's failure fails only that document."""
    keys = context.partition_keys
    bound: dict[str, Binding] = {}  # partition key -> its item and batch: handed back on interruption
    failures: list[dg.Failure] = []
    stop: BaseException | None = None
    unfinished = [len(keys)]  # read by the `llm` slot claims: a run with more left is served first
    stopping = threading.Event()  # interrupted: lanes still starting a document claim nothing
    warm = _WarmUp()

    def interrupted(in_flight: list[str]) -> None:
        stopping.set()  # before the hand-back: a lane claiming meanwhile hands back on its own
        _hand_back(context, ledger, [bound[k].item["id"] for k in in_flight if k in bound])

    for done in each_document(
        lambda key: _extract_one(context, ledger, llm, settings, key, keys, bound, lambda: unfinished[0], stopping),
        keys,
        # Documents in flight at once (defs/in_flight.py): two, and up to the `llm` pool's size and
        # a few prepared ones waiting for a slot while they wait on the model; the pool alone
        # bounds the calls.
        lanes=min(2, len(keys)),
        max_lanes=call_lanes(context.instance, len(keys), llm.slots_per_user),
        widen=lambda in_flight: _lanes_to_open(context, ledger, in_flight, bound),
        # A transient failure (RetryRequested) or a bug stops new documents; those in flight finish.
        keep_going=lambda done: done.error is None or isinstance(done.error, dg.Failure),
        on_interrupt=interrupted,
    ):
        unfinished[0] -= 1
        if isinstance(done.error, dg.Failure):
            failures.append(done.error)
            context.log.error(f"{done.key}: {done.error.description}{_internal_traceback(done.error)}")
        elif done.error is not None:
            stop = stop or done.error
        elif done.value is not None:
            yield dg.AssetMaterialization(asset_key=context.asset_key, partition=done.key, metadata=done.value)
        if done.key in bound and (done.error is None or isinstance(done.error, dg.Failure)):
            _close_if_last(context, ledger, settings, bound[done.key].batch_id, unfinished[0], warm)
    if stop is not None:
        # The step retries (transient) or fails; documents already materialized are skipped by a
        # retry (their items are completed).
        raise stop
    if failures:
        raise failures[0] if len(keys) == 1 else _several_failed(failures, len(keys))


class _WarmUp:
    """What writing the workbook needs, imported once on a background thread while the run's
    last documents wait on the model (core/export/closing.py, ``warm_up``); joined before the
    write, so the two never import the same modules at once."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=warm_up, name="export warm-up", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _close_if_last(
    context: dg.AssetExecutionContext,
    ledger: LedgerResource,
    settings: PipelineSettingsResource,
    batch_id: int,
    left_in_run: int,
    warm: _WarmUp,
) -> None:
    """A batch whose last document this run just settled is closed here and its workbook written
    at once, in this warm process: the analyst has it a second or two after the last document,
    where the aggregator's next tick and an export run of its own took ~25 s. Near the batch's
    end (``worth_warming_up``), what writing needs is imported meanwhile. The close is the
    aggregator's own conditional update (core/ledger/batches.py), so of two runs settling a
    batch's last documents at once one closes it; whatever goes wrong here (a full disk, an
    outage) leaves the batch to the aggregator, which exports it with its retries. On Celery the
    aggregator closes and exports: a step on another machine would write the workbook where the
    download page cannot read it."""
    if on_celery(context.job_def):
        return
    db = ledger.ledger()
    try:
        active = active_count(db, batch_id)
        if active:
            if not warm.started and worth_warming_up(active, left_in_run, llm_pool_size_or(context.instance, 0)):
                warm.start()
            return
        if not close_if_done(db, batch_id):
            return
    except Exception as exc:  # the aggregator closes what this could not
        context.log.warning(f"batch {batch_id}: not closed by this run ({exc}); the aggregator will")
        return
    context.log.info(f"batch {batch_id}: every document is settled; the batch is completed")
    warm.wait()
    try:
        written = write_batch_workbook(db, batch_id, settings.exports_dir)
    except ExportError:
        return  # recorded on the batch: the aggregator tries again, with backoff
    except Exception as exc:  # recorded, so the aggregator exports it without waiting for this run
        context.log.warning(f"batch {batch_id}: workbook not written by this run ({exc}); the aggregator will")
        with contextlib.suppress(Exception):
            record_export_failure(db, batch_id, failure_reason(exc, settings.exports_dir))
        return
    if written.result is ExportResult.WRITTEN and written.path is not None:
        _report_workbook(context, db, batch_id, written.path, written.version)


REPORT_TRIES = 3


def _report_workbook(context: dg.AssetExecutionContext, db: Ledger, batch_id: int, path: Path, version: int) -> None:
    """Tell Dagster of a workbook this run wrote (the batch is completed by then: nobody else
    will). Dagster's storage down for a moment is tried again; after that the workbook is still
    there for the download page and `batch status`, and the log says Dagster was not told."""
    key = batch_partition_key(batch_id)
    for attempt in range(REPORT_TRIES):
        try:
            context.instance.add_dynamic_partitions(batches_partitions.name, [key])
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=batch_workbook.key,
                    partition=key,
                    metadata=_workbook_metadata(batch_id, path, version, progress(db, batch_id)),
                )
            )
            return
        except Exception as exc:
            if attempt == REPORT_TRIES - 1:
                context.log.warning(f"batch {batch_id}: workbook written to {path}, not reported in Dagster ({exc})")
                return
            time.sleep(2**attempt)


def _lanes_to_open(
    context: dg.AssetExecutionContext, ledger: LedgerResource, in_flight: int, bound: dict[str, Binding]
) -> int:
    try:
        # The analyst whose documents the run extracts (one batch's, or one backfill's); the
        # lanes add to ``bound`` meanwhile: a copy of it.
        user = next((binding.user for binding in list(bound.values())), None)
        extracting = extracting_count(ledger.ledger())
        return lanes_to_open(context.instance, context.run.run_id, in_flight, extracting, user)
    except Exception as exc:  # only an optimisation: a storage hiccup must not fail the run
        context.log.debug(f"not widening: {exc}")
        return 0


def _hand_back(context: dg.AssetExecutionContext, ledger: LedgerResource, item_ids: list[int]) -> None:
    """The run was interrupted with these documents in flight: back to the queue, for another run
    (a second interrupt waits until they are)."""
    with interrupts_deferred():
        for item_id in item_ids:
            hand_back(ledger.ledger(), item_id, context.run.run_id, INTERRUPTED_MESSAGE, failing=False)


PROVIDER_BATCH_HANDOVER = "waiting for the provider's batch API: a run extracts it once the provider has answered"


def _extract_one(
    context: dg.AssetExecutionContext,
    ledger: LedgerResource,
    llm: LLMResource,
    settings: PipelineSettingsResource,
    key: str,
    run_keys: Sequence[str],
    bound: dict[str, Binding],
    unfinished: Callable[[], int],
    stopping: threading.Event,
) -> dict[str, Any] | None:
    """One document's extraction: its materialization metadata, or None when this run already
    materialized it (an earlier attempt of the same step)."""
    db = ledger.ledger()
    with retry_database_outages(context, settings.retry_schedule()):
        binding = bind_document(context, db, key, run_keys=run_keys)
        item = binding.item
        bound[key] = binding
        if item["status"] == ItemStatus.ERROR:
            raise _not_extracted(item)
        if item["status"] == ItemStatus.COMPLETED:
            if item["run_id"] == context.run.run_id:
                return None
            return {"status": "already completed", "run": item["run_id"], "batch": binding.batch_id}
        phase = provider_batch_phase(db, binding.batch_id)
        if (
            phase is not None
            and item["status"] == ItemStatus.PENDING
            and (phase in WAITING_PHASES or item["dispatch_round"] > binding.dispatch_round)
        ):
            # A UI launch asking for the provider's batch API: the document is the dispatcher's
            # now (a new round), launched once the provider has answered; this run is done with it.
            # Handed over once: a retry or re-execution of this step finds it in the later round.
            if item["dispatch_round"] == binding.dispatch_round:
                item_states.requeue(
                    db, item, message=PROVIDER_BATCH_HANDOVER, actor=context.run.run_id, event="provider batch"
                )
            return {"status": PROVIDER_BATCH_HANDOVER, "batch": binding.batch_id}
        parsed = _parse_or_fail(context, ledger, settings, binding.document, item["id"])
        gated = _gated(context, db, llm, key, binding, unfinished)
        outcome = _extract(context, db, gated, settings, binding, parsed, stopping)
    return _result(context, binding.batch_id, binding.document, outcome)


def _gated(
    context: dg.AssetExecutionContext,
    db: Ledger,
    llm: LLMResource,
    key: str,
    binding: Binding,
    unfinished: Callable[[], int],
) -> LLMConfig:
    """The model configuration whose every call holds one slot of the `llm` pool (defs/llm_slots.py)
    and spends the model's budget, shared by every run (core/ledger/budgets.py)."""
    gate = LLMSlotGate(
        context.instance,
        run_id=context.run.run_id,
        step_key=f"{context.asset_key.to_user_string()}[{key}]",
        user=binding.user,
        per_user_limit=llm.slots_per_user,
        run_documents_left=unfinished,
    )
    # Only a step redelivered to another Celery worker within the same run can find claims of its
    # own left behind; elsewhere a dead worker ends its run, and Dagster frees the run's slots (a
    # look at the whole pool per document, behind the storage lock every lane shares, saved).
    if on_celery(context.job_def) and (freed := gate.release_leftovers()):
        context.log.warning(f"{key}: freed {freed} `llm` slot(s) left by an earlier attempt of this step that died")
    config = llm.config()
    if not config.is_offline and (llm.tokens_per_minute or llm.requests_per_minute):
        # The account's budget, shared by every run and worker (core/ledger/budgets.py): limits
        # set in the environment are stated again by every run (they pin the model's budget);
        # without them, what the project page set stays, and what the provider says is learned.
        configure(
            db,
            config.effective_model,
            tokens_per_minute=llm.tokens_per_minute or None,
            requests_per_minute=llm.requests_per_minute or None,
        )
    item_id, run_id = binding.item["id"], context.run.run_id

    def on_refusal(cause: str, seconds: float) -> None:
        context.log.info(f"{key}: {cause}; sending it again in {seconds:g} s (waiting is not an attempt)")
        item_states.note_waited(db, item_id, run_id=run_id, cause=cause)

    budget = LedgerBudget(db, on_wait=_budget_waits(context, key), on_refusal=on_refusal)
    return replace(config, call_gate=gate, budget=budget)


def _budget_waits(context: dg.AssetExecutionContext, key: str) -> Callable[[str, float, Budget | None], None]:
    """Says in the run's log, once a step, that a call waits for the provider's budget (waiting
    is neither an attempt nor a failure)."""
    said = [0.0]

    def on_wait(model: str, left: float, budget: Budget | None) -> None:
        now = time.monotonic()
        if now - said[0] < 30:
            return
        said[0] = now
        what = budget.describe(time.time()) if budget else f"{model}'s budget"
        context.log.info(f"{key}: waiting {left:.0f} s for {what}")

    return on_wait


def _extract(
    context: dg.AssetExecutionContext,
    db: Ledger,
    llm: LLMConfig,
    settings: PipelineSettingsResource,
    binding: Binding,
    parsed: ParsedDocument,
    stopping: threading.Event,
) -> ExtractionOutcome:
    """The extraction, waiting in the step while the model's circuit breaker is open: checked
    every ``BREAKER_POLL_SECONDS``, so the document goes back to work within seconds of the
    probe that finds the provider answering again (a step retry would sleep its whole wait).
    After ``BREAKER_WAIT_IN_STEP_SECONDS`` the wait becomes a step retry, so a long outage shows
    as such in Dagster."""
    item_id, dispatch_round = binding.item["id"], binding.dispatch_round
    run_id = context.run.run_id

    def attempt() -> ExtractionOutcome:
        try:
            return extract_item(
                db,
                item_id=item_id,
                run_id=run_id,
                worker=_worker_id(),
                parsed=parsed,
                llm=llm,
                crashed_run_id=crashed_parent_run(context),
                breaker=settings.breaker_policy(),
                dispatch_round=dispatch_round,
                stopping=stopping.is_set,
            )
        except TransientError as exc:

            def give_up(message: str) -> None:
                for status in (ItemStatus.PENDING, ItemStatus.EXTRACTING):
                    item_states.fail(db, item_id, message=message, from_status=status, run_id=run_id)

            raise retry_or_give_up(
                context,
                cause=str(exc),
                schedule=settings.retry_schedule(),
                retry_after=exc.retry_after,
                on_give_up=give_up,
            ) from exc
        except PermanentError as exc:
            raise dg.Failure(f"extraction failed: {exc}", allow_retries=False) from exc

    deadline = time.monotonic() + BREAKER_WAIT_IN_STEP_SECONDS
    said = -math.inf
    while True:
        outcome = attempt()
        if outcome.status is not OutcomeStatus.WAITING or time.monotonic() >= deadline:
            return outcome
        if time.monotonic() - said >= BREAKER_SAY_EVERY_SECONDS:
            said = time.monotonic()
            say_waiting(context, f"{outcome.reason}; not calling, checking every {BREAKER_POLL_SECONDS:g} s")
        if stopping.wait(BREAKER_POLL_SECONDS):
            return outcome


BREAKER_POLL_SECONDS = 2.0
BREAKER_WAIT_IN_STEP_SECONDS = 600.0
BREAKER_SAY_EVERY_SECONDS = 60.0


def _result(
    context: dg.AssetExecutionContext, batch_id: int, document: DocumentRow, outcome: ExtractionOutcome
) -> dict[str, Any]:
    usage = outcome.usage
    spent = {
        "tokens_in": usage.tokens_in if usage else 0,
        "tokens_out": usage.tokens_out if usage else 0,
        "cost_usd": usage.cost_usd if usage else 0.0,
    }
    if outcome.status is OutcomeStatus.WAITING:
        raise wait_for_breaker(context, until=outcome.wait_until, reason=outcome.reason)
    if outcome.status is OutcomeStatus.DISCARDED:
        raise dg.Failure(outcome.reason, allow_retries=False, metadata={"status": "discarded", **spent})
    if outcome.status is OutcomeStatus.SKIPPED:
        if outcome.item_status == ItemStatus.COMPLETED:
            return {"status": "already completed", "reason": outcome.reason}
        raise dg.Failure(f"not extracted by this run: {outcome.reason}", allow_retries=False)
    clear_waiting(context)
    warning = {"warning": NOTHING_FOUND} if outcome.fields_found == 0 else {}
    if warning:
        context.log.warning(f"{document['filename']}: {NOTHING_FOUND}")
    return {
        **warning,
        "status": "completed",
        "batch": batch_id,
        "filename": document["filename"],
        "model": outcome.model,
        "fields_found": outcome.fields_found,
        "values_verified": outcome.values_verified,
        "values_flagged": outcome.values_flagged,
        "outcomes": outcome.outcomes,
        "template": outcome.template,
        "answer": answer_label(outcome.result),
        "possibly_missed": len(outcome.result.get("possibly_missed") or []),
        **({"follow_up_found": len(found_by_follow_up(outcome.result))} if "follow_up" in outcome.result else {}),
        **(_double_extraction_metadata(outcome) if outcome.second_model else {}),
        **spent,
    }


def _double_extraction_metadata(outcome: ExtractionOutcome) -> dict[str, Any]:
    """The document's agreement between the two models, and where they disagree (per field)."""
    verdicts: dict[str, str] = outcome.result.get("agreement") or {}
    disputed = sorted(path for path, verdict in verdicts.items() if verdict != "agree")
    return {
        "second_model": outcome.second_model,
        "agreement": outcome.agreement,
        "disagreements": ", ".join(f"{path} ({verdicts[path]})" for path in disputed[:30]) or "none",
    }


@dg.asset(
    partitions_def=batches_partitions,
    op_tags=queue_tags(EXPORT_QUEUE),
    group_name="export",
    kinds={"excel"},
    # Downstream of the extraction in the asset graph: a batch's workbook is made of its documents'
    # extractions. Which documents belong to a batch is the ledger's knowledge, not a partition
    # mapping's, so the dependency is drawn to all of them; the export runs when the batch closes.
    deps=[dg.AssetDep(extracted_document, partition_mapping=dg.AllPartitionMapping())],
)
def batch_workbook(
    context: dg.AssetExecutionContext, ledger: LedgerResource, settings: PipelineSettingsResource
) -> dg.MaterializeResult[None]:
    """The Excel workbook an analyst downloads for one finished batch: per document its status,
    cost and counts of verified / verified but flagged / approximate / unverified values; per outcome and per
    value the quote, page, verification status and plausibility checks."""
    batch_id = batch_id_from_partition(context.partition_key)
    db = ledger.ledger()
    with retry_database_outages(context, settings.retry_schedule()):
        batch = get_batch(db, batch_id)
        if batch is None:
            raise dg.Failure(f"batch {batch_id} is not in this ledger", allow_retries=False)
        if batch["status"] != BatchStatus.EXPORTING:
            # Materialized by hand from the UI: of an open batch a partial workbook, of a completed
            # one a fresh copy (with the review decisions so far), each under a name of its own and
            # never recorded as the batch's workbook.
            kind = "partial" if batch["status"] == BatchStatus.OPEN else "copy"
            stamp = utcnow().strftime("%Y%m%dT%H%M%SZ")
            try:
                path = write_workbook(db, batch_id, settings.exports_dir / f"batch-{batch_id}-{kind}-{stamp}.xlsx")
            except OSError as exc:
                raise dg.Failure(f"export failed: {failure_reason(exc, settings.exports_dir)}") from exc
            note = "the batch is still open" if kind == "partial" else f"the batch's workbook is {batch['export_path']}"
            return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)), kind: note})
        try:
            written = write_batch_workbook(db, batch_id, settings.exports_dir)
        except ExportError as exc:
            # Recorded on the batch; the aggregator launches the next attempt after a backoff.
            raise dg.Failure(
                f"batch {batch_id}: {exc}; the batch stays 'exporting' and the export is tried again",
                metadata={"reason": exc.reason},
                allow_retries=False,
            ) from None
        if written.result is ExportResult.REOPENED:
            raise dg.Failure(
                f"batch {batch_id} was reopened (batch retry) while workbook v{written.version} was written: "
                "a new workbook is written when it closes again",
                allow_retries=False,
            )
        assert written.path is not None  # written, or recorded by another writer
        path, version = written.path, written.version
        counts = progress(db, batch_id)
    clear_waiting(context)
    return dg.MaterializeResult(metadata=_workbook_metadata(batch_id, path, version, counts))


def _workbook_metadata(batch_id: int, path: Path, version: int, counts: Progress) -> dict[str, Any]:
    return {
        # Relative: the links work on whatever host and port serve the UI, also for
        # materializations written before `ui` started or after it moved.
        "download": dg.MetadataValue.url(workbook_url("", batch_id)),
        "meta_analysis_csv": dg.MetadataValue.url(csv_url("", batch_id)),
        "path": dg.MetadataValue.path(str(path)),
        "version": version,
        "documents": counts.total,
        "completed": counts.completed,
        "errors": counts.error,
        "cost_usd": counts.cost_usd,
    }
