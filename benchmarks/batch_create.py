"""Benchmark: wall time of `extraction-pipeline batch create` for a batch of N documents.

The command is measured as a user runs it (a new process: interpreter start, imports, ledger
insert of the batch and its N items), with Python's bytecode cache as a default install has it:
PYTHONDONTWRITEBYTECODE is unset for the command and one warm-up run (not counted) writes the
cache. Prints configuration, core count and the median.

    .venv/bin/python -m benchmarks.batch_create [--documents 100] [--repeats 7] [--postgres]   (from the repo root)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.throughput import fresh_postgres
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.instance import init_home
from extraction_pipeline_tests.support.ledgers import add_documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--postgres", action="store_true", help="the ledger on PostgreSQL (a fresh database)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        env = {**os.environ, "EXTRACTION_HOME": tmp}
        env.pop("EXTRACTION_DATABASE_URL", None)
        # Set in some sandboxes; a user's Python caches bytecode, so recompiling every module on
        # every run would measure the sandbox, not the command.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if args.postgres:
            env["EXTRACTION_DATABASE_URL"] = stack.enter_context(fresh_postgres("bench_batch_create"))
        os.environ.update(env)
        settings = Settings.from_env()
        init_home(settings)
        ledger = Ledger.connect(settings.ledger_url)
        add_documents(ledger, args.documents, project="bench")
        ledger.dispose()
        command = [str(Path(sys.executable).parent / "extraction-pipeline"), "batch", "create", "bench", "--user", "u"]
        subprocess.run([*command, "--idempotency-key", "bench-warm-up"], env=env, check=True, capture_output=True)
        times = []
        for repeat in range(args.repeats):
            started = time.perf_counter()
            subprocess.run([*command, "--idempotency-key", f"bench-{repeat}"], env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"batch create: {args.documents} documents, {args.repeats} repeats after 1 warm-up, {backend} ledger, "
        f"bytecode cache on, cores={os.cpu_count()}"
    )
    print(f"median {statistics.median(times):.3f} s  min {min(times):.3f} s  max {max(times):.3f} s")


if __name__ == "__main__":
    main()
