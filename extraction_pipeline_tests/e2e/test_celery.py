"""Steps on Celery workers (EXTRACTION_EXECUTOR=celery), end to end: the real daemon, the broker
(RabbitMQ, and Redis), two `extraction-pipeline worker` processes whose EXTRACTION_HOME is each its
own empty folder (they share only PostgreSQL and the broker with the daemon), the fake model over
HTTP. On RabbitMQ one worker is killed with SIGKILL mid-batch; every document still completes,
exactly once. (On Redis a killed worker's step returns only after the broker's visibility timeout,
an hour by default: docs/deployment.md.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.documents import partition_key_of
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import ItemListing, ItemRow
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.demo import wait_for_batch
from extraction_pipeline.instance import DaemonProcess, init_home
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.ledgers import fresh_pg_database

pytestmark = pytest.mark.e2e
LATENCY = 3.0  # seconds per model answer: the batch is still running when a worker is killed
SECRET = "sk-celery-secret"  # the model key: never in a worker's log
REDIS_DATABASES = tuple(range(15, 9, -1))  # from the top: the ones least likely in use


def _rabbitmqctl(*args: str) -> None:
    command = shutil.which("rabbitmqctl") or "rabbitmqctl"
    subprocess.run([command, "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def broker() -> Iterator[str]:
    """A RabbitMQ virtual host of its own: no message of another test or run can reach it."""
    problem = None if shutil.which("rabbitmqctl") else "rabbitmqctl not found"
    vhost = f"ep-test-{uuid.uuid4().hex[:8]}"
    if problem is None:
        try:
            _rabbitmqctl("add_vhost", vhost)
            _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            problem = f"rabbitmqctl failed: {exc}"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"RabbitMQ is required in CI: {problem}")
        pytest.skip(problem)
    yield f"pyamqp://guest:guest@127.0.0.1:5672/{vhost}"
    _rabbitmqctl("delete_vhost", vhost)


@pytest.fixture
def ledger_database() -> Iterator[str]:
    yield from fresh_pg_database()


@dataclass
class Worker:
    name: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path

    def group(self) -> int:
        return self.process.pid  # its own session: the Celery main process and its pool children

    def kill(self) -> None:
        os.killpg(self.group(), signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.group(), signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.group(), signal.SIGKILL)
                self.process.wait(timeout=30)


def _start_worker(name: str, home: Path, env: dict[str, str]) -> Worker:
    log = home.parent / f"{name}.log"
    command = [sys.executable, "-m", "extraction_pipeline.cli", "worker", "--queue", "pdf_parse", "--queue", "llm"]
    command += ["--concurrency", "2", "--name", f"{name}@test"]
    with log.open("wb") as out:
        worker_env = {**env, "EXTRACTION_HOME": str(home)}
        process = subprocess.Popen(
            command, env=worker_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Worker(name, home, process, log)


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _pids_of(group: int) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == group:
                    pids.add(int(entry.name))
            except ProcessLookupError:
                continue
    return pids


@dataclass
class RedisBroker:
    url: str
    client: Any  # redis.Redis on the test's own database

    def result_count(self) -> int:
        """Step results Celery stored here (one per step a worker ran through this broker)."""
        return len(self.client.keys("celery-task-meta-*"))


@pytest.fixture
def redis_broker() -> Iterator[RedisBroker]:
    """An empty Redis database of the test's own (broker and result backend), emptied afterwards;
    databases that hold keys are somebody else's and are left alone."""
    import redis

    chosen: tuple[int, Any] | None = None
    problem = f"Redis databases {REDIS_DATABASES[-1]}-{REDIS_DATABASES[0]} all hold keys of someone else's"
    try:
        for number in REDIS_DATABASES:
            client = redis.Redis(host="127.0.0.1", port=6379, db=number, socket_connect_timeout=5, socket_timeout=30)
            if client.dbsize() == 0:
                chosen = (number, client)
                break
            client.close()
    except redis.RedisError as exc:
        problem = f"Redis unreachable: {exc}"
    if chosen is None:
        if os.environ.get("CI"):
            pytest.fail(f"Redis is required in CI: {problem}")
        pytest.skip(problem)
    number, client = chosen
    try:
        yield RedisBroker(f"redis://127.0.0.1:6379/{number}", client)
    finally:
        try:
            client.flushdb()
        finally:
            client.close()


@dataclass
class CeleryStack:
    """The daemon (Celery executor), its ledger, and worker processes with homes of their own."""

    ledger: Ledger
    settings: Settings
    daemon: DaemonProcess
    workers: list[Worker]
    homes: dict[str, Path]

    def batch_of(self, count: int, folder: Path, key: str) -> int:
        pdfs = [write_report(make_trial(i), folder) for i in range(1, count + 1)]
        doc_ids = [document.id for document in register_all(self.ledger, self.settings.documents_dir, key, pdfs)]
        return create_batch(self.ledger, idempotency_key=key, project=key, user="cel", document_ids=doc_ids).id


@contextmanager
def celery_stack(
    tmp_path: Path, fake: FakeLLMServer, ledger_database: str, dagster_database: str, *, broker: str, backend: str
) -> Iterator[CeleryStack]:
    env = {
        **os.environ,
        "EXTRACTION_DATABASE_URL": ledger_database,
        "EXTRACTION_DAGSTER_STORAGE": "postgres",
        "DAGSTER_PG_URL": dagster_database,
        "EXTRACTION_EXECUTOR": "celery",
        "EXTRACTION_CELERY_BROKER": broker,
        "EXTRACTION_CELERY_BACKEND": backend,
        "EXTRACTION_MODEL": "openai/fake-model",
        "EXTRACTION_API_BASE": fake.api_base,
        "EXTRACTION_API_KEY": SECRET,
        "EXTRACTION_DOCUMENTS_PER_RUN": "3",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    homes = {name: tmp_path / name for name in ("daemon", "w1", "w2")}
    for home in homes.values():
        home.mkdir()
    workers: list[Worker] = []
    daemon: DaemonProcess | None = None
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.setenv("EXTRACTION_HOME", str(homes["daemon"]))
        settings = Settings.from_env()
        assert settings.executor == "celery"
        init_home(settings)
        patch.setenv("DAGSTER_HOME", str(settings.dagster_home))
        ledger = Ledger.connect(settings.ledger_url)
        try:
            for name in ("w1", "w2"):
                workers.append(_start_worker(name, homes[name], env))
            daemon = DaemonProcess(settings).start()
            yield CeleryStack(ledger, settings, daemon, workers, homes)
        finally:
            try:
                if daemon is not None:
                    daemon.stop()
            finally:
                for worker in workers:
                    worker.stop()
                ledger.dispose()


def _assert_each_completed_once(stack: CeleryStack, batch_id: int) -> list[ItemListing]:
    """Every document completed, with one materialization, by the run the ledger names; no worker
    home holds a PDF (they read them from the ledger); the workbook is written beside the daemon."""
    items = batch_item_rows(stack.ledger, batch_id)
    assert [item["status"] for item in items] == ["completed"] * len(items), [i["message"] for i in items]
    with dg.DagsterInstance.get() as instance:
        for item in items:
            key = partition_key_of(item["document_id"], item["partition_key"])
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("extracted_document"), asset_partitions=[key]),
                limit=10,
            ).records
            assert len(records) == 1, (key, len(records))
            assert records[0].run_id == item["run_id"]
    for worker in stack.workers:
        assert not list(worker.home.rglob("*.pdf")), worker.name
        assert SECRET not in worker.log.read_text(errors="replace")
    batch = get_batch(stack.ledger, batch_id)
    assert batch is not None and batch["export_path"] and Path(batch["export_path"]).is_file()
    assert str(stack.homes["daemon"]) in batch["export_path"]
    return items


def test_a_batch_on_two_celery_workers_survives_one_killed_mid_batch(
    tmp_path: Path, broker: str, ledger_database: str, pg_dagster_database: str
) -> None:
    fake = FakeLLMServer().start()
    fake.answer = lambda messages: _slow(answer_from_trial(messages))
    try:
        with celery_stack(
            tmp_path, fake, ledger_database, pg_dagster_database, broker=broker, backend="rpc://"
        ) as stack:
            batch_id = stack.batch_of(12, tmp_path / "in", "celery")
            w1 = stack.workers[0]

            def w1_extracting() -> ItemListing | None:
                pids = _pids_of(w1.group())
                return next(
                    (
                        item
                        for item in batch_item_rows(stack.ledger, batch_id)
                        if item["status"] == "extracting" and _pid(item) in pids
                    ),
                    None,
                )

            victim = _wait(w1_extracting, 240, "worker w1 to be extracting a document")
            w1.kill()  # SIGKILL to the worker and its pool processes, mid-call
            wait_for_batch(stack.ledger, batch_id, timeout_seconds=420, daemon=stack.daemon, quiet=True)
            items = _assert_each_completed_once(stack, batch_id)
            # The step in flight on the killed worker went back to the broker and ran on the other
            # worker, in the same run: it took the document up again (a second attempt).
            again = next(item for item in items if item["id"] == victim["id"])
            assert (again["run_id"], again["attempts"]) == (victim["run_id"], 2)
            assert _pid(again) != _pid(victim) and _pid(again) not in _pids_of(w1.group())
    finally:
        fake.stop()


def test_a_batch_runs_on_celery_workers_through_redis(
    tmp_path: Path, redis_broker: RedisBroker, ledger_database: str, pg_dagster_database: str
) -> None:
    """Redis as broker and result backend: every step of every run (parse and extraction) goes
    through it to a worker process."""
    fake = FakeLLMServer().start()
    fake.answer = answer_from_trial
    url = redis_broker.url
    try:
        with celery_stack(tmp_path, fake, ledger_database, pg_dagster_database, broker=url, backend=url) as stack:
            batch_id = stack.batch_of(6, tmp_path / "in", "redis")
            wait_for_batch(stack.ledger, batch_id, timeout_seconds=420, daemon=stack.daemon, quiet=True)
            items = _assert_each_completed_once(stack, batch_id)
            on_workers = set().union(*(_pids_of(worker.group()) for worker in stack.workers))
            assert {_pid(item) for item in items} <= on_workers
            # New PDFs: each run has a parse step and an extraction step, and Redis holds the
            # result of each (the export runs in-process beside the daemon).
            runs = {item["run_id"] for item in items}
            assert redis_broker.result_count() >= 2 * len(runs), (redis_broker.result_count(), len(runs))
    finally:
        fake.stop()


def _pid(item: ItemRow) -> int:
    return int(str(item["worker"]).rsplit(":", 1)[1])


def _slow(reply: Reply) -> Reply:
    reply.delay = LATENCY
    return reply
