"""Several documents of one run in flight at once.

A run extracts its documents one after the other per lane; with several lanes, while one document
waits for the model the next ones are bound, parsed (from the cache) and sent, so the `llm` pool
stays busy even while other runs are still starting up (a run opens more lanes, up to the pool's
size, while all of its documents wait on the model: ``should_widen``). How many calls are in
flight overall is still the pool's business (defs/llm_slots.py), never the number of lanes.

Lanes are daemon threads: a run that is interrupted (terminated, its daemon draining) hands the
documents still in flight back to the queue from the main thread and ends; a call that is still
waiting on the provider does not keep the process alive.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

# How often a run whose lanes are all busy asks whether to open one more (one read of the pool).
WIDEN_CHECK_SECONDS = 0.5


@dataclass(frozen=True)
class Done:
    key: str
    value: Any = None
    error: BaseException | None = None


def each_document(
    work: Callable[[str], Any],
    keys: Sequence[str],
    *,
    lanes: int,
    keep_going: Callable[[Done], bool],
    on_interrupt: Callable[[list[str]], None],
    max_lanes: int = 0,
    widen: Callable[[int], bool] | None = None,
) -> Generator[Done, None, None]:
    """Run ``work(key)`` for every key, at most ``lanes`` at once, yielding each result as it
    is done (in the caller's thread). After a result for which ``keep_going`` is false, no new
    key is started (those in flight finish). If the caller's thread is interrupted while
    waiting, ``on_interrupt`` gets the keys still in flight, then the interruption propagates.

    With ``widen``, one more lane opens (up to ``max_lanes``) whenever ``widen(in flight)`` says
    so, asked every ``WIDEN_CHECK_SECONDS`` while the lanes are busy: the run widens while its
    documents wait on a slow model and a slot is idle, and stays narrow while they use the CPU."""
    if lanes <= 1:
        # One lane: in the caller's own thread, so an interruption reaches the work itself.
        for key in keys:
            try:
                done = Done(key, value=work(key))
            except Exception as exc:
                done = Done(key, error=exc)
            yield done
            if not keep_going(done):
                return
        return
    results: queue.Queue[Done] = queue.Queue()
    waiting = list(keys)
    in_flight: set[str] = set()
    starting = True

    def start(key: str) -> None:
        def lane() -> None:
            try:
                results.put(Done(key, value=work(key)))
            except BaseException as exc:  # handed to the caller's thread, which decides
                results.put(Done(key, error=exc))

        in_flight.add(key)
        threading.Thread(target=lane, name=f"document {key}", daemon=True).start()

    try:
        while waiting and len(in_flight) < max(1, lanes):
            start(waiting.pop(0))
        while in_flight:
            try:
                done = results.get(timeout=WIDEN_CHECK_SECONDS if widen is not None else None)
            except queue.Empty:
                if starting and waiting and lanes < max_lanes and widen is not None and widen(len(in_flight)):
                    lanes += 1
                    start(waiting.pop(0))
                continue
            in_flight.discard(done.key)
            starting = starting and keep_going(done)
            yield done
            if starting and waiting:
                start(waiting.pop(0))
    except BaseException:
        if in_flight:
            on_interrupt(sorted(in_flight))
        raise
