"""Interrupts held back while a document is handed back to the queue.

A run that is stopped gets SIGTERM (the daemon's drain sends it again if the first one was lost:
Python drops an exception that a signal handler raises inside a garbage-collector callback). A
second signal that lands while the document is being handed back would abandon that write half
way and leave the document ``extracting`` until a sweep finds it; inside ``interrupts_deferred``
the signal waits until the hand-back is written, then is delivered to the handler it was meant for.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM received inside are delivered when the block ends (only the main
    thread receives signals; elsewhere this does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = {number: signal.getsignal(number) for number in DEFERRED_SIGNALS}
    for number in DEFERRED_SIGNALS:
        signal.signal(number, remember)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if received:
            signal.raise_signal(received[0])  # now, to the handler that was meant to get it
