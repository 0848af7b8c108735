"""Benchmark of record for throughput: N documents through the real daemon, and a bare Dagster
baseline on the same machine in the same invocation, so the ratio is what we track.

Pipeline: a temporary instance home (the project's dagster.yaml, pools and run queue), N synthetic
trial PDFs registered and parsed beforehand (cached parses), the model served by the loopback fake
at ``--latency`` seconds per call, `extraction-pipeline daemon` started, one batch created; timed
from `batch create` until every document is finished. Baseline: a bare project with one trivial
asset per dynamic partition and a sensor that requests one run per new partition, under the same
dagster.yaml, timed from adding N partitions until N runs succeeded.

Printed per run: documents (or runs) per minute, CPU-seconds per document (all processes: the
machine's busy time during the run, from /proc/stat), the peak RSS of a run worker, and the fake
server's peak number of calls in flight.

    .venv/bin/python -m benchmarks.throughput [--documents 40] [--latency 0] [--no-baseline]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extraction_pipeline.core.documents import register_pdf
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.parsing import parse_document
from extraction_pipeline.core.prompts import document_from_messages
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.demo import wait_for_batch
from extraction_pipeline.instance import DaemonProcess, init_home
from extraction_pipeline_tests.fake_llm import FakeLLMServer, Reply, extraction_json

TICKS = os.sysconf("SC_CLK_TCK")


def busy_cpu_seconds() -> float:
    """CPU time the whole machine spent not idle, since boot (all cores)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / TICKS


class WorkerSampler(threading.Thread):
    """Polls /proc for Dagster run workers (spawned by the code server, or `dagster api
    execute_run`) and keeps their peak RSS."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self.workers: set[int] = set()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.3):
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                    # The code server starts each run in a spawned process (multiprocessing).
                    if b"execute_run" not in cmdline and b"multiprocessing.spawn" not in cmdline:
                        continue
                    status = (proc / "status").read_text()
                except OSError:
                    continue
                self.workers.add(int(proc.name))
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))


@dataclass
class Measured:
    items: int
    seconds: float
    cpu_seconds: float
    peak_worker_mb: float
    workers: int
    peak_in_flight: int = 0

    def line(self, unit: str) -> str:
        return (
            f"{self.items / self.seconds * 60:6.1f} {unit}/min  "
            f"{self.cpu_seconds / self.items:5.2f} CPU-s/{unit[:-1]}  "
            f"wall {self.seconds:6.1f} s  peak worker RSS {self.peak_worker_mb:5.0f} MB ({self.workers} workers)"
        )


def _answer(trials: dict[str, Any], latency: float) -> Any:
    def answer(messages: list[dict[str, str]]) -> Reply:
        text = document_from_messages(messages)
        trial = next(t for nct, t in trials.items() if nct in text)
        sentence = f"This trial was registered at ClinicalTrials.gov ({trial.nct_number})."
        values = {"metadata.nct_number": (trial.nct_number, sentence)}
        return Reply(extraction_json(values), delay=latency, tokens_in=1500, tokens_out=60)

    return answer


def measure_pipeline(documents: int, latency: float, root: Path) -> Measured:
    fake = FakeLLMServer().start()
    env = {
        "EXTRACTION_HOME": str(root / "home"),
        "EXTRACTION_MODEL": "openai/fake-model",
        "EXTRACTION_API_BASE": fake.api_base,
        "EXTRACTION_API_KEY": "sk-benchmark",
    }
    os.environ.update(env)
    os.environ.pop("EXTRACTION_DATABASE_URL", None)
    settings = Settings.from_env()
    init_home(settings)
    ledger = Ledger.connect(settings.ledger_url)
    trials: dict[str, Any] = {}
    ids = []
    for index in range(1, documents + 1):
        trial = make_trial(10_000 + index)
        trials[trial.nct_number] = trial
        doc = register_pdf(ledger, settings.documents_dir, "bench", write_report(trial, root / "pdfs"))
        parse_document(ledger, sha256=doc.sha256, stored_path=str(settings.documents_dir / f"{doc.sha256}.pdf"))
        ids.append(doc.id)
    fake.answer = _answer(trials, latency)
    daemon = DaemonProcess(settings).start()
    sampler = WorkerSampler()
    sampler.start()
    try:
        time.sleep(5)  # let the daemon load the code location before the clock starts
        cpu, started = busy_cpu_seconds(), time.monotonic()
        batch = create_batch(ledger, idempotency_key="bench", project="bench", user="bench", document_ids=ids).id
        wait_for_batch(ledger, batch, timeout_seconds=3600, daemon=daemon, quiet=True)
        seconds, cpu_used = time.monotonic() - started, busy_cpu_seconds() - cpu
    finally:
        sampler.stopped.set()
        daemon.stop()
        fake.stop()
        ledger.dispose()
    return Measured(documents, seconds, cpu_used, sampler.peak_kb / 1024, len(sampler.workers), fake.peak_in_flight)


BARE_PROJECT = """
import dagster as dg

docs = dg.DynamicPartitionsDefinition(name="docs")


@dg.asset(partitions_def=docs)
def doc() -> None:
    return None


bare_job = dg.define_asset_job("bare_job", selection=[doc], partitions_def=docs)


@dg.sensor(job=bare_job, minimum_interval_seconds=5, default_status=dg.DefaultSensorStatus.RUNNING)
def bare_sensor(context):
    keys = context.instance.get_dynamic_partitions("docs")
    seen = int(context.cursor or 0)
    requests = [dg.RunRequest(run_key=key, partition_key=key) for key in keys[seen:]]
    return dg.SensorResult(run_requests=requests, cursor=str(len(keys)))


defs = dg.Definitions(assets=[doc], jobs=[bare_job], sensors=[bare_sensor])
"""


def measure_baseline(runs: int, root: Path, dagster_yaml: Path) -> Measured:
    import dagster as dg

    home = root / "bare-home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(dagster_yaml.read_text())
    module = root / "bare_project.py"
    module.write_text(textwrap.dedent(BARE_PROJECT))
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    log = (root / "bare-daemon.log").open("wb")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-f", str(module), "-d", str(root)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=root,
    )
    sampler = WorkerSampler()
    sampler.start()
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with dg.DagsterInstance.get() as instance:
            time.sleep(8)  # the daemon loads the code location
            cpu, started = busy_cpu_seconds(), time.monotonic()
            instance.add_dynamic_partitions("docs", [f"doc-{n}" for n in range(runs)])
            done = dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS])
            while instance.get_runs_count(done) < runs:
                if daemon.poll() is not None:
                    raise RuntimeError(f"the bare daemon exited; see {root / 'bare-daemon.log'}")
                time.sleep(1)
            seconds, cpu_used = time.monotonic() - started, busy_cpu_seconds() - cpu
    finally:
        sampler.stopped.set()
        os.killpg(daemon.pid, 15)
        daemon.wait(timeout=60)
        log.close()
    return Measured(runs, seconds, cpu_used, sampler.peak_kb / 1024, len(sampler.workers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the fake model takes per call")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    print(
        f"throughput: {args.documents} documents, fake LLM latency {args.latency:g} s, cached parses, "
        f"SQLite storage, cores={os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        ours = measure_pipeline(args.documents, args.latency, Path(tmp) / "pipeline")
        print(f"  pipeline  {ours.line('docs')}  fake peak concurrency {ours.peak_in_flight}")
        if not args.no_baseline:
            bare = measure_baseline(args.documents, Path(tmp) / "bare", repo / "dagster.yaml")
            print(f"  baseline  {bare.line('runs')}")
            ratio = (ours.items / ours.seconds) / (bare.items / bare.seconds)
            print(f"  ratio pipeline/baseline (docs per minute): {ratio:.2f}")


if __name__ == "__main__":
    main()
