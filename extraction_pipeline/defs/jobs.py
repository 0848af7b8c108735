"""Jobs the sensors launch. UI backfills use Dagster's implicit asset job instead."""

import dagster as dg

from extraction_pipeline.defs.assets import batch_workbook, extracted_document, parsed_document

extract_documents_job = dg.define_asset_job(
    "extract_documents",
    selection=dg.AssetSelection.assets(parsed_document, extracted_document),
    description="Parse and extract one document of a batch (launched by the batch_dispatcher sensor).",
)

extract_parsed_documents_job = dg.define_asset_job(
    "extract_parsed_documents",
    selection=dg.AssetSelection.assets(extracted_document),
    description=(
        "Extract documents whose parse is already cached (launched by the batch_dispatcher sensor): "
        "no parse step, so a run never waits for a `pdf_parse` slot it does not need."
    ),
)

export_batch_job = dg.define_asset_job(
    "export_batch",
    selection=dg.AssetSelection.assets(batch_workbook),
    description="Write a closed batch's workbook (launched by the batch_aggregator sensor).",
    # Always beside the daemon, whatever runs the extraction steps: the download page serves the
    # workbook from this machine's home.
    executor_def=dg.in_process_executor,
)
