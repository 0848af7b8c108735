"""The one Definitions object of the code location (thin: wiring only)."""

from __future__ import annotations

import os

import dagster as dg

from extraction_pipeline.core.settings import load_settings
from extraction_pipeline.defs.assets import batch_workbook, extracted_document, parsed_document
from extraction_pipeline.defs.executor import step_executor
from extraction_pipeline.defs.jobs import export_batch_job, extract_documents_job, extract_parsed_documents_job
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.sensors import (
    batch_aggregator,
    batch_dispatcher,
    document_partitions_sensor,
    stray_partitions_sensor,
)


def _env_or(name: str, default: str) -> str | dg.EnvVar:
    # EnvVar when set, so each run process reads it from its own environment (and the UI shows
    # the variable's name, never a secret); otherwise the documented default.
    return dg.EnvVar(name) if os.environ.get(name) else default


_settings = load_settings()

defs = dg.Definitions(
    assets=[parsed_document, extracted_document, batch_workbook],
    jobs=[extract_documents_job, extract_parsed_documents_job, export_batch_job],
    sensors=[document_partitions_sensor, stray_partitions_sensor, batch_dispatcher, batch_aggregator],
    resources={
        "ledger": LedgerResource(database_url=_env_or("EXTRACTION_DATABASE_URL", _settings.ledger_url)),
        "llm": LLMResource(
            model=_env_or("EXTRACTION_MODEL", ""),
            api_base=_env_or("EXTRACTION_API_BASE", ""),
            api_key=_env_or("EXTRACTION_API_KEY", ""),
            timeout_seconds=_settings.llm_timeout_seconds,
            context_tokens=_settings.context_tokens,
            slots_per_user=_settings.llm_slots_per_user,
        ),
        "settings": PipelineSettingsResource(
            home=str(_settings.home_dir),
            stale_minutes=_settings.stale_minutes,
            reconcile_grace_seconds=_settings.reconcile_grace_seconds,
            parse_timeout_seconds=_settings.parse_timeout_seconds,
            max_pages=_settings.max_pages,
            max_pdf_mb=_settings.max_pdf_mb,
            table_detection=_settings.table_detection,
            retry_budget_minutes=_settings.retry_budget_minutes,
            retry_base_seconds=_settings.retry_base_seconds,
            retry_max_delay_seconds=_settings.retry_max_delay_seconds,
            breaker_failures=_settings.breaker_failures,
            max_dispatch_rounds=_settings.max_dispatch_rounds,
            public_url=_settings.public_url,
        ),
    },
    # In each run's own process, or on Celery workers (defs/executor.py).
    executor=step_executor(_settings),
)
