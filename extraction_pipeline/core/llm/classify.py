"""Classify litellm/provider exceptions as transient (retry with backoff) or permanent, and say
what really happened.

Narrow on purpose: only failures that a later identical request can plausibly survive are
transient — rate limits, server errors, timeouts, dropped connections. Everything else (auth, bad
request, context window, unknown model, content policy) is permanent.

The message names the real cause. litellm reports "nobody answered on that port" as
``InternalServerError (HTTP 500)``; the exception chain underneath says ``Connection refused``, and
that is what an operator needs to read.
"""

from __future__ import annotations

import contextlib
import email.utils
import html
import re
import socket
import time
from typing import Any

from extraction_pipeline.core.errors import PermanentError, QuotaExhaustedError, RateLimitedError, TransientError

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
# A Retry-After beyond this is treated as this: the retry budget, not the provider, decides when to give up.
MAX_RETRY_AFTER_SECONDS = 3600.0


def _class_names(exc: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(exc).__mro__]


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def network_cause(exc: BaseException) -> str | None:
    """What went wrong on the wire, from the deepest network error in the chain (or None)."""
    if any(type(cause).__name__ == "ReadTimeout" for cause in _chain(exc)):
        return ANSWER_TIMED_OUT  # connected and asked: the answer did not come in time
    for cause in reversed(_chain(exc)):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "connection reset by the provider"
        if isinstance(cause, socket.gaierror):
            return "host name not resolved"
        if isinstance(cause, TimeoutError) or type(cause).__name__ in ("ConnectTimeout", "PoolTimeout"):
            return "timed out"
        if type(cause).__name__ in ("RemoteProtocolError", "ReadError", "WriteError"):
            return f"connection dropped ({str(cause)[:120] or type(cause).__name__})"
        if type(cause).__name__ == "ConnectError":
            return f"could not connect ({str(cause)[:120]})"
    return None


def retry_after_seconds(exc: BaseException, now: float | None = None) -> float | None:
    """The provider's ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``, if it sent one,
    else the ``retryDelay`` of Gemini's error body. Read here: litellm's
    ``_get_retry_after_from_exception_header`` and the SDKs' ``_parse_retry_after_header`` are
    private, litellm's reads whole seconds only (no ``retry-after-ms``), and none reads Gemini's body."""
    for headers in refusal_headers(exc):
        parsed = _parse_retry_after(headers, now)
        if parsed is not None:
            return min(parsed, MAX_RETRY_AFTER_SECONDS)
    delay = _retry_delay_in_body(exc)
    return min(delay, MAX_RETRY_AFTER_SECONDS) if delay is not None else None


# Gemini sends no Retry-After header: its 429 body carries a google.rpc.RetryInfo detail,
# ``{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}``, which litellm
# keeps in the exception's message (and response text).
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def _retry_delay_in_body(exc: BaseException) -> float | None:
    for cause in _chain(exc):
        texts = [str(cause)]
        with contextlib.suppress(Exception):  # a streamed or closed response: the message is enough
            texts.append(str(getattr(getattr(cause, "response", None), "text", "") or ""))
        for text in texts:
            match = _RETRY_DELAY.search(text)
            if match:
                return float(match.group(1))
    return None


def refusal_headers(exc: BaseException) -> list[Any]:
    """The provider's response headers on a failed call, wherever litellm keeps them (the HTTP
    response of the exception or of its causes, or litellm's own copy), nearest first."""
    found = []
    for cause in _chain(exc):
        for headers in (getattr(getattr(cause, "response", None), "headers", None), _litellm_headers(cause)):
            if headers:
                found.append(headers)
    return found


def _litellm_headers(exc: BaseException) -> Any:
    return getattr(exc, "litellm_response_headers", None)


def _parse_retry_after(headers: Any, now: float | None) -> float | None:
    try:
        millis = headers.get("retry-after-ms")
        raw = headers.get("retry-after")
    except Exception:  # headers of an unexpected type: no hint, not a failure
        return None
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(raw)).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (now if now is not None else time.time()))


# An error page in HTML (a load balancer's or proxy's, in front of the provider): its title says it.
# A page is what the body starts with (litellm puts the provider's name before it: "... - <html>").
HTML_PAGE = re.compile(r"(?:^|\s-\s)\s*(?:<!doctype html|<html)", re.IGNORECASE)
HTML_TITLE = re.compile(r"<title>\s*([^<]{1,120}?)\s*</title>", re.IGNORECASE)


def _error_page(exc: BaseException) -> str | None:
    """The HTML page answered instead of the provider's JSON, where the exception or the HTTP
    response it carries holds one (the OpenAI client keeps only "Error code: 502" in its words)."""
    for cause in _chain(exc):
        for text in (str(cause), _response_text(cause)):
            if HTML_PAGE.search(text):
                return text
    return None


def _response_text(exc: BaseException) -> str:
    try:
        return str(getattr(getattr(exc, "response", None), "text", "") or "")[:4000]
    except Exception:  # a streamed response not read, or one of another shape: no page to tell
        return ""


def _provider_message(exc: BaseException) -> str:
    if (page := _error_page(exc)) is not None:
        title = HTML_TITLE.search(page)
        words = " ".join(html.unescape(title.group(1)).split()) if title else ""
        return f"an HTML error page ({words})" if words else "an HTML error page"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    # litellm prefixes "litellm.RateLimitError: RateLimitError: OpenAIException - <provider's words>".
    return text.rsplit(" - ", 1)[-1][:300] if " - " in text else text[:300]


# "insufficient_quota" (OpenAI, a 429 with no Retry-After), "credit balance is too low" (Anthropic,
# a 400): the account is out of credit, which no retry fixes; calls pause for this long each time.
NO_CREDIT = re.compile(r"insufficient_quota|credit balance is too low", re.IGNORECASE)
QUOTA_PAUSE_SECONDS = 600.0


# Connected, asked, and no answer came before the call's timeout: the provider may still finish
# (and bill) the abandoned call.
ANSWER_TIMED_OUT = "no answer in time"
# litellm's words for a 200 whose body is no JSON (a proxy's or load balancer's page).
NOT_JSON = re.compile(r"Empty or invalid response from LLM endpoint\. Received: (.{0,80})", re.DOTALL)


def classify(exc: BaseException, timeout_seconds: float | None = None) -> TransientError | PermanentError:
    """Wrap ``exc`` in the error family that says whether to retry. Never includes secrets: the
    message is the cause, the HTTP status and the provider's message (which carries no key).
    ``timeout_seconds``: the call's timeout, named when the answer did not come within it."""
    names = _class_names(exc)
    status = getattr(exc, "status_code", None)
    wire = network_cause(exc)
    if wire == ANSWER_TIMED_OUT:
        within = f"within {timeout_seconds:.0f} s " if timeout_seconds else ""
        return TransientError(
            f"provider did not answer {within}(the call was abandoned; the provider may still bill it)"
            f" ({type(exc).__name__})",
            original=exc,
            provider=True,
        )
    if wire is not None:
        # No HTTP answer at all, whatever status litellm invented for it.
        return TransientError(f"provider unreachable: {wire} ({type(exc).__name__})", original=exc, provider=True)
    if (page := NOT_JSON.search(str(exc))) is not None:
        # litellm calls it HTTP 500; the provider (or what stands before it) answered 200.
        return TransientError(
            f"provider answered HTTP 200 with a body that is not JSON: {page.group(1).strip()}",
            original=exc,
            provider=True,
        )
    if any(NO_CREDIT.search(f"{cause} {getattr(cause, 'code', '')}") for cause in _chain(exc)):
        return QuotaExhaustedError(
            f"the provider says the account has no credit left: {_provider_message(exc)}",
            original=exc,
            retry_after=QUOTA_PAUSE_SECONDS,
            provider=True,
        )
    summary = f"{f'HTTP {status} ' if status else ''}{type(exc).__name__}: {_provider_message(exc)}"
    # The most specific class decides: ContextWindowExceededError is a BadRequestError (permanent)
    # while litellm's Timeout is an APIConnectionError subclass (transient).
    for name in names:
        if name in PERMANENT_NAMES:
            return PermanentError(summary, original=exc)
        if name in TRANSIENT_NAMES:
            return _transient(summary, exc)
    if isinstance(status, int):
        if status in TRANSIENT_STATUS:
            return _transient(summary, exc)
        return PermanentError(summary, original=exc)
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return _transient(summary, exc)
    return PermanentError(summary, original=exc)


def _transient(summary: str, exc: BaseException) -> TransientError:
    # A 429 is the account's rate limit (Anthropic's overload is 529, a server's 503): the
    # provider answers, the call is only early. (litellm reports Anthropic's 529 and Gemini's 503
    # as InternalServerError, status 500: transient by name, not a rate limit.)
    kind = (
        RateLimitedError
        if getattr(exc, "status_code", None) == 429 or "RateLimitError" in _class_names(exc)
        else TransientError
    )
    return kind(summary, original=exc, retry_after=retry_after_seconds(exc), provider=True)
