"""A free loopback port, an ASGI app served on one over real HTTP, and `ui` run as a user runs it."""

from __future__ import annotations

import contextlib
import http.cookiejar
import io
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
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


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    """GET ``url`` (with a personal token, if given): the status and body, errors included."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class UiServer:
    """`extraction-pipeline ui` on a home of its own, as a user runs it (``env``: more settings)."""

    def __init__(self, home: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.home, self.port = home, free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
        self.env.update({"EXTRACTION_HOME": str(home), **(env or {})})
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "extraction_pipeline.cli", "ui", "--port", str(self.port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                if get(f"{self.url}/extraction")[0] == 200:
                    break
            assert time.monotonic() < deadline and self.process.poll() is None, log.read_text()[-2000:]
            time.sleep(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL of the server and of the daemon it started, as a crash of the machine's service."""
        daemon = re.search(r"daemon pid (\d+)", self.log.read_text())
        for group in (self.process.pid, int(daemon.group(1)) if daemon else None):
            if group is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=120)


def post_pdfs(
    url: str, pdfs: list[Path], personal_token: str, *, project: str = "trials", may_be_cut: bool = False
) -> str:
    """The upload form's POST (multipart, same origin), by a signed-in user (a personal token):
    the project page it leads to, with the upload's verdicts. ``may_be_cut``: the server may die
    mid-upload (the answer is then empty)."""
    boundary = "----upload-boundary-7d3c425"
    body = io.BytesIO()
    for pdf in pdfs:
        body.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="pdfs"; filename="{pdf.name}"\r\n'
            "Content-Type: application/pdf\r\n\r\n".encode()
        )
        body.write(pdf.read_bytes() + b"\r\n")
    body.write(f"--{boundary}--\r\n".encode())
    request = urllib.request.Request(
        f"{url}/extraction/projects/{project}/documents",
        data=body.getvalue(),
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Origin": url,
            "Authorization": f"Bearer {personal_token}",
        },
        method="POST",
    )
    # The upload answers with a redirect to the project page and the verdicts in a cookie (post,
    # redirect, get): followed as a browser follows it, with its cookies.
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        with opener.open(request, timeout=600) as response:
            return str(response.read().decode())
    except OSError:
        if not may_be_cut:
            raise
        return ""


def create_project(url: str, name: str, personal_token: str) -> None:
    """The Projects page's form (an upload goes to a project that exists)."""
    request = urllib.request.Request(
        f"{url}/extraction/projects",
        data=f"project={name}".encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": url,
            "Authorization": f"Bearer {personal_token}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200  # redirected to the new project's page
