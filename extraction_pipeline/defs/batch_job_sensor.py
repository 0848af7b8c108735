"""Half price through the provider's batch API: the job that submits a batch's prompts, the job
that collects an ended provider batch's answers, and the sensor that follows the provider's
batches and launches both (the rules are in core/extraction/batch_job_flow.py). A tick only asks
the provider short questions (how a batch stands); downloading and reading results, which can
take minutes for a large batch, happen in a run."""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

from extraction_pipeline.core.errors import TransientError
from extraction_pipeline.core.extraction.batch_job_flow import follow, give_up, look, prepare, waiting_to_be_collected
from extraction_pipeline.core.ledger import utcnow
from extraction_pipeline.core.ledger.batch_jobs import (
    ProviderBatchRecord,
    batches_to_prepare,
    end_waiting_without_open_batches,
    finish_preparation,
    open_provider_batches,
    provider_batch_record,
    record_poll,
)
from extraction_pipeline.core.ledger.batches import BATCH_RUN_TAG, get_batch
from extraction_pipeline.core.ledger.database import Ledger
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document, parse_documents
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.sensors import described_sensor

PROVIDER_BATCH_TAG = "extraction/provider_batch_of"  # the batch whose prompts the run submits
COLLECT_TAG = "extraction/provider_batch_record"  # the provider batch (ledger row) whose answers the run collects
# The answers of an ended provider batch are paid for: a collect run that failed (the provider or
# the ledger down past the run's retries, its files unreadable) is launched again after a pause,
# for a day; then the batch is given up and its prompts are asked by ordinary calls.
COLLECT_PAUSE = timedelta(minutes=10)
COLLECT_GIVE_UP_AFTER = timedelta(hours=24)
COLLECT_ATTEMPTS = 3  # and at least this many runs before giving up
COLLECT_RETRIES, COLLECT_RETRY_SECONDS = 5, 60
# A provider down while submitting is retried this often, this far apart; then the run fails and
# the sensor sends the batch's documents to ordinary calls.
SUBMIT_RETRIES, SUBMIT_RETRY_SECONDS = 10, 60
POLL_EVERY_SECONDS = 300.0  # how often a submitted provider batch is asked how it stands


class SubmitConfig(dg.Config):
    batch_id: int


@dg.op
def submit_provider_batch(
    context: dg.OpExecutionContext,
    config: SubmitConfig,
    ledger: LedgerResource,
    llm: LLMResource,
    settings: PipelineSettingsResource,
) -> None:
    """Parses the batch's documents (cached for their runs), builds their first prompts and submits
    them to the provider's batch API; a provider that is down is retried like any call."""
    db = ledger.ledger()
    options = settings.parse_options()
    # Two runs submitting one batch at once (one launched by hand) would each take the other's
    # noted prompts for a dead attempt's: only one submits.
    running = context.instance.get_run_records(
        RunsFilter(
            job_name=context.job_name,
            statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING],
        )
    )
    for other in running:
        if other.dagster_run.run_id != context.run_id and _batch_of(other.dagster_run.run_config) == config.batch_id:
            context.log.warning(f"run {other.dagster_run.run_id} is submitting batch {config.batch_id}: this one stops")
            return

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(db, sha256=item["sha256"], stored_path=item["stored_path"], options=options)

    def parse_all(items: list[ItemListing]) -> None:
        # Into the cache together (one isolated child for many, not one each): ``parse`` then reads
        # it, and a PDF that does not parse is told there, for its document alone.
        parse_documents(db, [(item["sha256"], item["stored_path"]) for item in items], options)

    try:
        done = prepare(db, config.batch_id, llm.config(), parse, progress=context.log.info, parse_all=parse_all)
    except Exception as exc:
        # The provider or the ledger's database down: the retry finds what this attempt sent.
        if isinstance(exc, TransientError) or is_database_outage(exc):
            context.log.warning(describe_database_outage(exc) if is_database_outage(exc) else str(exc))
            raise dg.RetryRequested(max_retries=SUBMIT_RETRIES, seconds_to_wait=SUBMIT_RETRY_SECONDS) from exc
        raise
    context.log.info(done.describe())
    context.add_output_metadata({"prompts": done.prompts, "already_paid": done.already_paid})


def _batch_of(run_config: Any) -> Any:
    """The batch a submit run's config names (None: it names none)."""
    try:
        return run_config["ops"]["submit_provider_batch"]["config"]["batch_id"]
    except (KeyError, TypeError):
        return None


@dg.job(
    description="Submit a batch's prompts to the provider's batch API (launched by provider_batch_follower).",
    # Beside the daemon, whatever runs the extraction steps: one short step, no pool to wait for.
    executor_def=dg.in_process_executor,
)
def submit_provider_batch_job() -> None:
    submit_provider_batch()


class CollectConfig(dg.Config):
    record_id: int  # the provider batch's row in the ledger


@dg.op
def collect_provider_batch(
    context: dg.OpExecutionContext, config: CollectConfig, ledger: LedgerResource, llm: LLMResource
) -> None:
    """Downloads an ended provider batch's results and stores its answers as paid for (at the
    batch price, on each document); what it did not answer is left to ordinary calls. The
    provider or the ledger down is retried like any call."""
    db = ledger.ledger()
    record = provider_batch_record(db, config.record_id)
    if record is None or record.ended:
        context.log.info(f"provider batch record {config.record_id}: already collected")
        return
    try:
        follow(db, record, llm.config())
    except Exception as exc:
        if isinstance(exc, TransientError) or is_database_outage(exc):
            context.log.warning(describe_database_outage(exc) if is_database_outage(exc) else str(exc))
            raise dg.RetryRequested(max_retries=COLLECT_RETRIES, seconds_to_wait=COLLECT_RETRY_SECONDS) from exc
        raise
    done = provider_batch_record(db, config.record_id)
    if done is not None:
        context.log.info(done.describe())
        context.add_output_metadata({"answered": done.answered, "asked_as_ordinary_calls": done.fallen_back})


@dg.job(
    description="Collect an ended provider batch's answers (launched by provider_batch_follower).",
    executor_def=dg.in_process_executor,
)
def collect_provider_batch_job() -> None:
    collect_provider_batch()


def _collect_request(
    context: dg.SensorEvaluationContext, db: Ledger, record: ProviderBatchRecord
) -> dg.RunRequest | None:
    """The run that collects ``record``'s answers: none while one is queued or running, or for
    ``COLLECT_PAUSE`` after one failed; after ``COLLECT_ATTEMPTS`` runs and ``COLLECT_GIVE_UP_AFTER``
    since the first, the provider batch is given up here."""
    runs = context.instance.get_run_records(RunsFilter(tags={COLLECT_TAG: str(record.id)}))  # newest first
    if any(not run.dagster_run.is_finished for run in runs):
        return None
    now = datetime.now(UTC)
    if runs and runs[0].end_time and now - datetime.fromtimestamp(runs[0].end_time, UTC) < COLLECT_PAUSE:
        return None
    if len(runs) >= COLLECT_ATTEMPTS and now - runs[-1].create_timestamp.astimezone(UTC) >= COLLECT_GIVE_UP_AFTER:
        give_up(
            db,
            record,
            f"its results could not be collected in {len(runs)} runs over {COLLECT_GIVE_UP_AFTER} "
            f"(last: {runs[0].dagster_run.run_id})",
        )
        return None
    batch = get_batch(db, record.batch_id)
    uid = batch["uid"] if batch is not None else str(record.batch_id)
    return dg.RunRequest(
        run_key=f"{uid}-provider-batch-{record.id}-collect-{len(runs) + 1}",
        job_name=collect_provider_batch_job.name,
        run_config={"ops": {"collect_provider_batch": {"config": {"record_id": record.id}}}},
        tags={COLLECT_TAG: str(record.id), BATCH_RUN_TAG: str(record.batch_id)},
    )


@described_sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    jobs=[submit_provider_batch_job, collect_provider_batch_job],
)
def provider_batch_follower(
    context: dg.SensorEvaluationContext, ledger: LedgerResource, llm: LLMResource
) -> dg.SensorResult:
    """Half price for batches created with `--provider-batch`: launches the run that submits a
    batch's prompts to the provider's batch API (one per batch, run key from the batch), then asks
    the provider how each submitted batch stands. When one has ended, it launches the run that
    stores its answers as paid for (at the batch price, on each document); then the batch's
    documents are dispatched: their runs ground those answers and ask what the provider did not
    answer as ordinary calls. A submit run that failed ends the waiting the same way, and a
    provider batch whose results cannot be collected is given up: nothing waits forever."""
    db = ledger.ledger()
    requests = []
    for batch in batches_to_prepare(db):
        runs = context.instance.get_run_records(RunsFilter(tags={PROVIDER_BATCH_TAG: str(batch["id"])}), limit=1)
        if runs and runs[0].dagster_run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
            run_id = runs[0].dagster_run.run_id
            finish_preparation(
                db,
                batch["id"],
                message=f"submitting failed (run {run_id}): its documents are asked by ordinary calls",
            )
            continue
        if not runs:
            requests.append(
                dg.RunRequest(
                    run_key=f"{batch['uid']}-provider-batch",
                    job_name=submit_provider_batch_job.name,
                    run_config={"ops": {"submit_provider_batch": {"config": {"batch_id": batch["id"]}}}},
                    tags={PROVIDER_BATCH_TAG: str(batch["id"]), BATCH_RUN_TAG: str(batch["id"])},
                )
            )
    ended = 0
    # Asking costs the litellm import in this process (seconds of CPU) and a provider batch takes
    # hours: each is asked about every few minutes, not every tick.
    due_before = utcnow() - timedelta(seconds=POLL_EVERY_SECONDS)
    records = open_provider_batches(db)
    asked = [r for r in records if not waiting_to_be_collected(r) and (r.polled_at is None or r.polled_at < due_before)]
    if asked:
        config = llm.config()
        for record in asked:
            try:
                ended += look(db, record, config)
            except Exception as exc:  # one batch's trouble never stops the others, or the submits
                # Asked again in a few minutes (a provider down is given up after a day).
                record_poll(db, record.id, record.status)
                context.log.warning(f"provider batch {record.provider_batch_id}: {type(exc).__name__}: {exc}")
    for record in open_provider_batches(db):
        if waiting_to_be_collected(record):
            collect = _collect_request(context, db, record)
            if collect is not None:
                requests.append(collect)
    # Whatever ended a batch's last provider batch (a crash included), its documents then run.
    released = end_waiting_without_open_batches(db)
    if not requests and not asked and not released:
        return dg.SensorResult(skip_reason="nothing to submit or collect, and no provider batch due to be asked about")
    context.log.info(
        f"{len(requests)} runs to launch, {len(asked)} asked about, {ended} ended at the provider, "
        f"batches released: {released}"
    )
    return dg.SensorResult(run_requests=requests)
