"""Run workers forked from a warm process instead of started cold.

Dagster's default launcher asks the code server to start each run, and the code server starts a
fresh interpreter for it (multiprocessing "spawn"). Every run then imported dagster, this package
and litellm again before its first document: about 3.5 CPU-s per run, most of a run worker's CPU
in a small run, and seconds of delay before its first model call when the machine is busy.

Here the launcher starts a run the way Dagster's container launchers do, with the run's
``ExecuteRunArgs`` handed to ``dagster api execute_run``, but inside a process forked from a server
that has imported all of that once (multiprocessing "forkserver", run_worker_preload.py). The
server is started by the daemon's first launch and stays while the daemon or any worker forked from
it lives; a run worker costs a fork. The server only imports: no thread, connection or open file
is shared by the workers it forks, and module-level random generators are reseeded in each
(core/backoff.py).

What the worker runs is Dagster's own run command, so a forked run behaves as a spawned one:
its events, its interrupts (SIGINT or SIGTERM), its exit. A run is forked only when its code runs
on this environment's Python and the code has not changed since the server imported it; otherwise
its code server starts it as before (``HealthCheckedRunLauncher.launch_run``), so an upgrade or an
edit is never run with the old code (restart the daemon to have warm workers again).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from pathlib import Path
from typing import Any

from dagster._core.origin import JobPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun
from dagster._grpc.types import ExecuteRunArgs

PRELOAD_MODULE = "extraction_pipeline.run_worker_preload"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
_lock = threading.Lock()
_context: Any = None
_imported_code: tuple[int, int, int] | None = None  # the code's fingerprint when the server started


def code_fingerprint() -> tuple[int, int, int]:
    """Changes when this package's sources or the installed packages change: the number of
    modules, their newest mtime, and the mtime of the site-packages directory (installing or
    upgrading a distribution adds and removes entries in it). A few milliseconds."""
    sources = [path.stat().st_mtime_ns for path in PACKAGE_DIR.rglob("*.py")]
    site = Path(os.__file__).parent  # the standard library: only a fallback below
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            site = Path(entry)
            break
    return len(sources), max(sources, default=0), site.stat().st_mtime_ns


def _forkserver() -> Any:
    """The multiprocessing context whose server has imported what a run needs (made once)."""
    global _context, _imported_code
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([PRELOAD_MODULE])
            _imported_code = code_fingerprint()
            _context = context
        return _context


def forkable(run: DagsterRun) -> bool:
    """Whether ``run`` can be forked from this environment's server: its code runs on this very
    Python (the same path, not only the same interpreter a virtualenv links to), and the code
    is still what the server imported."""
    origin = run.job_code_origin
    if not isinstance(origin, JobPythonOrigin):
        return False
    if os.path.abspath(origin.repository_origin.executable_path) != os.path.abspath(sys.executable):
        return False
    return _imported_code is None or _imported_code == code_fingerprint()


def _execute(command: list[str]) -> None:
    """In the forked worker: Dagster's ``dagster api execute_run`` for one run (it exits the process)."""
    from dagster._cli import cli

    os.environ.pop("DAGSTER_EXECUTE_RUN_ARGS", None)
    cli.main(args=command, prog_name="dagster", standalone_mode=True)


def start_run_worker(run: DagsterRun, instance_ref: Any) -> int:
    """Fork a worker executing ``run``; returns its pid. It is not waited for here: the fork
    server reaps it, and Dagster's event log and run monitoring tell how it ended."""
    origin = run.job_code_origin
    if not isinstance(origin, JobPythonOrigin):
        raise ValueError(f"run {run.run_id} has no Python origin to execute")
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
