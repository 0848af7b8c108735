"""Is a run's worker process still there? Answered from the process table, for the launcher's
health check (defs/launcher.py).

A pid alone is not enough: after the daemon or the machine restarts, the number may belong to a
new, unrelated process. A worker counts as alive only if a process with that pid exists, is not a
zombie, and started no later than the run did (Linux ``/proc``; elsewhere only existence is
checked).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
# A worker process starts a moment before it records the run's start; allow for clock granularity.
START_TOLERANCE_SECONDS = 5.0


def _boot_time() -> float | None:
    try:
        for line in (PROC / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def _proc_state_and_start(pid: int) -> tuple[str, float] | None:
    """(state letter, start time as epoch seconds) of ``pid`` from /proc, or None if unreadable."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (2nd field) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    boot = _boot_time()
    if boot is None:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return fields[0], boot + int(fields[19]) / ticks


def worker_alive(pid: int, *, started_by: float | None = None) -> bool:
    """True if process ``pid`` exists and (with ``started_by``, epoch seconds) is not a newer
    process that reused the number."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if not PROC.is_dir():
        return True
    info = _proc_state_and_start(pid)
    if info is None:
        return (PROC / str(pid)).exists()  # gone between the two checks: dead
    state, process_start = info
    if state in ("Z", "X"):
        return False  # exited, waiting to be reaped: the run will never report
    return started_by is None or process_start <= started_by + START_TOLERANCE_SECONDS
