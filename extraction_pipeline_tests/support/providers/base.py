"""What every provider fake shares: a loopback HTTP server (``http_fake``), the request log,
the scripted replies, the answer callback, token counting and the prompt-prefix cache.

A provider module says only what is its own: which paths it serves, what it refuses (``check``:
the provider's documented constraints, answered with the provider's own 400 body), how its
request reads as plain chat messages (``messages_of``, so one answer callback serves every
provider), how an answer and an error look on its wire (``answer_body``, ``error_reply``).

The answer callback is fake_llm's: ``answer(messages) -> Reply`` with messages as
``[{"role": ..., "content": str}]`` (the corpus oracle plugs in unchanged). A ``Reply`` with a
non-200 ``status`` or an ``error`` kind is sent as that provider's error; ``finish`` says how the
model stopped in neutral words ("stop", "length", "filtered"), each provider saying it its way.

Tokens are counted as the providers' rule of thumb has them, about 4 characters each.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extraction_pipeline_tests.support.fake_llm import CHARS_PER_TOKEN, Reply
from extraction_pipeline_tests.support.http_fake import Exchange, LoopbackFake

__all__ = ["CHARS_PER_TOKEN", "ProviderFake", "Refusal", "Reply", "Request", "SentReply", "tokens"]


# A SentReply body holding this key is sent as that text, not as JSON (a "not_json" reply).
RAW_BODY = "__raw_body__"


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Request:
    """One request as the fake received it (headers with lower-case names)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class SentReply:
    """What the fake sends back for one request: the status, the provider's own body (an answer or
    an error) and its headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class Refusal(Exception):
    """Raised by ``check``: the request breaks a documented constraint; the fake answers ``error``
    and records why (a test asserts ``fake.violations`` is empty). A ``capacity`` refusal is no
    broken rule but a limit the client learns only by meeting it (a schema too large to serve):
    recorded in ``declined``, for the test to check it was handled."""

    def __init__(self, error: SentReply, why: str, *, capacity: bool = False) -> None:
        super().__init__(why)
        self.error, self.why, self.capacity = error, why, capacity


@dataclass
class Answered:
    """What the fake answered for one accepted request (for assertions)."""

    request: Request
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # read from the prompt cache (each provider reports it its way)
    cache_written: int = 0  # Anthropic: written to the cache on this call


class PrefixCache:
    """The prompts a provider has seen, for its prompt-prefix cache: ``hit(text)`` is the length
    (characters) of the longest prefix shared with an earlier prompt still in the cache. An entry
    lives ``ttl_seconds`` after its last use, and each use refreshes it. Anthropic: "the cache has a
    5-minute lifetime, refreshed for no additional cost each time the cached content is used";
    OpenAI: "cached prefixes generally remain active for 5 to 10 minutes of inactivity" (each
    provider's prompt caching guide; the shorter figure). A test shortens ``ttl_seconds`` to see an
    entry expire."""

    def __init__(self, ttl_seconds: float = 300.0) -> None:
        self.ttl_seconds = ttl_seconds
        self._seen: dict[str, float] = {}  # prompt -> when it was last used (time.monotonic)
        self._lock = threading.Lock()

    def _live(self) -> dict[str, float]:
        now = time.monotonic()
        for text in [t for t, used in self._seen.items() if now - used >= self.ttl_seconds]:
            del self._seen[text]
        return self._seen

    def hit(self, text: str) -> int:
        with self._lock:
            shared = {seen: _common_prefix(text, seen) for seen in self._live()}
            best = max(shared, key=shared.__getitem__, default=None)
            if best is None or not shared[best]:
                return 0
            # Read: the lifetime of what was read starts again, and only of that (a prompt that
            # shares the template with paper A keeps the template alive, not paper A).
            self._seen[best[: shared[best]]] = time.monotonic()
            return shared[best]

    def store(self, text: str) -> None:
        with self._lock:
            self._seen[text] = time.monotonic()

    def __contains__(self, text: object) -> bool:
        with self._lock:
            if not isinstance(text, str) or text not in self._live():
                return False
            self._seen[text] = time.monotonic()  # read: its lifetime starts again
            return True

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on prefix equality: papers are long
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class ProviderFake(LoopbackFake):
    """A provider's API on 127.0.0.1. Subclasses set ``name`` and implement the hooks."""

    name = "provider"

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Request] = []  # every request received, refused ones included
        self.answered: list[Answered] = []  # every 200 answer sent
        self.violations: list[str] = []  # why each refused request broke the provider's rules
        self.declined: list[str] = []  # requests refused at a limit met only by trying (capacity)
        self.replies: deque[Reply] = deque()
        self.answer: Callable[[list[dict[str, str]]], Reply] = lambda messages: Reply(json.dumps({}))
        self.rate_limit_headers: dict[str, str] = {}  # sent with every answer (and error)
        self.cache = PrefixCache()

    @property
    def api_base(self) -> str:
        """What litellm is given as ``api_base`` for this provider."""
        return self.origin

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    # -- provider hooks ----------------------------------------------------------------------
    def serves(self, request: Request) -> bool:
        raise NotImplementedError

    def check(self, request: Request) -> None:
        """Raise ``Refusal`` when the request breaks one of the provider's documented rules."""
        raise NotImplementedError

    def messages_of(self, request: Request) -> list[dict[str, str]]:
        """The request as plain chat messages, for the answer callback."""
        raise NotImplementedError

    def answer_body(self, request: Request, reply: Reply, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
        """(status, body) of an answer; records it in ``answered``."""
        raise NotImplementedError

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        """The provider's own error for a scripted non-200 reply."""
        raise NotImplementedError

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, {"error": {"message": f"no route {request.path}"}})

    # -- shared helpers ------------------------------------------------------------------------
    def refuse(self, status: int, body: dict[str, Any], why: str, headers: dict[str, str] | None = None) -> Refusal:
        return Refusal(SentReply(status, body, headers or {}), why)

    def record(self, answered: Answered) -> None:
        with self._lock:
            self.answered.append(answered)

    def requests_to(self, suffix: str) -> list[Request]:
        return [r for r in self.requests if r.path.endswith(suffix)]

    def _next(self, messages: list[dict[str, str]]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return self.answer(messages)

    def _handle(self, request: Request) -> SentReply:
        with self._lock:
            self.requests.append(request)
        if not self.serves(request):
            return self.not_found(request)
        try:
            self.check(request)
        except Refusal as refusal:
            with self._lock:
                (self.declined if refusal.capacity else self.violations).append(refusal.why)
            return refusal.error
        messages = self.messages_of(request)
        reply = self._next(messages)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.finish == "not_json":
            # A proxy's or load balancer's page passed on with status 200: not the provider's JSON.
            return SentReply(200, {RAW_BODY: "<html><body>upstream answered</body></html>"}, self.rate_limit_headers)
        if reply.error == "html_page":
            # What stands before the provider (its load balancer, a proxy) answered with its own
            # error page: the status it chose and HTML, none of the provider's JSON.
            page = f"<html><head><title>{reply.status} Bad Gateway</title></head><body>nginx</body></html>"
            return SentReply(reply.status, {RAW_BODY: page})
        if reply.status != 200 or reply.error:
            error = self.error_reply(request, reply)
            return SentReply(error.status, error.body, {**self.rate_limit_headers, **error.headers, **reply.headers})
        try:
            status, body = self.answer_body(request, reply, messages)
        except Refusal as refusal:  # found only while answering (a prompt past the window)
            with self._lock:
                self.violations.append(refusal.why)
            return refusal.error
        return SentReply(status, body, {**self.rate_limit_headers, **reply.headers})

    def serve(self, exchange: Exchange) -> None:
        try:
            body = exchange.json()
        except json.JSONDecodeError:  # kept as text for the request log
            body = {"__unparsable__": exchange.body.decode(errors="replace")}
        sent = self._handle(Request(exchange.method, exchange.path, exchange.query, exchange.headers, body))
        if RAW_BODY in sent.body:
            exchange.send(sent.status, str(sent.body[RAW_BODY]).encode(), sent.headers, content_type="text/html")
            return
        exchange.send(sent.status, sent.body, sent.headers)


def answer_text(reply: Reply, cap: int | None) -> tuple[str, int, str]:
    """(text, completion tokens, neutral finish): the reply cut at ``cap`` tokens when longer."""
    content = reply.content or ""
    written = tokens(content)
    if reply.finish != "stop":
        return content, written, reply.finish
    if cap is not None and written > cap:
        return content[: cap * CHARS_PER_TOKEN], cap, "length"
    return content, written, "stop"
