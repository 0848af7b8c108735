"""Several documents of one run in flight (defs/in_flight.py): lanes, stopping, interruption."""

from __future__ import annotations

import threading

import pytest

from extraction_pipeline.defs.in_flight import WIDEN_CHECK_SECONDS, Done, each_document


def test_two_lanes_keep_two_documents_in_flight_and_yield_each_once() -> None:
    lock = threading.Lock()
    in_flight = peak = 0
    both_started = threading.Barrier(2, timeout=10)

    def work(key: str) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        if key in ("a", "b"):
            both_started.wait()  # the first two only finish once both run at the same time
        with lock:
            in_flight -= 1
        return key.upper()

    done = list(each_document(work, list("abcde"), lanes=2, keep_going=lambda d: True, on_interrupt=print))
    assert sorted(d.value for d in done) == list("ABCDE") and peak == 2


def test_after_a_stopping_result_no_new_document_starts() -> None:
    started: list[str] = []

    def work(key: str) -> str:
        started.append(key)
        if key == "b":
            raise RuntimeError("provider down")
        return key

    done = list(each_document(work, list("abcdef"), lanes=1, keep_going=lambda d: d.error is None, on_interrupt=print))
    assert started == ["a", "b"] and [d.key for d in done] == ["a", "b"]
    assert isinstance(done[1].error, RuntimeError)


def test_an_interrupted_caller_hands_back_what_is_in_flight() -> None:
    release = threading.Event()
    handed_back: list[list[str]] = []

    def work(key: str) -> str:
        if key != "a":
            release.wait(10)  # still calling the provider when the run is stopped
        return key

    documents = each_document(work, list("abcd"), lanes=3, keep_going=lambda d: True, on_interrupt=handed_back.append)
    first = next(documents)
    assert first == Done("a", value="a")
    with pytest.raises(KeyboardInterrupt):
        documents.throw(KeyboardInterrupt())  # what the run's signal handler does to the waiting thread
    release.set()
    assert handed_back == [["b", "c"]]  # "d" never started


class SlowModel:
    """Work that blocks until released, as documents waiting on a slow model: counts how many are
    in flight at once, and lets every call through once ``release_at`` are in flight."""

    def __init__(self, release_at: int = 0) -> None:
        self.release = threading.Event()
        self.release_at = release_at
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0

    def __call__(self, key: str) -> str:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight == self.release_at:
                self.release.set()  # the pool is full: calls start coming back
        self.release.wait(10)
        with self.lock:
            self.in_flight -= 1
        return key


def test_a_run_widens_by_what_widen_says_and_never_beyond_max_lanes() -> None:
    """Each time it is asked, ``widen`` says how many lanes to open, up to ``max_lanes``; it is
    asked with how many are in flight."""
    model = SlowModel(release_at=5)
    asked: list[int] = []

    def widen(now_in_flight: int) -> int:
        asked.append(now_in_flight)
        return 2

    documents = each_document(
        model, list("abcdefgh"), lanes=2, max_lanes=5, widen=widen, keep_going=lambda d: True, on_interrupt=print
    )
    done = list(documents)
    assert sorted(d.key for d in done) == list("abcdefgh")
    assert model.peak == 5 and asked[:2] == [2, 4]  # 2 + 2, then 1 more: max_lanes


def test_a_run_is_asked_to_widen_while_its_documents_keep_finishing() -> None:
    """Results arriving more often than the check's interval do not keep the run from being
    asked (a wide run finishes a document every second or so)."""
    finished = threading.Semaphore(0)
    asked: list[int] = []

    def work(key: str) -> str:
        finished.acquire(timeout=10)
        return key

    def widen(now_in_flight: int) -> int:
        asked.append(now_in_flight)
        return 0

    def trickle() -> None:
        for _ in range(40):
            finished.release()
            threading.Event().wait(WIDEN_CHECK_SECONDS / 10)  # ten results per check: four checks' worth

    threading.Thread(target=trickle, daemon=True).start()
    keys = [f"d{n}" for n in range(40)]
    done = list(
        each_document(work, keys, lanes=2, max_lanes=10, widen=widen, keep_going=lambda d: True, on_interrupt=print)
    )
    assert len(done) == 40 and len(asked) >= 2


def test_a_run_stays_narrow_while_widen_says_no() -> None:
    model = SlowModel()
    asked: list[int] = []

    def widen(now_in_flight: int) -> int:
        asked.append(now_in_flight)
        if len(asked) >= 3:
            model.release.set()
        return 0

    documents = each_document(
        model, list("abcde"), lanes=2, max_lanes=5, widen=widen, keep_going=lambda d: True, on_interrupt=print
    )
    done = list(documents)
    assert len(done) == 5 and model.peak == 2 and len(asked) >= 3
