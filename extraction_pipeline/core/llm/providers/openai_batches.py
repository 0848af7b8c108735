"""OpenAI's Batch API: the same requests as ordinary calls, sent as one JSONL file, answered within
24 hours at half price. Each step is one provider call through litellm (no state kept here: the
caller stores the ids and polls later):

- ``submit``: the requests become a JSONL file (one line per request: ``custom_id``, ``method``,
  ``url`` and the very body an ordinary call would send), uploaded with ``purpose="batch"``, and a
  batch created from it (``completion_window="24h"``), tagged in its ``metadata`` with the
  caller's submission key. A create the provider refused deletes the uploaded file.
- ``find``: the batch a submission key was given to, among the account's recent batches (newest
  first, ``GET /v1/batches``): how a retried submit adopts what an attempt that died after the
  provider accepted it had sent, instead of paying for it twice.
- ``poll``: the batch's status and request counts.
- ``collect``: once the batch has ended, the output file's answers, the error file's failures, and
  for a request in neither a failure saying why.
- ``cancel``: stop the batch (what it already answered is still collected).

litellm 1.110.2 does every call (``create_file``, ``create_batch``, ``retrieve_batch``,
``list_batches``, ``file_content``, ``file_delete``, ``cancel_batch``) and builds each line's body
as it builds an ordinary call's (``get_optional_params``). Its own retries are disabled
(``max_retries=0``, which reaches the OpenAI client): as for ordinary calls, the orchestrator owns
retries.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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
from extraction_pipeline.core.llm.classify import TRANSIENT_STATUS, classify
from extraction_pipeline.core.llm.config import LLMConfig, output_limit, sampling
from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.providers.base import ProviderAdapter
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage

BATCH_ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"  # the only window OpenAI offers
# OpenAI's limits for one batch's input file: 50,000 requests, 200 MB. Bytes are counted in decimal
# megabytes, the smaller reading of "MB", so a file this module accepts is never refused for size.
MAX_REQUESTS_PER_BATCH = 50_000
MAX_FILE_BYTES = 200_000_000
# The metadata key a batch's submission key is written under. OpenAI's metadata: at most 16 pairs,
# keys up to 64 characters, values up to 512 (https://platform.openai.com/docs/api-reference/batch/create).
SUBMISSION_METADATA_KEY = "extraction_pipeline_submission"
# ``GET /v1/batches`` pages hold 1 to 100 batches, newest first; a key is looked for this many pages
# back at most (an account submitting thousands of batches an hour is not one this serves).
LIST_PAGE_SIZE, MOST_PAGES = 100, 20


@dataclass(frozen=True)
class OpenAIBatchDriver:
    """OpenAI's batch API for the adapter's model (``adapter`` shapes the requests)."""

    adapter: ProviderAdapter
    max_requests: int = MAX_REQUESTS_PER_BATCH
    max_bytes: int = MAX_FILE_BYTES

    def request_body(
        self, config: LLMConfig, messages: list[dict[str, str]], template: TemplateDefinition
    ) -> dict[str, Any]:
        """The chat-completions body an ordinary ``complete_extraction`` call sends: the provider's
        model name, the messages, temperature 0 where the model takes it (``sampling``), the
        structured-output format and the output limit, mapped for the model by litellm as for an
        ordinary call (``max_completion_tokens`` for the models that take only that)."""
        litellm = import_litellm()
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
            params = dict(get_optional_params(model=model, custom_llm_provider=provider, **asked))
        except Exception as exc:  # e.g. UnsupportedParamsError: the ordinary call would be refused too
            raise classify(exc) from exc
        params.pop("stream", None)  # litellm's default, not asked for
        extra = params.pop("extra_body", None) or {}
        return {"model": model, "messages": messages, **params, **extra}

    def batch_line(self, config: LLMConfig, request: BatchRequest) -> bytes:
        """One line of the batch input file (newline included)."""
        line = {
            "custom_id": request.custom_id,
            "method": "POST",
            "url": BATCH_ENDPOINT,
            "body": self.request_body(config, request.messages, request.template),
        }
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    def request_size(self, config: LLMConfig, request: BatchRequest) -> int:
        return len(self.batch_line(config, request))

    def submit(self, config: LLMConfig, requests: Sequence[BatchRequest], key: str | None = None) -> SubmittedBatch:
        """Upload ``requests`` as one batch input file and create the batch, tagged with ``key``
        (``find`` looks for it). Refuses (PermanentError) an empty list, repeated custom ids, or
        more than one batch holds. A create the provider refused (a 4xx) deletes the uploaded
        file; a 5xx or an answer that never came leaves it: the batch may exist and read it."""
        if not requests:
            raise PermanentError("provider batch: no requests to submit")
        ids = [r.custom_id for r in requests]
        repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
        if repeated:
            raise PermanentError(f"provider batch: custom ids must be unique in a batch, repeated: {repeated[:5]}")
        if len(requests) > self.max_requests:
            raise PermanentError(
                f"provider batch: {len(requests)} requests, a batch holds at most {self.max_requests}: "
                "split them with split_requests"
            )
        data = b"".join(self.batch_line(config, r) for r in requests)
        if len(data) > self.max_bytes:
            raise PermanentError(
                f"provider batch: the input file would be {len(data)} bytes, a batch file holds at most "
                f"{self.max_bytes}: split the requests with split_requests"
            )
        litellm = import_litellm()
        uploaded = call_provider(
            "uploading the input file",
            lambda: litellm.create_file(
                file=("batch_input.jsonl", data, "application/jsonl"),
                purpose="batch",
                **_credentials(config, max(config.timeout_seconds, FILE_TIMEOUT_SECONDS)),
            ),
        )
        metadata = {SUBMISSION_METADATA_KEY: key} if key else None
        try:
            batch = call_provider(
                "creating the batch",
                lambda: litellm.create_batch(
                    completion_window=COMPLETION_WINDOW,
                    endpoint=BATCH_ENDPOINT,
                    input_file_id=uploaded.id,
                    metadata=metadata,
                    **_credentials(config, config.timeout_seconds),
                ),
            )
        except PermanentError:
            # Refused (a 4xx): no batch reads the file, which would only cost storage. A 5xx or no
            # answer at all may hide a batch that was made and reads it: the file stays.
            self.delete_file(config, str(uploaded.id))
            raise
        return _submitted(batch, config, len(requests), tuple(ids))

    def find(
        self, config: LLMConfig, key: str, *, since: datetime, count: int, known: frozenset[str] = frozenset()
    ) -> SubmittedBatch | None:
        """The batch created with ``key`` in its metadata at or after ``since`` (less the clock
        skew), not one of ``known``; None when the account has none. ``count`` is the number of
        requests it was given (a batch tagged with the key but holding another number is not it)."""
        litellm = import_litellm()
        horizon = since.replace(tzinfo=since.tzinfo or UTC) - CLOCK_SKEW
        after: str | None = None
        for _ in range(MOST_PAGES):
            cursor = after
            page = call_provider(
                "listing the account's recent batches",
                lambda cursor=cursor: litellm.list_batches(  # type: ignore[misc]
                    after=cursor, limit=LIST_PAGE_SIZE, **_credentials(config, config.timeout_seconds)
                ),
            )
            batches = list(getattr(page, "data", None) or [])
            for batch in batches:
                created = _when(getattr(batch, "created_at", None))
                if created is not None and created < horizon:
                    return None  # newest first: every batch from here on is older than the key
                tagged = (getattr(batch, "metadata", None) or {}).get(SUBMISSION_METADATA_KEY) == key
                total = int(getattr(getattr(batch, "request_counts", None), "total", 0) or 0)
                if tagged and str(batch.id) not in known and total in (0, count):  # 0: still validating
                    return _submitted(batch, config, count, ())
            if not batches or not getattr(page, "has_more", False):
                return None
            after = str(batches[-1].id)
        return None

    def delete_file(self, config: LLMConfig, file_id: str) -> bool:
        """Delete an uploaded file no batch will read; False (never raised) when that fails: it
        only costs storage, and OpenAI deletes batch files on its own schedule."""
        litellm = import_litellm()
        try:
            litellm.file_delete(file_id=file_id, **_credentials(config, config.timeout_seconds))
        except Exception:
            return False
        return True

    def poll(self, config: LLMConfig, batch_id: str) -> BatchState:
        litellm = import_litellm()
        batch = call_provider(
            f"reading batch {batch_id}",
            lambda: litellm.retrieve_batch(batch_id=batch_id, **_credentials(config, config.timeout_seconds)),
        )
        return _state(batch)

    def cancel(self, config: LLMConfig, batch_id: str) -> BatchState:
        """Ask OpenAI to stop the batch (it goes to ``cancelling``, then ``cancelled``, keeping
        what it already answered). A batch that has already ended is left as it is."""
        state = self.poll(config, batch_id)
        if state.status.ended or state.status is ProviderJobStatus.CANCELLING:
            return state
        litellm = import_litellm()
        batch = call_provider(
            f"cancelling batch {batch_id}",
            lambda: litellm.cancel_batch(batch_id=batch_id, **_credentials(config, config.timeout_seconds)),
        )
        return _state(batch)

    def collect(
        self, config: LLMConfig, state: BatchState, templates: Mapping[str, TemplateDefinition]
    ) -> list[BatchOutcome]:
        """Every request's outcome once the batch has ended, in the order of ``templates`` (custom
        id -> the template its answer is validated with): the output file's answers, the error
        file's failures, and for a request in neither file a failure saying why (the batch expired,
        was cancelled or failed before running it)."""
        if not state.status.ended:
            raise PermanentError(
                f"provider batch {state.batch_id} is {state.status.value}: collect it once it has ended "
                "(completed, expired, cancelled or failed)"
            )
        litellm = import_litellm()
        found: dict[str, BatchOutcome] = {}
        answers, unread_answers = _file_lines(config, state.output_file_id)
        errors, unread_errors = _file_lines(config, state.error_file_id)
        # The output file first: a request answered there is answered, whatever else is reported.
        for line in [*answers, *errors]:
            custom_id = line["custom_id"]
            if custom_id in templates and not isinstance(found.get(custom_id), BatchAnswer):
                outcome = _outcome(litellm, config, line, templates[custom_id])
                if custom_id not in found or isinstance(outcome, BatchAnswer):
                    found[custom_id] = outcome
        unread = unread_answers + unread_errors
        return [found.get(custom_id) or unreported(custom_id, state, unread) for custom_id in templates]


def _credentials(config: LLMConfig, timeout: float) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"custom_llm_provider": "openai", "max_retries": 0, "timeout": timeout}
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    return kwargs


def _submitted(batch: Any, config: LLMConfig, count: int, custom_ids: tuple[str, ...]) -> SubmittedBatch:
    return SubmittedBatch(
        batch_id=str(batch.id),
        input_file_id=str(getattr(batch, "input_file_id", "") or "") or None,
        model=config.effective_model,
        count=count,
        submitted_at=_when(getattr(batch, "created_at", None)) or datetime.now(UTC),
        custom_ids=custom_ids,
    )


def _when(timestamp: Any) -> datetime | None:
    return datetime.fromtimestamp(int(timestamp), UTC) if timestamp else None


def _state(batch: Any) -> BatchState:
    try:
        status = ProviderJobStatus(str(batch.status))
    except ValueError as exc:
        raise PermanentError(f"provider batch {batch.id}: unknown status {batch.status!r}") from exc
    counts = getattr(batch, "request_counts", None)
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    return BatchState(
        batch_id=str(batch.id),
        status=status,
        counts=RequestCounts(
            total=int(getattr(counts, "total", 0) or 0),
            completed=int(getattr(counts, "completed", 0) or 0),
            failed=int(getattr(counts, "failed", 0) or 0),
        ),
        input_file_id=getattr(batch, "input_file_id", None),
        output_file_id=getattr(batch, "output_file_id", None),
        error_file_id=getattr(batch, "error_file_id", None),
        errors=tuple(_batch_error(e) for e in errors),
        expires_at=_when(getattr(batch, "expires_at", None)),
    )


def _batch_error(error: Any) -> str:
    line = getattr(error, "line", None)
    where = f" (line {line})" if line else ""
    return f"{getattr(error, 'code', None) or 'error'}{where}: {getattr(error, 'message', '')}"


def _file_lines(config: LLMConfig, file_id: str | None) -> tuple[list[dict[str, Any]], int]:
    """The file's result lines, and how many lines could not be read (not JSON, or no custom id):
    a broken line fails only the request it was for (``unreported``), never the whole file."""
    if not file_id:
        return [], 0
    litellm = import_litellm()
    content = call_provider(
        f"reading file {file_id}",
        lambda: litellm.file_content(
            file_id=file_id, **_credentials(config, max(config.timeout_seconds, FILE_TIMEOUT_SECONDS))
        ),
    )
    return result_lines(bytes(content.content))


# The per-line error codes OpenAI writes for requests a batch never ran.
_NOT_RUN = {"batch_expired": FailureKind.EXPIRED, "batch_cancelled": FailureKind.CANCELLED}


def _outcome(litellm: Any, config: LLMConfig, line: dict[str, Any], template: TemplateDefinition) -> BatchOutcome:
    custom_id = line["custom_id"]
    error = line.get("error")
    response = line.get("response") or {}
    if error:
        error = error if isinstance(error, dict) else {"message": str(error)}
        code = str(error.get("code") or "")
        kind = _NOT_RUN.get(code, FailureKind.REQUEST_FAILED)
        message = f"{code or 'error'}: {str(error.get('message') or '')[:300]}"
        return BatchFailure(custom_id, kind, message, transient=kind is not FailureKind.REQUEST_FAILED)
    status = response.get("status_code")
    body = response.get("body") or {}
    if status != 200:
        said = (body.get("error") or {}) if isinstance(body, dict) else {}
        message = f"HTTP {status}: {str(said.get('message') or body)[:300]}"
        status_code = status if isinstance(status, int) else None
        return BatchFailure(
            custom_id,
            FailureKind.REQUEST_FAILED,
            message,
            transient=status_code in TRANSIENT_STATUS,
            status_code=status_code,
        )
    usage = batch_usage(litellm, config, body.get("usage") or {})
    choice = (body.get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content")
    if choice.get("finish_reason") == "length":
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
    try:
        return BatchAnswer(custom_id, parse_answer(content, template), content or "", usage)
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
    """One answered line's tokens, priced at litellm's batch price for the model
    (``input_cost_per_token_batches`` ...; cached prompt tokens at their batch rate), and what the
    same tokens would have cost as an ordinary, uncached call (``saved_usd``, the difference)."""
    from litellm.cost_calculator import batch_cost_calculator
    from litellm.types.utils import Usage as LitellmUsage

    tokens_in = int(reported.get("prompt_tokens") or 0)
    tokens_out = int(reported.get("completion_tokens") or 0)
    details = reported.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    model = config.effective_model
    cost = ordinary = 0.0
    try:
        counted = LitellmUsage(
            prompt_tokens=tokens_in,
            completion_tokens=tokens_out,
            total_tokens=tokens_in + tokens_out,
            prompt_tokens_details={"cached_tokens": cached} if cached else None,
        )
        cost = math.fsum(batch_cost_calculator(usage=counted, model=model))
        ordinary = math.fsum(litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out))
    except Exception:  # a model litellm has no price for: the tokens are still counted
        cost = ordinary = 0.0
    return Usage(
        model=model,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=cost,
        cached_tokens=cached,
        saved_usd=max(0.0, ordinary - cost),
    )
