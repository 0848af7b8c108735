"""The loopback HTTP harness the test fakes share (fake_llm, fake_batches, fake_anthropic_batches,
providers/): a ``ThreadingHTTPServer`` on 127.0.0.1, its serving thread, start / stop, the request
as read off the wire and the answer written back, and scripted HTTP errors per route.

A fake subclasses ``LoopbackFake`` and implements ``serve(exchange)``: it reads the request from
the ``Exchange`` and answers with ``exchange.send(...)``; everything it says is its own provider's.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:  # fake_llm builds on this module: importing it at run time would be a cycle
    from extraction_pipeline_tests.support.fake_llm import Reply


@dataclass(frozen=True)
class Exchange:
    """One request as received (headers with lower-case names) and the way to answer it."""

    method: str
    target: str  # the path as sent, query included
    headers: dict[str, str]
    body: bytes
    _handler: BaseHTTPRequestHandler

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """The query's parameters, the last value of a repeated one."""
        return {name: values[-1] for name, values in parse_qs(urlsplit(self.target).query).items()}

    def json(self) -> Any:
        """The body as JSON (an empty body reads as ``{}``); raises ValueError when it is not JSON."""
        return json.loads(self.body or b"{}")

    def send(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        content_type: str | None = None,
    ) -> bool:
        """Answer ``payload``: bytes as they are (``content_type`` application/octet-stream unless
        given), anything else as JSON. False when the client had already gone (a timeout test, a
        killed worker), which is no error of the fake's."""
        if isinstance(payload, bytes):
            data, content_type = payload, content_type or "application/octet-stream"
        else:
            data, content_type = json.dumps(payload).encode(), content_type or "application/json"
        handler = self._handler
        try:
            handler.send_response(status)
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":  # the OpenAI client's file uploads
        chunks = []
        while size := int(handler.rfile.readline().strip() or b"0", 16):
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
        handler.rfile.readline()
        return b"".join(chunks)
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


class LoopbackFake:
    """A fake API on 127.0.0.1, bound at construction (``port`` 0: one the OS picks), served on a
    daemon thread from ``start()`` to ``stop()`` (or as a context manager)."""

    methods: tuple[str, ...] = ("POST",)  # the HTTP methods served; others get http.server's 501
    routes: tuple[str, ...] = ()  # the route names ``fail_next`` takes

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.RLock()  # the fake's state, shared by the server's threads
        self._failures: defaultdict[str, deque[Reply]] = defaultdict(deque)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        # A short poll so that stop() returns quickly: tests start and stop many fakes.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() would wait forever for a server never started
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve(self, exchange: Exchange) -> None:
        """Answer one request (on the server's thread for it)."""
        raise NotImplementedError

    def fail_next(self, route: str, reply: Reply) -> None:
        """The next call of ``route`` (one of ``routes``) is answered with ``reply``'s HTTP error."""
        assert route in self.routes, route
        with self._lock:
            self._failures[route].append(reply)

    def failure(self, route: str) -> Reply | None:
        """The error scripted for this call of ``route``, taken from the queue; None: none."""
        with self._lock:
            queue = self._failures[route]
            return queue.popleft() if queue else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        def do(handler: BaseHTTPRequestHandler) -> None:
            headers = {name.lower(): value for name, value in handler.headers.items()}
            fake.serve(Exchange(handler.command, handler.path, headers, _read_body(handler), handler))

        for method in self.methods:
            setattr(Handler, f"do_{method}", do)
        return Handler
