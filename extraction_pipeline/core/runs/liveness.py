"""Is a run's worker process still there? Answered from the process table, for the launcher's
health check (defs/launcher.py).

A pid alone is not enough: after the daemon or the machine restarts, the number may belong to a
new, unrelated process. Each run worker records a stamp on its run (host, boot id, pid, start tick
since boot) and is alive only if that exact process still exists. Before the stamp is written, the
RUN_START event's pid is checked: it must exist, not be a zombie, and have started no later than
the run (Linux ``/proc``; elsewhere only existence is checked).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

PROC = Path("/proc")
# A worker process starts a moment before it records the run's start. The boot time in /proc moves
# with the wall clock (NTP steps), so this fallback comparison is generous; the exact check is
# ``stamp_alive`` on the stamp the worker records itself.
START_TOLERANCE_SECONDS = 120.0


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


BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: fixed for its life, unlike wall clock."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def worker_stamp(pid: int | None = None) -> str:
    """Who this worker is, exactly: host, boot, pid and start tick (recorded on its run)."""
    pid = pid or os.getpid()
    return "|".join((socket.gethostname(), _boot_id(), str(pid), _start_ticks(pid) or ""))


def stamp_alive(stamp: str) -> bool | None:
    """True/False for a worker on this host; None when it ran on another host (cannot tell)."""
    try:
        host, boot, pid_text, ticks = stamp.split("|")
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if boot and _boot_id() and boot != _boot_id():
        return False  # the machine restarted since: every process of that boot is gone
    if not ticks:
        return worker_alive(pid)
    return _start_ticks(pid) == ticks
