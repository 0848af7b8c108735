"""Error classification, tested both ways on litellm's real exception types."""

from __future__ import annotations

import httpx
import litellm
import pytest

from extraction_pipeline.core.errors import PermanentError, RateLimitedError, TransientError
from extraction_pipeline.core.llm.classify import classify

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _response(status: int) -> httpx.Response:
    return httpx.Response(status, request=REQUEST)


TRANSIENT = [
    litellm.RateLimitError("slow down", llm_provider="openai", model="m"),
    litellm.InternalServerError("boom", llm_provider="openai", model="m"),
    litellm.ServiceUnavailableError("down", llm_provider="openai", model="m"),
    litellm.BadGatewayError("gateway", llm_provider="openai", model="m"),
    litellm.Timeout("timed out", model="m", llm_provider="openai"),
    litellm.APIConnectionError("refused", llm_provider="openai", model="m"),
    TimeoutError("socket timeout"),
    ConnectionResetError("reset by peer"),
]
PERMANENT = [
    litellm.AuthenticationError("bad key", llm_provider="openai", model="m"),
    litellm.BadRequestError("bad request", model="m", llm_provider="openai"),
    litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai"),
    litellm.NotFoundError("no such model", model="m", llm_provider="openai"),
    litellm.PermissionDeniedError("denied", llm_provider="openai", model="m", response=_response(403)),
    litellm.ContentPolicyViolationError("policy", model="m", llm_provider="openai"),
    ValueError("a bug is not worth retrying"),
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient(exc: Exception) -> None:
    result = classify(exc)
    assert isinstance(result, TransientError) and result.original is exc


@pytest.mark.parametrize("exc", PERMANENT, ids=lambda e: type(e).__name__)
def test_permanent(exc: Exception) -> None:
    result = classify(exc)
    assert isinstance(result, PermanentError) and not isinstance(result, TransientError)
    assert result.original is exc


def test_context_window_is_permanent_although_a_bad_request_subclass() -> None:
    exc = litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai")
    assert isinstance(exc, litellm.BadRequestError)
    assert isinstance(classify(exc), PermanentError)


class _StatusError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"status {status_code}")
        self.status_code = status_code


@pytest.mark.parametrize(
    ("status", "transient"), [(429, True), (502, True), (504, True), (400, False), (401, False), (422, False)]
)
def test_unknown_exception_types_fall_back_to_the_status_code(status: int, transient: bool) -> None:
    assert isinstance(classify(_StatusError(status)), TransientError) is transient


def test_only_the_accounts_rate_limit_is_a_rate_limited_error() -> None:
    assert isinstance(classify(litellm.RateLimitError("slow down", llm_provider="openai", model="m")), RateLimitedError)
    assert isinstance(classify(_StatusError(429)), RateLimitedError)
    for other in (_StatusError(503), _StatusError(529), litellm.ServiceUnavailableError("down", "openai", "m")):
        classified = classify(other)
        assert isinstance(classified, TransientError) and not isinstance(classified, RateLimitedError)


def test_geminis_retry_delay_in_its_429_body_is_the_retry_after() -> None:
    body = (
        '{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": '
        '[{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}]}}'
    )
    exc = litellm.RateLimitError(body, llm_provider="gemini", model="gemini-2.5-flash")
    classified = classify(exc)
    assert isinstance(classified, RateLimitedError) and classified.retry_after == 17.0
    undelayed = classify(litellm.RateLimitError("no delay said", llm_provider="gemini", model="m"))
    assert isinstance(undelayed, RateLimitedError) and undelayed.retry_after is None


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        # Anthropic's 529 overloaded_error, as litellm raises it (an InternalServerError)
        (litellm.InternalServerError('{"type":"error","error":{"type":"overloaded_error"}}', "anthropic", "m"), True),
        (_StatusError(529), True),
        # Anthropic's "prompt is too long" and vLLM's context message: litellm's ContextWindowExceededError
        (
            litellm.ContextWindowExceededError("prompt is too long: 210000 tokens > 200000 maximum", "m", "anthropic"),
            False,
        ),
        # Azure's content filter on the prompt
        (litellm.ContentPolicyViolationError("content_filter", "m", "azure"), False),
        (litellm.BadRequestError("INVALID_ARGUMENT", "m", "gemini"), False),
    ],
    ids=["anthropic-529", "status-529", "context", "azure-filter", "gemini-invalid"],
)
def test_provider_errors_both_ways(exc: Exception, transient: bool) -> None:
    classified = classify(exc)
    assert isinstance(classified, TransientError) is transient
    assert not isinstance(classified, RateLimitedError)


def test_an_html_error_page_is_named_by_its_title_and_a_message_quoting_html_is_not_a_page() -> None:
    page = "<!DOCTYPE html>\n<html><head><title>502 Bad\n  Gateway &amp; co</title></head><body>nginx</body></html>"
    response = httpx.Response(502, request=REQUEST, text=page)
    # The OpenAI client keeps only "Error code: 502" in its words: the page is in the response.
    bare = classify(litellm.BadGatewayError("Error code: 502", llm_provider="openai", model="m", response=response))
    assert isinstance(bare, TransientError) and bare.provider
    assert str(bare) == "HTTP 502 BadGatewayError: an HTML error page (502 Bad Gateway & co)"
    said = classify(litellm.BadGatewayError(f"AnthropicException - {page}", llm_provider="anthropic", model="m"))
    assert str(said).endswith(": an HTML error page (502 Bad Gateway & co)")
    quoted = classify(
        litellm.BadRequestError('invalid value "<html>" for field stop', model="m", llm_provider="openai")
    )
    assert isinstance(quoted, PermanentError) and "HTML error page" not in str(quoted)
    assert 'invalid value "<html>" for field stop' in str(quoted)
