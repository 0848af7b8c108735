"""What every provider fake shares: a loopback HTTP server on its own thread, the request log,
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from extraction_pipeline_tests.support.fake_llm import CHARS_PER_TOKEN, Reply

__all__ = ["CHARS_PER_TOKEN", "ProviderFake", "Refusal", "Reply", "Request", "SentError", "tokens"]


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
class SentError:
    """An error the provider answers with: status, its own body, its headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class Refusal(Exception):
    """Raised by ``check``: the request breaks a documented constraint; the fake answers ``error``
    and records why (a test asserts ``fake.violations`` is empty)."""

    def __init__(self, error: SentError, why: str) -> None:
        super().__init__(why)
        self.error, self.why = error, why


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
    (characters) of the longest prefix shared with an earlier prompt."""

    def __init__(self) -> None:
        self._seen: list[str] = []
        self._lock = threading.Lock()

    def hit(self, text: str) -> int:
        with self._lock:
            return max((_common_prefix(text, seen) for seen in self._seen), default=0)

    def store(self, text: str) -> None:
        with self._lock:
            self._seen.append(text)

    def __contains__(self, text: str) -> bool:
        with self._lock:
            return text in self._seen

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


class ProviderFake:
    """A provider's API on 127.0.0.1. Subclasses set ``name`` and implement the hooks."""

    name = "provider"

    def __init__(self) -> None:
        self.requests: list[Request] = []  # every request received, refused ones included
        self.answered: list[Answered] = []  # every 200 answer sent
        self.violations: list[str] = []  # why each refused request broke the provider's rules
        self.replies: deque[Reply] = deque()
        self.answer: Callable[[list[dict[str, str]]], Reply] = lambda messages: Reply(json.dumps({}))
        self.rate_limit_headers: dict[str, str] = {}  # sent with every answer (and error)
        self.cache = PrefixCache()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_base(self) -> str:
        """What litellm is given as ``api_base`` for this provider."""
        return self.origin

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

    def error_reply(self, request: Request, reply: Reply) -> SentError:
        """The provider's own error for a scripted non-200 reply."""
        raise NotImplementedError

    def not_found(self, request: Request) -> SentError:
        return SentError(404, {"error": {"message": f"no route {request.path}"}})

    # -- shared helpers ------------------------------------------------------------------------
    def refuse(self, status: int, body: dict[str, Any], why: str, headers: dict[str, str] | None = None) -> Refusal:
        return Refusal(SentError(status, body, headers or {}), why)

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

    def _handle(self, request: Request) -> SentError:
        with self._lock:
            self.requests.append(request)
        if not self.serves(request):
            return self.not_found(request)
        try:
            self.check(request)
        except Refusal as refusal:
            with self._lock:
                self.violations.append(refusal.why)
            return refusal.error
        messages = self.messages_of(request)
        reply = self._next(messages)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200 or reply.error:
            error = self.error_reply(request, reply)
            return SentError(error.status, error.body, {**self.rate_limit_headers, **error.headers, **reply.headers})
        try:
            status, body = self.answer_body(request, reply, messages)
        except Refusal as refusal:  # found only while answering (a prompt past the window)
            with self._lock:
                self.violations.append(refusal.why)
            return refusal.error
        return SentError(status, body, {**self.rate_limit_headers, **reply.headers})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) or b"{}"
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {"__unparsable__": raw.decode(errors="replace")}
                split = urlsplit(self.path)
                request = Request(
                    "POST",
                    split.path,
                    {k: v[-1] for k, v in parse_qs(split.query).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                sent = fake._handle(request)
                data = json.dumps(sent.body).encode()
                try:
                    self.send_response(sent.status)
                    for name, value in sent.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up

        return Handler


def answer_text(reply: Reply, cap: int | None) -> tuple[str, int, str]:
    """(text, completion tokens, neutral finish): the reply cut at ``cap`` tokens when longer."""
    content = reply.content or ""
    written = tokens(content)
    if reply.finish != "stop":
        return content, written, reply.finish
    if cap is not None and written > cap:
        return content[: cap * CHARS_PER_TOKEN], cap, "length"
    return content, written, "stop"
