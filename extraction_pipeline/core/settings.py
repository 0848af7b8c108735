"""Runtime settings, all from environment variables prefixed ``EXTRACTION_``.

One place resolves where the instance home, the ledger and the exports live, so the CLI, the
Dagster code server and every run process agree on them. Deliberately a plain dataclass read
from ``os.environ`` (not pydantic-settings): every CLI call pays for this import, and
``batch create`` must answer in well under a second.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from extraction_pipeline.core.errors import ConfigError

if TYPE_CHECKING:  # imported lazily at run time: `batch create` must not pay for it
    from extraction_pipeline.core.llm.config import LLMConfig
    from extraction_pipeline.core.pdf.isolation import ParseOptions

PREFIX = "EXTRACTION_"
DEFAULT_HOME = Path(".extraction_home")
DEFAULT_BROKER = "pyamqp://guest@127.0.0.1//"
# Dagster concurrency pools (set by `init --parse-slots/--llm-slots`, read back from the instance).
DEFAULT_PARSE_SLOTS = 2
DEFAULT_UI_URL = "http://127.0.0.1:3000"  # `ui` with no options
UI_URL_FILE = "ui.url"  # under the home: the address `ui` serves, written when it starts
DEFAULT_LLM_SLOTS = 5
BROKER_SCHEMES = ("pyamqp://", "amqp://", "amqps://", "redis://", "rediss://")


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(PREFIX + name, "").strip()
    return value or None


def _number(env: Mapping[str, str], name: str, default: float, *, minimum: float, strict: bool) -> float:
    raw = _text(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{PREFIX}{name} must be a number, got {raw!r}") from None
    if value < minimum or (strict and value == minimum):
        relation = ">" if strict else ">="
        raise ConfigError(f"{PREFIX}{name} must be {relation} {minimum:g}, got {raw!r}")
    return value


def _count(env: Mapping[str, str], name: str, default: int, *, minimum: int, maximum: int) -> int:
    value = _number(env, name, default, minimum=minimum, strict=False)
    if not float(value).is_integer() or value > maximum:
        raise ConfigError(
            f"{PREFIX}{name} must be a whole number from {minimum} to {maximum}, got {_text(env, name)!r}"
        )
    return int(value)


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = (_text(env, name) or "").lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{PREFIX}{name} must be true or false, got {_text(env, name)!r}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = _text(env, name)
    if raw is None:
        return default
    if raw not in choices:
        raise ConfigError(f"{PREFIX}{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _networks(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """Comma-separated IP addresses or CIDR networks; a typo must fail loudly, since a list that
    silently trusts nothing (or too much) decides whose word names the user."""
    entries = tuple(entry.strip() for entry in (_text(env, name) or "").split(",") if entry.strip())
    for entry in entries:
        import ipaddress  # only when the list is set: every CLI call reads the settings

        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(
                f"{PREFIX}{name} holds IP addresses or networks (e.g. 10.0.0.5,10.1.0.0/16), got {entry!r}"
            ) from None
    return entries


def _executor(env: Mapping[str, str]) -> str:
    executor = _choice(env, "EXECUTOR", ("in_process", "celery"), "in_process")
    if executor == "celery":
        # Workers on other machines share only PostgreSQL and the broker with the daemon.
        ledger = _text(env, "DATABASE_URL") or ""
        if not ledger.startswith("postgresql") or env.get("EXTRACTION_DAGSTER_STORAGE") != "postgres":
            raise ConfigError(
                "EXTRACTION_EXECUTOR=celery needs PostgreSQL for the ledger (EXTRACTION_DATABASE_URL="
                "postgresql+psycopg2://...) and for Dagster (EXTRACTION_DAGSTER_STORAGE=postgres): "
                "workers on other machines share only those and the broker"
            )
    return executor


def _broker(env: Mapping[str, str]) -> str:
    broker = _text(env, "CELERY_BROKER") or DEFAULT_BROKER
    if not broker.startswith(BROKER_SCHEMES):
        scheme = broker.split("://", 1)[0] if "://" in broker else "no scheme"
        raise ConfigError(
            f"EXTRACTION_CELERY_BROKER must start with {', '.join(BROKER_SCHEMES)} (got {scheme!r}); "
            "e.g. pyamqp://guest@127.0.0.1// or redis://127.0.0.1:6379/0"
        )
    return broker


def per_provider(text: str | None, variable: str, *, urls: bool = False) -> tuple[tuple[str, str], ...]:
    """``EXTRACTION_API_KEYS`` / ``EXTRACTION_API_BASES``: comma-separated ``NAME=VALUE`` entries,
    NAME a provider (``openai``, ``anthropic``, ``gemini``...) or a whole model string
    (``openai/gpt-4o-mini``), VALUE its key or its endpoint. A malformed entry is refused by its
    position and name, never by its value (a key)."""
    entries: list[tuple[str, str]] = []
    for number, raw in enumerate((text or "").split(","), start=1):
        if not raw.strip():
            continue
        name, equals, value = raw.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name or not value:
            shown = name if equals else "(no '=')"
            raise ConfigError(f"{variable}: entry {number} ({shown}) is not NAME=VALUE, e.g. openai=...,anthropic=...")
        if any(name == seen for seen, _ in entries):
            raise ConfigError(f"{variable}: {name} is given twice")
        if urls and not value.startswith(("http://", "https://")):
            raise ConfigError(f"{variable}: the endpoint of {name} must start with http:// or https://")
        entries.append((name, value))
    return tuple(entries)


@dataclass(frozen=True)
class Settings:
    """Environment-driven settings. ``api_key`` never appears in ``repr``."""

    home: Path = DEFAULT_HOME
    database_url: str | None = None  # ledger URL; SQLite under home if unset
    model: str | None = None  # litellm model string; offline extractor if unset
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # Keys and endpoints of other providers' models (a second model, an adjudicator): per_provider.
    api_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_bases: tuple[tuple[str, str], ...] = ()
    llm_timeout_seconds: float = 120.0
    # The model's context window in tokens (0: litellm's figure for the model, if it knows one);
    # a prompt may use it less the answer's limit. A paper over that is extracted in parts.
    context_tokens: int = 0
    # The longest answer asked for, in tokens (0: litellm's figure for the model). An answer cut
    # there is asked again in smaller questions (module by module, then half the pages at a time).
    output_tokens: int = 0
    # The account's budget for EXTRACTION_MODEL, per minute (0: none configured; what the provider's
    # rate-limit headers say is learned either way, and the lower applies). Calls wait until they fit.
    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    stale_minutes: float = 30.0  # extracting this long without an update = stale
    reconcile_grace_seconds: float = 30.0  # wait after a run fails before judging its item
    parse_timeout_seconds: float = 120.0  # hard limit for parsing one PDF (child process killed)
    max_pages: int = 300
    max_pdf_mb: float = 200.0
    # The most one request may send: a form post (our biggest is a template of 100,000 characters)
    # and an upload of PDFs (all its files together; each also within max_pdf_mb).
    max_form_kb: int = 1024
    max_upload_mb: int = 2048
    # Memory one PDF may use while it is read (registration, estimate, parse, page images): the
    # child reading it is capped there, so a decompression bomb costs one document, not the machine.
    pdf_memory_mb: int = 2048
    table_detection: str = "lines"  # lines | layout | off (see pdf/engine.py)
    # Transient failures (provider outage, rate limit, database restart) are retried for this long
    # from the first failure, with waits from retry_base_seconds doubling up to retry_max_delay_seconds.
    retry_budget_minutes: float = 30.0
    retry_base_seconds: float = 10.0
    retry_max_delay_seconds: float = 300.0
    breaker_failures: int = 3  # consecutive provider failures that open the model's circuit breaker
    max_dispatch_rounds: int = 5  # fresh runs for a document whose runs keep dying
    drain_seconds: float = 60.0  # `daemon` on SIGTERM: how long in-flight runs may finish
    # Documents one run extracts (each still its own partition, item, failure and retry): a run's
    # start-up (process, imports: ~6 CPU-s, most of it litellm) is paid once per run, not once per
    # document. 20 rather than 8: 127 instead of 62-66 documents/min with an instant model on
    # PostgreSQL; 40 rather than 20 for large pools: a batch is spread over the runs Dagster starts
    # at once (core/runs/dispatch.py), and runs that still hold waiting documents widen into the
    # slots a finished run frees, where a queued run would first pay its start-up (pool 50, 200
    # documents, 20 s calls: 110 instead of 128 s, 0.46 instead of 0.78 CPU-s per document;
    # docs/benchmarks.md). A run still takes up documents two at a time and more while they wait
    # on the model, so a larger run does not hold the `llm` pool back. 400 rather than 40: a batch
    # of up to 2,000 documents fits the runs one analyst gets at once (5), so no run waits in the
    # queue for a running one to end while slots idle (500 documents were three waves of 5 runs of
    # 40, each wave's start-up an idle pool).
    documents_per_run: int = 400
    # The most `llm` pool slots one analyst's calls may hold at once (0: the whole pool).
    llm_slots_per_user: int = 0
    # Where steps run: "in_process" (in each run's own process, beside the daemon) or "celery"
    # (on `extraction-pipeline worker` processes, anywhere that reaches the broker and PostgreSQL).
    executor: str = "in_process"
    celery_broker: str = field(default=DEFAULT_BROKER, repr=False)  # may hold a password
    celery_backend: str = field(default="rpc://", repr=False)
    ui_token: str | None = field(default=None, repr=False)  # required to serve `ui` beyond loopback
    # How users reach `ui` when that is not the address it serves (a proxy, TLS): its host is an
    # allowed host, and printed sign-in links name it. Empty: what `ui` serves (``link_base``).
    public_url: str = ""
    # Host names `ui` answers to besides loopback, its bound address and public_url's host ("*": any).
    allowed_hosts: tuple[str, ...] = ()
    # Peers (IPs or CIDR networks) whose X-Forwarded-User / X-Forwarded-Email header names the
    # signed-in user: a single-sign-on proxy. Empty: the header is never believed.
    trusted_proxies: tuple[str, ...] = ()
    # Anonymous requests from a loopback address may do everything through Dagster's own endpoints
    # (launch, terminate, wipe, pools), as plain Dagster allows. Off: they only read (web/dagster_roles.py).
    open_loopback: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every ``EXTRACTION_*`` variable; an unset one takes the field's default above
        (the one place each default is written)."""
        env = os.environ if env is None else env
        d = cls  # the class attributes are the fields' defaults
        return cls(
            home=Path(_text(env, "HOME") or d.home),
            database_url=_text(env, "DATABASE_URL"),
            model=_text(env, "MODEL"),
            api_base=_text(env, "API_BASE"),
            api_key=_text(env, "API_KEY"),
            api_keys=per_provider(_text(env, "API_KEYS"), "EXTRACTION_API_KEYS"),
            api_bases=per_provider(_text(env, "API_BASES"), "EXTRACTION_API_BASES", urls=True),
            llm_timeout_seconds=_number(env, "LLM_TIMEOUT_SECONDS", d.llm_timeout_seconds, minimum=0, strict=True),
            context_tokens=int(_number(env, "CONTEXT_TOKENS", d.context_tokens, minimum=0, strict=False)),
            output_tokens=int(_number(env, "OUTPUT_TOKENS", d.output_tokens, minimum=0, strict=False)),
            tokens_per_minute=int(_number(env, "TOKENS_PER_MINUTE", d.tokens_per_minute, minimum=0, strict=False)),
            requests_per_minute=int(
                _number(env, "REQUESTS_PER_MINUTE", d.requests_per_minute, minimum=0, strict=False)
            ),
            stale_minutes=_number(env, "STALE_MINUTES", d.stale_minutes, minimum=0, strict=True),
            reconcile_grace_seconds=_number(
                env, "RECONCILE_GRACE_SECONDS", d.reconcile_grace_seconds, minimum=0, strict=False
            ),
            parse_timeout_seconds=_number(
                env, "PARSE_TIMEOUT_SECONDS", d.parse_timeout_seconds, minimum=0, strict=True
            ),
            max_pages=int(_number(env, "MAX_PAGES", d.max_pages, minimum=0, strict=True)),
            max_pdf_mb=_number(env, "MAX_PDF_MB", d.max_pdf_mb, minimum=0, strict=True),
            max_form_kb=_count(env, "MAX_FORM_KB", d.max_form_kb, minimum=64, maximum=1_048_576),
            max_upload_mb=_count(env, "MAX_UPLOAD_MB", d.max_upload_mb, minimum=1, maximum=1_048_576),
            pdf_memory_mb=_count(env, "PDF_MEMORY_MB", d.pdf_memory_mb, minimum=256, maximum=1_048_576),
            table_detection=_choice(env, "TABLE_DETECTION", ("lines", "layout", "off"), d.table_detection),
            retry_budget_minutes=_number(env, "RETRY_BUDGET_MINUTES", d.retry_budget_minutes, minimum=0, strict=True),
            retry_base_seconds=_number(env, "RETRY_BASE_SECONDS", d.retry_base_seconds, minimum=0, strict=True),
            retry_max_delay_seconds=_number(
                env, "RETRY_MAX_DELAY_SECONDS", d.retry_max_delay_seconds, minimum=0, strict=True
            ),
            breaker_failures=int(_number(env, "BREAKER_FAILURES", d.breaker_failures, minimum=1, strict=False)),
            max_dispatch_rounds=int(
                _number(env, "MAX_DISPATCH_ROUNDS", d.max_dispatch_rounds, minimum=1, strict=False)
            ),
            drain_seconds=_number(env, "DRAIN_SECONDS", d.drain_seconds, minimum=0, strict=False),
            documents_per_run=_count(env, "DOCUMENTS_PER_RUN", d.documents_per_run, minimum=1, maximum=2000),
            llm_slots_per_user=_count(env, "LLM_SLOTS_PER_USER", d.llm_slots_per_user, minimum=0, maximum=1000),
            executor=_executor(env),
            celery_broker=_broker(env),
            celery_backend=_text(env, "CELERY_BACKEND") or d.celery_backend,
            ui_token=_text(env, "UI_TOKEN"),
            public_url=_text(env, "PUBLIC_URL") or d.public_url,
            allowed_hosts=tuple(
                name.strip() for name in (_text(env, "ALLOWED_HOSTS") or "").split(",") if name.strip()
            ),
            trusted_proxies=_networks(env, "TRUSTED_PROXIES"),
            open_loopback=_flag(env, "OPEN_LOOPBACK", d.open_loopback),
        )

    def llm(self, *, with_key: bool = True) -> LLMConfig:
        """The model configured here, with its key and endpoint and the other providers' ones
        (``with_key`` False: no key at all, for what calls nobody, such as an estimate)."""
        from extraction_pipeline.core.llm.config import LLMConfig

        return LLMConfig(
            model=self.model,
            api_base=self.api_base,
            api_key=self.api_key if with_key else None,
            keys=self.api_keys if with_key else (),
            bases=self.api_bases,
            timeout_seconds=self.llm_timeout_seconds,
            context_tokens=self.context_tokens or None,
            output_tokens=self.output_tokens or None,
        )

    def link_base(self) -> str:
        """Where users reach `ui`, for links printed elsewhere (a sign-in link by `users add`):
        EXTRACTION_PUBLIC_URL; else the URL the running (or last) `ui` of this home serves, which
        it records when it starts; else `ui`'s default address."""
        if self.public_url:
            return self.public_url.rstrip("/")
        try:
            served = (self.home_dir / UI_URL_FILE).read_text().strip()
        except OSError:
            served = ""
        return served if served.startswith(("http://", "https://")) else DEFAULT_UI_URL

    def record_ui_url(self, url: str) -> None:
        """What `ui` serves, for ``link_base`` (the public URL wins when configured)."""
        self.home_dir.mkdir(parents=True, exist_ok=True)
        (self.home_dir / UI_URL_FILE).write_text((self.public_url or url).rstrip("/") + "\n")

    @property
    def max_pdf_bytes(self) -> int:
        return int(self.max_pdf_mb * 1024 * 1024)

    def parse_options(
        self, *, table_detection: str | None = None, timeout_seconds: float | None = None
    ) -> ParseOptions:
        """The parse limits these settings describe, optionally overriding the table mode or timeout."""
        from extraction_pipeline.core.pdf.engine import EngineOptions
        from extraction_pipeline.core.pdf.isolation import ParseOptions

        limits = EngineOptions(
            max_pages=self.max_pages,
            max_bytes=self.max_pdf_bytes,
            table_detection=table_detection or self.table_detection,
            memory_mb=self.pdf_memory_mb,
        )
        return ParseOptions(timeout_seconds=timeout_seconds or self.parse_timeout_seconds, limits=limits)

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def ledger_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home_dir / 'ledger.db'}"

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def documents_dir(self) -> Path:
        return self.home_dir / "documents"

    @property
    def exports_dir(self) -> Path:
        return self.home_dir / "exports"


def load_settings() -> Settings:
    return Settings.from_env()
