"""A loopback OpenAI-compatible chat-completions server for tests.

Real HTTP, real litellm client: only the model is fake. Tests script it per request:
``push(Reply(...))`` queues replies used first-in-first-out; when the queue is empty,
``answer(messages)`` builds the reply (by default: an empty extraction).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from extraction_pipeline.core.extraction.prompts import document_from_messages


@dataclass
class Reply:
    content: str | None = None  # assistant message content
    status: int = 200  # non-200: an error body is sent
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    error_message: str = ""  # message in the error body of a non-200 reply
    tokens_in: int = 100
    tokens_out: int = 20
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (Retry-After)


class FakeLLMServer:
    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[Reply] = deque()
        self.answer: Callable[[list[dict[str, str]]], Reply] = lambda messages: Reply(json.dumps({}))
        # When set, answers by model: (model string as sent, messages) -> Reply (double extraction).
        self.answer_by_model: Callable[[str, list[dict[str, str]]], Reply] | None = None
        self._lock = threading.Lock()
        self.served_tokens_in = 0  # tokens of the answers actually sent (200 replies)
        self.peak_in_flight = 0
        self._in_flight = 0
        self.call_spans: list[tuple[float, float]] = []  # (start, end), time.monotonic(), per answered call
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

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
        if self.answer_by_model is not None:
            return self.answer_by_model(str(body.get("model", "")), body.get("messages", []))
        return self.answer(body.get("messages", []))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                    return
                reply = fake._next_reply(body)
                started = time.monotonic()
                with fake._lock:
                    fake._in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake._in_flight)
                try:
                    if reply.delay:
                        time.sleep(reply.delay)
                    self._answer(reply, body)
                finally:
                    with fake._lock:
                        fake._in_flight -= 1
                        fake.call_spans.append((started, time.monotonic()))

            def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
                if reply.status != 200:
                    self._send(
                        reply.status,
                        {"error": {"message": reply.error_message or f"fake error {reply.status}", "type": "fake"}},
                        reply.headers,
                    )
                    return
                sent = self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": reply.tokens_in,
                            "completion_tokens": reply.tokens_out,
                            "total_tokens": reply.tokens_in + reply.tokens_out,
                        },
                    },
                )
                if sent:
                    with fake._lock:
                        fake.served_tokens_in += reply.tokens_in

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> bool:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    return True
                except (BrokenPipeError, ConnectionResetError):
                    return False  # the client gave up (timeout test, killed worker)

        return Handler


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
