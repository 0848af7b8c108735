"""Benchmark of record for throughput: N documents through the real daemon, and a bare Dagster
baseline on the same machine in the same invocation, so the ratio is what we track.

Pipeline: a temporary instance home (the project's dagster.yaml, pools and run queue), N synthetic
trial PDFs made, registered and parsed beforehand by ``--jobs`` workers (cached parses), the
model served by the loopback fake at ``--latency`` seconds per call, `extraction-pipeline daemon`
started, one batch created; timed from `batch create` until every document is finished.
Baseline: a bare project with one trivial asset per dynamic partition and a sensor that requests
one run per new partition, under the same dagster.yaml, timed from adding N partitions until N
runs succeeded.

Printed per run: documents (or runs) per minute, CPU-seconds per document (all processes: the
machine's busy time during the run, from /proc/stat), the peak RSS of a run worker, and the fake
server's peak number of calls in flight.

    .venv/bin/python -m benchmarks.throughput [--documents 40] [--latency 0] [--no-baseline]
        [--postgres] [--documents-per-run N] [--fairness M] [--pool 5] [--jobs N] [--timeline]
        [--budget configured|probe]
        [--tokens-per-minute T [--requests-per-minute R] [--configure-budget] [--corpus DIR]]

With ``--latency`` > 0 it also prints the makespan against the ideal ceil(N / pool) x latency, and
how long after the last document the workbook came. ``--timeline`` adds where the pool's
slot-seconds went and, for each slot an answer freed, how soon the next call took it (median,
p90, shares within 0.5/1/2/5 s). ``--budget``: the model's limits configured (default; a large
account, so the first calls go at once) or unknown (``probe``: the first call goes alone and tells
them, as on a new instance).
``--fairness M``: analyst B starts a batch of M documents a minute after analyst A's N, and B's
batch is timed again alone on a fresh instance; the ratio is B's time shared / alone.

``--tokens-per-minute T``: the fake meters like a hosted provider (OpenAI's rules: a request is
admitted when its prompt plus ``max_tokens`` fits the minute's token bucket, else 429 with
``Retry-After`` and ``x-ratelimit-*`` headers; every answer carries the headers). The documents are
then real corpus papers (``--corpus``, cycled, each copy distinct bytes so nothing is shared), and
it prints the calls refused, the span from the first to the last answer against the token-bound
ideal (tokens counted minus one minute's allowance, divided by the budget, plus one call's
latency), and the tokens per minute achieved. The pipeline learns the limit from the headers;
``--configure-budget`` also sets it (``EXTRACTION_TOKENS_PER_MINUTE``/``_REQUESTS_PER_MINUTE``).
``--output-tokens N`` sets ``EXTRACTION_OUTPUT_TOKENS`` (what each call reserves for its answer).

``--fault outage|storm``: the same batch twice in one invocation, without and then with a fault
that starts ``--fault-after`` seconds after `batch create` and lasts ``--fault-seconds``: an outage
(the fake's port closed: connection refused) or a storm (every request answered 429 with
``Retry-After: 60``). It prints how much later the faulty batch closed than the clean one, beyond
the fault's own duration, and how many documents failed.

``--postgres``: the ledger and Dagster's storage (for the pipeline and the baseline alike) in fresh
databases on the PostgreSQL server at 127.0.0.1:5432 (dropped afterwards).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.pdf.parsing import parse_documents
from extraction_pipeline.core.pdf.registration import register_pdfs
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.demo import wait_for_batch
from extraction_pipeline.instance import DaemonProcess, init_home, pool_limits
from extraction_pipeline_tests.support import oracle
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, ProviderMeter, Reply, extraction_json

TICKS = os.sysconf("SC_CLK_TCK")


def busy_cpu_seconds() -> float:
    """CPU time the whole machine spent not idle, since boot (all cores)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / TICKS


def _is_run_worker(proc: Path) -> bool:
    cmdline = (proc / "cmdline").read_bytes()
    if b"execute_run" in cmdline or b"multiprocessing.spawn" in cmdline:
        return True  # spawned by a code server
    if b"multiprocessing.forkserver" not in cmdline:
        return False
    # A forked worker shows its server's command line: it is the one whose parent is the server.
    parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
    return b"multiprocessing.forkserver" in (proc.parent / parent / "cmdline").read_bytes()


class WorkerSampler(threading.Thread):
    """Polls /proc for Dagster run workers (forked by the launcher's fork server, spawned by a code
    server, or `dagster api execute_run`) and keeps their peak RSS: of one worker, and of all live
    workers together."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self.peak_total_kb = 0  # the largest sum of the live workers' RSS seen in one poll
        self.peak_live = 0
        self.workers: set[int] = set()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.3):
            total_kb = live = 0
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    if not _is_run_worker(proc):
                        continue
                    status = (proc / "status").read_text()
                except OSError:
                    continue
                self.workers.add(int(proc.name))
                live += 1
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                    elif line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
            self.peak_total_kb = max(self.peak_total_kb, total_kb)
            self.peak_live = max(self.peak_live, live)


@dataclass
class Measured:
    items: int
    seconds: float
    cpu_seconds: float
    peak_worker_mb: float
    workers: int
    peak_in_flight: int = 0
    peak_all_workers_mb: float = 0.0
    peak_live_workers: int = 0

    def line(self, unit: str) -> str:
        return (
            f"{self.items / self.seconds * 60:6.1f} {unit}/min  "
            f"{self.cpu_seconds / self.items:5.2f} CPU-s/{unit[:-1]}  "
            f"wall {self.seconds:6.1f} s  peak worker RSS {self.peak_worker_mb:5.0f} MB ({self.workers} workers; "
            f"all together at most {self.peak_all_workers_mb:5.0f} MB, {self.peak_live_workers} at once)"
        )


def _answer(trials: dict[str, Any], latency: float) -> Any:
    def answer(messages: list[dict[str, str]]) -> Reply:
        text = document_from_messages(messages)
        trial = next(t for nct, t in trials.items() if nct in text)
        sentence = f"This trial was registered at ClinicalTrials.gov ({trial.nct_number})."
        values = {"metadata.nct_number": (trial.nct_number, sentence)}
        return Reply(extraction_json(values), delay=latency, tokens_in=1500, tokens_out=60)

    return answer


def _corpus_answer(latency: float) -> Any:
    """The oracle's answer for the corpus paper in the prompt (an empty one for papers without
    gold values): real answer sizes, values grounded against the real paper."""
    answers = [oracle.build_answer(pmcid) for pmcid in oracle.ORACLE_PAPERS]

    def answer(messages: list[dict[str, str]]) -> Reply:
        text = oracle.skeleton(document_from_messages(messages))
        found = next((a for a in answers if a.fingerprint and oracle.skeleton(a.fingerprint) in text), None)
        return Reply(found.as_json() if found else extraction_json({}), delay=latency)

    return answer


def corpus_copies(corpus: Path, count: int, into: Path) -> list[Path]:
    """``count`` PDFs cycled from the corpus, each copy a distinct text (a line naming the copy
    written at the top of its first page) so that no parse, prompt or stored answer is shared."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()
    papers = sorted((corpus / "pdf").glob("*.pdf"))
    if not papers:
        raise SystemExit(f"no PDFs under {corpus / 'pdf'} (set --corpus or EXTRACTION_CORPUS)")
    into.mkdir(parents=True, exist_ok=True)
    copies = []
    for n in range(count):
        paper = papers[n % len(papers)]
        copy = into / f"{paper.stem}-{n}.pdf"
        with pymupdf.open(paper, filetype="pdf") as pdf:
            pdf[0].insert_text((36, 14), f"Benchmark copy {n} of {paper.stem}", fontsize=6)
            pdf.save(copy)
        copies.append(copy)
    return copies


@dataclass(frozen=True)
class Fault:
    """A provider fault during the batch: ``kind`` outage or storm."""

    kind: str
    after: float
    seconds: float
    retry_after: int = 60


class FaultyProvider:
    """Injects ``fault`` into the fake provider: an outage closes its port (a new server takes the
    same port when it ends, answering the same way); a storm refuses every request with a 429."""

    def __init__(self, fake: FakeLLMServer, fault: Fault) -> None:
        self.fake, self.fault = fake, fault
        self.port = int(fake.api_base.rsplit(":", 1)[1].split("/")[0])
        self.servers = [fake]
        self.ended: float | None = None

    def run(self) -> None:
        time.sleep(self.fault.after)
        if self.fault.kind == "outage":
            self.fake.stop()
            time.sleep(self.fault.seconds)
            back = FakeLLMServer(port=self.port)
            back.answer = self.fake.answer
            self.servers.append(back.start())
        else:
            self.fake.refusing = Reply(status=429, headers={"retry-after": str(self.fault.retry_after)})
            time.sleep(self.fault.seconds)
            self.fake.refusing = None
        self.ended = time.monotonic()

    def stop(self) -> None:
        for server in self.servers[1:]:
            server.stop()


@dataclass(frozen=True)
class Metering:
    """A provider that meters the account (``--tokens-per-minute``), and what the pipeline is told."""

    tokens_per_minute: int
    requests_per_minute: int | None
    configured: bool
    corpus: Path


PG_SERVER = "postgresql+psycopg2://postgres@127.0.0.1:5432"


@contextlib.contextmanager
def fresh_postgres(name: str) -> Iterator[str]:
    """A new empty database on the local server, dropped afterwards: its URL."""
    import sqlalchemy as sa

    admin = sa.create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def storage_env(postgres: str | None) -> dict[str, str]:
    if postgres is None:
        return {"EXTRACTION_DAGSTER_STORAGE": "sqlite"}
    return {"EXTRACTION_DAGSTER_STORAGE": "postgres", "DAGSTER_PG_URL": postgres, "EXTRACTION_DATABASE_URL": postgres}


@dataclass(frozen=True)
class BatchSpec:
    user: str
    documents: int
    start_after: float = 0.0  # seconds after the first batch


def _write_trial(number: int, folder: Path) -> tuple[Any, Path]:
    trial = make_trial(number)
    return trial, write_report(trial, folder)


def prepare(
    ledger: Ledger, settings: Settings, total: int, root: Path, metering: Metering | None
) -> tuple[dict[str, Any], list[int]]:
    """``total`` documents made, registered and parsed (the parse cached) before the clock starts,
    by ``--jobs`` workers: PDFs written by a pool of processes, then registered and parsed in
    ``--jobs`` lists (one isolated child reads each list).
    Returns the synthetic trials by NCT number and the document ids, in order."""
    started = time.monotonic()
    trials: dict[str, Any] = {}
    if metering is not None:
        pdfs = corpus_copies(metering.corpus, total, root / "pdfs")
    else:
        with ProcessPoolExecutor(max_workers=JOBS) as pool:
            made = list(pool.map(_write_trial, range(10_001, 10_001 + total), [root / "pdfs"] * total, chunksize=16))
        trials = {trial.nct_number: trial for trial, _ in made}
        pdfs = [pdf for _, pdf in made]
    made_at = time.monotonic()
    chunks = [pdfs[k::JOBS] for k in range(JOBS)]  # every JOBS-th PDF: the lists are the same size

    def register(chunk: list[Path]) -> list[Any]:
        return register_pdfs(ledger, settings.documents_dir, "bench", chunk, settings.parse_options())

    with ThreadPoolExecutor(max_workers=JOBS) as threads:
        registered = list(threads.map(register, chunks))
    ordered = [registered[k % JOBS][k // JOBS] for k in range(total)]
    refused = [verdict for verdict in ordered if isinstance(verdict, BaseException)]
    if refused:
        raise SystemExit(f"the benchmark's documents could not be registered: {refused[0]}")
    registered_at = time.monotonic()

    def parse(chunk: list[Any]) -> None:
        listed = [(doc.sha256, str(settings.documents_dir / f"{doc.sha256}.pdf")) for doc in chunk]
        failed = [verdict for verdict in parse_documents(ledger, listed) if isinstance(verdict, Exception)]
        if failed:
            raise SystemExit(f"the benchmark's documents could not be parsed: {failed[0]}")

    with ThreadPoolExecutor(max_workers=JOBS) as threads:
        list(threads.map(parse, [ordered[k::JOBS] for k in range(JOBS)]))
    done = time.monotonic()
    print(
        f"  prepared {total} documents in {done - started:.1f} s with {JOBS} jobs: made "
        f"{made_at - started:.1f} s, registered {registered_at - made_at:.1f} s, parsed {done - registered_at:.1f} s",
        flush=True,
    )
    return trials, [doc.id for doc in ordered]


def measure_pipeline(
    documents: int,
    latency: float,
    root: Path,
    postgres: str | None,
    second: BatchSpec | None = None,
    metering: Metering | None = None,
    fault: Fault | None = None,
) -> tuple[Measured, dict[str, float], FakeLLMServer]:
    """The pipeline's figures, each batch's own duration (from its creation to its workbook), and
    the fake provider (its meter's record)."""
    fake = FakeLLMServer().start()
    if metering is not None:
        fake.meter = ProviderMeter(metering.tokens_per_minute, metering.requests_per_minute)
    env = {
        "EXTRACTION_HOME": str(root / "home"),
        "EXTRACTION_MODEL": "openai/fake-model",
        "EXTRACTION_API_BASE": fake.api_base,
        "EXTRACTION_API_KEY": "sk-benchmark",
        **storage_env(postgres),
    }
    if metering is not None and metering.configured:
        env["EXTRACTION_TOKENS_PER_MINUTE"] = str(metering.tokens_per_minute)
        if metering.requests_per_minute:
            env["EXTRACTION_REQUESTS_PER_MINUTE"] = str(metering.requests_per_minute)
    elif metering is None and BUDGET == "configured":
        env["EXTRACTION_TOKENS_PER_MINUTE"] = str(LARGE_ACCOUNT[0])
        env["EXTRACTION_REQUESTS_PER_MINUTE"] = str(LARGE_ACCOUNT[1])
    else:
        for name in ("EXTRACTION_TOKENS_PER_MINUTE", "EXTRACTION_REQUESTS_PER_MINUTE"):
            os.environ.pop(name, None)
    os.environ.pop("EXTRACTION_DATABASE_URL", None)
    os.environ.update(env)
    settings = Settings.from_env()
    init_home(settings, {"llm": POOL})  # --pool: the instance's own `llm` limit, as `init --llm-slots` sets it
    print(f"  instance pools (read back): {pool_limits(settings)}", flush=True)
    ledger = Ledger.connect(settings.ledger_url)
    specs = [BatchSpec("analyst-a", documents), *([second] if second else [])]
    trials, doc_ids = prepare(ledger, settings, sum(s.documents for s in specs), root, metering)
    ids = [doc_ids[sum(s.documents for s in specs[:k]) :][: spec.documents] for k, spec in enumerate(specs)]
    fake.answer = _corpus_answer(latency) if metering else _answer(trials, latency)
    daemon = DaemonProcess(settings).start()
    faulty = FaultyProvider(fake, fault) if fault else None
    sampler = WorkerSampler()
    sampler.start()
    durations: dict[str, float] = {}
    try:
        time.sleep(5)  # let the daemon load the code location before the clock starts
        cpu, started = busy_cpu_seconds(), time.monotonic()
        waiters = []
        for index, (spec, doc_ids) in enumerate(zip(specs, ids, strict=True)):
            waiters.append(threading.Thread(target=_run_batch, args=(ledger, daemon, spec, doc_ids, index, durations)))
            waiters[-1].start()
        if faulty is not None:
            threading.Thread(target=faulty.run, daemon=True).start()
        for waiter in waiters:
            waiter.join()
        seconds, cpu_used = time.monotonic() - started, busy_cpu_seconds() - cpu
    finally:
        sampler.stopped.set()
        daemon.stop()
        if faulty is not None:
            faulty.stop()
            if faulty.ended is not None:
                durations["fault ended"] = faulty.ended - started
        if faulty is None or faulty.fault.kind != "outage" or faulty.ended is None:
            fake.stop()
        ledger.dispose()
    if SHOW_TIMELINE:
        _print_slot_use(fake.call_spans, started, POOL)
    total = sum(spec.documents for spec in specs)
    measured = Measured(
        total,
        seconds,
        cpu_used,
        sampler.peak_kb / 1024,
        len(sampler.workers),
        fake.peak_in_flight,
        sampler.peak_total_kb / 1024,
        sampler.peak_live,
    )
    durations["not completed"] = total - sum(durations.pop(f"{spec.user} completed", 0) for spec in specs)
    return measured, durations, fake


def _run_batch(
    ledger: Ledger, daemon: DaemonProcess, spec: BatchSpec, doc_ids: list[int], index: int, out: dict[str, float]
) -> None:
    time.sleep(spec.start_after)
    started = time.monotonic()
    batch = create_batch(
        ledger, idempotency_key=f"bench-{index}", project="bench", user=spec.user, document_ids=doc_ids
    ).id
    # Looked at often: a batch's time is until its workbook, and a 1-s poll would add up to 1 s.
    wait_for_batch(ledger, batch, timeout_seconds=7200, daemon=daemon, quiet=True, poll_seconds=WORKBOOK_POLL_SECONDS)
    out[spec.user] = time.monotonic() - started
    items = batch_item_rows(ledger, batch)
    created = min(item["created_at"] for item in items)
    out[f"{spec.user} first start"] = (min(i["started_at"] for i in items) - created).total_seconds()
    out[f"{spec.user} documents done"] = (max(i["finished_at"] for i in items) - created).total_seconds()
    out[f"{spec.user} completed"] = sum(1 for item in items if item["status"] == "completed")
    if SHOW_TIMELINE:
        _print_timeline(spec.user, items, created)
        _print_run_start_ups(daemon, items, created)


WORKBOOK_POLL_SECONDS = 0.2
SHOW_TIMELINE = False
JOBS = os.cpu_count() or 1  # --jobs: workers preparing the documents
POOL = 5
# --budget (unmetered fake): "configured", the account's limits are set, so the first calls go at
# once; "probe", a new instance that knows nothing: its first call goes alone and tells them.
BUDGET = "configured"
LARGE_ACCOUNT = (30_000_000, 10_000)  # tokens and requests per minute (a large hosted account)


def _print_metered(meter: ProviderMeter, latency: float) -> None:
    """Refusals, and the answers' span against the token-bound ideal."""
    calls = meter.admitted + meter.refused
    per_minute = meter.tokens_per_minute
    ideal = max(0, meter.tokens_counted - per_minute) / per_minute * 60 + latency
    span = (meter.last_answer or 0) - (meter.first_answer or 0)
    print(
        f"  metered: {meter.refused} of {calls} calls refused ({meter.refused / max(1, calls):.1%}); "
        f"{meter.tokens_counted:,} tokens counted; answers spanned {span:.1f} s against a token-bound ideal "
        f"of {ideal:.1f} s: {span / ideal:.2f}x; achieved {meter.tokens_counted / max(span, 1e-9) * 60:,.0f} "
        f"tokens/min over the span (budget {per_minute:,})"
    )
    if meter.refusals and meter.first_answer is not None:
        t0 = meter.first_answer
        print(
            "  refusals (s after the first answer: tokens asked / left): "
            + ", ".join(f"{at - t0:.1f}: {asked:,}/{left:,}" for at, asked, left in meter.refusals[:12])
            + (" ..." if len(meter.refusals) > 12 else "")
        )


def _print_slot_use(spans: list[tuple[float, float]], t0: float, pool: int) -> None:
    """Where the pool's slot-seconds went, from the fake's own record of each call: busy, idle
    while the pool was first filling, idle between calls once it had been full (hand-over from
    one call to the next), and idle after the last call started (the uneven last round); and how
    soon a slot an answer freed was used by the next call."""
    if not spans:
        return
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    last_start = max(start for start, _ in spans)
    idle = {"filling": 0.0, "hand-over": 0.0, "tail": 0.0}
    in_flight, previous, filled_at = 0, t0, None
    for moment, change in events:
        phase = "filling" if filled_at is None else ("tail" if previous >= last_start else "hand-over")
        idle[phase] += max(0, pool - in_flight) * (moment - previous)
        in_flight += change
        if filled_at is None and in_flight >= pool:
            filled_at = moment
        previous = moment
    starts = ", ".join(f"{start - t0:.1f}" for start, _ in sorted(spans)[:pool])
    print(f"  first {pool} calls started at {starts} s; pool full from {(filled_at or previous) - t0:.1f} s")
    busy = sum(end - start for start, end in spans)
    ends_before_last_start = sum(1 for _, end in spans if end < last_start)
    print(
        f"  slot use: {busy:.0f} slot-s busy; idle {idle['filling']:.0f} slot-s while the pool first filled, "
        f"{idle['hand-over']:.0f} between calls ({idle['hand-over'] / max(1, ends_before_last_start):.2f} s per "
        f"call ended), {idle['tail']:.0f} after the last call started; {len(spans)} calls"
    )
    if filled_at is not None and last_start > filled_at:
        window = pool * (last_start - filled_at)
        busy_after = sum(max(0.0, min(end, last_start) - max(start, filled_at)) for start, end in spans)
        print(
            f"  after the pool filled ({filled_at - t0:.1f}-{last_start - t0:.1f} s): "
            f"slots {busy_after / window:.1%} busy until the last call started"
        )
    if filled_at is not None:
        _print_hand_over(spans, filled_at, last_start)


def _print_hand_over(spans: list[tuple[float, float]], filled_at: float, last_start: float) -> None:
    """For every slot an answer freed once the pool had filled, how long until a call took it:
    each call started then takes the slot freed earliest (every slot idle after the pool filled
    was freed by an answer). Ends after the last call started are the tail, not hand-overs."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    freed: list[float] = []  # when slots were freed after the pool filled, oldest first
    gaps: list[float] = []
    for moment, change in events:
        if moment <= filled_at:
            continue
        if change < 0:
            if moment < last_start:
                freed.append(moment)
        elif freed:
            gaps.append(moment - freed.pop(0))
    if not gaps:
        print("  hand-over: the pool was never full before the last call started")
        return
    gaps.sort()
    share = [sum(1 for gap in gaps if gap <= bound) / len(gaps) for bound in (0.5, 1.0, 2.0, 5.0)]
    print(
        f"  hand-over (a slot an answer freed, until the next call took it; {len(gaps)} slots): median "
        f"{gaps[len(gaps) // 2]:.2f} s, p90 {gaps[int(len(gaps) * 0.9)]:.2f} s, max {gaps[-1]:.2f} s; "
        f"within 0.5 s {share[0]:.0%}, 1 s {share[1]:.0%}, 2 s {share[2]:.0%}, 5 s {share[3]:.0%}"
    )


def _print_timeline(user: str, items: list[dict[str, Any]], created: Any) -> None:
    """Per run: when each of its documents was claimed and finished (s after `batch create`):
    where the makespan goes (late starts, idle slots, an uneven last round)."""
    runs: dict[str, list[tuple[float, float]]] = {}
    for item in items:
        start = (item["started_at"] - created).total_seconds()
        end = (item["finished_at"] - created).total_seconds()
        runs.setdefault(item["run_id"], []).append((start, end))
    print(f"  timeline of {user}'s batch (claimed-finished, s after `batch create`), one line per run:")
    for run_id, spans in sorted(runs.items(), key=lambda entry: min(entry[1])):
        print(f"    {run_id[:8]}  " + "  ".join(f"{a:5.1f}-{b:5.1f}" for a, b in sorted(spans)))


# What a run goes through before its first document is claimed, in Dagster's own event log.
START_UP_EVENTS = ("RUN_ENQUEUED", "RUN_DEQUEUED", "RUN_STARTING", "RUN_START", "STEP_START")


def _print_run_start_ups(daemon: DaemonProcess, items: list[Any], created: Any) -> None:
    """Per run, when it passed each stage of its start (s after `batch create`): the sensor's
    request, the queue, the worker process starting, the step starting, its first claim."""
    from dagster import DagsterInstance

    first_claim: dict[str, float] = {}
    for item in items:
        at = (item["started_at"] - created).total_seconds()
        first_claim[item["run_id"]] = min(at, first_claim.get(item["run_id"], at))
    t0 = created.replace(tzinfo=UTC).timestamp()  # the ledger's times are naive UTC
    print("  run start-up (s after `batch create`): " + ", ".join(n.lower() for n in START_UP_EVENTS) + ", first claim")
    os.environ["DAGSTER_HOME"] = str(daemon.settings.dagster_home)
    with DagsterInstance.get() as instance:
        for run_id, claimed in sorted(first_claim.items(), key=lambda entry: entry[1]):
            record = instance.get_run_record_by_id(run_id)
            stages: dict[str, float] = {}
            for event in instance.all_logs(run_id):
                name = event.dagster_event.event_type.name if event.dagster_event else None
                if name in START_UP_EVENTS and name not in stages:
                    stages[name] = event.timestamp - t0
            created_at = record.create_timestamp.timestamp() - t0 if record else float("nan")
            shown = "  ".join(f"{stages.get(name, float('nan')):5.1f}" for name in START_UP_EVENTS)
            print(f"    {run_id[:8]}  created {created_at:5.1f}  {shown}  {claimed:5.1f}")


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


def measure_baseline(runs: int, root: Path, dagster_yaml: Path, postgres: str | None) -> Measured:
    import dagster as dg

    home = root / "bare-home"
    home.mkdir(parents=True)
    template = dagster_yaml if postgres is None else dagster_yaml.with_name("dagster.postgres.yaml")
    (home / "dagster.yaml").write_text(template.read_text())
    module = root / "bare_project.py"
    module.write_text(textwrap.dedent(BARE_PROJECT))
    env = {**os.environ, **storage_env(postgres), "DAGSTER_HOME": str(home)}
    os.environ.update(storage_env(postgres))
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
    return Measured(
        runs,
        seconds,
        cpu_used,
        sampler.peak_kb / 1024,
        len(sampler.workers),
        peak_all_workers_mb=sampler.peak_total_kb / 1024,
        peak_live_workers=sampler.peak_live,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the fake model takes per call")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--postgres", action="store_true", help="ledger and Dagster storage on PostgreSQL")
    parser.add_argument("--documents-per-run", type=int, default=None, help="EXTRACTION_DOCUMENTS_PER_RUN")
    parser.add_argument(
        "--fairness",
        type=int,
        default=0,
        metavar="M",
        help="also: analyst B's batch of M documents a minute after A's, and B's batch alone on an idle system",
    )
    parser.add_argument("--pool", type=int, default=5, help="the `llm` pool's limit (init's default: 5)")
    parser.add_argument("--timeline", action="store_true", help="print when each run's documents ran")
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="workers that make, register and parse the documents before the clock starts (default: the cores)",
    )
    parser.add_argument(
        "--tokens-per-minute",
        type=int,
        default=0,
        metavar="T",
        help="the fake meters the account like a hosted provider at T tokens/min; documents are corpus papers",
    )
    parser.add_argument("--requests-per-minute", type=int, default=0, metavar="R", help="with T: also R requests/min")
    parser.add_argument(
        "--configure-budget", action="store_true", help="with T: tell the pipeline the limits (else it learns them)"
    )
    parser.add_argument(
        "--budget",
        choices=("configured", "probe"),
        default=None,
        help="without T: the account's limits set (configured, the default: calls start at once) or unknown "
        "(probe: a new instance's first call goes alone)",
    )
    parser.add_argument("--output-tokens", type=int, default=None, help="EXTRACTION_OUTPUT_TOKENS")
    parser.add_argument("--fault", choices=("outage", "storm"), default=None, help="the batch again, with this fault")
    parser.add_argument("--fault-after", type=float, default=20.0, help="seconds after `batch create`")
    parser.add_argument("--fault-seconds", type=float, default=180.0, help="how long the fault lasts")
    parser.add_argument(
        "--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", oracle.CORPUS)), help="with T"
    )
    args = parser.parse_args()
    if args.budget and args.tokens_per_minute:
        parser.error("--budget is for the unmetered fake; with --tokens-per-minute use --configure-budget")
    global SHOW_TIMELINE, POOL, JOBS, BUDGET
    SHOW_TIMELINE, POOL, JOBS = args.timeline, args.pool, max(args.jobs, 1)
    BUDGET = args.budget or "configured"
    if args.documents_per_run is not None:
        os.environ["EXTRACTION_DOCUMENTS_PER_RUN"] = str(args.documents_per_run)
    if args.output_tokens is not None:
        os.environ["EXTRACTION_OUTPUT_TOKENS"] = str(args.output_tokens)
    metering = None
    if args.tokens_per_minute:
        oracle.CORPUS = args.corpus
        rpm = args.requests_per_minute or None
        metering = Metering(args.tokens_per_minute, rpm, args.configure_budget, args.corpus)
    repo = Path(__file__).resolve().parents[1]
    per_run = Settings.from_env().documents_per_run
    print(
        f"throughput: {args.documents} documents, fake LLM latency {args.latency:g} s, cached parses, "
        f"{'PostgreSQL' if args.postgres else 'SQLite'} storage, documents per run <= {per_run}, "
        f"pool {args.pool}, preparation jobs {JOBS}, cores={os.cpu_count()}"
    )
    if not args.tokens_per_minute:
        print(
            "  model budget: "
            + (
                f"configured ({LARGE_ACCOUNT[0]:,} tokens/min, {LARGE_ACCOUNT[1]:,} requests/min): calls start at once"
                if BUDGET == "configured"
                else "unknown: the first call probes the provider alone"
            )
        )
    if metering:
        print(
            f"  metered provider: {metering.tokens_per_minute:,} tokens/min"
            + (f", {metering.requests_per_minute:,} requests/min" if metering.requests_per_minute else "")
            + f"; limits {'configured and ' if metering.configured else ''}learned from the headers; "
            f"corpus papers from {metering.corpus}; output tokens per call "
            f"{os.environ.get('EXTRACTION_OUTPUT_TOKENS') or 'from litellm (none known for the fake)'}"
        )
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="throughput-"))
        ours_db = stack.enter_context(fresh_postgres("bench_pipeline")) if args.postgres else None
        second = BatchSpec("analyst-b", args.fairness, start_after=60.0) if args.fairness else None
        ours, durations, fake = measure_pipeline(
            args.documents, args.latency, Path(tmp) / "pipeline", ours_db, second, metering
        )
        print(f"  pipeline  {ours.line('docs')}  fake peak concurrency {ours.peak_in_flight} (pool {args.pool})")
        print(f"  documents not completed: {durations['not completed']:g}")
        if fake.meter is not None:
            _print_metered(fake.meter, args.latency)
        elif args.latency > 0 and not second:
            ideal = math.ceil(args.documents / args.pool) * args.latency
            done = durations["analyst-a documents done"]
            print(
                f"  LLM-bound: every document done {done:.1f} s after `batch create` (first extraction "
                f"started at {durations['analyst-a first start']:.1f} s), workbook at {ours.seconds:.1f} s "
                f"({ours.seconds - done:.1f} s after the last document); "
                f"ideal {ideal:.0f} s (ceil(N / pool) x latency): measured/ideal {done / ideal:.2f} "
                f"(with the workbook {ours.seconds / ideal:.2f})"
            )
        if second:
            alone_db = stack.enter_context(fresh_postgres("bench_alone")) if args.postgres else None
            _, alone, _ = measure_pipeline(args.fairness, args.latency, Path(tmp) / "alone", alone_db, None, metering)
            ratio = durations["analyst-b"] / alone["analyst-a"]
            print(
                f"  fairness: B's {args.fairness} documents took {durations['analyst-b']:.1f} s while A's "
                f"{args.documents} ran, {alone['analyst-a']:.1f} s alone: ratio {ratio:.2f}; "
                f"A's batch {durations['analyst-a']:.1f} s"
            )
        if args.fault:
            fault = Fault(args.fault, args.fault_after, args.fault_seconds)
            faulty_db = stack.enter_context(fresh_postgres("bench_fault")) if args.postgres else None
            _, hit_durations, _ = measure_pipeline(
                args.documents, args.latency, Path(tmp) / "fault", faulty_db, None, metering, fault
            )
            late = hit_durations["analyst-a"] - durations["analyst-a"] - fault.seconds
            print(
                f"  with a {fault.seconds:g} s {fault.kind} from {fault.after:g} s: batch closed at "
                f"{hit_durations['analyst-a']:.1f} s against {durations['analyst-a']:.1f} s without it: "
                f"{late:+.1f} s beyond the fault's duration; documents not completed: "
                f"{hit_durations['not completed']:g}"
            )
        if not args.no_baseline:
            bare_db = stack.enter_context(fresh_postgres("bench_bare")) if args.postgres else None
            bare = measure_baseline(args.documents, Path(tmp) / "bare", repo / "dagster.yaml", bare_db)
            print(f"  baseline  {bare.line('runs')}")
            ratio = (ours.items / ours.seconds) / (bare.items / bare.seconds)
            print(f"  ratio pipeline/baseline (docs per minute): {ratio:.2f}")


if __name__ == "__main__":
    main()
