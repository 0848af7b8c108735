"""`extraction-pipeline worker`: a Celery worker that runs pipeline steps from the broker.

It needs what any machine of a Celery deployment shares: the broker (EXTRACTION_CELERY_BROKER),
the PostgreSQL ledger (EXTRACTION_DATABASE_URL: documents' bytes and parse results live there)
and the model settings. Dagster's storage comes with each step (the daemon's instance), so the
worker's own EXTRACTION_HOME may be any empty folder.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import sys
from pathlib import Path

from extraction_pipeline.cli.common import EXIT_USAGE, AddCommand, CliError, positive_int
from extraction_pipeline.core.settings import Settings

# Mirrors defs/executor.py, which this module must not import (it pulls in Dagster, ~1.5 s):
# tests check both name the same queues and settings.
QUEUES = ("pdf_parse", "llm", "export")
ACKS_LATE = {"task_acks_late": True, "task_reject_on_worker_lost": True, "worker_prefetch_multiplier": 1}


def worker_config(settings: Settings, directory: Path) -> Path:
    """The Celery configuration module the worker loads (``dagster_celery_config``, as
    dagster-celery's own worker command writes it), readable by its owner only: the broker URL
    may hold a password."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        f"broker_url = {settings.celery_broker!r}",
        f"result_backend = {settings.celery_backend!r}",
        *(f"{key} = {value!r}" for key, value in ACKS_LATE.items()),
    ]
    path = directory / "dagster_celery_config.py"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # also when the file was already there
    with os.fdopen(descriptor, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def _check_broker(url: str) -> None:
    """Fail fast, in one line, when the broker cannot be reached (Celery would retry forever)."""
    from kombu.connection import Connection

    with Connection(url, connect_timeout=5) as connection:  # type: ignore[no-untyped-call]  # kombu is untyped
        try:
            connection.ensure_connection(max_retries=1)
        except Exception as exc:  # kombu raises transport-specific types
            # as_uri() masks the password.
            raise CliError(f"cannot reach the Celery broker at {connection.as_uri()}: {exc}") from None


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.ledger_url.startswith("postgresql"):
        raise CliError(
            "a worker needs the shared PostgreSQL ledger: set EXTRACTION_DATABASE_URL=postgresql+psycopg2://...",
            EXIT_USAGE,
        )
    queues = list(dict.fromkeys(args.queue or ["pdf_parse", "llm"]))
    name = args.name or f"{'+'.join(queues)}-{os.getpid()}@{socket.gethostname()}"
    _check_broker(settings.celery_broker)
    # One folder per worker name: restarts reuse it, and workers sharing a home never share a file.
    config_dir = settings.home_dir / "celery" / hashlib.sha256(name.encode()).hexdigest()[:12]
    worker_config(settings, config_dir)
    settings.dagster_home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(config_dir), env.get("PYTHONPATH")]))
    env["DAGSTER_HOME"] = str(settings.dagster_home)
    command = [
        sys.executable,
        "-m",
        "celery",
        "--app",
        "dagster_celery.app",
        "worker",
        "--queues",
        ",".join(queues),
        "--hostname",
        name,
        "--concurrency",
        str(args.concurrency),
        "--prefetch-multiplier",
        "1",
        "--loglevel",
        args.loglevel,
    ]
    print(f"worker {name}: queues {', '.join(queues)}, {args.concurrency} step(s) at once", flush=True)
    # Replaces this process: the service manager's signals reach Celery itself (SIGTERM: finish the
    # steps in hand, then stop).
    os.execve(sys.executable, command, env)  # noqa: S606  (a fixed argument list, no shell)
    return 0  # not reached


def register(add: AddCommand) -> None:
    worker = add(
        "worker",
        cmd_worker,
        "Run a Celery worker for pipeline steps (EXTRACTION_EXECUTOR=celery): parse, LLM or export queues.",
    )
    worker.add_argument(
        "--queue",
        action="append",
        choices=QUEUES,
        help="queue to serve; repeat for several (default: pdf_parse and llm)",
    )
    worker.add_argument(
        "--concurrency", type=positive_int, default=2, help="steps this worker runs at once (default 2)"
    )
    worker.add_argument("--name", help="worker name, unique on the broker (default: queues-pid@host)")
    worker.add_argument("--loglevel", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
