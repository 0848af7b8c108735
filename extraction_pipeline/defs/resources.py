"""Resources: the ledger database, the LLM endpoint, and the instance home's settings.

Each is a ConfigurableResource fed from ``EXTRACTION_*`` environment variables (``dg.EnvVar``), so
every run process resolves them from its own environment and the UI never shows a secret.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from extraction_pipeline.core.backoff import PROBE_AT_LEAST_EVERY_SECONDS, BreakerPolicy, RetrySchedule
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.runs.reconcile import Limits
from extraction_pipeline.core.settings import Settings, per_provider

_LEDGERS: dict[str, Ledger] = {}


def _env_or(name: str, default: str) -> str | dg.EnvVar:
    # EnvVar when set, so each run process reads it from its own environment (and the UI shows
    # the variable's name, never a secret); otherwise the value the settings resolved.
    return dg.EnvVar(name) if os.environ.get(name) else default


# Every default below is the Settings field's own (its class attribute): written once, there.
_D = Settings


class LedgerResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # dagster's generic base
    """The ledger of documents, batches and items (SQLite file or PostgreSQL)."""

    database_url: str

    @classmethod
    def from_settings(cls, settings: Settings) -> LedgerResource:
        return cls(database_url=_env_or("EXTRACTION_DATABASE_URL", settings.ledger_url))

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
    api_keys: str = ""  # EXTRACTION_API_KEYS: other providers' keys, NAME=KEY,... (per_provider)
    api_bases: str = ""  # EXTRACTION_API_BASES: their endpoints, NAME=URL,...
    timeout_seconds: float = _D.llm_timeout_seconds
    context_tokens: int = _D.context_tokens  # the context window; 0: litellm's figure for the model
    output_tokens: int = _D.output_tokens  # the answer limit; 0: litellm's figure for the model
    tokens_per_minute: int = _D.tokens_per_minute  # the account's budget for `model`; 0: none configured
    requests_per_minute: int = _D.requests_per_minute
    slots_per_user: int = _D.llm_slots_per_user  # most `llm` slots one analyst's calls hold; 0: all

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMResource:
        return cls(
            model=_env_or("EXTRACTION_MODEL", ""),
            api_base=_env_or("EXTRACTION_API_BASE", ""),
            api_key=_env_or("EXTRACTION_API_KEY", ""),
            api_keys=_env_or("EXTRACTION_API_KEYS", ""),
            api_bases=_env_or("EXTRACTION_API_BASES", ""),
            timeout_seconds=settings.llm_timeout_seconds,
            context_tokens=settings.context_tokens,
            output_tokens=settings.output_tokens,
            tokens_per_minute=settings.tokens_per_minute,
            requests_per_minute=settings.requests_per_minute,
            slots_per_user=settings.llm_slots_per_user,
        )

    def config(self) -> LLMConfig:
        return LLMConfig(
            model=self.model or None,
            api_base=self.api_base or None,
            api_key=self.api_key or None,
            keys=per_provider(self.api_keys, "EXTRACTION_API_KEYS"),
            bases=per_provider(self.api_bases, "EXTRACTION_API_BASES", urls=True),
            timeout_seconds=self.timeout_seconds,
            context_tokens=self.context_tokens or None,
            output_tokens=self.output_tokens or None,
        )


# The settings the Dagster side needs, carried into every run by the resource's config.
_PIPELINE_FIELDS = (
    "stale_minutes",
    "reconcile_grace_seconds",
    "parse_timeout_seconds",
    "max_pages",
    "max_pdf_mb",
    "table_detection",
    "retry_budget_minutes",
    "retry_base_seconds",
    "retry_max_delay_seconds",
    "breaker_failures",
    "max_dispatch_rounds",
    "documents_per_run",
)


class PipelineSettingsResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where exports land, how long the aggregator waits before judging stuck items, the limits
    of the PDF parse (hard timeout, page and size limits), how transient failures are retried
    (time budget, backoff, circuit breaker, dispatch rounds) and how many documents a run takes."""

    home: str
    stale_minutes: float = _D.stale_minutes
    reconcile_grace_seconds: float = _D.reconcile_grace_seconds
    parse_timeout_seconds: float = _D.parse_timeout_seconds
    max_pages: int = _D.max_pages
    max_pdf_mb: float = _D.max_pdf_mb
    table_detection: str = _D.table_detection
    retry_budget_minutes: float = _D.retry_budget_minutes
    retry_base_seconds: float = _D.retry_base_seconds
    retry_max_delay_seconds: float = _D.retry_max_delay_seconds
    breaker_failures: int = _D.breaker_failures
    max_dispatch_rounds: int = _D.max_dispatch_rounds
    documents_per_run: int = _D.documents_per_run

    @classmethod
    def from_settings(cls, settings: Settings) -> PipelineSettingsResource:
        return cls(home=str(settings.home_dir), **{name: getattr(settings, name) for name in _PIPELINE_FIELDS})

    def as_settings(self) -> Settings:
        return Settings(home=Path(self.home), **{name: getattr(self, name) for name in _PIPELINE_FIELDS})

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
            max_cooldown_seconds=min(self.retry_max_delay_seconds, PROBE_AT_LEAST_EVERY_SECONDS),
        )

    def reconcile_limits(self) -> Limits:
        return Limits(grace_seconds=self.reconcile_grace_seconds, max_rounds=self.max_dispatch_rounds)

    @property
    def exports_dir(self) -> Path:
        return self.as_settings().exports_dir

    def parse_options(self) -> ParseOptions:
        return self.as_settings().parse_options()
