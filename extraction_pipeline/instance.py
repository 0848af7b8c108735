"""The instance home on disk, and the Dagster processes that work on it.

Layout of ``$EXTRACTION_HOME`` (default ``./.extraction_home``):

    ledger.db        the ledger (unless EXTRACTION_DATABASE_URL points elsewhere)
    documents/       stored copies of registered PDFs, named by sha256
    exports/         one workbook per batch: batch-<id>.xlsx
    dagster/         DAGSTER_HOME: dagster.yaml plus Dagster's own SQLite storage
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.pdf.process_groups import group_alive
from extraction_pipeline.core.pdf.registration import store_missing_contents
from extraction_pipeline.core.settings import DEFAULT_LLM_SLOTS, DEFAULT_PARSE_SLOTS, Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POOLS = {"pdf_parse": DEFAULT_PARSE_SLOTS, "llm": DEFAULT_LLM_SLOTS}
CODE_LOCATION_MODULE = "extraction_pipeline.definitions"
# A stopped daemon's run workers get SIGTERM again this often until they are gone (interrupt_group).
INTERRUPT_AGAIN_SECONDS = 5.0


@dataclass(frozen=True)
class InitReport:
    home: Path
    dagster_yaml: str  # "written" | "kept"
    storage: str  # "sqlite" | "postgres"
    ledger_url: str
    pools: dict[str, int]
    # PDFs put into a shared ledger by this init, and those whose stored copy is not on this machine
    contents: tuple[int, int] = (0, 0)


def _instance_template(storage: str) -> Path:
    name = {"sqlite": "dagster.yaml", "postgres": "dagster.postgres.yaml"}.get(storage)
    if name is None:
        raise ConfigError(f"EXTRACTION_DAGSTER_STORAGE must be 'sqlite' or 'postgres', not {storage!r}")
    path = PROJECT_ROOT / name
    if not path.is_file():
        raise ConfigError(f"instance template {path} is missing (run from a checkout of the project)")
    if storage == "postgres" and not os.environ.get("DAGSTER_PG_URL"):
        raise ConfigError("EXTRACTION_DAGSTER_STORAGE=postgres needs DAGSTER_PG_URL=postgresql+psycopg2://...")
    return path


def dagster_env(settings: Settings) -> dict[str, str]:
    """Environment for every Dagster process of this home (daemon, webserver, runs)."""
    env = dict(os.environ)
    env["EXTRACTION_HOME"] = str(settings.home_dir)
    env["DAGSTER_HOME"] = str(settings.dagster_home)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def init_home(settings: Settings, pools: dict[str, int] | None = None) -> InitReport:
    """Create (or complete) the instance home. Idempotent: safe to run any number of times."""
    pools = {**DEFAULT_POOLS, **(pools or {})}
    for name, limit in pools.items():
        if limit < 1:
            raise ConfigError(f"pool {name} limit must be at least 1, not {limit}")
    storage = os.environ.get("EXTRACTION_DAGSTER_STORAGE", "sqlite")
    template = _instance_template(storage)
    for directory in (settings.home_dir, settings.dagster_home, settings.documents_dir, settings.exports_dir):
        directory.mkdir(parents=True, exist_ok=True)
    target = settings.dagster_home / "dagster.yaml"
    if target.exists() and target.read_text() == template.read_text():
        state = "kept"
    else:
        shutil.copyfile(template, target)
        state = "written"
    ledger = Ledger.connect(settings.ledger_url, create_schema=False)
    try:
        ledger.create_schema(full_check=True)  # `init` inspects every table, whatever the ledger records
        contents = store_missing_contents(ledger)
    finally:
        ledger.dispose()
    _set_pool_limits(settings, pools)
    return InitReport(settings.home_dir, state, storage, _redact(settings.ledger_url), pools, contents)


def _set_pool_limits(settings: Settings, pools: dict[str, int]) -> None:
    from dagster import DagsterInstance  # lazy: 1.4 CPU-s

    with _dagster_home(settings), DagsterInstance.get() as instance:
        for name, limit in pools.items():
            instance.event_log_storage.set_concurrency_slots(name, limit)


def pool_limits(settings: Settings) -> dict[str, int]:
    """The pools' limits as the instance has them (what runs are actually held to)."""
    from dagster import DagsterInstance

    with _dagster_home(settings), DagsterInstance.get() as instance:
        return {name: instance.event_log_storage.get_concurrency_info(name).slot_count for name in DEFAULT_POOLS}


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def is_initialized(settings: Settings) -> bool:
    return (settings.dagster_home / "dagster.yaml").is_file()


def require_initialized(settings: Settings) -> None:
    if not is_initialized(settings):
        raise ConfigError(f"{settings.home_dir} is not initialized: run `extraction-pipeline init` first")


def interrupt_group(pgid: int, seconds: float, *, every: float = INTERRUPT_AGAIN_SECONDS) -> None:
    """SIGTERM to the group, again every ``every`` seconds while it lives, for up to ``seconds``.
    Again, because a run worker can lose the first one: Python drops an exception that a signal
    handler raises inside a garbage-collector callback, and such a worker would go on until the
    SIGKILL, its document left `extracting` instead of handed back."""
    deadline = time.monotonic() + seconds
    next_signal = time.monotonic()
    while time.monotonic() < deadline and group_alive(pgid):
        if time.monotonic() >= next_signal:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            next_signal = time.monotonic() + every
        time.sleep(0.2)


def fail_runs_of_dead_workers(settings: Settings) -> int:
    """Mark failed every STARTED run of this home whose worker process is gone (what run
    monitoring does on the daemon's next start, done at once when we stop it). Returns how many."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
    from dagster._core.launcher import WorkerStatus

    from extraction_pipeline.defs.launcher import HealthCheckedRunLauncher

    with _dagster_home(settings), DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        if not isinstance(launcher, HealthCheckedRunLauncher):
            return 0
        failed = 0
        for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
            health = launcher.check_run_worker_health(run)
            current = instance.get_run_by_id(run.run_id)  # it may have finished meanwhile
            if health.status == WorkerStatus.NOT_FOUND and current and current.status == DagsterRunStatus.STARTED:
                instance.report_run_failed(current, health.msg)
                failed += 1
        return failed


@contextlib.contextmanager
def _dagster_home(settings: Settings) -> Iterator[None]:
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = previous


class DaemonLock:
    """One Dagster daemon per instance home. Dagster itself only logs that two daemons heartbeat;
    two would run every sensor twice. Held (``flock``) for the life of the process that started
    the daemon; the kernel releases it when that process dies, so a crash never leaves it stuck."""

    def __init__(self, settings: Settings) -> None:
        self.path = settings.home_dir / "daemon.lock"
        self._handle: Any = None

    def acquire(self) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise ConfigError(
                f"a Dagster daemon already runs on {self.path.parent} (process {holder}): stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None


def daemon_running(settings: Settings) -> bool:
    """Whether a daemon started by this package holds the home's lock right now."""
    lock = DaemonLock(settings)
    if not lock.path.exists():
        return False
    try:
        lock.acquire()
    except ConfigError:
        return True
    lock.release()
    return False


class DaemonProcess:
    """A `dagster-daemon run` (or `dagster dev`) in its own session, stopped by process group."""

    def __init__(self, settings: Settings, *, with_ui: bool = False, port: int = 3000, log_path: Path | None = None):
        self.settings = settings
        self.with_ui = with_ui
        self.port = port
        self.log_path = log_path or settings.home_dir / ("dagster-dev.log" if with_ui else "daemon.log")
        self.process: subprocess.Popen[bytes] | None = None
        self.lock = DaemonLock(settings)

    def command(self) -> list[str]:
        bin_dir = Path(sys.executable).parent
        if self.with_ui:
            return [
                str(bin_dir / "dagster"),
                "dev",
                "-m",
                CODE_LOCATION_MODULE,
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
            ]
        return [str(bin_dir / "dagster-daemon"), "run", "-m", CODE_LOCATION_MODULE]

    def start(self) -> DaemonProcess:
        self.lock.acquire()  # refuses a second daemon on the same home
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        # A new session: `dagster dev` ignores SIGTERM sent to it alone, so we stop the group.
        self.process = subprocess.Popen(
            self.command(),
            env=dagster_env(self.settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.settings.home_dir,
        )
        log.close()
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_seconds: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            self.lock.release()
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # the group also holds code servers and run workers
        self.process.wait(timeout=10)
        self.lock.release()

    def drain(self, timeout_seconds: float, *, say: Callable[[str], None] = print) -> None:
        """Stop without losing work: the daemon stops first (no new runs, no new dispatches)
        while the runs already in flight go on until they finish (their workers are in the
        daemon's process group, forked by its launcher, and outlive it). Whatever still runs
        after ``timeout_seconds`` is interrupted: each interrupted step hands its document back
        to the queue. Runs left STARTED by workers that died anyway are then failed, so none
        stays STARTED and the next daemon retries them."""
        if self.process is None or self.process.poll() is not None:
            self.lock.release()
            return
        pgid = os.getpgid(self.process.pid)
        # `dagster dev` shuts down on SIGINT (its own Ctrl-C); `dagster-daemon run` on SIGTERM.
        self.process.send_signal(signal.SIGINT if self.with_ui else signal.SIGTERM)
        say(f"stopping: no new runs; in-flight runs may finish within {timeout_seconds:g} s (Ctrl-C again: stop now)")
        deadline = time.monotonic() + timeout_seconds
        try:
            while time.monotonic() < deadline and group_alive(pgid):
                self.process.poll()  # reap the exited daemon: a zombie still counts as a group member
                time.sleep(0.5)
        except KeyboardInterrupt:
            say("stopping now: interrupting in-flight runs (their documents go back to the queue)")
        if group_alive(pgid):
            say("drain timeout: interrupting the runs still in flight (their documents go back to the queue)")
            interrupt_group(pgid, 15.0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.lock.release()
        failed = fail_runs_of_dead_workers(self.settings)
        if failed:
            say(f"{failed} run(s) whose worker was gone marked failed; their documents will be retried")

    def __enter__(self) -> DaemonProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
