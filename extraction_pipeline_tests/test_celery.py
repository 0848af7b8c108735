"""Steps on Celery workers (EXTRACTION_EXECUTOR=celery), end to end: the real daemon, RabbitMQ,
two `extraction-pipeline worker` processes whose EXTRACTION_HOME is each its own empty folder
(they share only PostgreSQL and the broker with the daemon), the fake model over HTTP. One
worker is killed with SIGKILL mid-batch; every document still completes, exactly once.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.documents import register_pdf
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.documents import partition_key_of
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.demo import wait_for_batch
from extraction_pipeline.instance import DaemonProcess, init_home
from extraction_pipeline_tests.conftest import _fresh_pg_database
from extraction_pipeline_tests.dagster_support import _answer_from_trial
from extraction_pipeline_tests.fake_llm import FakeLLMServer, Reply

pytestmark = pytest.mark.e2e
LATENCY = 3.0  # seconds per model answer: the batch is still running when a worker is killed


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
    yield from _fresh_pg_database()


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


def test_a_batch_on_two_celery_workers_survives_one_killed_mid_batch(
    tmp_path: Path, broker: str, ledger_database: str, pg_dagster_database: str
) -> None:
    fake = FakeLLMServer().start()
    fake.answer = lambda messages: _slow(_answer_from_trial(messages))
    env = {
        **os.environ,
        "EXTRACTION_DATABASE_URL": ledger_database,
        "EXTRACTION_DAGSTER_STORAGE": "postgres",
        "DAGSTER_PG_URL": pg_dagster_database,
        "EXTRACTION_EXECUTOR": "celery",
        "EXTRACTION_CELERY_BROKER": broker,
        "EXTRACTION_MODEL": "openai/fake-model",
        "EXTRACTION_API_BASE": fake.api_base,
        "EXTRACTION_API_KEY": "sk-celery-secret",
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
            workers = [_start_worker(name, homes[name], env) for name in ("w1", "w2")]
            daemon = DaemonProcess(settings).start()
            doc_ids = [
                register_pdf(ledger, settings.documents_dir, "celery", write_report(make_trial(i), tmp_path / "in")).id
                for i in range(1, 13)
            ]
            batch_id = create_batch(
                ledger, idempotency_key="celery", project="celery", user="cel", document_ids=doc_ids
            ).id

            w1 = workers[0]

            def w1_extracting() -> dict[str, Any] | None:
                pids = _pids_of(w1.group())
                return next(
                    (
                        item
                        for item in batch_item_rows(ledger, batch_id)
                        if item["status"] == "extracting" and _pid(item) in pids
                    ),
                    None,
                )

            victim = _wait(w1_extracting, 240, "worker w1 to be extracting a document")
            w1.kill()  # SIGKILL to the worker and its pool processes, mid-call
            batch = wait_for_batch(ledger, batch_id, timeout_seconds=420, daemon=daemon, quiet=True)
            items = batch_item_rows(ledger, batch_id)
            assert [item["status"] for item in items] == ["completed"] * 12, [(i["message"]) for i in items]
            # The step in flight on the killed worker went back to the broker and ran on the other
            # worker, in the same run: it took the document up again (a second attempt).
            again = next(item for item in items if item["id"] == victim["id"])
            assert (again["run_id"], again["attempts"]) == (victim["run_id"], 2)
            assert _pid(again) != _pid(victim) and _pid(again) not in _pids_of(w1.group())
            # Each document completed exactly once: one materialization per partition, one run each.
            with dg.DagsterInstance.get() as instance:
                for item in items:
                    key = partition_key_of(item["document_id"], item["partition_key"])
                    records = instance.fetch_materializations(
                        dg.AssetRecordsFilter(asset_key=dg.AssetKey("extracted_document"), asset_partitions=[key]),
                        limit=10,
                    ).records
                    assert len(records) == 1, (key, len(records))
                    assert records[0].run_id == item["run_id"]
            # Neither worker's home holds a document: they read the PDFs from the ledger.
            for worker in workers:
                assert not list(worker.home.rglob("*.pdf")), worker.name
            assert batch["export_path"] and Path(batch["export_path"]).is_file()
            assert str(homes["daemon"]) in batch["export_path"]  # written beside the daemon
            log = workers[1].log.read_text(errors="replace")
            assert "sk-celery-secret" not in log
        finally:
            if daemon is not None:
                daemon.stop()
            for worker in workers:
                worker.stop()
            ledger.dispose()
            fake.stop()


def _pid(item: dict[str, Any]) -> int:
    return int(str(item["worker"]).rsplit(":", 1)[1])


def _slow(reply: Reply) -> Reply:
    reply.delay = LATENCY
    return reply
