"""Resources: the ledger database, the LLM endpoint, and the instance home's settings.

Each is a ConfigurableResource fed from ``EXTRACTION_*`` environment variables (``dg.EnvVar``), so
every run process resolves them from its own environment and the UI never shows a secret.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from extraction_pipeline.core.backoff import BreakerPolicy, RetrySchedule
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.parsing import ParseOptions
from extraction_pipeline.core.runs.reconcile import Limits

_LEDGERS: dict[str, Ledger] = {}


class LedgerResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # dagster's generic base
    """The ledger of documents, batches and items (SQLite file or PostgreSQL)."""

    database_url: str

    def ledger(self) -> Ledger:
        # One engine (connection pool) per process and URL, created on first use.
        if self.database_url not in _LEDGERS:
            _LEDGERS[self.database_url] = Ledger.connect(self.database_url)
        return _LEDGERS[self.database_url]


class LLMResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The model used for extraction: a litellm model string; empty means the offline extractor."""

    model: str = ""
    api_base: str = ""
    api_key: str = ""
    timeout_seconds: float = 120.0
    context_tokens: int = 0  # the prompt limit; 0: litellm's figure for the model
    slots_per_user: int = 0  # most `llm` pool slots one analyst's calls hold at once; 0: the whole pool

    def config(self) -> LLMConfig:
        return LLMConfig(
            model=self.model or None,
            api_base=self.api_base or None,
            api_key=self.api_key or None,
            timeout_seconds=self.timeout_seconds,
            context_tokens=self.context_tokens or None,
        )


class PipelineSettingsResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where exports land, how long the aggregator waits before judging stuck items, the limits
    of the PDF parse (hard timeout, page and size limits), and how transient failures are retried
    (time budget, backoff, circuit breaker, dispatch rounds)."""

    home: str
    stale_minutes: float = 30.0
    reconcile_grace_seconds: float = 30.0
    parse_timeout_seconds: float = 120.0
    max_pages: int = 300
    max_pdf_mb: float = 200.0
    table_detection: str = "lines"
    retry_budget_minutes: float = 30.0
    retry_base_seconds: float = 10.0
    retry_max_delay_seconds: float = 300.0
    breaker_failures: int = 3
    max_dispatch_rounds: int = 5
    public_url: str = "http://127.0.0.1:3000"

    def retry_schedule(self) -> RetrySchedule:
        return RetrySchedule(
            budget_seconds=self.retry_budget_minutes * 60,
            base_seconds=self.retry_base_seconds,
            max_delay_seconds=self.retry_max_delay_seconds,
        )

    def export_retry_schedule(self) -> RetrySchedule:
        """A failed workbook is retried for as long as it takes (the batch says why meanwhile),
        with the same backoff as any transient failure."""
        return RetrySchedule(
            budget_seconds=float("inf"),
            base_seconds=self.retry_base_seconds,
            max_delay_seconds=self.retry_max_delay_seconds,
        )

    def breaker_policy(self) -> BreakerPolicy:
        return BreakerPolicy(
            failures=self.breaker_failures,
            base_cooldown_seconds=self.retry_base_seconds,
            max_cooldown_seconds=self.retry_max_delay_seconds,
        )

    def reconcile_limits(self) -> Limits:
        return Limits(grace_seconds=self.reconcile_grace_seconds, max_rounds=self.max_dispatch_rounds)

    @property
    def exports_dir(self) -> Path:
        return Path(self.home) / "exports"

    def parse_options(self) -> ParseOptions:
        limits = EngineOptions(
            max_pages=self.max_pages,
            max_bytes=int(self.max_pdf_mb * 1024 * 1024),
            table_detection=self.table_detection,
        )
        return ParseOptions(timeout_seconds=self.parse_timeout_seconds, limits=limits)
