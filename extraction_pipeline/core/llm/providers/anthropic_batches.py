"""Anthropic's Message Batches through the official ``anthropic`` SDK (litellm 1.110.2 cannot
create one: ``AnthropicBatchesConfig.transform_create_batch_request`` raises
``NotImplementedError``; only retrieving is implemented):

- ``client.messages.batches.create(requests=[{"custom_id", "params"}, ...])``: each ``params`` is
  the very Messages body an ordinary call sends, built by litellm's own transformation
  (``message_params``), so a batch asks exactly what ``complete_extraction`` would.
- ``client.messages.batches.retrieve(id)``: ``processing_status`` (in_progress, canceling, ended),
  ``request_counts`` (processing, succeeded, errored, canceled, expired), ``results_url`` once ended.
- the results: JSONL, one ``{"custom_id", "result": {"type": succeeded | errored | canceled |
  expired, ...}}`` per request, in no particular order. Read with the client's ``get`` (the SDK's
  documented way to an address of one's own), not ``batches.results``: that one follows whatever
  ``results_url`` the answer names, with the key, where ours follows it only on the configured
  endpoint's origin (``same_origin``). Its lines are read as JSON, not as the SDK's models: an
  errored result's error is read in both shapes it comes in.
- ``client.messages.batches.cancel(id)``.
- ``client.messages.batches.list(limit, after_id)``: the account's batches, newest first. A Message
  Batch carries no metadata, so ``find`` knows the batch a retried submit should adopt only by
  when it was created (after the ledger noted the submission, within the time a create may take)
  and how many requests it holds; ids the ledger already follows are never taken. A batch taken
  by mistake (another submission of the same size in the same minutes on the same account) cannot
  give a document a wrong answer: answers are matched by custom id, and one it does not hold is
  asked as an ordinary call.

The SDK's own retries are off (``max_retries=0``): as for ordinary calls, the orchestrator owns
retries (the step's backoff with the ledger kept honest between attempts; a 429's ``Retry-After``
is read by ``classify`` from the SDK's exception, which carries the response). Every failure is
classified (``classify`` reads the SDK's exceptions by class name and status) and its message never
carries the API key. A client is made per call, for the config's endpoint and key (a batch is
followed with the model and endpoint it was submitted with).

A batch holds at most 100,000 requests or 256 MB and ends within 24 hours.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.llm.answer_parsing import parse_answer
from extraction_pipeline.core.llm.batch_model import (
    CLOCK_SKEW,
    FILE_TIMEOUT_SECONDS,
    BatchAnswer,
    BatchFailure,
    BatchOutcome,
    BatchRequest,
    BatchState,
    FailureKind,
    ProviderJobStatus,
    RequestCounts,
    SubmittedBatch,
    call_provider,
    result_lines,
    unreported,
)
from extraction_pipeline.core.llm.classify import classify
from extraction_pipeline.core.llm.config import LLMConfig, output_limit, sampling
from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.providers.base import ProviderAdapter
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.messages import MessageBatch

DEFAULT_API_BASE = "https://api.anthropic.com"
# The API version litellm sends an ordinary call with (``AnthropicConfig``), sent with the batch too:
# its requests are the ordinary call's params, read as that version reads them (the SDK's own
# default is newer).
ANTHROPIC_VERSION = "2023-06-01"
# Anthropic's limits for one batch: 100,000 requests, 256 MB (counted in decimal megabytes, the
# smaller reading, so a batch this module accepts is never refused for size).
MAX_REQUESTS_PER_BATCH = 100_000
MAX_BATCH_BYTES = 256_000_000
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# ``GET /v1/messages/batches`` pages hold 1 to 1000 batches, newest first
# (https://docs.anthropic.com/en/api/listing-message-batches); a submission is looked for this far back.
LIST_PAGE_SIZE, MOST_PAGES = 100, 20

# Anthropic's error types a later identical request may survive; every other one (invalid_request,
# authentication, permission, not_found, request_too_large) fails again the same way.
TRANSIENT_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
# The HTTP status Anthropic answers each error type with (what the line would have been).
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@dataclass(frozen=True)
class AnthropicBatchDriver:
    """Anthropic's Message Batches for the adapter's model (``adapter`` shapes the requests: its
    response format and cache marks)."""

    adapter: ProviderAdapter
    max_requests: int = MAX_REQUESTS_PER_BATCH
    max_bytes: int = MAX_BATCH_BYTES

    # -- the requests ------------------------------------------------------------------------------

    def message_params(
        self, config: LLMConfig, messages: list[dict[str, str]], template: TemplateDefinition
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """(params, beta headers): the Messages body an ordinary ``complete_extraction`` call sends
        to Anthropic, and the ``anthropic-beta`` header it would carry (structured outputs), if any.

        Built the way litellm's HTTP handler builds the ordinary call: the same asked parameters
        (temperature 0, the output limit, the response format) mapped by ``get_optional_params``,
        the handler's own keys (``json_mode``, ``extra_body``, ``stream``) taken out, then
        ``AnthropicConfig.transform_request`` on the messages as the adapter sends them (cache
        marks). Written by hand, it would drift from what the ordinary call sends whenever litellm
        changes its mapping."""
        litellm = import_litellm()
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig
        from litellm.utils import get_optional_params

        try:
            model, provider, _, _ = litellm.get_llm_provider(model=config.effective_model)
            asked: dict[str, Any] = {
                **sampling(config),
                "response_format": self.adapter.response_format(config, template),
            }
            limit = output_limit(config, thinking=self.adapter.thinks(config))
            if limit:
                asked["max_tokens"] = limit
            optional = dict(get_optional_params(model=model, custom_llm_provider=provider, **asked))
            for handler_only in ("json_mode", "extra_body", "stream"):  # popped by litellm's handler too
                optional.pop(handler_only, None)
            headers: dict[str, Any] = {}
            params = AnthropicConfig().transform_request(
                model=model,
                # The system prompt marked (the batch's requests share it, read as they run), the
                # paper not: its next call (the follow-up) comes after the batch has ended, hours
                # past the cache's 5 minutes; a mark would only make every paper cost 1.25x.
                messages=self.adapter.messages_for(messages, cache=False),  # type: ignore[arg-type]
                optional_params=optional,
                litellm_params={},
                headers=headers,
            )
        except Exception as exc:  # the ordinary call would be refused the same way
            raise classify(exc) from exc
        params.pop("stream", None)  # a batch request may not stream
        beta = {k.lower(): str(v) for k, v in headers.items() if k.lower() == "anthropic-beta"}
        return dict(params), beta

    def batch_request(self, config: LLMConfig, request: BatchRequest) -> dict[str, Any]:
        """One entry of the batch's ``requests``."""
        params, _ = self.message_params(config, request.messages, request.template)
        return {"custom_id": request.custom_id, "params": params}

    def request_size(self, config: LLMConfig, request: BatchRequest) -> int:
        """The entry's bytes in the create body (its share of the 256 MB)."""
        return len(_dumps(self.batch_request(config, request))) + 1  # the comma between entries

    # -- the calls ---------------------------------------------------------------------------------

    def submit(self, config: LLMConfig, requests: Sequence[BatchRequest], key: str | None = None) -> SubmittedBatch:
        """Create one Message Batch of ``requests``. Refuses (PermanentError) an empty list,
        repeated or malformed custom ids (Anthropic's rule: 1-64 of ``[a-zA-Z0-9_-]``), or more
        than a batch holds. ``key`` is not sent: a Message Batch has no metadata (``find``)."""
        if not requests:
            raise PermanentError("provider batch: no requests to submit")
        ids = [r.custom_id for r in requests]
        repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
        if repeated:
            raise PermanentError(f"provider batch: custom ids must be unique in a batch, repeated: {repeated[:5]}")
        malformed = [i for i in ids if not CUSTOM_ID.match(i)]
        if malformed:
            raise PermanentError(
                f"provider batch: Anthropic's custom ids are 1-64 letters, digits, '_' or '-': {malformed[:5]}"
            )
        if len(requests) > self.max_requests:
            raise PermanentError(
                f"provider batch: {len(requests)} requests, a batch holds at most {self.max_requests}: "
                "split them with split_requests"
            )
        entries, beta = [], {}
        for request in requests:
            params, headers = self.message_params(config, request.messages, request.template)
            entries.append({"custom_id": request.custom_id, "params": params})
            beta.update(headers)  # one header for the whole batch: the same for every request of a model
        size = len(_dumps({"requests": entries}))
        if size > self.max_bytes:
            raise PermanentError(
                f"provider batch: the batch would be {size} bytes, a batch holds at most {self.max_bytes}: "
                "split the requests with split_requests"
            )
        # Sending up to 256 MB takes longer than one ordinary call may.
        client = _client(config, max(config.timeout_seconds, FILE_TIMEOUT_SECONDS))
        batch = call_provider(
            "creating the batch",
            lambda: client.messages.batches.create(requests=entries, extra_headers=beta or None),  # type: ignore[arg-type]
        )
        return SubmittedBatch(
            batch_id=str(batch.id),
            input_file_id=None,  # Anthropic takes the requests inline: there is no input file
            model=config.effective_model,
            count=len(requests),
            submitted_at=_utc(batch.created_at) or datetime.now(UTC),
            custom_ids=tuple(ids),
        )

    def find(
        self, config: LLMConfig, key: str, *, since: datetime, count: int, known: frozenset[str] = frozenset()
    ) -> SubmittedBatch | None:
        """The batch of ``count`` requests created first after ``since`` (less the clock skew) and
        no later than a create call may take, not one of ``known``; None when there is none.
        (``key`` cannot be matched: Anthropic keeps no metadata on a batch.)"""
        earliest = since.replace(tzinfo=since.tzinfo or UTC) - CLOCK_SKEW
        latest = (
            since.replace(tzinfo=since.tzinfo or UTC)
            + timedelta(seconds=max(config.timeout_seconds, FILE_TIMEOUT_SECONDS))
            + CLOCK_SKEW
        )
        client = _client(config, config.timeout_seconds)
        candidates = []
        after: str | None = None
        for _ in range(MOST_PAGES):
            cursor = after
            page = call_provider(
                "listing the account's recent batches",
                lambda cursor=cursor: client.messages.batches.list(  # type: ignore[misc]
                    limit=LIST_PAGE_SIZE, **({"after_id": cursor} if cursor else {})
                ),
            )
            batches = list(page.data or [])
            for batch in batches:
                created = _utc(batch.created_at)
                if created is None:
                    continue
                if created < earliest:
                    break
                total = sum(
                    int(getattr(batch.request_counts, name, 0) or 0)
                    for name in ("processing", "succeeded", "errored", "canceled", "expired")
                )
                if created <= latest and total == count and str(batch.id) not in known:
                    candidates.append((created, batch))
            else:
                if batches and page.has_more:
                    after = str(batches[-1].id)
                    continue
            break
        if not candidates:
            return None
        created, batch = min(candidates, key=lambda found: found[0])
        return SubmittedBatch(
            batch_id=str(batch.id),
            input_file_id=None,
            model=config.effective_model,
            count=count,
            submitted_at=created,
            custom_ids=(),
        )

    def poll(self, config: LLMConfig, batch_id: str) -> BatchState:
        client = _client(config, config.timeout_seconds)
        return _state(call_provider(f"reading batch {batch_id}", lambda: client.messages.batches.retrieve(batch_id)))

    def cancel(self, config: LLMConfig, batch_id: str) -> BatchState:
        """Ask Anthropic to stop the batch (``canceling``, then ``ended`` with what it answered
        kept). A batch that has already ended, or is being cancelled, is left as it is."""
        state = self.poll(config, batch_id)
        if state.status.ended or state.status is ProviderJobStatus.CANCELLING:
            return state
        client = _client(config, config.timeout_seconds)
        return _state(call_provider(f"cancelling batch {batch_id}", lambda: client.messages.batches.cancel(batch_id)))

    def collect(
        self, config: LLMConfig, state: BatchState, templates: Mapping[str, TemplateDefinition]
    ) -> list[BatchOutcome]:
        """Every request's outcome once the batch has ended, in the order of ``templates``; a
        request the results do not name fails as the batch's end says (expired, cancelled, missing)."""
        if not state.status.ended:
            raise PermanentError(
                f"provider batch {state.batch_id} is {state.status.value}: collect it once it has ended "
                "(completed, expired, cancelled or failed)"
            )
        litellm = import_litellm()
        found: dict[str, BatchOutcome] = {}
        lines, unread = _result_lines(config, state)
        for line in lines:
            custom_id = line["custom_id"]
            if custom_id in templates and not isinstance(found.get(custom_id), BatchAnswer):
                found[custom_id] = _outcome(litellm, config, custom_id, line.get("result") or {}, templates[custom_id])
        return [found.get(custom_id) or unreported(custom_id, state, unread) for custom_id in templates]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _base(config: LLMConfig) -> str:
    return (config.api_base or DEFAULT_API_BASE).rstrip("/")


def _client(config: LLMConfig, timeout: float) -> anthropic.Anthropic:
    """The SDK's client for the config's endpoint and key, without retries of its own (imported
    here: only a batch needs it)."""
    import anthropic

    return anthropic.Anthropic(
        api_key=config.api_key,
        base_url=_base(config),
        max_retries=0,
        timeout=timeout,
        default_headers={"anthropic-version": ANTHROPIC_VERSION},
    )


def same_origin(url: str | None, base: str) -> str | None:
    """``url`` when it is on the configured endpoint's scheme, host and port, else None: the key
    goes with the request, so a results address the answer names elsewhere is never followed."""
    if not url:
        return None
    return url if _origin(url) == _origin(base) else None


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def _utc(when: datetime | None) -> datetime | None:
    if when is None:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _state(batch: MessageBatch) -> BatchState:
    """Anthropic's batch in OpenAI's words: ``ended`` says only that nothing more will be run, so
    the counts say how it ended (a request canceled: the batch was cancelled; one expired: the
    24 hours ran out; else completed, whatever errored)."""
    counts = batch.request_counts
    n = {
        key: int(getattr(counts, key, 0) or 0) for key in ("processing", "succeeded", "errored", "canceled", "expired")
    }
    processing = batch.processing_status
    if processing == "in_progress":
        status = ProviderJobStatus.IN_PROGRESS
    elif processing == "canceling":
        status = ProviderJobStatus.CANCELLING
    elif processing == "ended":
        if n["canceled"]:
            status = ProviderJobStatus.CANCELLED
        elif n["expired"]:
            status = ProviderJobStatus.EXPIRED
        else:
            status = ProviderJobStatus.COMPLETED
    else:
        raise PermanentError(f"provider batch {batch.id}: unknown processing_status {processing!r}")
    return BatchState(
        batch_id=str(batch.id),
        status=status,
        counts=RequestCounts(
            total=sum(n.values()), completed=n["succeeded"], failed=n["errored"] + n["canceled"] + n["expired"]
        ),
        results_url=batch.results_url or None,  # set once ended
        expires_at=_utc(batch.expires_at),
    )


def _result_lines(config: LLMConfig, state: BatchState) -> tuple[list[dict[str, Any]], int]:
    url = same_origin(state.results_url, _base(config)) or (
        f"{_base(config)}/v1/messages/batches/{state.batch_id}/results"
    )
    client = _client(config, max(config.timeout_seconds, FILE_TIMEOUT_SECONDS))
    what = f"reading the results of batch {state.batch_id}"
    content = call_provider(what, lambda: client.get(url, cast_to=bytes))
    return result_lines(bytes(content))


def _outcome(
    litellm: Any, config: LLMConfig, custom_id: str, result: Mapping[str, Any], template: TemplateDefinition
) -> BatchOutcome:
    kind = result.get("type")
    if kind == "canceled":
        return BatchFailure(
            custom_id, FailureKind.CANCELLED, "the batch was cancelled before the request was run", True
        )
    if kind == "expired":
        return BatchFailure(custom_id, FailureKind.EXPIRED, "the batch expired before the request was run", True)
    if kind != "succeeded":
        error = result.get("error")
        error = error if isinstance(error, Mapping) else {}
        # Documented as an error response ({"type": "error", "error": {...}}); a bare error object
        # is read too.
        inner = error.get("error")
        said: Mapping[str, Any] = inner if isinstance(inner, Mapping) else error
        error_type = str(said.get("type") or "error")
        status = ERROR_STATUS.get(error_type)
        return BatchFailure(
            custom_id,
            FailureKind.REQUEST_FAILED,
            f"{error_type}: {str(said.get('message') or '')[:300]}",
            transient=error_type in TRANSIENT_ERROR_TYPES,
            status_code=status,
        )
    message = result.get("message") or {}
    usage = batch_usage(litellm, config, message.get("usage") or {})
    blocks = message.get("content") or []
    content = "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    stop = message.get("stop_reason")
    if stop == "max_tokens":  # litellm's "length": the ordinary call's AnswerCutError
        at = output_limit(config) or usage.tokens_out
        return BatchFailure(
            custom_id,
            FailureKind.ANSWER_CUT,
            f"answer cut at {at} output tokens ({usage.model} stopped at its output limit)",
            transient=False,
            status_code=200,
            usage=usage,
            content=content,
        )
    if stop == "refusal":  # litellm's "content_filter": the ordinary call's PermanentError
        return BatchFailure(
            custom_id,
            FailureKind.REQUEST_FAILED,
            f"{usage.model} withheld the answer (stop_reason refusal)",
            transient=False,
            status_code=200,
            usage=usage,
            content=content,
        )
    try:
        return BatchAnswer(custom_id, parse_answer(content, template), content, usage)
    except (ValueError, ValidationError) as exc:
        return BatchFailure(
            custom_id,
            FailureKind.INVALID_ANSWER,
            f"model output is not valid JSON for the schema: {str(exc)[:300]}",
            transient=False,
            status_code=200,
            usage=usage,
            content=content,
        )


def batch_usage(litellm: Any, config: LLMConfig, reported: Mapping[str, Any]) -> Usage:
    """One answer's tokens, as litellm normalizes Anthropic's (prompt tokens include the cache
    reads and writes; ``cached_tokens`` are the reads), priced at the model map's batch rates
    (``*_batches``: input, output, cache read, cache write). ``saved_usd``: what the same tokens
    would have cost as an ordinary, uncached call, less that."""
    fresh = int(reported.get("input_tokens") or 0)
    read = int(reported.get("cache_read_input_tokens") or 0)
    written = int(reported.get("cache_creation_input_tokens") or 0)
    tokens_out = int(reported.get("output_tokens") or 0)
    tokens_in = fresh + read + written
    model = config.effective_model
    cost = ordinary = 0.0
    try:
        info = litellm.get_model_info(model)
        ordinary = math.fsum(litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out))
        if info.get("input_cost_per_token_batches") is not None:
            # A cache rate the map has no batch figure for is taken at its ordinary rate: never
            # less than was paid.
            cost = math.fsum(
                (
                    fresh * float(info["input_cost_per_token_batches"]),
                    tokens_out * float(info.get("output_cost_per_token_batches") or info["output_cost_per_token"]),
                    read
                    * float(
                        info.get("cache_read_input_token_cost_batches") or info.get("cache_read_input_token_cost") or 0
                    ),
                    written
                    * float(
                        info.get("cache_creation_input_token_cost_batches")
                        or info.get("cache_creation_input_token_cost")
                        or 0
                    ),
                )
            )
        else:
            # No batch price in the map for this model: the ordinary price (cache reads and writes
            # at their rates) is counted, not an assumed half of it; the cost may be overstated,
            # never understated.
            cost = math.fsum(
                litellm.cost_per_token(
                    model=model,
                    prompt_tokens=tokens_in,
                    completion_tokens=tokens_out,
                    cache_read_input_tokens=read,
                    cache_creation_input_tokens=written,
                )
            )
    except Exception:  # a model litellm has no price for: the tokens are still counted
        cost = ordinary = 0.0
    return Usage(
        model=model,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=cost,
        cached_tokens=read,
        saved_usd=ordinary - cost,
        cache_written_tokens=written,
    )
