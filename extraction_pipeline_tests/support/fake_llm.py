"""A loopback OpenAI-compatible chat-completions server for tests.

Real HTTP, real litellm client: only the model is fake. Tests script it per request:
``push(Reply(...))`` queues replies used first-in-first-out; when the queue is empty,
``answer(messages)`` builds the reply (by default: an empty extraction).

``meter`` makes it an account with OpenAI's rate limits (``ProviderMeter``): a request is
admitted when its estimate (the prompt's characters / 4 plus ``max_tokens``) fits the minute's
token bucket and a request is left, else refused with 429, ``Retry-After`` and OpenAI's error body;
every answer carries the ``x-ratelimit-*`` headers, and once answered the unused part of
``max_tokens`` is given back.

``output_limit`` makes it a model with OpenAI's output rules: a request asking for more than the
limit (``max_tokens`` / ``max_completion_tokens``) is refused with OpenAI's 400 body, and an answer
longer than what was asked for (or than the limit, when nothing was asked) is cut there, with
``finish_reason: "length"`` and the completion tokens it wrote. Its tokens are counted as OpenAI's
rule of thumb has them, about 4 characters each.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline_tests.support.http_fake import Exchange, LoopbackFake

CHARS_PER_TOKEN = 4


class ProviderMeter:
    """An account's tokens- and requests-per-minute buckets, refilled continuously."""

    def __init__(self, tokens_per_minute: int, requests_per_minute: int | None = None) -> None:
        self.tokens_per_minute, self.requests_per_minute = tokens_per_minute, requests_per_minute
        self._tokens, self._requests = float(tokens_per_minute), float(requests_per_minute or 0)
        self._at = time.monotonic()
        self._lock = threading.Lock()
        self.admitted = 0
        self.refused = 0
        self.tokens_counted = 0  # what admitted calls finally counted (prompt and answer)
        self.refusals: list[tuple[float, int, int]] = []  # (time.monotonic(), estimate, tokens left) per 429
        self.first_answer: float | None = None  # time.monotonic() of the first and last answers
        self.last_answer: float | None = None

    @staticmethod
    def estimate(body: dict[str, Any]) -> int:
        chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        return math.ceil(chars / CHARS_PER_TOKEN) + int(
            body.get("max_completion_tokens") or body.get("max_tokens") or 0
        )

    def _refill(self, now: float) -> None:
        elapsed, self._at = now - self._at, now
        self._tokens = min(float(self.tokens_per_minute), self._tokens + elapsed * self.tokens_per_minute / 60)
        if self.requests_per_minute:
            rpm = float(self.requests_per_minute)
            self._requests = min(rpm, self._requests + elapsed * rpm / 60)

    def headers(self) -> dict[str, str]:
        tokens_reset = (self.tokens_per_minute - self._tokens) * 60 / self.tokens_per_minute
        headers = {
            "x-ratelimit-limit-tokens": str(self.tokens_per_minute),
            "x-ratelimit-remaining-tokens": str(int(self._tokens)),
            "x-ratelimit-reset-tokens": f"{tokens_reset:.3f}s",
        }
        if self.requests_per_minute:
            requests_reset = (self.requests_per_minute - self._requests) * 60 / self.requests_per_minute
            headers |= {
                "x-ratelimit-limit-requests": str(self.requests_per_minute),
                "x-ratelimit-remaining-requests": str(int(self._requests)),
                "x-ratelimit-reset-requests": f"{requests_reset:.3f}s",
            }
        return headers

    def admit(self, estimate: int, model: str) -> tuple[dict[str, str], dict[str, Any] | None]:
        """(headers, None) when admitted (the estimate is taken), else (headers, OpenAI's 429 body)."""
        with self._lock:
            self._refill(time.monotonic())
            short_tokens = estimate - self._tokens
            short_requests = 1 - self._requests if self.requests_per_minute else 0
            if short_tokens <= 0 and short_requests <= 0:
                self._tokens -= estimate
                if self.requests_per_minute:
                    self._requests -= 1
                self.admitted += 1
                return self.headers(), None
            self.refused += 1
            self.refusals.append((time.monotonic(), estimate, int(self._tokens)))
            waits = [short_tokens * 60 / self.tokens_per_minute]
            if self.requests_per_minute:
                waits.append(short_requests * 60 / self.requests_per_minute)
            wait = max(waits)
            kind = "tokens per min (TPM)" if short_tokens > 0 else "requests per min (RPM)"
            used = int(self.tokens_per_minute - self._tokens)
            message = (
                f"Rate limit reached for {model} in organization org-fake on {kind}: Limit "
                f"{self.tokens_per_minute}, Used {used}, Requested {estimate}. Please try again in {wait:.3f}s."
            )
            body = {"error": {"message": message, "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}
            return {
                **self.headers(),
                "retry-after": str(math.ceil(wait)),
                "retry-after-ms": str(int(wait * 1000)),
            }, body

    def settle(self, estimate: int, used: int) -> None:
        """The answer is written: what the call counts is what it used."""
        with self._lock:
            self._tokens = min(float(self.tokens_per_minute), self._tokens + max(0, estimate - used))
            self.tokens_counted += used
            now = time.monotonic()
            self.first_answer = self.first_answer if self.first_answer is not None else now
            self.last_answer = now


@dataclass
class Reply:
    content: str | None = None  # assistant message content
    status: int = 200  # non-200: an error body is sent
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    error_message: str = ""  # message in the error body of a non-200 reply
    tokens_in: int = 100
    tokens_out: int = 20
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (Retry-After)
    # The provider fakes (support/providers/) say these each in their own words: how the model
    # stopped ("stop", "length", "filtered": content filter / safety / refusal) and which error a
    # non-200 reply is ("rate_limit", "overloaded", "context_length", "filtered", "invalid", "" by status;
    # "html_page": not the provider's but its proxy's HTML error page, with the reply's status).
    finish: str = "stop"
    error: str = ""
    cached_tokens: int = 0  # this fake only: prompt tokens reported as read from the prompt cache


class FakeLLMServer(LoopbackFake):
    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[Reply] = deque()
        self.answer: Callable[[list[dict[str, str]]], Reply] = lambda messages: Reply(json.dumps({}))
        # When set, answers by model: (model string as sent, messages) -> Reply (double extraction).
        self.answer_by_model: Callable[[str, list[dict[str, str]]], Reply] | None = None
        # When set, answers from the whole request body (what a call sends beside its messages).
        self.answer_request: Callable[[dict[str, Any]], Reply] | None = None
        self.served_tokens_in = 0  # tokens of the answers actually sent (200 replies)
        self.peak_in_flight = 0
        self._in_flight = 0
        self.call_spans: list[tuple[float, float]] = []  # (start, end), time.monotonic(), per answered call
        self.output_limit: int | None = None  # the model's most completion tokens; None: no limit
        self.completion_tokens: list[int] = []  # per answer sent (200), as its usage reports them
        self.meter: ProviderMeter | None = None  # the account's rate limits; None: unmetered
        self.refusing: Reply | None = None  # a storm: every request gets this reply (a 429), none answered

    @property
    def api_base(self) -> str:
        return f"{self.origin}/v1"

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.replies.clear()

    def documents_requested(self) -> list[str]:
        with self._lock:
            return [document_from_messages(r["messages"]) for r in self.requests]

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self.replies:
                return self.replies.popleft()
        if self.answer_request is not None:
            return self.answer_request(body)
        if self.answer_by_model is not None:
            return self.answer_by_model(str(body.get("model", "")), body.get("messages", []))
        return self.answer(body.get("messages", []))

    def serve(self, exchange: Exchange) -> None:
        body = exchange.json()
        if not exchange.target.endswith("/chat/completions"):
            exchange.send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        storm = self.refusing
        if storm is not None:
            with self._lock:
                self.requests.append(body)
            exchange.send(storm.status, _rate_limited(str(body.get("model", ""))), storm.headers)
            return
        meter, estimate = self.meter, 0
        limits: dict[str, str] = {}
        if meter is not None:
            estimate = meter.estimate(body)
            limits, refusal = meter.admit(estimate, str(body.get("model", "fake-model")))
            if refusal is not None:
                with self._lock:
                    self.requests.append(body)
                exchange.send(429, refusal, limits)
                return
        reply = self._next_reply(body)
        if limits:
            reply = Reply(**{**reply.__dict__, "headers": {**limits, **reply.headers}})
        started = time.monotonic()
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            if reply.delay:
                time.sleep(reply.delay)
            self._answer(exchange, reply, body)
        finally:
            with self._lock:
                self._in_flight -= 1
                self.call_spans.append((started, time.monotonic()))

    def _answer(self, exchange: Exchange, reply: Reply, body: dict[str, Any]) -> None:
        if reply.status != 200:
            exchange.send(
                reply.status,
                {"error": {"message": reply.error_message or f"fake error {reply.status}", "type": "fake"}},
                reply.headers,
            )
            return
        content, tokens_out, finish = reply.content, reply.tokens_out, "stop"
        if self.output_limit is not None:
            asked = body.get("max_completion_tokens") or body.get("max_tokens")
            if asked is not None and int(asked) > self.output_limit:
                exchange.send(400, _too_large(int(asked), self.output_limit))
                return
            cap = int(asked) if asked is not None else self.output_limit
            tokens_out = math.ceil(len(content or "") / CHARS_PER_TOKEN)
            if tokens_out > cap:
                content, tokens_out, finish = (content or "")[: cap * CHARS_PER_TOKEN], cap, "length"
        tokens_in = reply.tokens_in
        if self.meter is not None:  # a metered account reports the prompt as it counted it
            tokens_in = self.meter.estimate({**body, "max_tokens": 0, "max_completion_tokens": 0})
            self.meter.settle(self.meter.estimate(body), tokens_in + tokens_out)
        sent = exchange.send(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish,
                    }
                ],
                "usage": {
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                    # OpenAI's report of the prompt tokens its prompt cache served
                    "prompt_tokens_details": {"cached_tokens": min(reply.cached_tokens, tokens_in)},
                },
            },
            reply.headers,
        )
        if sent:
            with self._lock:
                self.served_tokens_in += tokens_in
                self.completion_tokens.append(tokens_out)


def _rate_limited(model: str) -> dict[str, Any]:
    """OpenAI's body of a 429 for the account's rate limit."""
    return {
        "error": {
            "message": f"Rate limit reached for {model} in organization org-fake on requests per min (RPM). "
            "Please try again later.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def _too_large(asked: int, limit: int) -> dict[str, Any]:
    """OpenAI's refusal of a request asking for more completion tokens than the model writes."""
    return {
        "error": {
            "message": f"max_tokens is too large: {asked}. This model supports at most {limit} completion "
            f"tokens, whereas you provided {asked}.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "invalid_value",
        }
    }


def extraction_json(values: Mapping[str, tuple[object, str | None]]) -> str:
    """Build the model's JSON answer from {path: (value, quote)}, paths as the pipeline names them:
    ``metadata.nct_number`` for a module field, ``outcomes.2.ci_lower`` for the 2nd outcome's field."""
    answer: dict[str, Any] = {}
    for path, (value, quote) in values.items():
        module, *index, field = path.split(".")
        pair = {"value": value, "quote": quote}
        if index:
            entries = answer.setdefault(module, [])
            while len(entries) < int(index[0]):
                entries.append({})
            entries[int(index[0]) - 1][field] = pair
        else:
            answer.setdefault(module, {})[field] = pair
    return json.dumps(answer)
