"""What a provider batch job is, whichever provider runs it: the requests sent, the job's state, and
each request's outcome (an answer, or a failure saying why); and ``BatchDriver``, what a provider
adapter's batch API does with them. Shared by the OpenAI driver (``providers/openai_batches.py``)
and the Anthropic one (``providers/anthropic_batches.py``), called through ``batch_api``.

"Batch" here is the provider's: a job at its batch endpoint. The ledger's ``BatchStatus``
(core/ledger/schema.py) is the status of an analyst's batch of documents, another thing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel

from extraction_pipeline.core.errors import (
    AnswerCutError,
    ExtractionRuntimeError,
    OutputParseError,
    PermanentError,
    TransientError,
)
from extraction_pipeline.core.llm.classify import classify
from extraction_pipeline.core.llm.config import LLMConfig
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage

# Uploading or downloading a file of up to 200 MB takes longer than one chat call may.
FILE_TIMEOUT_SECONDS = 600.0
# The provider's clock and ours may differ: a batch the provider dates this much before the moment
# the ledger noted a submission is still taken for it.
CLOCK_SKEW = timedelta(minutes=5)


class ProviderJobStatus(StrEnum):
    """Where a job stands at the provider's batch API, in OpenAI's words (Anthropic's processing
    status is read into them: ``providers/anthropic_batches.py``)."""

    VALIDATING = "validating"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    FAILED = "failed"  # the input file did not pass validation: nothing was run
    EXPIRED = "expired"  # not done within 24 h: what was done is in the output file
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"  # what was done before the cancel is in the output file

    @property
    def ended(self) -> bool:
        """True once the provider will do nothing more with the batch (its files are final)."""
        return self in _ENDED


_ENDED = frozenset(
    {ProviderJobStatus.COMPLETED, ProviderJobStatus.FAILED, ProviderJobStatus.EXPIRED, ProviderJobStatus.CANCELLED}
)


class FailureKind(StrEnum):
    """Why a request of a batch has no answer."""

    REQUEST_FAILED = "request_failed"  # the provider answered the line with an HTTP error
    ANSWER_CUT = "answer_cut"  # the answer stopped at the output limit (finish_reason "length")
    INVALID_ANSWER = "invalid_answer"  # the answer is not valid JSON for the template
    EXPIRED = "expired"  # the batch expired before the request was run
    CANCELLED = "cancelled"  # the batch was cancelled before the request was run
    BATCH_FAILED = "batch_failed"  # the whole batch failed validation: nothing was run
    MISSING = "missing"  # a completed batch reported nothing for the request


@dataclass(frozen=True)
class BatchRequest:
    custom_id: str  # unique within the batch: the answer comes back under it
    messages: list[dict[str, str]]
    template: TemplateDefinition


@dataclass(frozen=True)
class SubmittedBatch:
    batch_id: str
    input_file_id: str | None  # OpenAI's uploaded requests; None for Anthropic, which takes them inline
    model: str  # the model string of the config it was submitted with
    count: int
    submitted_at: datetime  # the provider's creation time of the batch
    custom_ids: tuple[str, ...]


@dataclass(frozen=True)
class RequestCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class BatchState:
    batch_id: str
    status: ProviderJobStatus
    counts: RequestCounts
    input_file_id: str | None = None  # OpenAI: the uploaded requests
    output_file_id: str | None = None  # OpenAI: the file of the successful requests' responses
    error_file_id: str | None = None  # OpenAI: the file of the failed requests' errors
    results_url: str | None = None  # Anthropic: where every request's result is read, once ended
    errors: tuple[str, ...] = ()  # why a failed batch failed (the provider's validation errors)
    expires_at: datetime | None = None


@dataclass(frozen=True)
class BatchAnswer:
    custom_id: str
    output: BaseModel  # an instance of output_model(template)
    content: str  # the answer's text as the model sent it
    usage: Usage  # priced at the batch price; saved_usd: what the ordinary, uncached call would have cost more


@dataclass(frozen=True)
class BatchFailure:
    """A request the batch did not answer. Every one is meant to be asked again as an ordinary
    call; ``kind`` says why, ``transient`` whether the provider's own refusal of the line was
    the kind a later call survives (a 5xx or 429; an expired or cancelled request was never run,
    so it is transient too)."""

    custom_id: str
    kind: FailureKind
    message: str
    transient: bool
    status_code: int | None = None  # the line's HTTP status, when the provider ran it
    usage: Usage | None = None  # what an answer that was cut or invalid cost (it was paid)
    content: str | None = None  # that answer's text (an invalid one can be repaired by an ordinary call)

    def error(self) -> ExtractionRuntimeError:
        """The exception an ordinary call failing this way raises (for the caller's ledger)."""
        if self.kind is FailureKind.ANSWER_CUT:
            tokens = self.usage.tokens_out if self.usage is not None else 0
            return AnswerCutError(self.message, output_tokens=tokens, usage=self.usage)
        if self.kind is FailureKind.INVALID_ANSWER:
            return OutputParseError(self.message, usage=self.usage)
        if self.transient:
            return TransientError(self.message, usage=self.usage, provider=True)
        return PermanentError(self.message, usage=self.usage)


BatchOutcome = BatchAnswer | BatchFailure


def call_provider(what: str, action: Callable[[], Any]) -> Any:
    """One provider call, its failure classified (the message names the step, never the key)."""
    try:
        return action()
    except Exception as exc:
        classified = classify(exc)
        classified.args = (f"provider batch: {what} failed: {classified}",)
        raise classified from exc


def result_lines(content: bytes) -> tuple[list[dict[str, Any]], int]:
    """A results file's lines (JSON objects naming a ``custom_id``), and how many lines could not be
    read: a broken line costs only the request it was for (``unreported``), never the file."""
    lines, unread = [], 0
    for raw in content.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            unread += 1
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            lines.append(line)
        else:
            unread += 1
    return lines, unread


def unreported(custom_id: str, state: BatchState, unread: int = 0) -> BatchFailure:
    """The failure of a request an ended batch gave no line for: why it was never answered
    (``unread``: lines of its results that could not be read, one of which may have been its)."""
    if unread:
        return BatchFailure(
            custom_id,
            FailureKind.MISSING,
            f"its result could not be read ({unread} unreadable line(s) in the batch's results)",
            True,
        )
    if state.status is ProviderJobStatus.EXPIRED:
        return BatchFailure(custom_id, FailureKind.EXPIRED, "the batch expired before the request was run", True)
    if state.status is ProviderJobStatus.CANCELLED:
        return BatchFailure(
            custom_id, FailureKind.CANCELLED, "the batch was cancelled before the request was run", True
        )
    if state.status is ProviderJobStatus.FAILED:
        why = "; ".join(state.errors[:3]) or "no reason given"
        return BatchFailure(custom_id, FailureKind.BATCH_FAILED, f"the batch failed validation: {why}", True)
    return BatchFailure(custom_id, FailureKind.MISSING, "the completed batch reported nothing for the request", True)


class BatchDriver(Protocol):
    """One provider's batch API: what ``batch_api`` asks of it (the adapter's ``batch_api()``).
    Every failure is classified (``call_provider``); no state is kept: the caller stores the ids."""

    @property
    def max_requests(self) -> int:
        """The most requests one job takes."""
        ...

    @property
    def max_bytes(self) -> int:
        """The most bytes one job's requests take (as ``request_size`` counts them)."""
        ...

    def request_size(self, config: LLMConfig, request: BatchRequest) -> int:
        """The request's share of ``max_bytes``."""
        ...

    def submit(self, config: LLMConfig, requests: Sequence[BatchRequest], key: str | None = None) -> SubmittedBatch:
        """Send ``requests`` as one job, tagged with the submission ``key`` where the provider
        keeps tags; refuses (PermanentError) what no job takes."""
        ...

    def find(
        self, config: LLMConfig, key: str, *, since: datetime, count: int, known: frozenset[str] = frozenset()
    ) -> SubmittedBatch | None:
        """The job an earlier ``submit`` with ``key`` of ``count`` requests created at or after
        ``since`` (an attempt that died before it could keep the job's id), not one of ``known``
        (the ids the caller already follows); None when the provider has none."""
        ...

    def poll(self, config: LLMConfig, batch_id: str) -> BatchState: ...

    def cancel(self, config: LLMConfig, batch_id: str) -> BatchState:
        """Ask the provider to stop the job; one that has ended, or is cancelling, is left as it is."""
        ...

    def collect(
        self, config: LLMConfig, state: BatchState, templates: Mapping[str, TemplateDefinition]
    ) -> list[BatchOutcome]:
        """Every request's outcome once the job has ended, in the order of ``templates``."""
        ...
