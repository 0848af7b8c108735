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
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import openpyxl
import pytest
from sqlalchemy import create_engine, text

from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.breakers import failing_providers
from extraction_pipeline_tests.support.drills import (
    CLOSE_TIMEOUT,
    DEAD_RUN_BOUND_SECONDS,
    Drill,
    DrillLLM,
    get_page,
    wait_for,
)
from extraction_pipeline_tests.support.invariant import batch_runs
from extraction_pipeline_tests.support.web import free_port

pytestmark = pytest.mark.drill


# --- the drills -------------------------------------------------------------------------------


def test_daemon_killed_with_its_workers_then_restarted(make_drill: Callable[..., Drill], llm: DrillLLM) -> None:
    llm.latency = 8.0  # the kill lands while calls are in flight
    drill = make_drill()
    batch = drill.batch(5, "kill")
    drill.start_daemon()
    busy = wait_for(lambda: drill.extracting(batch, at_least=2), 180, "two documents in extraction")
    dead_runs = {item["run_id"] for item in busy}
    drill.kill_daemon()
    time.sleep(3)  # the machine's service manager restarts it a moment later
    restarted = time.monotonic()
    drill.start_daemon()
    with drill.instance() as instance:

        def dead_runs_failed() -> bool:
            runs = [instance.get_run_by_id(run_id) for run_id in dead_runs]
            return all(run is not None and run.status == dg.DagsterRunStatus.FAILURE for run in runs)

        wait_for(dead_runs_failed, DEAD_RUN_BOUND_SECONDS, "the dead runs to be failed")
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
    stopped = wait_for(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
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
    busy = wait_for(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
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
    # One document per run: runs start one after another, so when the first document is done the
    # others still have calls to make and meet the outage (one run of five documents makes its
    # calls side by side, and they could all be answered before the port closes).
    drill = make_drill(breaker_failures="2", retry_budget_minutes="4", documents_per_run="1")
    batch = drill.batch(5, "outage")
    drill.start_daemon()
    wait_for(lambda: any(i["status"] == "completed" for i in drill.items(batch)), 180, "a first document")
    llm.down()
    left = [i["id"] for i in drill.items(batch) if i["status"] != "completed"]
    assert left, "every document was done before the outage: the drill tested nothing"
    outage_started = time.monotonic()
    # The first failure may be a kept-alive connection reset; the next ones find the port closed.
    refused = wait_for(
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
        [victim, *_] = wait_for(lambda: drill.extracting(batch, at_least=5), 180, "five documents in extraction")
        worker_pid = int(victim["worker"].rsplit(":", 1)[1])
        os.kill(worker_pid, signal.SIGKILL)
        with drill.instance() as instance:

            def retry_statuses() -> list[dg.DagsterRunStatus]:
                runs = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": victim["run_id"]}))
                return [run.status for run in runs]

            try:
                wait_for(retry_statuses, 240, "the dead run's retry to be submitted")
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
    [victim, *_] = wait_for(lambda: drill.extracting(batch, at_least=1), 180, "a document in extraction")
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
        wait_for(lambda: drill.extracting(batch, at_least=2), 180, "two documents in extraction")
        wait_for(lambda: llm.requests() >= 2, 120, "two calls in flight")
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
    failed = wait_for(
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
    page = get_page(f"{url}/batches/{batch}") or ""
    assert f"export failed: {words}" in html.unescape(page), page[-2000:]
    with drill.instance() as instance:  # the failed export run, as the Dagster UI shows it
        # The first attempt was the closing run's own (its log warns; the batch records why); the
        # aggregator's export run follows at its next tick, without backoff, and fails in view.
        failed_runs = dg.RunsFilter(job_name="export_batch", statuses=[dg.DagsterRunStatus.FAILURE])
        runs = wait_for(lambda: instance.get_runs(failed_runs), 120, "a failed export run", interval=1)
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
    batch = drill.batch(5, "disk-full")  # one run: the drill is about the disk, not the runs
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
