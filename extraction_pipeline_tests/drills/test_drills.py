"""Fault drills (issue: nothing lost), each the way an operator meets it: a batch of synthetic
trial PDFs through `extraction-pipeline daemon` on PostgreSQL (ledger and Dagster storage), the
loopback fake LLM, one fault per batch. Each ends with every item terminal, every document once
in the workbook, the ledger/Dagster invariant (invariant.py) checked, and nothing lost that a
retry could have saved: every document completed.

`./dev test` runs the quick drills; CI (CI=true) runs them all (`slow_drill`). Budgets and
timings are scaled down through the EXTRACTION_* settings so each drill takes one to three minutes.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import openpyxl
import pytest
from sqlalchemy import create_engine, text

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.breakers import failing_providers
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing
from extraction_pipeline.core.pdf.isolation import group_alive
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.invariant import batch_runs, invariant_violations
from extraction_pipeline_tests.support.ledgers import fresh_pg_database
from extraction_pipeline_tests.support.web import free_port

pytestmark = pytest.mark.drill
CLI = Path(sys.executable).parent / "extraction-pipeline"
CLOSE_TIMEOUT = 420
DEAD_RUN_BOUND_SECONDS = 120  # documented in ARCHITECTURE.md: dead runs are failed within this


def _wait(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
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
        _wait(lambda: _get(url) is not None, 120, "the pages to answer")
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
        found = _wait(
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
        _wait(lambda: not group_alive(group), 30, "the daemon's process group to die")

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
        doc_ids = [
            register_pdf(
                self.ledger, self.home / "documents", "drill", write_report(make_trial(i), self.home / "in")
            ).id
            for i in range(1, count + 1)
        ]
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

        return _wait(closed, timeout, f"batch {batch_id} to close", interval=1)  # type: ignore[no-any-return]

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


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except OSError:
        return None


def _drill(tmp_path: Path, ledger_url: str, dagster_url: str, llm: DrillLLM, **settings: str) -> Drill:
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


@pytest.fixture
def llm() -> Iterator[DrillLLM]:
    fake = DrillLLM()
    yield fake
    if fake.server is not None:
        fake.server.stop()


@pytest.fixture
def drill_dbs() -> Iterator[tuple[str, str]]:
    ledger_db = fresh_pg_database()
    dagster_db = fresh_pg_database()
    yield next(ledger_db), next(dagster_db)
    for generator in (ledger_db, dagster_db):
        next(generator, None)


@pytest.fixture
def make_drill(tmp_path: Path, drill_dbs: tuple[str, str], llm: DrillLLM) -> Iterator[Callable[..., Drill]]:
    made: list[Drill] = []

    def make(ledger_url: str | None = None, dagster_url: str | None = None, **settings: str) -> Drill:
        drill = _drill(tmp_path, ledger_url or drill_dbs[0], dagster_url or drill_dbs[1], llm, **settings)
        made.append(drill)
        return drill

    yield make
    for drill in made:
        drill.close()
        drill.ledger.dispose()
        for log in drill.logs:  # kept for a failing test's report
            print(f"--- {log.name} ---\n{log.read_text()[-1500:]}")


# --- the drills -------------------------------------------------------------------------------


def test_daemon_killed_with_its_workers_then_restarted(make_drill: Callable[..., Drill], llm: DrillLLM) -> None:
    llm.latency = 8.0  # the kill lands while calls are in flight
    drill = make_drill()
    batch = drill.batch(5, "kill")
    drill.start_daemon()
    busy = _wait(lambda: drill.extracting(batch, at_least=2), 180, "two documents in extraction")
    dead_runs = {item["run_id"] for item in busy}
    drill.kill_daemon()
    time.sleep(3)  # the machine's service manager restarts it a moment later
    restarted = time.monotonic()
    drill.start_daemon()
    with drill.instance() as instance:

        def dead_runs_failed() -> bool:
            runs = [instance.get_run_by_id(run_id) for run_id in dead_runs]
            return all(run is not None and run.status == dg.DagsterRunStatus.FAILURE for run in runs)

        _wait(dead_runs_failed, DEAD_RUN_BOUND_SECONDS, "the dead runs to be failed")
        print(f"dead runs failed {time.monotonic() - restarted:.0f} s after the restart")
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    assert sum(item["tokens_in"] for item in drill.items(batch)) <= llm.total_served_tokens()
    told = drill.told(batch)
    for item in busy:  # each document whose run died says so, and that it completed all the same
        assert told[item["document_id"]].startswith("completed: completed on attempt "), told
        assert "worker died" in told[item["document_id"]], told
    assert drill.tracebacks() == []


def test_daemon_stopped_with_sigterm_hands_runs_back_and_leaves_none_started(
    make_drill: Callable[..., Drill], llm: DrillLLM
) -> None:
    llm.latency = 30.0  # longer than the drain: in-flight runs are interrupted and handed back
    drill = make_drill(drain_seconds="3")
    batch = drill.batch(4, "sigterm")
    drill.start_daemon()
    stopped = _wait(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
    output = drill.stop_daemon()
    assert "stopping: no new runs" in output and "stopped" in output
    with drill.instance() as instance:
        stopping = get_batch(drill.ledger, batch)
        assert stopping is not None
        runs = batch_runs(instance, stopping)
        started = [
            run.run_id for run in runs if run.status in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING)
        ]
        assert started == []  # nothing left STARTED to hold run slots after a restart
    items = drill.items(batch)
    assert {item["status"] for item in items} <= {"pending", "completed"}, items  # handed back, not lost
    llm.latency = 1.0
    drill.start_daemon()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    told = drill.told(batch)
    for item in stopped:
        assert told[item["document_id"]].startswith("completed: completed on attempt "), told
        assert "handed back unfinished: interrupted: the run was stopped" in told[item["document_id"]], told
    assert drill.tracebacks() == []


def test_daemon_sigterm_lets_in_flight_runs_finish_within_the_drain(
    make_drill: Callable[..., Drill], llm: DrillLLM
) -> None:
    llm.latency = 6.0
    drill = make_drill(drain_seconds="120")
    batch = drill.batch(2, "drain")
    drill.start_daemon()
    busy = _wait(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
    drill.stop_daemon()
    finished = {item["id"]: item for item in drill.items(batch)}
    for item in busy:  # what was in flight when the stop came finished during the drain
        assert finished[item["id"]]["status"] == "completed", finished[item["id"]]
    drill.start_daemon()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    told = drill.told(batch)
    for item in busy:  # nothing happened to them: the stop waited
        assert told[item["document_id"]] == "completed: ", told
    assert drill.tracebacks() == []


def test_half_of_the_calls_rate_limited(make_drill: Callable[..., Drill], llm: DrillLLM) -> None:
    llm.latency = 0.5
    llm.rate_limit_every = 2
    drill = make_drill(breaker_failures="4")
    batch = drill.batch(6, "429")
    drill.start_daemon()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    assert llm.requests() >= 6 + 3  # the 429s happened and were waited out
    assert sum(item["tokens_in"] for item in drill.items(batch)) == llm.total_served_tokens()
    told = drill.told(batch)
    limited = [words for words in told.values() if "HTTP 429 RateLimitError: Rate limit reached" in words]
    assert limited and all(words.startswith("completed: completed on attempt ") for words in limited), told
    assert drill.tracebacks() == []


@pytest.mark.slow_drill
def test_provider_down_for_a_while(make_drill: Callable[..., Drill], llm: DrillLLM) -> None:
    llm.latency = 1.0
    drill = make_drill(breaker_failures="2", retry_budget_minutes="4")
    batch = drill.batch(5, "outage")
    drill.start_daemon()
    _wait(lambda: any(i["status"] == "completed" for i in drill.items(batch)), 180, "a first document")
    llm.down()
    outage_started = time.monotonic()
    # The first failure may be a kept-alive connection reset; the next ones find the port closed.
    refused = _wait(
        lambda: [b for b in failing_providers(drill.ledger) if "connection refused" in (b.last_error or "")],
        120,
        "the provider to be reported unreachable",
    )
    assert refused[0].last_error.startswith("provider unreachable: connection refused")
    status = drill.cli("batch", "status", str(batch))
    assert "waiting for the provider openai/fake-model since" in status.stdout, status.stdout
    # Scaled from a 2-minute outage: still several times the longest retry delay (8 s), so the
    # runs in flight wait it out in more than one retry and nothing new is dispatched meanwhile.
    time.sleep(max(0.0, 30 - (time.monotonic() - outage_started)))
    llm.up()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    assert failing_providers(drill.ledger) == []  # the first success closed the breaker
    assert sum(item["tokens_in"] for item in drill.items(batch)) == llm.total_served_tokens()
    told = drill.told(batch)
    cut_off = [words for words in told.values() if "provider unreachable: connection refused" in words]
    assert cut_off and all(words.startswith("completed: completed on attempt ") for words in cut_off), told
    assert drill.tracebacks() == []


@pytest.mark.slow_drill
def test_stale_sweep_leaves_an_item_whose_retry_is_queued(make_drill: Callable[..., Drill], llm: DrillLLM) -> None:
    # One document per run, seven runs: five fill the analyst's five run slots, two queue behind
    # them, and answers are held, so no run ends and the dead run's retry must wait in the queue
    # for as long as the drill says (with runs of two documents the batch took three slots, the
    # retry started within a second, and its queued state could be missed between two looks).
    llm.latency = 1.0
    llm.answering.clear()
    drill = make_drill(
        stale_minutes="0.2", reconcile_grace_seconds="120", documents_per_run="1", llm_timeout_seconds="300"
    )
    batch = drill.batch(7, "sweep")
    drill.start_daemon()
    try:
        [victim, *_] = _wait(lambda: drill.extracting(batch, at_least=5), 180, "five documents in extraction")
        worker_pid = int(victim["worker"].rsplit(":", 1)[1])
        os.kill(worker_pid, signal.SIGKILL)
        with drill.instance() as instance:

            def retry_statuses() -> list[dg.DagsterRunStatus]:
                runs = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": victim["run_id"]}))
                return [run.status for run in runs]

            try:
                _wait(retry_statuses, 240, "the dead run's retry to be submitted")
            except AssertionError as exc:  # say what the daemon did meanwhile: a failure here must explain itself
                dead_run = instance.get_run_by_id(victim["run_id"])
                events = [
                    f"{record.event_log_entry.dagster_event_type}: {record.event_log_entry.message[:200]}"
                    for record in instance.get_records_for_run(victim["run_id"], ascending=False, limit=8).records
                ]
                daemon_log = (drill.home / "daemon.log").read_text()[-4000:]
                status = dead_run.status if dead_run else None
                said = f"victim run {status}; last events {events}; daemon log: {daemon_log}"
                raise AssertionError(f"{exc}; {said}") from exc
            # Longer than the stale threshold (12 s) and one sweep interval (10 s) after it, while the
            # retry waits in the queue.
            time.sleep(24)
            assert retry_statuses() == [dg.DagsterRunStatus.QUEUED], retry_statuses()
            assert drill.items(batch)[victim["id"] - 1]["status"] != "error"
    finally:
        llm.answering.set()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    told = drill.told(batch)[victim["document_id"]]
    assert told.startswith("completed: completed on attempt ") and "worker died" in told, told
    assert drill.tracebacks() == []


@pytest.mark.slow_drill
def test_a_stopped_worker_is_not_swept_and_its_paid_call_counts(
    make_drill: Callable[..., Drill], llm: DrillLLM
) -> None:
    llm.latency = 4.0
    drill = make_drill(stale_minutes="0.2")
    batch = drill.batch(3, "sigstop")
    drill.start_daemon()
    [victim, *_] = _wait(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
    pid = int(victim["worker"].rsplit(":", 1)[1])
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(27)  # more than twice the stale threshold (12 s), with a sweep after each
        assert drill.items(batch)[victim["id"] - 1]["status"] == "extracting"  # its run is alive
    finally:
        os.kill(pid, signal.SIGCONT)
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    assert sum(item["tokens_in"] for item in drill.items(batch)) == llm.total_served_tokens()
    assert drill.told(batch)[victim["document_id"]] == "completed: "  # paused, never taken from it
    assert drill.tracebacks() == []


# --- PostgreSQL restart: a second cluster of our own, never the shared server -----------------


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster of the drill's own: ``stop()`` and ``start()`` it at will."""

    admin_url: str
    stop: Callable[[], None]
    start: Callable[[], None]


@pytest.fixture
def own_clusters() -> Iterator[Callable[[], Cluster]]:
    """Makes throwaway PostgreSQL clusters, each on a free port; all removed afterwards."""
    initdb = shutil.which("initdb")
    pg_ctl = shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("initdb/pg_ctl not found")
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        as_postgres = ["runuser", "-u", "postgres", "--"]
    made: list[tuple[Path, Callable[..., None]]] = []

    def make() -> Cluster:
        data = Path(tempfile.mkdtemp(prefix="ep-drill-pg-", dir="/tmp"))
        if as_postgres:
            shutil.chown(data, "postgres", "postgres")
        port = free_port()
        cluster = data / "cluster"
        subprocess.run(
            [*as_postgres, initdb, "-D", str(cluster), "-A", "trust", "-U", "postgres"], check=True, capture_output=True
        )
        options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"

        def pg(*args: str) -> None:
            subprocess.run(
                [*as_postgres, pg_ctl, "-D", str(cluster), "-l", str(data / "log"), "-w", *args],
                check=True,
                capture_output=True,
                timeout=60,
            )

        pg("-o", options, "start")
        made.append((data, pg))
        return Cluster(
            admin_url=f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres",
            stop=lambda: pg("-m", "fast", "stop"),
            start=lambda: pg("-o", options, "start"),
        )

    try:
        yield make
    finally:
        for data, pg in made:
            with contextlib.suppress(subprocess.CalledProcessError):
                pg("-m", "immediate", "stop")
            shutil.rmtree(data, ignore_errors=True)


def _create_database(admin_url: str, name: str) -> str:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))  # a constant of this test, not input
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.mark.slow_drill
def test_postgresql_restarted_mid_batch(
    make_drill: Callable[..., Drill], llm: DrillLLM, own_clusters: Callable[[], Cluster]
) -> None:
    # Both databases go down at once; Dagster's comes back first, the ledger's a few seconds
    # later. The answers of the calls in flight are held until both are down, so they arrive
    # during the outage: a step that logs to Dagster waits for its database inside Dagster's
    # own retries, then meets the ledger still down, and must wait that out as a step retry.
    ledger_cluster, dagster_cluster = own_clusters(), own_clusters()
    llm.latency = 0.5
    llm.answering.clear()
    drill = make_drill(
        ledger_url=_create_database(ledger_cluster.admin_url, "ledger"),
        dagster_url=_create_database(dagster_cluster.admin_url, "dagster"),
    )
    batch = drill.batch(5, "pg-restart")
    drill.start_daemon()
    try:
        _wait(lambda: drill.extracting(batch, at_least=2), 180, "two documents in extraction")
        _wait(lambda: llm.requests() >= 2, 120, "two calls in flight")
        ledger_cluster.stop()
        dagster_cluster.stop()
        llm.answering.set()
        time.sleep(3.0)
        dagster_cluster.start()
        time.sleep(5.0)
        ledger_cluster.start()
    finally:
        llm.answering.set()
    drill.wait_closed(batch)
    drill.assert_nothing_lost(batch)
    assert sum(item["tokens_in"] for item in drill.items(batch)) <= llm.total_served_tokens()
    told = drill.told(batch)
    assert any("ledger database" in words for words in told.values()), told
    assert drill.tracebacks(dagster_db_outage=True) == []


# --- the workbook's disk: full, read-only ------------------------------------------------------


@pytest.fixture
def exports_mount(make_drill: Callable[..., Drill]) -> Iterator[tuple[Drill, Path]]:
    """A drill whose exports folder is a 1 MB tmpfs of its own (mounting needs root: CI is): room
    for a workbook with its pictures once the filler is gone."""
    drill = make_drill()
    exports = drill.home / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    mounted = _mount("-t", "tmpfs", "-o", "size=1024k,mode=0755", "tmpfs", str(exports), check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'}): the disk drills need one")
    try:
        yield drill, exports
    finally:
        drill.close()  # nothing may hold the mount
        subprocess.run([shutil.which("umount") or "/usr/bin/umount", "-l", str(exports)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Fill the file system under ``folder`` to the last byte."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as handle:
        for size in (4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * size)
    return filler


def _mount(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("mount") or "/usr/bin/mount", *args], capture_output=True, text=True, check=check
    )


def _export_failure_shown(drill: Drill, batch: int, url: str, words: str) -> None:
    """The batch is not completed and says why, in `batch status`, the batch page and Dagster."""
    failed = _wait(
        lambda: (b := get_batch(drill.ledger, batch)) and b["export_error"] and b,
        CLOSE_TIMEOUT,
        "the export to fail",
        interval=1,
    )
    assert failed["status"] == "exporting" and failed["export_path"] is None
    assert words in failed["export_error"], failed["export_error"]
    status = drill.cli("batch", "status", str(batch))
    assert f"export failed: {words}" in status.stdout, status.stdout
    assert "completed" not in status.stdout.splitlines()[0].rsplit(" ", 1)[-1]
    page = _get(f"{url}/batches/{batch}") or ""
    assert f"export failed: {words}" in html.unescape(page), page[-2000:]
    with drill.instance() as instance:  # the failed export run, as the Dagster UI shows it
        runs = instance.get_runs(dg.RunsFilter(job_name="export_batch", statuses=[dg.DagsterRunStatus.FAILURE]))
        assert runs
        failures = [
            event.dagster_event.event_specific_data.error.message  # type: ignore[union-attr]
            for event in instance.all_logs(runs[0].run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
        ]
        assert any(f"export failed: {words}" in message for message in failures), failures


def _workbook_arrives_on_its_own(drill: Drill, batch: int, exports: Path) -> None:
    closed = drill.wait_closed(batch)
    assert Path(str(closed["export_path"])).parent == exports and closed["export_error"] is None
    workbook = openpyxl.load_workbook(closed["export_path"], read_only=True)
    assert workbook["Documents"].max_row == 1 + len(drill.items(batch))
    drill.assert_nothing_lost(batch)
    assert drill.cli("batch", "status", str(batch)).stdout.splitlines()[0].endswith("completed")
    assert drill.tracebacks() == []


@pytest.mark.slow_drill
def test_the_exports_disk_is_full_when_the_batch_closes(exports_mount: tuple[Drill, Path], llm: DrillLLM) -> None:
    drill, exports = exports_mount
    llm.latency = 0.5
    filler = _fill(exports)
    batch = drill.batch(10, "disk-full")
    url = drill.start_ui()
    _export_failure_shown(drill, batch, url, "no space left on device")
    filler.unlink()  # space is back: nobody runs anything by hand
    _workbook_arrives_on_its_own(drill, batch, exports)


@pytest.mark.slow_drill
def test_the_exports_folder_is_read_only_when_the_batch_closes(
    exports_mount: tuple[Drill, Path], llm: DrillLLM
) -> None:
    drill, exports = exports_mount
    llm.latency = 0.5
    _mount("-o", "remount,ro", str(exports))
    batch = drill.batch(4, "read-only")
    url = drill.start_ui()
    _export_failure_shown(drill, batch, url, "read-only file system")
    _mount("-o", "remount,rw", str(exports))
    _workbook_arrives_on_its_own(drill, batch, exports)
