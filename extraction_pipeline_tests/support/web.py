"""A free loopback port, and an ASGI app served on one over real HTTP, for the tests."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

# Ports handed to servers the tests start later (a subprocess binds them, not us). They come from a
# range of this test process's own, below Linux's ephemeral range (32768-60999): a port taken from
# the ephemeral range and released could meanwhile become the local end of some outgoing connection,
# and parallel test workers (pytest-xdist, PYTEST_XDIST_WORKER=gw0, gw1, ...) must never draw the same one.
_PORTS_PER_WORKER = 500
_FIRST_PORT = 20000


def _worker_number() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


_candidates = itertools.cycle(
    range(_FIRST_PORT + _worker_number() * _PORTS_PER_WORKER, _FIRST_PORT + (_worker_number() + 1) * _PORTS_PER_WORKER)
)


def free_port() -> int:
    """A loopback port nobody listens on now, from this worker's own range (never the same one
    twice in a row: a server that just stopped may still hold its port in TIME_WAIT)."""
    for _ in range(_PORTS_PER_WORKER):
        port = next(_candidates)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in this worker's range of {_PORTS_PER_WORKER}")


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a loopback port (uvicorn in a thread of this process), as `ui` serves it: no
    proxy headers, so the peer a trusted-proxy check sees is the socket's. Yields the base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", proxy_headers=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def serving_pages(settings: Any, token: str | None) -> Iterator[str]:
    """Our pages (a stand-in for Dagster's UI beside them) on a loopback port, in this process."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from extraction_pipeline.web.server import build_app

    async def dagster_ui(request: Any) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=token)
    with serving(app) as base:
        yield base
