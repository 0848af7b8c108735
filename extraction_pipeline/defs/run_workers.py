"""Run workers forked from a warm process instead of started cold.

Dagster's default launcher asks the code server to start each run, and the code server starts a
fresh interpreter for it (multiprocessing "spawn"). Every run then imported dagster, this package
and litellm again before its first document: about 3.5 CPU-s per run, most of a run worker's CPU
in a small run, and seconds of delay before its first model call when the machine is busy.

Here the launcher starts a run the way Dagster's container launchers do, with the run's
``ExecuteRunArgs`` handed to ``dagster api execute_run``, but inside a process forked from a server
that has imported all of that once (multiprocessing "forkserver"). The server is started with the
daemon's first launch and lives as long as the daemon; a run worker costs a fork. Forking from it
is safe: it imports and nothing more (no thread, no connection, no open file of the runs').

What the worker runs is Dagster's own run command, so a forked run behaves as a spawned one:
its events, its interrupts (SIGINT or SIGTERM), its exit. Only runs whose code runs on this
process's Python are forked; a run of another environment goes to its code server as before
(``HealthCheckedRunLauncher.launch_run``).

The server keeps the code it imported: after upgrading the package, restart the daemon (the code
server Dagster restarts every minute would otherwise serve newer code than the runs).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from typing import Any

from dagster._core.origin import JobPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun
from dagster._grpc.types import ExecuteRunArgs

PRELOAD_MODULE = "extraction_pipeline.run_worker_preload"
_lock = threading.Lock()
_context: Any = None


def _forkserver() -> Any:
    """The multiprocessing context whose server has imported what a run needs (made once)."""
    global _context
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([PRELOAD_MODULE])
            _context = context
        return _context


def forkable(run: DagsterRun) -> bool:
    """Whether ``run`` can be forked from this environment's server: its code runs on this Python
    (the code location the server imported is then already loaded; any other is imported by the
    worker). A run recorded without its origin, or for another environment, is not."""
    origin = run.job_code_origin
    if not isinstance(origin, JobPythonOrigin):
        return False
    return os.path.realpath(origin.repository_origin.executable_path) == os.path.realpath(sys.executable)


def _execute(command: list[str]) -> None:
    """In the forked worker: Dagster's ``dagster api execute_run`` for one run (it exits the process)."""
    from dagster._cli import cli

    os.environ.pop("DAGSTER_EXECUTE_RUN_ARGS", None)
    cli.main(args=command, prog_name="dagster", standalone_mode=True)


def start_run_worker(run: DagsterRun, instance_ref: Any) -> int:
    """Fork a worker executing ``run``; returns its pid. It is not waited for here: the fork
    server reaps it, and Dagster's event log and run monitoring tell how it ended."""
    origin = run.job_code_origin
    assert isinstance(origin, JobPythonOrigin), "only forkable runs are forked"
    args = ExecuteRunArgs(job_origin=origin, run_id=run.run_id, instance_ref=instance_ref)
    # get_command_args() starts with how to call dagster ("dagster" or "python -m dagster"): dropped.
    command = args.get_command_args()
    command = command[command.index("api") :]
    worker = _forkserver().Process(target=_execute, args=(command,), name=f"dagster run {run.run_id}")
    worker.start()
    # Not a child to wait for: multiprocessing would join it when the daemon exits, and a stopped
    # daemon must exit at once while its runs drain (instance.py, DaemonProcess.drain). The fork
    # server reaps it; dropping the handle closes our end of its exit-status pipe.
    multiprocessing.process._children.discard(worker)  # type: ignore[attr-defined]
    return int(worker.pid)
