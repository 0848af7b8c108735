"""The run launcher: Dagster's default one, with run workers forked warm and a worker health check.

Launching: each run is executed by a process forked from a server that has already imported the
code (defs/run_workers.py), not by a new interpreter the code server starts; a run of another
environment, or launched after the code changed, goes to the code server as Dagster's default
launcher sends it. The forked worker's stamp is recorded on the run at once
(``extraction/run_worker``), and terminating the run interrupts exactly that process (SIGINT, as
the code server would), also before the run has recorded its start.

Health:

``DefaultRunLauncher`` cannot tell Dagster's run monitoring whether a run's worker process is still
alive. When the worker is killed, or the machine restarts, the run would stay STARTED for good,
holding the run queue's global and per-user slots. With this launcher, run monitoring asks, on
every poll (``run_monitoring.poll_interval_seconds``), for each STARTED run: is the process that
recorded the run's start still there (same pid, not a zombie, not a newer process reusing the
number)? If not, the run is marked failed within one poll of the daemon coming back, its pool
slots are freed, Dagster's run retry launches a retry, and the batch aggregator puts the document
back in the queue if no retry finishes it.

Only workers on this machine can be checked. For a code server on another host the answer is
"running": the launcher never fails a run it cannot see.
"""

from __future__ import annotations

import json
import os
import signal
import socket

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, LaunchRunContext, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.tags import GRPC_INFO_TAG

from extraction_pipeline.core.runs.liveness import stamp_alive, worker_alive, worker_stamp
from extraction_pipeline.defs.binding import WORKER_TAG
from extraction_pipeline.defs.run_workers import forkable, start_run_worker

# The stamp (core/runs/liveness.py) of the process this launcher forked for the run; empty when the
# code server started it (a retry inherits its parent's tags: the launch always writes its own).
RUN_WORKER_TAG = "extraction/run_worker"
GONE = "is gone (killed, or its daemon or machine restarted); the document goes back to the queue"

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", ""})  # noqa: S104  (compared, not bound)


def _runs_on_this_host(run: DagsterRun) -> bool:
    raw = run.tags.get(GRPC_INFO_TAG)
    if not raw:
        return True  # launched in-process or by a local code server
    try:
        host = str(json.loads(raw).get("host") or "")
    except (ValueError, AttributeError):
        return True
    return host in LOCAL_HOSTS or host == socket.gethostname()


class HealthCheckedRunLauncher(DefaultRunLauncher):
    """``DefaultRunLauncher`` whose run workers are forked warm and can be health-checked."""

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        if forkable(run):
            try:
                pid = start_run_worker(run, self._instance.get_ref())
            except Exception as error:  # the fork server could not start: the code server still can
                self._instance.report_engine_event(
                    f"Could not fork a run worker ({type(error).__name__}: {error}); the code server starts it.",
                    run,
                    cls=self.__class__,
                )
            else:
                self._instance.add_run_tags(run.run_id, {RUN_WORKER_TAG: worker_stamp(pid)})
                self._instance.report_engine_event(f"Run worker forked (pid {pid}).", run, cls=self.__class__)
                return
        self._instance.add_run_tags(run.run_id, {RUN_WORKER_TAG: ""})
        super().launch_run(context)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        stamp = run.tags.get(RUN_WORKER_TAG, "")
        if not stamp:  # started by the code server: it is the one to stop it
            return bool(super().terminate(run_id))  # type: ignore[no-untyped-call]
        self._instance.report_run_canceling(run)
        if stamp_alive(stamp):
            pid = int(stamp.split("|")[2])
            try:
                os.kill(pid, signal.SIGINT)  # what the code server does to a run it stops
                return True
            except ProcessLookupError:
                pass  # it ended meanwhile
            except PermissionError:
                self._instance.report_engine_event(
                    f"Not allowed to interrupt run worker {pid} (another user's process).", run, cls=self.__class__
                )
                return False
        self._instance.report_engine_event(
            "No live worker to interrupt on this host: run monitoring ends the run.", run, cls=self.__class__
        )
        return False

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        # Any status but RUNNING/SUCCESS fails the run: answer RUNNING whenever we cannot tell.
        records = self._instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1).records
        if not records:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run start not recorded yet")
        entry = records[0].event_log_entry
        pid = entry.dagster_event.pid if entry.dagster_event is not None else None
        stamp = run.tags.get(WORKER_TAG, "")
        # The stamp counts only if this run's worker wrote it: a retry run inherits its parent's tags.
        if pid is not None and stamp.split("|")[2:3] == [str(pid)]:
            alive = stamp_alive(stamp)
            if alive is None:
                return CheckRunHealthResult(WorkerStatus.RUNNING, "worker on another host: not checked")
            return self._verdict(alive, pid)
        if not _runs_on_this_host(run):
            return CheckRunHealthResult(WorkerStatus.RUNNING, "worker on another host: not checked")
        if pid is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no worker pid recorded")
        return self._verdict(worker_alive(pid, started_by=entry.timestamp), pid)

    @staticmethod
    def _verdict(alive: bool, pid: int) -> CheckRunHealthResult:
        if alive:
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker pid {pid} alive")
        return CheckRunHealthResult(WorkerStatus.NOT_FOUND, f"run worker process {pid} {GONE}")
