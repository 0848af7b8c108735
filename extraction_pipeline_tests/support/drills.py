"""The fault drills' harness (drills/): an instance home run by `extraction-pipeline daemon` (or
`ui`) on PostgreSQL, the loopback fake model with knobs for faults, and what every drill checks at
its end (every item terminal, the ledger and Dagster agreeing, each document's story told alike by
`history` and the batch page, no traceback in any log)."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing
from extraction_pipeline.core.pdf.process_groups import group_alive
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.invariant import invariant_violations
from extraction_pipeline_tests.support.web import free_port

CLI = Path(sys.executable).parent / "extraction-pipeline"
CLOSE_TIMEOUT = 420
DEAD_RUN_BOUND_SECONDS = 120  # documented in ARCHITECTURE.md: dead runs are failed within this


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# One report by a Dagster daemon loop of a dropped database connection: psycopg2's error, then the
# traceback through dagster/_daemon that it caused (up to the next line that is not indented).
_DAGSTER_DAEMON_DB_OUTAGE = re.compile(
    r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*psycopg2\.OperationalError: .*\n(?:\t.*\n|\n)*"
    r"The above exception was the direct cause of the following exception:\n\n"
    r"Traceback \(most recent call last\):\n  File \"[^\"]*/dagster/_daemon/[^\n]*\n(?:[ \t].*\n)*\S.*\n"
)

# Dagster's own shutdown race: once a stopped dagster-daemon logs "Daemon threads shut down.", a
# sensor tick already under way asks for the code location the daemon has just disposed of and logs
# that it is gone. The daemon is exiting and no code of ours ran; any other traceback still counts.
_DAGSTER_THREADS_SHUT_DOWN = "Daemon threads shut down."
_DAGSTER_SHUTDOWN_RACE = re.compile(
    r"Traceback \(most recent call last\):\n  File \"[^\"]*/dagster/_daemon/sensor\.py\"[^\n]*\n(?:[ \t].*\n)*"
    r"dagster\._core\.errors\.DagsterCodeLocationNotFoundError: Location \S+ does not exist in workspace\n"
)


def _without_dagster_shutdown_race(text: str) -> str:
    before, marker, after = text.partition(_DAGSTER_THREADS_SHUT_DOWN)
    return before + marker + _DAGSTER_SHUTDOWN_RACE.sub("", after) if marker else text


class DrillLLM:
    """The fake provider with knobs: latency, a share of 429s, and an outage (port closed)."""

    def __init__(self, latency: float = 3.0) -> None:
        self.latency = latency
        self.rate_limit_every = 0  # n: every n-th request gets a 429
        self.count = 0
        self.port = free_port()
        self.servers: list[FakeLLMServer] = []  # every incarnation: answers in flight finish after down()
        self.server: FakeLLMServer | None = None
        self.lock = threading.Lock()
        self.answering = threading.Event()  # cleared: answers wait (no run can end meanwhile)
        self.answering.set()
        self.up()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _answer(self, messages: list[dict[str, str]]) -> Reply:
        with self.lock:
            self.count += 1
            limited = self.rate_limit_every and self.count % self.rate_limit_every == 0
        if limited:
            return Reply(status=429, error_message="Rate limit reached", headers={"Retry-After": "1"})
        self.answering.wait(timeout=240)  # a drill that holds answers lets calls wait longer (llm_timeout_seconds)
        reply = answer_from_trial(messages)
        reply.delay = self.latency
        return reply

    def up(self) -> None:
        self.server = FakeLLMServer(port=self.port).start()
        self.server.answer = self._answer
        self.servers.append(self.server)

    def down(self) -> None:
        """Close the port: calls now get "connection refused" (answers already in flight finish)."""
        assert self.server is not None
        self.server.stop()
        self.server = None

    def total_served_tokens(self) -> int:
        return sum(server.served_tokens_in for server in self.servers)

    def requests(self) -> int:
        return self.count


@dataclass
class Drill:
    home: Path
    env: dict[str, str]
    ledger: Ledger
    llm: DrillLLM
    dagster_pg_url: str
    daemon: subprocess.Popen[bytes] | None = None
    daemon_log: Path | None = None
    logs: list[Path] = field(default_factory=list)

    # --- processes ---
    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CLI), *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def start_daemon(self) -> None:
        self.daemon_log = self.home / f"cli-daemon-{len(self.logs)}.log"
        self.logs.append(self.daemon_log)
        with self.daemon_log.open("wb") as log:
            self.daemon = subprocess.Popen(
                [str(CLI), "daemon"], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start_ui(self) -> str:
        """`extraction-pipeline ui` (daemon and pages) instead of `daemon`; returns the pages' URL."""
        port = free_port()
        self.daemon_log = self.home / f"cli-ui-{len(self.logs)}.log"
        self.logs.append(self.daemon_log)
        with self.daemon_log.open("wb") as log:
            self.daemon = subprocess.Popen(
                [str(CLI), "ui", "--port", str(port)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}/extraction"
        wait_for(lambda: get_page(url) is not None, 120, "the pages to answer")
        return url

    def tracebacks(self, *, dagster_db_outage: bool = False) -> list[str]:
        """Tracebacks in what the daemon (and its runs) wrote: a handled fault leaves none.
        ``dagster_db_outage``: the drill restarts Dagster's own database, and Dagster's daemon
        loops log (then survive) the dropped connection they were using: such a report, raised
        in dagster/_daemon and caused by psycopg2's OperationalError, is Dagster's, not ours."""
        logs = [*self.logs, self.home / "daemon.log", self.home / "dagster-dev.log"]
        found = []
        for log in logs:
            text = log.read_text() if log.exists() else ""
            if dagster_db_outage:
                text = _DAGSTER_DAEMON_DB_OUTAGE.sub("", text)
            text = _without_dagster_shutdown_race(text)
            if "Traceback" in text:
                start = text.index("Traceback")
                found.append(f"{log.name}: {text[start : start + 3000]}")  # the first one, where it starts
        return found

    def dagster_daemon_pid(self) -> int:
        assert self.daemon_log is not None
        found = wait_for(
            lambda: re.search(r"pid (\d+)", self.daemon_log.read_text()) if self.daemon_log else None,
            60,
            "the daemon to start",
        )
        return int(found.group(1))

    def kill_daemon(self) -> None:
        """SIGKILL of the daemon's whole process group (daemon, code servers, run workers) and of
        the CLI wrapper: what a crash of the machine's service looks like."""
        assert self.daemon is not None
        group = self.dagster_daemon_pid()
        for target in (group, self.daemon.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(target, signal.SIGKILL)
        self.daemon.wait(timeout=30)
        wait_for(lambda: not group_alive(group), 30, "the daemon's process group to die")

    def stop_daemon(self, timeout: float = 180) -> str:
        """SIGTERM to `extraction-pipeline daemon`, as a service manager stops it."""
        assert self.daemon is not None and self.daemon_log is not None
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait(timeout=timeout)
        return self.daemon_log.read_text()

    def close(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            try:
                group = self.dagster_daemon_pid()
                os.killpg(group, signal.SIGKILL)
            except (AssertionError, ProcessLookupError):
                pass
            os.killpg(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait(timeout=30)

    # --- the batch ---
    def batch(self, count: int, key: str) -> int:
        pdfs = [write_report(make_trial(i), self.home / "in") for i in range(1, count + 1)]
        doc_ids = [document.id for document in register_all(self.ledger, self.home / "documents", "drill", pdfs)]
        return create_batch(self.ledger, idempotency_key=key, project="drill", user="drill", document_ids=doc_ids).id

    def items(self, batch_id: int) -> list[ItemListing]:
        return batch_item_rows(self.ledger, batch_id)

    def extracting(self, batch_id: int, at_least: int = 1) -> list[ItemListing]:
        busy = [item for item in self.items(batch_id) if item["status"] == "extracting"]
        return busy if len(busy) >= at_least else []

    def wait_closed(self, batch_id: int, timeout: float = CLOSE_TIMEOUT) -> BatchRow:
        def closed() -> BatchRow | None:
            batch = get_batch(self.ledger, batch_id)
            if self.daemon is not None and self.daemon.poll() is not None:
                raise AssertionError(f"the daemon exited: {self.daemon_log and self.daemon_log.read_text()[-2000:]}")
            return batch if batch and batch["status"] == "completed" and batch["export_path"] else None

        return wait_for(closed, timeout, f"batch {batch_id} to close", interval=1)  # type: ignore[no-any-return]

    def instance(self) -> dg.DagsterInstance:
        os.environ["DAGSTER_HOME"] = str(self.home / "dagster")
        os.environ["DAGSTER_PG_URL"] = self.dagster_pg_url
        return dg.DagsterInstance.get()

    def told(self, batch_id: int) -> dict[int, str]:
        """What `history` and the batch page say happened to each document (by document id): the
        status and, for a document that went through something, the words. Both must agree."""
        listed = self.cli("history", "--batch", str(batch_id), "--json")
        assert listed.returncode == 0, listed.stderr
        words = {row["document_id"]: f"{row['status']}: {row['message'] or ''}" for row in json.loads(listed.stdout)}
        from starlette.applications import Starlette
        from starlette.testclient import TestClient

        from extraction_pipeline.core.settings import Settings
        from extraction_pipeline.web.server import build_app

        app = build_app(Settings.from_env({**self.env, "EXTRACTION_HOME": str(self.home)}), Starlette(), token=None)
        # Named as a browser on this machine names it (the server refuses unknown hosts).
        with TestClient(app, base_url="http://127.0.0.1") as client:
            response = client.get(f"/extraction/batches/{batch_id}")
            assert response.status_code == 200, response.text[-500:]
            page = html.unescape(response.text)
        for told in words.values():
            message = told.split(": ", 1)[1]
            assert message in page, (message, page[-3000:])  # the page tells the same story
        print("\n".join(f"document {doc}: {told}" for doc, told in sorted(words.items())))
        return words

    def assert_nothing_lost(self, batch_id: int) -> None:
        items = self.items(batch_id)
        assert [item["status"] for item in items] == ["completed"] * len(items), [
            (item["document_id"], item["status"], item["message"]) for item in items
        ]
        with self.instance() as instance:
            assert invariant_violations(self.ledger, instance, batch_id) == []


def get_page(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except OSError:
        return None


def new_drill(tmp_path: Path, ledger_url: str, dagster_url: str, llm: DrillLLM, **settings: str) -> Drill:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    env.update(
        {
            "EXTRACTION_HOME": str(home),
            "EXTRACTION_DATABASE_URL": ledger_url,
            "EXTRACTION_DAGSTER_STORAGE": "postgres",
            "DAGSTER_PG_URL": dagster_url,
            "EXTRACTION_MODEL": "openai/fake-model",
            "EXTRACTION_API_BASE": llm.api_base,
            "EXTRACTION_API_KEY": "sk-drill-not-a-secret",
            "EXTRACTION_RECONCILE_GRACE_SECONDS": "15",
            "EXTRACTION_RETRY_BASE_SECONDS": "2",
            "EXTRACTION_RETRY_MAX_DELAY_SECONDS": "8",
            "EXTRACTION_RETRY_BUDGET_MINUTES": "5",
            "EXTRACTION_DRAIN_SECONDS": "60",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            **{f"EXTRACTION_{name.upper()}": value for name, value in settings.items()},
        }
    )
    drill = Drill(home, env, Ledger.connect(ledger_url), llm, dagster_url)
    init = drill.cli("init")
    assert init.returncode == 0, init.stderr
    return drill
