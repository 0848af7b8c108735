"""Half price through the provider's batch API: the job that submits a batch's prompts and the
sensor that follows the provider's batches (the rules are in core/extraction/batch_job_flow.py)."""

from datetime import timedelta

import dagster as dg
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

from extraction_pipeline.core.errors import TransientError
from extraction_pipeline.core.extraction.batch_job_flow import follow, prepare
from extraction_pipeline.core.ledger import utcnow
from extraction_pipeline.core.ledger.batch_jobs import (
    batches_to_prepare,
    end_waiting_without_open_batches,
    finish_preparation,
    open_provider_batches,
    record_poll,
)
from extraction_pipeline.core.ledger.batches import BATCH_RUN_TAG
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.sensors import described_sensor

PROVIDER_BATCH_TAG = "extraction/provider_batch_of"  # the batch whose prompts the run submits
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

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(db, sha256=item["sha256"], stored_path=item["stored_path"], options=options)

    try:
        done = prepare(db, config.batch_id, llm.config(), parse, progress=context.log.info)
    except Exception as exc:
        # The provider or the ledger's database down: the retry finds what this attempt sent.
        if isinstance(exc, TransientError) or is_database_outage(exc):
            context.log.warning(describe_database_outage(exc) if is_database_outage(exc) else str(exc))
            raise dg.RetryRequested(max_retries=SUBMIT_RETRIES, seconds_to_wait=SUBMIT_RETRY_SECONDS) from exc
        raise
    context.log.info(done.describe())
    context.add_output_metadata({"prompts": done.prompts, "already_paid": done.already_paid})


@dg.job(
    description="Submit a batch's prompts to the provider's batch API (launched by provider_batch_follower).",
    # Beside the daemon, whatever runs the extraction steps: one short step, no pool to wait for.
    executor_def=dg.in_process_executor,
)
def submit_provider_batch_job() -> None:
    submit_provider_batch()


@described_sensor(
    minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING, jobs=[submit_provider_batch_job]
)
def provider_batch_follower(
    context: dg.SensorEvaluationContext, ledger: LedgerResource, llm: LLMResource
) -> dg.SensorResult:
    """Half price for batches created with `--provider-batch`: launches the run that submits a
    batch's prompts to the provider's batch API (one per batch, run key from the batch), then asks
    the provider how each submitted batch stands. When one has ended, its answers are stored as
    paid for (at the batch price, on each document) and the batch's documents are dispatched: their
    runs ground those answers and ask what the provider did not answer as ordinary calls. A submit
    run that failed ends the waiting the same way: nothing waits forever."""
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
    records = open_provider_batches(db, polled_before=utcnow() - timedelta(seconds=POLL_EVERY_SECONDS))
    if records:
        config = llm.config()
        for record in records:
            try:
                ended += follow(db, record, config)
            except Exception as exc:  # one batch's trouble never stops the others, or the submits
                # Asked again in a few minutes (a provider down is given up after a day).
                record_poll(db, record.id, record.status)
                context.log.warning(f"provider batch {record.provider_batch_id}: {type(exc).__name__}: {exc}")
    # Whatever ended a batch's last provider batch (a crash included), its documents then run.
    released = end_waiting_without_open_batches(db)
    if not requests and not records and not released:
        return dg.SensorResult(skip_reason="nothing to submit, and no provider batch due to be asked about")
    context.log.info(
        f"{len(requests)} to submit, {len(records)} asked about, {ended} ended, batches released: {released}"
    )
    return dg.SensorResult(run_requests=requests)
