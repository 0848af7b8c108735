"""The one Definitions object of the code location (thin: wiring only).

Loaded lazily (``@dg.definitions``): the settings are read when Dagster loads the code location,
in each process that does, never when a module is imported.
"""

from __future__ import annotations

import dagster as dg

from extraction_pipeline.core.settings import load_settings
from extraction_pipeline.defs.assets import batch_workbook, extracted_document, parsed_document
from extraction_pipeline.defs.batch_job_sensor import (
    collect_provider_batch_job,
    provider_batch_follower,
    submit_provider_batch_job,
)
from extraction_pipeline.defs.executor import step_executor
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job, extract_parsed_documents_job
from extraction_pipeline.defs.partitions import documents_backfill_policy
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.sensors import (
    batch_aggregator,
    batch_dispatcher,
    document_partitions_sensor,
    stray_partitions_sensor,
)


@dg.definitions
def defs() -> dg.Definitions:
    settings = load_settings()
    per_run = documents_backfill_policy(settings.documents_per_run)
    return dg.Definitions(
        assets=[
            parsed_document.with_attributes(backfill_policy=per_run),
            extracted_document.with_attributes(backfill_policy=per_run),
            batch_workbook,
        ],
        jobs=[
            extract_documents_job,
            extract_parsed_documents_job,
            export_batch_job,
            submit_provider_batch_job,
            collect_provider_batch_job,
        ],
        sensors=[
            document_partitions_sensor,
            stray_partitions_sensor,
            batch_dispatcher,
            batch_aggregator,
            provider_batch_follower,
        ],
        resources={
            "ledger": LedgerResource.from_settings(settings),
            "llm": LLMResource.from_settings(settings),
            "settings": PipelineSettingsResource.from_settings(settings),
        },
        # In each run's own process, or on Celery workers (defs/executor.py).
        executor=step_executor(settings),
    )
