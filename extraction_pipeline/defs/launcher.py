"""The run launcher: Dagster's default one, plus a worker health check.

``DefaultRunLauncher`` starts each run as a child process of the code server, and cannot tell
Dagster's run monitoring whether that process is still alive. When the daemon (or the machine)
dies, its run workers die with it, and after the restart their runs would stay STARTED for good,
holding the run queue's global and per-user slots. With this launcher, run monitoring asks, on
every poll (``run_monitoring.poll_interval_seconds``), for each STARTED run: is the process that
recorded the run's start still there (same pid, not a zombie, not a newer process reusing the
number)? If not, the run is marked failed within one poll of the daemon coming back, its pool
slots are freed, Dagster's run retry launches a retry, and the batch aggregator puts the document
back in the queue if no retry finishes it.

Only workers on this machine can be checked (the default launcher runs them beside the code
server). For a code server on another host the answer is "running": the launcher never fails a run
it cannot see.
"""

from __future__ import annotations

import json
import socket

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.tags import GRPC_INFO_TAG

from extraction_pipeline.core.runs.liveness import stamp_alive, worker_alive
from extraction_pipeline.defs.binding import WORKER_TAG

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
    """``DefaultRunLauncher`` whose run workers' health can be checked by run monitoring."""

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
