"""The `llm` pool held per model call (defs/llm_slots.py), on a real Dagster instance with
PostgreSQL storage (where Dagster's slot claims are atomic), and the calls made over HTTP to the
loopback fake through litellm.

Counts and order are asserted, never durations."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.llm.gateway import LLMConfig, complete_json
from extraction_pipeline.defs.llm_slots import (
    LLM_POOL,
    WATCH_SECONDS,
    LLMSlotGate,
    PoolState,
    analyst_mark,
    call_lanes,
    lanes_to_open,
)
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply


@pytest.fixture
def instance(pg_dagster_database: str) -> Iterator[dg.DagsterInstance]:
    storage = {"storage": {"postgres": {"postgres_url": pg_dagster_database}}}
    with dg.instance_for_test(overrides=storage) as instance:
        yield instance


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


def _config(fake: FakeLLMServer, gate: LLMSlotGate) -> LLMConfig:
    base = LLMConfig(model="openai/fake-model", api_base=fake.api_base, api_key="sk-test", timeout_seconds=30)
    return replace(base, call_gate=gate)


def _call_in_threads(configs: list[LLMConfig]) -> list[BaseException]:
    errors: list[BaseException] = []

    def call(config: LLMConfig) -> None:
        try:
            complete_json(config, [{"role": "user", "content": "answer in JSON"}])
        except BaseException as exc:  # reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(config,)) for config in configs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_calls_in_flight_never_exceed_the_pool_across_runs_and_documents(
    instance: dg.DagsterInstance, fake: FakeLLMServer
) -> None:
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 3)
    fake.answer = lambda messages: Reply('{"ok": true}', delay=0.4)
    gates = [
        LLMSlotGate(instance, run_id=f"run-{run}", step_key=f"extracted_document[doc-{doc}]", user="ann")
        for run in range(4)
        for doc in range(3)
    ]
    assert _call_in_threads([_config(fake, gate) for gate in gates]) == []
    assert len(fake.requests) == 12
    assert fake.peak_in_flight == 3  # the pool filled, never more
    assert instance.event_log_storage.get_concurrency_info(LLM_POOL).claimed_slots == []  # all given back


def test_a_newcomer_is_served_before_the_next_call_of_an_analyst_holding_slots(
    instance: dg.DagsterInstance, fake: FakeLLMServer
) -> None:
    """Pool of 1: Ann holds it, Ann's second call queues, then Bob's: Bob is served first."""
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
    order: list[str] = []
    fake.answer = lambda messages: Reply('{"ok": true}')
    release = threading.Event()

    def ann_holds() -> None:
        with LLMSlotGate(instance, run_id="ann-1", step_key="extracted_document[doc-1]", user="ann")():
            order.append("ann first")
            release.wait(30)

    def call(user: str, run_id: str) -> None:
        with LLMSlotGate(instance, run_id=run_id, step_key="extracted_document[doc-2]", user=user)():
            order.append(user)

    holder = threading.Thread(target=ann_holds)
    holder.start()
    _wait_for(lambda: order == ["ann first"])
    ann_next = threading.Thread(target=call, args=("ann", "ann-2"))
    ann_next.start()
    _wait_for(lambda: len(_pending(instance)) == 1)
    bob = threading.Thread(target=call, args=("bob", "bob-1"))
    bob.start()
    _wait_for(lambda: len(_pending(instance)) == 2)
    release.set()
    for thread in (holder, ann_next, bob):
        thread.join(timeout=60)
    assert order == ["ann first", "bob", "ann"]


def test_a_per_user_limit_caps_one_analyst_and_leaves_the_rest_of_the_pool_to_others(
    instance: dg.DagsterInstance, fake: FakeLLMServer
) -> None:
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 4)
    in_flight: dict[str, int] = {"ann": 0, "bob": 0}
    peak: dict[str, int] = {"ann": 0, "bob": 0}
    lock = threading.Lock()

    def answer(messages: list[dict[str, str]]) -> Reply:
        # Long enough that each analyst's calls overlap even on a loaded machine ("each reached it").
        return Reply('{"ok": true}', delay=1.0)

    fake.answer = answer
    configs = []
    for user in ("ann", "bob"):
        for doc in range(4):
            gate = LLMSlotGate(
                instance, run_id=f"{user}-run", step_key=f"extracted_document[doc-{doc}]", user=user, per_user_limit=2
            )
            configs.append(_counted(_config(fake, gate), user, in_flight, peak, lock))
    assert _call_in_threads(configs) == []
    assert len(fake.requests) == 8
    assert peak == {"ann": 2, "bob": 2}  # each capped at 2 of 4, and each reached it
    assert fake.peak_in_flight <= 4


def _counted(
    config: LLMConfig, user: str, in_flight: dict[str, int], peak: dict[str, int], lock: threading.Lock
) -> LLMConfig:
    """The same gate, counting this analyst's calls while their slot is held."""
    inner = config.call_gate
    assert inner is not None

    class Counting:
        def __call__(self) -> Counting:
            assert inner is not None
            self._held = inner()
            return self

        def __enter__(self) -> None:
            self._held.__enter__()
            with lock:
                in_flight[user] += 1
                peak[user] = max(peak[user], in_flight[user])

        def __exit__(self, *exc: Any) -> None:
            with lock:
                in_flight[user] -= 1
            self._held.__exit__(*exc)

    return replace(config, call_gate=Counting())


def _pending(instance: dg.DagsterInstance) -> list[str]:
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    return [step.step_key for step in info.pending_steps if step.assigned_timestamp is None]


def _wait_for(predicate: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_pool_without_a_limit_lets_every_call_through(instance: dg.DagsterInstance, fake: FakeLLMServer) -> None:
    """As for Dagster's own steps: no limit set for `llm` (and no default) means no limit."""
    fake.answer = lambda messages: Reply('{"ok": true}', delay=0.3)
    gates = [LLMSlotGate(instance, run_id="r", step_key=f"extracted_document[doc-{n}]", user="ann") for n in range(4)]
    assert _call_in_threads([_config(fake, gate) for gate in gates]) == []
    assert len(fake.requests) == 4 and fake.peak_in_flight == 4


def test_a_run_holding_no_slot_is_served_before_another_runs_second_lane(instance: dg.DagsterInstance) -> None:
    """Pool of 2, both held (run R, run S). R's second document queues first, then run T: when
    S gives its slot back, T gets it, not R's second lane (runs progress evenly)."""
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 2)
    order: list[str] = []
    release_s, release_r = threading.Event(), threading.Event()

    def hold(run_id: str, doc: str, until: threading.Event | None) -> None:
        with LLMSlotGate(instance, run_id=run_id, step_key=f"extracted_document[{doc}]", user="ann")():
            order.append(f"{run_id}:{doc}")
            if until is not None:
                until.wait(30)

    first = [
        threading.Thread(target=hold, args=("R", "d1", release_r)),
        threading.Thread(target=hold, args=("S", "d3", release_s)),
    ]
    for thread in first:
        thread.start()
    _wait_for(lambda: len(order) == 2)
    r_second = threading.Thread(target=hold, args=("R", "d2", None))
    r_second.start()
    _wait_for(lambda: len(_pending(instance)) == 1)  # R's second lane waits in the queue ...
    t_first = threading.Thread(target=hold, args=("T", "d5", None))
    t_first.start()
    _wait_for(lambda: len(_pending(instance)) == 2)  # ... and T after it
    release_s.set()
    _wait_for(lambda: len(order) == 4, timeout=30)
    release_r.set()
    for thread in (*first, r_second, t_first):
        thread.join(timeout=30)
    assert order[2:] == ["T:d5", "R:d2"]


def test_the_run_with_more_documents_left_is_served_first(instance: dg.DagsterInstance) -> None:
    """Pool of 1, held by run S. Run T (1 document left) queues before run R (5 left): when S
    gives the slot back, R gets it — the batch ends when its slowest run does."""
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
    order: list[str] = []
    release = threading.Event()

    def hold(run_id: str, left: int, until: threading.Event | None) -> None:
        gate = LLMSlotGate(
            instance,
            run_id=run_id,
            step_key=f"extracted_document[{run_id}]",
            user="ann",
            run_documents_left=lambda: left,
        )
        with gate():
            order.append(run_id)
            if until is not None:
                until.wait(30)

    holder = threading.Thread(target=hold, args=("S", 1, release))
    holder.start()
    _wait_for(lambda: order == ["S"])
    late_runs = [threading.Thread(target=hold, args=("T", 1, None)), threading.Thread(target=hold, args=("R", 5, None))]
    late_runs[0].start()
    _wait_for(lambda: len(_pending(instance)) == 1)
    late_runs[1].start()
    _wait_for(lambda: len(_pending(instance)) == 2)
    release.set()
    for thread in (holder, *late_runs):
        thread.join(timeout=30)
    assert order == ["S", "R", "T"]


def test_claims_a_dead_attempt_of_the_same_document_left_behind_are_freed(instance: dg.DagsterInstance) -> None:
    """A Celery worker killed mid-call never gives its slot back; the step is redelivered in the
    same run, and before the document's first call its leftovers are freed (not another's)."""
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 2)
    storage = instance.event_log_storage
    dead = "extracted_document[doc-1]|call|abc|dead"
    other = "extracted_document[doc-2]|call|abc|live"
    for claim in (dead, other):
        assert storage.claim_concurrency_slot(LLM_POOL, "R", claim).is_claimed
    gate = LLMSlotGate(instance, run_id="R", step_key="extracted_document[doc-1]", user="ann")
    assert gate.release_leftovers() == 1
    held = {slot.step_key for slot in storage.get_concurrency_info(LLM_POOL).claimed_slots}
    assert held == {other}
    assert gate.release_leftovers() == 0


def test_a_run_keeps_as_many_documents_in_flight_as_the_pool_has_slots(instance: dg.DagsterInstance) -> None:
    """The first run of a batch can fill the pool alone, with a prepared document or a few
    waiting for the next freed slot (a fifth of the pool, at least one); never more lanes than
    documents, the analyst's cap when lower, and two when the pool has no limit."""
    assert call_lanes(instance, 8) == 2  # no limit set for `llm`
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 5)
    assert [call_lanes(instance, documents) for documents in (1, 2, 3, 5, 8)] == [1, 2, 3, 5, 6]
    assert call_lanes(instance, 8, per_user_limit=3) == 4
    assert call_lanes(instance, 8, per_user_limit=1) == 2  # a second lane prepares the next document
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 100)
    assert call_lanes(instance, 500) == 120


def test_a_claim_waiting_in_line_is_served_when_a_slot_is_given_back(instance: dg.DagsterInstance) -> None:
    """Pool of 1: three more claims wait in Dagster's queue (polling it, not claiming again);
    each slot given back goes to the next in line, one call at a time, nobody left queued."""
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
    order: list[str] = []
    in_call = [0]
    peak = [0]
    lock = threading.Lock()

    def call(doc: str) -> None:
        with LLMSlotGate(instance, run_id=f"run-{doc}", step_key=f"extracted_document[{doc}]", user="ann")():
            with lock:
                in_call[0] += 1
                peak[0] = max(peak[0], in_call[0])
                order.append(doc)
            time.sleep(0.3)
            with lock:
                in_call[0] -= 1

    threads = [threading.Thread(target=call, args=(f"d{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(order) == ["d0", "d1", "d2", "d3"] and peak[0] == 1
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    assert info.claimed_slots == [] and info.pending_steps == []


def test_claims_waiting_in_one_process_share_one_read_of_the_pool(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty claims wait behind a held slot: while they wait the pool is read by one watcher
    every WATCH_SECONDS for all of them (each claim reading it on its own made 20 or more reads
    over the same time), and each is served in turn once the slot is given back."""
    storage = instance.event_log_storage
    storage.set_concurrency_slots(LLM_POOL, 1)
    reads = [0]
    read_pool = storage.get_concurrency_info

    def counted(pool: str) -> Any:
        reads[0] += 1
        return read_pool(pool)

    monkeypatch.setattr(storage, "get_concurrency_info", counted)
    holder = LLMSlotGate(instance, run_id="run-h", step_key="extracted_document[h]", user="ann")
    release = threading.Event()
    served: list[str] = []

    def hold() -> None:
        with holder():
            served.append("h")
            release.wait(timeout=60)

    def call(doc: str) -> None:
        with LLMSlotGate(instance, run_id=f"run-{doc}", step_key=f"extracted_document[{doc}]", user="ann")():
            served.append(doc)

    def waiting() -> int:
        return sum(1 for step in read_pool(LLM_POOL).pending_steps if step.assigned_timestamp is None)

    threads = [threading.Thread(target=hold)]
    threads[0].start()
    try:
        deadline = time.monotonic() + 30
        while served != ["h"] and time.monotonic() < deadline:
            time.sleep(0.05)
        threads += [threading.Thread(target=call, args=(f"d{n}",)) for n in range(20)]
        for thread in threads[1:]:
            thread.start()
        while waiting() < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiting() == 20
        before, window = reads[0], 2.0
        time.sleep(window)
        during = reads[0] - before
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=60)
    assert during <= window / WATCH_SECONDS + 5, during  # one watcher's reads, not one per claim
    assert sorted(served) == sorted(["h", *(f"d{n}" for n in range(20))])
    info = read_pool(LLM_POOL)
    assert info.claimed_slots == [] and info.pending_steps == []


def test_a_claim_whose_freeing_failed_is_freed_at_the_next_call(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dagster's storage refuses the free at the end of a call (down for a moment): the error is
    the call's, and the slot is given back at the next call through the gate, not at the run's
    end."""
    storage = instance.event_log_storage
    storage.set_concurrency_slots(LLM_POOL, 2)
    free = storage.free_concurrency_slot_for_step

    def down(run_id: str, step_key: str) -> None:
        raise ConnectionError("storage down")

    gate = LLMSlotGate(instance, run_id="R", step_key="extracted_document[d1]", user="ann")
    with pytest.raises(ConnectionError), gate():
        monkeypatch.setattr(storage, "free_concurrency_slot_for_step", down)
    monkeypatch.setattr(storage, "free_concurrency_slot_for_step", free)
    assert len(storage.get_concurrency_info(LLM_POOL).claimed_slots) == 1
    with LLMSlotGate(instance, run_id="R", step_key="extracted_document[d2]", user="ann")():
        assert len(storage.get_concurrency_info(LLM_POOL).claimed_slots) == 1  # only this call's
    info = storage.get_concurrency_info(LLM_POOL)
    assert info.claimed_slots == [] and info.pending_steps == []


def test_a_run_opens_its_share_of_idle_slots_and_of_a_ready_reserve(instance: dg.DagsterInstance) -> None:
    """Pool of 3 (a reserve of one claim waiting): a run opens what the pool lacks, less its
    documents being prepared, split with the other runs in the pool; nothing while its documents
    are mostly on the CPU."""
    storage = instance.event_log_storage
    storage.set_concurrency_slots(LLM_POOL, 3)
    for doc in ("d1", "d2"):
        assert storage.claim_concurrency_slot(LLM_POOL, "R", f"extracted_document[{doc}]|call|a|{doc}").is_claimed
    assert lanes_to_open(instance, "R", in_flight=2) == 2  # one idle slot and the reserve
    # Other runs' documents being prepared (in the ledger, not yet in the pool) count: at most the
    # pool and two reserves in all.
    assert lanes_to_open(instance, "R", in_flight=2, extracting=4) == 1
    assert lanes_to_open(instance, "R", in_flight=2, extracting=6) == 0
    assert lanes_to_open(instance, "R", in_flight=3) == 1  # one document being prepared counts
    assert lanes_to_open(instance, "R", in_flight=5) == 0  # more of them on the CPU than in calls
    assert lanes_to_open(instance, "S", in_flight=1) == 0  # S's document is not in a call
    assert storage.claim_concurrency_slot(LLM_POOL, "S", "extracted_document[d3]|call|b|d3").is_claimed
    assert lanes_to_open(instance, "R", in_flight=2) == 1  # the pool is full: the reserve, shared with S
    assert not storage.claim_concurrency_slot(LLM_POOL, "T", "extracted_document[d4]|call|c|d4").is_claimed
    assert lanes_to_open(instance, "R", in_flight=2) == 0  # T's claim waits: the reserve is there
    storage.free_concurrency_slot_for_step("S", "extracted_document[d3]|call|b|d3")
    assert lanes_to_open(instance, "R", in_flight=2) == 1  # the freed slot is T's: not idle; the reserve is gone
    assert storage.claim_concurrency_slot(LLM_POOL, "T", "extracted_document[d4]|call|c|d4").is_claimed
    storage.free_concurrency_slot_for_step("T", "extracted_document[d4]|call|c|d4")
    assert lanes_to_open(instance, "R", in_flight=2) == 2  # idle again, nobody waiting


def test_an_analyst_arriving_at_a_full_pool_opens_documents_up_to_an_equal_share(
    instance: dg.DagsterInstance,
) -> None:
    """Pool of 4, filled by alice's run with her reserve waiting: bob's run, with one claim
    waiting, opens one more document (an equal share is 2); alice's run opens none; once bob
    holds his share it opens nothing more than the pool lacks."""
    storage = instance.event_log_storage
    storage.set_concurrency_slots(LLM_POOL, 4)
    alice, bob = analyst_mark("alice"), analyst_mark("bob")
    for n in range(5):  # four held, one waiting: the pool's reserve
        storage.claim_concurrency_slot(LLM_POOL, "A", f"extracted_document[a{n}]|call|{alice}|a{n}")
    assert not storage.claim_concurrency_slot(LLM_POOL, "B", f"extracted_document[b0]|call|{bob}|b0").is_claimed
    assert lanes_to_open(instance, "B", in_flight=1) == 0  # the pool lacks nothing
    assert lanes_to_open(instance, "B", in_flight=1, user="bob") == 1  # his equal share lacks one
    assert lanes_to_open(instance, "B", in_flight=2, user="bob") == 0  # being prepared: counted
    assert lanes_to_open(instance, "A", in_flight=5, user="alice") == 0  # more than her share
    for n in (4, 0, 1):  # her waiting claim withdrawn, two of her calls ended
        storage.free_concurrency_slot_for_step("A", f"extracted_document[a{n}]|call|{alice}|a{n}")
    assert storage.claim_concurrency_slot(LLM_POOL, "B", f"extracted_document[b0]|call|{bob}|b0").is_claimed
    assert storage.claim_concurrency_slot(LLM_POOL, "B", f"extracted_document[b1]|call|{bob}|b1").is_claimed
    # He holds his share: only the pool's empty reserve, split between the two runs, as for anyone.
    assert lanes_to_open(instance, "B", in_flight=2, user="bob") == lanes_to_open(instance, "B", in_flight=2) == 1


def test_a_waiting_claim_joins_the_queue_again_only_to_pass_or_fall_behind_another_analysts_claim() -> None:
    """Dagster serves the highest priority first, ties in the order they joined: joining again
    costs writes, so only a move that changes the order against another analyst's claim does."""
    mine, other = "x|call|a|1", "y|call|b|1"

    def state(other_priority: int, other_since: float) -> PoolState:
        waiting = {mine: (0, 10.0), other: (other_priority, other_since), "z|call|a|2": (-500, 1.0)}
        return PoolState(0, 0, set(), set(waiting), set(), waiting)

    assert not state(0, 5.0).reorders(mine, queued=0, priority=0)  # unchanged: never, ties or not
    assert state(-500, 5.0).reorders(mine, queued=-1000, priority=0)  # passes b's claim between
    assert state(-1000, 5.0).reorders(mine, queued=-1000, priority=0)  # passes a tie that joined before it
    assert not state(-1000, 15.0).reorders(mine, queued=-1000, priority=0)  # that tie is behind it already
    assert not state(100, 5.0).reorders(mine, queued=-1000, priority=0)  # b's is ahead either way
    assert state(-500, 5.0).reorders(mine, queued=0, priority=-1000)  # falls behind b's claim
    assert state(-1000, 5.0).reorders(mine, queued=0, priority=-1000)  # behind a tie of its new standing
    assert state(0, 15.0).reorders(mine, queued=0, priority=-1000)  # behind its tie that joined after it
    assert not state(0, 5.0).reorders(mine, queued=0, priority=-1000)  # that tie was ahead anyway
    assert not state(-2000, 5.0).reorders(mine, queued=0, priority=-1000)  # still ahead of b's
