"""Several documents of one run in flight at once.

A run extracts its documents one after the other per lane; with several lanes, while one document
waits for the model the next ones are bound, parsed (from the cache) and sent, so the `llm` pool
stays busy even while other runs are still starting up (a run opens more lanes, up to the pool's
size and a few prepared documents waiting for the next freed slot, while all of its documents wait
on the model: ``lanes_to_open``). How many calls are in
flight overall is still the pool's business (defs/llm_slots.py), never the number of lanes.

Lanes are daemon threads: a run that is interrupted (terminated, its daemon draining) hands the
documents still in flight back to the queue from the main thread and ends; a call that is still
waiting on the provider does not keep the process alive.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

# How often a run asks whether to open more lanes (one read of the pool).
WIDEN_CHECK_SECONDS = 1.0


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
    widen: Callable[[int], int] | None = None,
) -> Generator[Done, None, None]:
    """Run ``work(key)`` for every key, at most ``lanes`` at once, yielding each result as it
    is done (in the caller's thread). After a result for which ``keep_going`` is false, no new
    key is started (those in flight finish). If the caller's thread is interrupted while
    waiting, ``on_interrupt`` gets the keys still in flight, then the interruption propagates.

    With ``widen``, ``widen(in flight)`` more lanes open (up to ``max_lanes``), asked every
    ``WIDEN_CHECK_SECONDS`` whether or not documents finish meanwhile: the run widens while its
    documents wait on a slow model and the pool lacks claims, and stays narrow while they use the
    CPU."""
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
        next_check = time.monotonic() + WIDEN_CHECK_SECONDS
        while in_flight:
            result: Done | None = None
            try:
                timeout = max(0.0, next_check - time.monotonic()) if widen is not None else None
                result = results.get(timeout=timeout)
            except queue.Empty:
                pass
            if result is not None:
                in_flight.discard(result.key)
                starting = starting and keep_going(result)
                yield result
                if starting and waiting:
                    start(waiting.pop(0))
            if widen is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + WIDEN_CHECK_SECONDS
                if starting and waiting and lanes < max_lanes:
                    for _ in range(min(widen(len(in_flight)), max_lanes - lanes, len(waiting))):
                        lanes += 1
                        start(waiting.pop(0))
    except BaseException:
        if in_flight:
            on_interrupt(sorted(in_flight))
        raise
