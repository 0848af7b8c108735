"""The project's exception hierarchy.

Three families, as callers need to tell them apart:

- ``ConfigError``: the user's setup is wrong (bad URL, missing file, unknown id). Fix and rerun.
- ``ExtractionRuntimeError``: something failed while working. ``TransientError`` is worth a retry
  (rate limit, 5xx, timeout, connection); ``PermanentError`` is not (bad request, auth, broken PDF).
  Both keep the underlying exception in ``original``. ``RateLimitedError`` is the transient error
  of a provider that refused a call for the account's rate limit (HTTP 429): the provider is
  answering, so it is waited out (its ``Retry-After``), not counted as an outage.
- ``OutputParseError``: the model answered, but not with valid data even after one repair attempt.
  It is permanent: asking again with the same prompt is not expected to help.
- ``AnswerCutError``: the model's answer stopped at its output limit (``finish_reason: length``).
  Not malformed, incomplete: the same prompt would be cut again, a smaller question would not.
"""

from __future__ import annotations

from typing import Any


class ExtractionError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(ExtractionError):
    """Invalid configuration, arguments or input named by the user."""


class ExtractionRuntimeError(ExtractionError):
    """A failure while processing; ``original`` is the exception that caused it, if any."""

    def __init__(self, message: str, *, original: BaseException | None = None, usage: Any = None) -> None:
        super().__init__(message)
        self.original = original
        # Tokens already spent when the failure happened (a ledger ``Usage``), so cost is never lost.
        self.usage = usage


class TransientError(ExtractionRuntimeError):
    """Worth retrying with backoff: the same request may succeed later.

    ``retry_after``: seconds the provider asked us to wait (its ``Retry-After`` header), if any.
    ``provider``: True when the provider (not our database) failed; it feeds the model's circuit
    breaker."""

    def __init__(
        self,
        message: str,
        *,
        original: BaseException | None = None,
        usage: Any = None,
        retry_after: float | None = None,
        provider: bool = False,
    ) -> None:
        super().__init__(message, original=original, usage=usage)
        self.retry_after = retry_after
        self.provider = provider


class RateLimitedError(TransientError):
    """The provider refused the call for the account's rate limit (HTTP 429, ``RateLimitError``)."""


class QuotaExhaustedError(TransientError):
    """The provider says the account has no credit left (OpenAI's 429 ``insufficient_quota``,
    Anthropic's "credit balance is too low"): no retry fixes it until someone adds credit. Not a
    rate limit to wait out inside the call: its ``retry_after`` opens the model's circuit breaker
    at once for a long pause, so every call of the model stops and the batch says why."""


class PermanentError(ExtractionRuntimeError):
    """Retrying cannot help; the item is marked ``error``."""


class InternalError(PermanentError):
    """A bug of ours (an unexpected exception, a database error that is no outage): the document
    fails with the cause named, and the run's log keeps the traceback for whoever fixes it."""


class WithheldError(PermanentError):
    """The provider withheld the answer (litellm's ``content_filter``: a content filter, a safety
    system, or Gemini's RECITATION)."""


class OutputParseError(PermanentError):
    """The model's output was not valid JSON for the schema, even after a repair attempt."""


class AnswerCutError(PermanentError):
    """The answer was cut at the output limit; ``output_tokens``: where (the limit sent, else the
    tokens the provider says it wrote)."""

    def __init__(self, message: str, *, output_tokens: int, usage: Any = None) -> None:
        super().__init__(message, usage=usage)
        self.output_tokens = output_tokens
