"""Classify litellm/provider exceptions as transient (retry with backoff) or permanent.

Narrow on purpose: only failures that a later identical request can plausibly survive are
transient — rate limits, server errors, timeouts, dropped connections. Everything else (auth, bad
request, context window, unknown model, content policy) is permanent.
"""

from __future__ import annotations

from extraction_pipeline.core.errors import PermanentError, TransientError

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
TRANSIENT_NAMES = frozenset(
    {
        "RateLimitError",
        "Timeout",
        "APITimeoutError",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
    }
)
PERMANENT_NAMES = frozenset(
    {
        "AuthenticationError",
        "PermissionDeniedError",
        "BadRequestError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
        "NotFoundError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
    }
)


def _class_names(exc: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(exc).__mro__]


def classify(exc: BaseException) -> TransientError | PermanentError:
    """Wrap ``exc`` in the error family that says whether to retry. Never includes secrets: the
    message is the exception type, status and the provider's message (which carries no key)."""
    names = _class_names(exc)
    status = getattr(exc, "status_code", None)
    summary = f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {str(exc)[:500]}"
    # The most specific class decides: ContextWindowExceededError is a BadRequestError (permanent)
    # while litellm's Timeout is an APIConnectionError subclass (transient).
    for name in names:
        if name in PERMANENT_NAMES:
            return PermanentError(summary, original=exc)
        if name in TRANSIENT_NAMES:
            return TransientError(summary, original=exc)
    if isinstance(status, int):
        if status in TRANSIENT_STATUS:
            return TransientError(summary, original=exc)
        return PermanentError(summary, original=exc)
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return TransientError(summary, original=exc)
    return PermanentError(summary, original=exc)
