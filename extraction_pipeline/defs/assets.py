"""Assets: a document's parsed text, its grounded extraction, and a batch's workbook."""

import os
import socket
from typing import Any

import dagster as dg

from extraction_pipeline.core.errors import PermanentError, TransientError
from extraction_pipeline.core.export import default_export_path, write_workbook
from extraction_pipeline.core.extract import extract_item
from extraction_pipeline.core.ledger import ItemStatus
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.batches import set_export_path
from extraction_pipeline.core.ledger.queries import progress
from extraction_pipeline.core.parsing import ParsedDocument, parse_document
from extraction_pipeline.defs.binding import bind_run, crashed_parent_run
from extraction_pipeline.defs.partitions import batch_id_from_partition, batches_partitions, documents_partitions
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource

TERMINAL = (ItemStatus.COMPLETED.value, ItemStatus.ERROR.value)

# Transient LLM failures (429, 5xx, timeouts) back off exponentially with jitter: 10 s, 20 s, 40 s.
EXTRACTION_RETRY_POLICY = dg.RetryPolicy(
    max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _parse_or_fail(
    context: dg.AssetExecutionContext,
    ledger: LedgerResource,
    settings: PipelineSettingsResource,
    document: dict[str, Any],
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
        # A broken PDF fails this document only, permanently; the rest of the batch goes on.
        item_states.fail(ledger.ledger(), item_id, message=f"parse failed: {exc}", from_status=ItemStatus.PENDING)
        item_states.fail(
            ledger.ledger(),
            item_id,
            message=f"parse failed: {exc}",
            from_status=ItemStatus.EXTRACTING,
            run_id=context.run.run_id,
        )
        raise dg.Failure(f"parse failed: {exc}", allow_retries=False) from exc


@dg.asset(
    partitions_def=documents_partitions,
    pool="pdf_parse",
    group_name="extraction",
    kinds={"pdf"},
)
def parsed_document(
    context: dg.AssetExecutionContext, ledger: LedgerResource, settings: PipelineSettingsResource
) -> dg.MaterializeResult[None]:
    """The text of one registered trial PDF, page by page — what the extraction reads and what
    every quote is checked against. Parsed once per content (cached by sha256 + parser version)."""
    binding = bind_run(context, ledger.ledger())
    if binding.item["status"] in TERMINAL:
        return dg.MaterializeResult(
            metadata={"skipped": f"item already {binding.item['status']}", "batch": binding.batch_id}
        )
    parsed = _parse_or_fail(context, ledger, settings, binding.document, binding.item["id"])
    return dg.MaterializeResult(
        metadata={"batch": binding.batch_id, "filename": binding.document["filename"], **parsed.metadata()}
    )


@dg.asset(
    partitions_def=documents_partitions,
    deps=[parsed_document],
    pool="llm",
    retry_policy=EXTRACTION_RETRY_POLICY,
    group_name="extraction",
    kinds={"llm"},
)
def extracted_document(
    context: dg.AssetExecutionContext, ledger: LedgerResource, llm: LLMResource, settings: PipelineSettingsResource
) -> dg.MaterializeResult[None]:
    """The structured data of one trial as its batch's frozen template asks (study details,
    baseline per arm, Risk of Bias, every reported outcome, project fields), each value with its
    verbatim quote, page, verification status and plausibility checks, recorded on the batch item."""
    db = ledger.ledger()
    binding = bind_run(context, db)
    item_id = binding.item["id"]
    if binding.item["status"] in TERMINAL:
        return dg.MaterializeResult(metadata={"status": "skipped", "reason": f"item already {binding.item['status']}"})
    parsed = _parse_or_fail(context, ledger, settings, binding.document, item_id)
    try:
        outcome = extract_item(
            db,
            item_id=item_id,
            run_id=context.run.run_id,
            worker=_worker_id(),
            parsed=parsed,
            llm=llm.config(),
            crashed_run_id=crashed_parent_run(context),
        )
    except TransientError as exc:
        context.log.warning(f"transient LLM error, item {item_id} back to pending; retrying: {exc}")
        raise
    except PermanentError as exc:
        raise dg.Failure(f"extraction failed: {exc}", allow_retries=False) from exc
    if outcome.status != "completed":
        context.log.info(f"item {item_id} skipped: {outcome.reason}")
        return dg.MaterializeResult(metadata={"status": "skipped", "reason": outcome.reason})
    usage = outcome.usage
    return dg.MaterializeResult(
        metadata={
            "status": "completed",
            "batch": binding.batch_id,
            "filename": binding.document["filename"],
            "model": outcome.model,
            "fields_found": outcome.fields_found,
            "quotes_verified": outcome.quotes_verified,
            "values_flagged": outcome.values_flagged,
            "outcomes": outcome.outcomes,
            "template": outcome.template,
            "tokens_in": usage.tokens_in if usage else 0,
            "tokens_out": usage.tokens_out if usage else 0,
            "cost_usd": usage.cost_usd if usage else 0.0,
        }
    )


@dg.asset(partitions_def=batches_partitions, group_name="export", kinds={"excel"})
def batch_workbook(
    context: dg.AssetExecutionContext, ledger: LedgerResource, settings: PipelineSettingsResource
) -> dg.MaterializeResult[None]:
    """The Excel workbook an analyst downloads for one finished batch: per document its status,
    cost and counts of verified / approximate / unverified / flagged values; per outcome and per
    value the quote, page, verification status and plausibility checks."""
    batch_id = batch_id_from_partition(context.partition_key)
    db = ledger.ledger()
    path = write_workbook(db, batch_id, default_export_path(settings.exports_dir, batch_id))
    set_export_path(db, batch_id, str(path))
    counts = progress(db, batch_id)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "documents": counts.total,
            "completed": counts.completed,
            "errors": counts.error,
            "cost_usd": counts.cost_usd,
        }
    )
