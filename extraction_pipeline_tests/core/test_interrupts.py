"""Stopping run workers: a second interrupt never cuts a hand-back short, and a lost first
SIGTERM is sent again (core/runs/interrupts.py, instance.interrupt_group). Real signals, real
processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from extraction_pipeline.core.pdf.process_groups import group_alive
from extraction_pipeline.core.runs.interrupts import interrupts_deferred
from extraction_pipeline.instance import interrupt_group


class Interrupted(Exception):
    pass


def _raise(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


def _hand_back_while_interrupted(written: list[str]) -> None:
    with interrupts_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # a handler that raised would have cut the block here
        written.append("handed back")


def test_a_signal_inside_is_delivered_to_its_handler_when_the_block_ends() -> None:
    previous = signal.signal(signal.SIGTERM, _raise)
    written: list[str] = []
    try:
        with pytest.raises(Interrupted):
            _hand_back_while_interrupted(written)
        assert written == ["handed back"]
        assert signal.getsignal(signal.SIGTERM) is _raise  # the handler is back
        with interrupts_deferred():
            written.append("nothing received")
        assert written == ["handed back", "nothing received"]
    finally:
        signal.signal(signal.SIGTERM, previous)


# Ignores the first SIGTERM (as a worker whose interrupt was swallowed in a GC callback would)
# and exits on the second, writing down how many it saw.
SWALLOWS_FIRST = """
import signal, sys, time
seen = []
def handler(signum, frame):
    seen.append(signum)
    if len(seen) == 2:
        open(sys.argv[1], "w").write(str(len(seen)))
        sys.exit(0)
signal.signal(signal.SIGTERM, handler)
open(sys.argv[1] + ".ready", "w").close()
while True:
    time.sleep(0.05)
"""


def test_a_worker_that_lost_the_first_sigterm_gets_another(tmp_path: Path) -> None:
    marker = tmp_path / "seen"
    worker = subprocess.Popen([sys.executable, "-c", SWALLOWS_FIRST, str(marker)], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not Path(f"{marker}.ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        reaper = threading.Thread(target=worker.wait)  # as its parent would: a zombie is in the group
        reaper.start()
        started = time.monotonic()
        interrupt_group(worker.pid, 60.0, every=0.5)
        assert time.monotonic() - started < 60  # returned when the group was gone, not at the deadline
        reaper.join(timeout=10)
        assert worker.returncode == 0  # its own exit on the second signal, not a kill
        assert marker.read_text() == "2"
        assert not group_alive(worker.pid)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
