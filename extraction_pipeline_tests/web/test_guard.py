"""What another site cannot make the server do: the request guard in front of a real `ui` (Dagster's
own GraphQL endpoint behind it), probed the way a hostile page would, with raw HTTP and with a
real Chromium visiting a page on another origin."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.web.guard import allowed_hosts, host_name, is_mutation, origin_of
from extraction_pipeline_tests.support.web import free_port

CHROMIUM = os.environ.get("EXTRACTION_CHROMIUM", "/usr/bin/chromium")
TOKEN = "guard-test-token-9f2c"
READ_POOL = '{ instance { concurrencyLimit(concurrencyKey: "llm") { slotCount } } }'
ZERO_POOL = 'mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 0) }'


def test_the_allowed_hosts_are_loopback_the_bound_address_the_public_url_and_the_configured() -> None:
    assert allowed_hosts("127.0.0.1", "http://127.0.0.1:3000", ()) == frozenset({"localhost", "127.0.0.1", "::1"})
    hosts = allowed_hosts("10.0.0.5", "https://review.example.org/", ("Trials.Example.org", " "))
    assert hosts == frozenset({"localhost", "127.0.0.1", "::1", "10.0.0.5", "review.example.org", "trials.example.org"})
    assert "0.0.0.0" not in (allowed_hosts("0.0.0.0", "http://127.0.0.1:3000", ()) or ())  # noqa: S104
    assert allowed_hosts("0.0.0.0", "http://x", ("*",)) is None  # noqa: S104  # any name, by choice
    assert host_name("[::1]:3000") == "::1" and host_name("Example.org:80") == "example.org"
    # One origin however it is written: the scheme's default port, case; another scheme or port is another.
    assert origin_of("HTTPS://Review.Example.org:443/") == origin_of("https://review.example.org") is not None
    assert (
        origin_of("http://127.0.0.1:80") == "http://127.0.0.1" and origin_of("http://[::1]:3000") == "http://[::1]:3000"
    )
    assert origin_of("https://127.0.0.1:3000") != origin_of("http://127.0.0.1:3000")
    assert origin_of("null") is None and origin_of("http://x:99999") is None


def test_a_mutation_is_told_from_a_query_however_it_is_written() -> None:
    assert not is_mutation(READ_POOL) and not is_mutation("query Q { version }")
    assert is_mutation(ZERO_POOL) and is_mutation(
        '# a comment\n  mutation M { terminateRun(runId: "x") { __typename } }'
    )
    assert is_mutation("query A { version } mutation B { logTelemetry { __typename } }")
    assert is_mutation('subscription { pipelineRunLogs(runId: "x") { __typename } }')
    assert is_mutation("{ unbalanced")  # unreadable: refused rather than guessed at


@dataclass
class Ui:
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    admin: dict[str, str]  # an admin's personal token as a header: Dagster's writes are an admin's

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def answer_headers(self, method: str, path: str, headers: dict[str, str] | None = None) -> dict[str, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, headers=headers or {})
            response = connection.getresponse()
            response.read()
            return {name.lower(): value for name, value in response.getheaders()}
        finally:
            connection.close()

    def raw(self, request: bytes) -> bytes:
        """Bytes sent as they are (what http.client would not send: two Host headers)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as connection:
            connection.sendall(request)
            answer = b""
            while chunk := connection.recv(65536):  # to the end: the server closes (Connection: close)
                answer += chunk
            return answer

    def graphql(self, query: str, **headers: str) -> tuple[int, bytes]:
        data = json.dumps({"query": query}).encode()
        return self.request("POST", "/graphql", body=data, headers={"Content-Type": "application/json", **headers})

    def pool(self) -> int:
        status, body = self.graphql(READ_POOL)
        assert status == 200, body
        return int(json.loads(body)["data"]["instance"]["concurrencyLimit"]["slotCount"])


def _start_ui(home: Path, log: Path, *, token: str | None) -> Ui:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    env["EXTRACTION_HOME"] = str(home)
    if token:
        env["EXTRACTION_UI_TOKEN"] = token
    cli = [sys.executable, "-m", "extraction_pipeline.cli"]
    subprocess.run([*cli, "init"], env=env, check=True, capture_output=True)
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    admin = {"Authorization": f"Bearer {add_user(ledger, 'Ada Admin', Role.ADMIN)[1]}"}
    ledger.dispose()
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*cli, "ui", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    ui = Ui(port, process, log, admin)
    deadline = time.monotonic() + 120
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    while True:
        with contextlib.suppress(OSError):
            if ui.request("GET", "/server_info", headers=auth)[0] == 200:
                return ui
        assert time.monotonic() < deadline and process.poll() is None, log.read_text()[-2000:]
        time.sleep(0.5)


def _serving(factory: pytest.TempPathFactory, name: str, token: str | None) -> Iterator[Ui]:
    root = factory.mktemp(name)
    server = _start_ui(root / "home", root / "ui.log", token=token)
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=120)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """`ui` as an analyst runs it: loopback, no token (the default)."""
    yield from _serving(tmp_path_factory, "guarded", None)


@pytest.mark.e2e
def test_graphql_changes_state_only_through_a_same_site_json_post(ui: Ui) -> None:
    assert ui.pool() == 5  # `init`'s llm pool
    status, body = ui.request("GET", f"/graphql?query={quote(ZERO_POOL)}")  # what an <img> sends
    assert status == 405 and b"needs a POST with Content-Type: application/json" in body
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, body = ui.request(  # the "simple" POSTs a page on any site may send without asking
            "POST", f"/graphql?query={quote(ZERO_POOL)}", body=b"query=x", headers={"Content-Type": content_type}
        )
        assert status == 415, (content_type, body)
    status, body = ui.graphql(ZERO_POOL, Origin="http://evil.example")
    assert status == 403 and b"another site" in body
    status, _ = ui.graphql(ZERO_POOL, **{"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    assert ui.pool() == 5  # nothing above changed anything
    status, body = ui.request("GET", f"/graphql?query={quote(READ_POOL)}")
    assert status == 200 and json.loads(body)["data"]["instance"]["concurrencyLimit"]["slotCount"] == 5  # reads stay
    six = 'mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 6) }'
    status, body = ui.graphql(six, Origin=ui.origin, **ui.admin)
    assert status == 200 and json.loads(body)["data"]["setConcurrencyLimit"] is True  # the UI's own way works
    assert ui.pool() == 6
    ui.graphql('mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 5) }', **ui.admin)
    assert ui.pool() == 5


@pytest.mark.e2e
def test_a_request_naming_another_host_is_refused(ui: Ui) -> None:
    rebinding = {
        "Host": "evil.example",
        "Origin": "http://evil.example",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    status, body = ui.request("POST", "/extraction/projects", body=b"name=rebound", headers=rebinding)
    assert status == 421 and b"not served as 'evil.example'" in body and b"EXTRACTION_ALLOWED_HOSTS" in body
    status, _ = ui.request("GET", "/graphql?query=%7Bversion%7D", headers={"Host": f"evil.example:{ui.port}"})
    assert status == 421
    status, page = ui.request("GET", "/extraction/projects")
    assert status == 200 and b"rebound" not in page
    for host in (f"localhost:{ui.port}", f"127.0.0.1:{ui.port}"):
        assert ui.request("GET", "/server_info", headers={"Host": host})[0] == 200


# What the hostile page posts: a "latest workbook" whose link points to another site.
PLANT = "/report_asset_materialization/batch_workbook?description=planted&metadata=" + quote(
    '{"url": "http://evil.example"}', safe=""
)
MATERIALIZATIONS = (
    '{ assetOrError(assetKey: {path: ["batch_workbook"]}) { ... on Asset { assetMaterializations { timestamp } } } }'
)


def _materializations(ui: Ui) -> int:
    status, body = ui.graphql(MATERIALIZATIONS)
    assert status == 200, body
    return len(json.loads(body)["data"]["assetOrError"]["assetMaterializations"])


@pytest.mark.e2e
def test_no_answer_may_be_framed_and_a_write_from_another_origin_or_scheme_is_refused(ui: Ui) -> None:
    refused_mutation = f"/graphql?query={quote(ZERO_POOL)}"
    for path in ("/extraction/projects", "/extraction/signin", "/server_info", "/", refused_mutation):
        headers = ui.answer_headers("GET", path)  # ours, Dagster's, and a refusal of the guard's
        assert headers.get("x-frame-options") == "DENY", (path, headers)
        assert headers.get("content-security-policy") == "frame-ancestors 'none'", (path, headers)
    # The same host and port over another scheme is another origin.
    https = f"https://127.0.0.1:{ui.port}"
    status, body = ui.graphql(ZERO_POOL, Origin=https)
    assert status == 403 and b"another site" in body
    form = {"Origin": https, "Content-Type": "application/x-www-form-urlencoded"}
    status, body = ui.request("POST", "/extraction/projects", body=b"name=from-https", headers=form)
    assert status == 403 and b"POST requests from another site are refused" in body
    # Dagster's REST writes: never from another site, never in the bodiless form any page can send.
    report = "/report_asset_materialization/batch_workbook"
    status, body = ui.request("POST", report, headers={"Origin": "http://evil.example"})
    assert status == 403, body
    status, body = ui.request("POST", f"{report}?description=planted")
    assert status == 415 and b"Content-Type: application/json" in body
    assert _materializations(ui) == 0
    status, body = ui.request(  # as an admin's script reports one, the documented JSON way: accepted
        "POST", report, body=b'{"description": "reported"}', headers={"Content-Type": "application/json", **ui.admin}
    )
    assert status == 200, body
    assert _materializations(ui) == 1
    # Two Host headers: the guard and the application could each read another one.
    doubled = (
        f"GET /server_info HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    ).encode()
    answer = ui.raw(doubled)
    assert answer.startswith(b"HTTP/1.1 400") and b"one Host header" in answer, answer[:300]
    # Two Content-Types: this guard reads one, Dagster the other (its body or the URL's query).
    typed_twice = (
        f"POST /graphql?query={quote(ZERO_POOL)} HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n"
        "Content-Type: text/plain\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\n{}"
    ).encode()
    answer = ui.raw(typed_twice)
    assert answer.startswith(b"HTTP/1.1 400") and b"Content-Type once" in answer, answer[:300]
    assert ui.pool() == 5
    assert b"from-https" not in ui.request("GET", "/extraction/projects")[1]


def _text_of(frame: Any) -> str:
    try:
        return str(frame.evaluate("document.body ? document.body.innerText : ''"))
    except Exception:  # an error page of the browser's own may not be read at all
        return ""


def _framing_page(target: str) -> str:
    """A page on another site that shows the server's sign-in page and a Dagster page in frames."""
    return (
        f'<!doctype html><html><body><iframe src="{target}/extraction/signin" width=600 height=300></iframe>'
        f'<iframe src="{target}/runs" width=600 height=300></iframe></body></html>'
    )


@pytest.mark.e2e
@pytest.mark.browser
def test_a_page_on_another_site_cannot_frame_the_server(ui: Ui, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with _other_site(_framing_page(ui.origin)) as framing, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(framing, wait_until="load")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(tmp_path / "framed.png"))
        frames = [(frame.url, _text_of(frame)) for frame in page.frames[1:]]
        browser.close()
    assert len(frames) == 2, frames
    # Chromium puts its error page in a frame it refused to fill: neither page of ours was shown.
    assert not any(url.startswith(ui.origin) for url, _ in frames), frames
    assert not any("Sign in" in text for _, text in frames), frames


def _hostile_page(target: str) -> str:
    """The page on another site: it tries every way a page can make the browser send a mutation."""
    mutation = quote(ZERO_POOL)
    return f"""<!doctype html><html><body>
<img src="{target}/graphql?query={mutation}">
<form id="plain" method="post" enctype="text/plain" action="{target}/graphql?query={mutation}" target="f1">
<input name="x" value="y"></form>
<form id="urlenc" method="post" action="{target}/graphql?query={mutation}" target="f2">
<input name="query" value='{ZERO_POOL}'></form>
<form id="plant" method="post" action="{target}{PLANT}" target="f3"><input name="x" value="y"></form>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe>
<script>
document.getElementById('plain').submit();
document.getElementById('urlenc').submit();
fetch("{target}/graphql", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
  body: JSON.stringify({{query: '{ZERO_POOL}'}})}});
fetch("{target}/graphql", {{method: "POST", headers: {{"Content-Type": "application/json"}},
  body: JSON.stringify({{query: '{ZERO_POOL}'}})}}).catch(() => {{}});
// Dagster's REST write: a "latest workbook" event planted with a link to another site.
fetch("{target}{PLANT}", {{method: "POST", mode: "no-cors"}});
fetch("{target}{PLANT}", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
  body: '{{"description": "planted"}}'}});
fetch("{target}{PLANT}", {{method: "POST", headers: {{"Content-Type": "application/json"}},
  body: '{{"description": "planted"}}'}}).catch(() => {{}});
document.getElementById('plant').submit();
setTimeout(() => {{ document.title = "done"; }}, 2500);
</script></body></html>"""


@contextlib.contextmanager
def _other_site(page: str) -> Iterator[str]:
    """``page`` served at another origin (and another host): its URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _chromium() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required in CI: {CHROMIUM} is missing (./dev test installs it)")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    return CHROMIUM


@pytest.mark.e2e
@pytest.mark.browser
def test_a_page_on_another_site_cannot_change_the_instance_through_the_browser(ui: Ui, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    events = _materializations(ui)
    with _other_site(_hostile_page(ui.origin)) as hostile, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{ui.origin}/extraction")  # the analyst has the workbench open
        page.goto(hostile)
        page.wait_for_function("document.title === 'done'", timeout=30_000)
        page.screenshot(path=str(tmp_path / "hostile.png"))
        browser.close()
    assert ui.pool() == 5  # the llm pool was not set to 0
    assert _materializations(ui) == events  # and no workbook event was planted


@pytest.fixture(scope="module")
def token_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """`ui` with an access token (required beyond loopback, allowed on it)."""
    yield from _serving(tmp_path_factory, "token", TOKEN)


@pytest.mark.e2e
def test_dagsters_live_updates_work_behind_the_token_and_refuse_other_sites(token_ui: Ui) -> None:
    import websockets
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    url = f"ws://127.0.0.1:{token_ui.port}/graphql"

    async def handshake(headers: dict[str, str]) -> str:
        async with websockets.connect(url, subprotocols=["graphql-ws"], additional_headers=headers) as socket:  # type: ignore[list-item]
            await socket.send(json.dumps({"type": "connection_init", "payload": {}}))
            return str(json.loads(await asyncio.wait_for(socket.recv(), 10))["type"])

    cookie = {"Cookie": f"extraction_token={TOKEN}", "Origin": token_ui.origin}
    assert asyncio.run(handshake(cookie)) == "connection_ack"
    for refused in ({"Origin": token_ui.origin}, {**cookie, "Origin": "http://evil.example"}):
        with pytest.raises((InvalidStatus, ConnectionClosed)):
            asyncio.run(handshake(refused))
    assert "Traceback" not in token_ui.log.read_text()  # each handshake was answered, none failed with a 500
