"""Run the parse engine in a child process, in its own session, with a hard timeout.

A broken PDF can hang or crash a parser; it must cost one document, never a worker. On timeout
or cancellation of the caller: SIGTERM to the child's whole process group, up to 3 s grace, then
SIGKILL — so nothing the parser started survives it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.pdf.engine import EngineOptions

TERM_GRACE_SECONDS = 3.0
WORKER_MODULE = "extraction_pipeline.core.pdf.child"


class ParseTimeout(PermanentError):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"parse timed out after {seconds:g} s")
        self.seconds = seconds


def kill_process_group(process: subprocess.Popen[bytes], grace: float = TERM_GRACE_SECONDS) -> None:
    """SIGTERM the child's group, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
    try:
        pgid = os.getpgid(process.pid)
    except ProcessLookupError:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and group_alive(pgid):
            process.poll()  # reap the direct child so its pid leaves the group
            time.sleep(0.05)
        if not group_alive(pgid):
            break
    process.poll()


def group_alive(pgid: int) -> bool:
    """True while any process (a zombie too: reap your child first) is in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_isolated(
    pdf: Path, *, timeout_seconds: float, limits: EngineOptions, command: list[str] | None = None
) -> dict[str, Any]:
    """Parse ``pdf`` in a child process. Returns the engine's result; raises PermanentError with a
    specific reason (bad PDF, crash) or ParseTimeout. ``command`` replaces the worker (tests)."""
    with tempfile.TemporaryDirectory(prefix="parse-") as tmp:
        out = Path(tmp) / "result.json"
        argv = command or [sys.executable, "-m", WORKER_MODULE]
        with subprocess.Popen(
            [*argv, str(pdf), str(out), json.dumps(asdict(limits))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed as a whole
        ) as process:
            try:
                output, _ = process.communicate(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                kill_process_group(process)
                raise ParseTimeout(timeout_seconds) from None
            finally:
                # Also on cancellation (Dagster interrupts the run with an exception here): never
                # leave the parser or anything it spawned behind.
                if process.poll() is None or group_alive(process.pid):
                    kill_process_group(process)
        if out.exists():
            payload = json.loads(out.read_text())
            if "ok" in payload:
                return dict(payload["ok"])
            raise PermanentError(str(payload["error"]))
        code = process.returncode
        reason = f"signal {-code}" if code < 0 else f"exit status {code}"
        last = (output or b"").decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise PermanentError(f"parser crashed ({reason}) {last[0][:300]}".rstrip())
