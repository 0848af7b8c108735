"""The `llm` pool, held per model call rather than per step.

The pool's limit is a promise to the provider's rate limit: never more calls in flight than it
says, however many runs and documents are working. A step that extracts several documents would
hold a step-level pool slot through all of them (and through its parsing, grounding and ledger
work between calls); here a slot of Dagster's own `llm` pool is claimed just before each call and
freed as soon as the answer is in. The Dagster UI's concurrency page shows who holds which slot.

Fair share between analysts: a claim's priority falls with the number of slots its analyst
already holds, so a newcomer's call is served before the next call of an analyst who holds
several; with ``EXTRACTION_LLM_SLOTS_PER_USER`` set, nobody holds more than that many slots. A
lone analyst may use the whole pool.

Even progress between runs: a run whose documents all wait on the model while a slot is idle
puts more of them in flight, up to the pool's size (``lanes_to_open``), so the first run of a batch
fills the pool while the others start up, and keeps a few prepared documents waiting for the next
freed slot; an analyst arriving while another's batch fills the pool opens documents up to an
equal share. Among one analyst's claims, a run holding fewer slots when the claim joined the
queue is served first, then the run with more documents left. A run's documents
cannot move to another run, so a batch ends when its slowest run does; runs that keep pace end
together, with every slot busy to the last round. A waiting claim whose standing changes against
another analyst's waiting claims joins the queue again at its new priority.

Slots of a run whose worker dies are freed by Dagster's run monitoring when the run is failed.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import dagster as dg
from dagster._utils.concurrency import ConcurrencyKeyInfo

LLM_POOL = "llm"
# A held slot's key: "<step>|call|<analyst's hash>|<unique>": who holds it is read from the key.
CALL_MARK = "|call|"
# How often a process reads the pool while any of its claims waits (one read, ~5 ms of CPU on
# SQLite, for all of them: ``_PoolWatcher``); a slot given to a waiting claim is taken within it.
WATCH_SECONDS = 0.2
# A watcher with no claim waiting ends its thread after this long.
WATCHER_IDLE_SECONDS = 30.0
# A racing claim's write lands within this (see _still_mine): 50 ms, and the ~10 ms a read of the
# pool took when the slot was checked twice, the second time after 50 ms.
OVERWRITE_WINDOW_SECONDS = 0.06
# Priority steps: one slot held by the analyst outweighs anything about the run while a run holds
# fewer than ten; one slot held by the run outweighs any difference in documents left (counted up
# to 99: runs of more tie until their last 99).
ANALYST_STEP = 1000
RUN_STEP = 100


def llm_pool_size(instance: dg.DagsterInstance) -> int:
    """The `llm` pool's limit: 0 when it has none, or the storage keeps no pools."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return 0
    return max(0, storage.get_concurrency_info(LLM_POOL).slot_count or 0)


def llm_pool_size_or(instance: dg.DagsterInstance, fallback: int) -> int:
    """``llm_pool_size``, or ``fallback`` when it is 0 or cannot be read: for what only uses it as
    an optimisation (a storage hiccup must not fail a run or a tick)."""
    try:
        return llm_pool_size(instance) or fallback
    except Exception:
        return fallback


def call_lanes(instance: dg.DagsterInstance, documents: int, per_user_limit: int = 0) -> int:
    """The most documents of a run in flight at once: as many as the `llm` pool has slots (the
    analyst's cap when lower) and the reserve of prepared claims waiting for one
    (``ready_reserve``), at least two, never more than the run's documents. A run starts with two
    and opens more only while ``lanes_to_open`` says so."""
    if documents <= 1:
        return 1
    limit = llm_pool_size(instance)
    if per_user_limit:
        limit = min(limit, per_user_limit) if limit else per_user_limit
    return max(2, min(documents, limit + ready_reserve(limit)))


# Claims kept waiting in the pool's queue while calls are slow, as a share of its slots (at least
# one): a slot an answer frees goes to a document that is already prepared (Dagster hands it to
# the head of the queue, whose process reads the pool every WATCH_SECONDS) instead of sitting
# idle while the finished document's lane grounds its answer and prepares the next one (~8 s per call ended
# on a busy machine, measured with none waiting). A fifth: answers come back in bursts (a round of
# calls that started together), and a tenth was used up within a second of one.
READY_SHARE = 0.2


def ready_reserve(slots: int) -> int:
    """How many prepared documents wait for a slot of a pool of ``slots`` while calls are slow."""
    return max(1, math.ceil(slots * READY_SHARE)) if slots else 0


def lanes_to_open(
    instance: dg.DagsterInstance,
    run_id: str,
    in_flight: int,
    extracting: int | None = None,
    user: str | None = None,
) -> int:
    """How many more documents a run should put in flight now. Its share (split between the runs
    in the pool) of what the pool lacks, that is its idle slots plus a reserve of prepared claims
    waiting for the next freed slot (``ready_reserve``), less the run's documents outside the
    pool (being prepared or grounded: each is a claim soon). None while fewer of its documents
    are in the pool (holding or waiting for a slot) than outside it: its documents then spend
    their time on the CPU, not on the model, and more threads would only contend for it. With
    ``extracting`` (the instance's documents being extracted, from the ledger), never more than
    the pool and two reserves being extracted in all: runs starting together each see the pool
    idle while the others' documents are still being prepared, and would each fill it.

    With ``user`` (the run's analyst) and other analysts' calls in the pool, a run whose analyst
    holds or waits for fewer than an equal share of the pool opens its share of the difference
    (between the analyst's runs in the pool), whatever the pool lacks: otherwise an analyst
    arriving while another's batch fills the pool and its reserve would stay at two documents per
    run until that batch ends. Its claims are served first (``LLMSlotGate``), so slots the
    other analyst's answers free come to it until the shares are even.

    A batch's runs start one after the other, each paying seconds of start-up (a process, the
    imports: litellm alone is 4-5 CPU-s), so with two documents per run a pool of 5 sat part-empty
    for the first ~20 s of every batch. Widening lets the first run fill the pool while the others
    start, when calls are slow; while documents use the CPU (fast calls) a run stays at two (63.6
    against 54.9 documents a minute, 100 documents, instant model)."""
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    held = {slot.step_key for slot in info.claimed_slots}
    in_pool = sum(1 for slot in info.claimed_slots if slot.run_id == run_id)
    in_pool += sum(1 for step in info.pending_steps if step.run_id == run_id and step.step_key not in held)
    outside = max(0, in_flight - in_pool)
    if in_pool == 0 or in_pool < outside:
        return 0
    # A slot freed for a claim that waited is assigned to it before it is taken: not idle.
    promised = sum(1 for step in info.pending_steps if step.assigned_timestamp and step.step_key not in held)
    waiting = sum(1 for step in info.pending_steps if step.assigned_timestamp is None)
    idle = max(0, info.slot_count - len(held) - promised)
    lacking = idle + ready_reserve(info.slot_count) - waiting
    runs = {slot.run_id for slot in info.claimed_slots} | {step.run_id for step in info.pending_steps} | {run_id}
    wanted = math.ceil(lacking / len(runs)) - outside
    if extracting is not None:
        wanted = min(wanted, info.slot_count + 2 * ready_reserve(info.slot_count) - extracting)
    if user is not None:
        wanted = max(wanted, _fair_share_lacking(info, run_id, analyst_mark(user)) - outside)
    return max(0, wanted)


def _fair_share_lacking(info: ConcurrencyKeyInfo, run_id: str, mark: str) -> int:
    """This run's part of what its analyst lacks of an equal share of the pool, counting the slots
    it holds and its claims waiting; 0 while it is the only analyst in the pool."""
    claims = [slot.step_key for slot in info.claimed_slots]
    claims += [step.step_key for step in info.pending_steps if step.assigned_timestamp is None]
    analysts = {_analyst_of(claim) for claim in claims} | {mark}
    if len(analysts) == 1:
        return 0
    holding = sum(1 for claim in claims if _analyst_of(claim) == mark)
    runs = {slot.run_id for slot in info.claimed_slots if _analyst_of(slot.step_key) == mark}
    runs |= {step.run_id for step in info.pending_steps if _analyst_of(step.step_key) == mark} | {run_id}
    lacking = math.ceil(info.slot_count / len(analysts)) - holding
    return math.ceil(lacking / len(runs)) if lacking > 0 else 0


def analyst_mark(user: str) -> str:
    return hashlib.sha256(user.encode()).hexdigest()[:10]


@dataclass
class LLMSlotGate:
    """A context manager factory: ``with gate(): <one model call>``."""

    instance: dg.DagsterInstance
    run_id: str
    step_key: str
    user: str
    per_user_limit: int = 0  # 0: an analyst may hold the whole pool
    # How many of the run's documents are not finished yet (this call's included).
    run_documents_left: Callable[[], int] = lambda: 1

    def _pool_state(self, claim: str) -> PoolState:
        return self._state_of(self.instance.event_log_storage.get_concurrency_info(LLM_POOL), claim)

    def _state_of(self, info: ConcurrencyKeyInfo, claim: str) -> PoolState:
        mark = f"{CALL_MARK}{analyst_mark(self.user)}|"
        return PoolState(
            held_by_analyst=sum(1 for slot in info.claimed_slots if mark in slot.step_key),
            held_by_run=sum(1 for s in info.claimed_slots if s.run_id == self.run_id and s.step_key != claim),
            held_keys={slot.step_key for slot in info.claimed_slots},
            queued={p.step_key for p in info.pending_steps},
            assigned={p.step_key for p in info.pending_steps if p.assigned_timestamp is not None},
            waiting={
                p.step_key: (p.priority or 0, p.enqueued_timestamp.timestamp())
                for p in info.pending_steps
                if p.assigned_timestamp is None
            },
        )

    def release_leftovers(self) -> int:
        """Free this run's claims for this document left by an earlier attempt of the step that
        died without giving them back (a Celery worker killed mid-call: its step is redelivered,
        so the run goes on and Dagster frees the run's slots only when it ends). A document's
        calls are made one after another, so before its first call none of them can be live.
        Returns how many were freed."""
        storage = self.instance.event_log_storage
        if not storage.supports_global_concurrency_limits:
            return 0
        info = storage.get_concurrency_info(LLM_POOL)
        prefix = f"{self.step_key}{CALL_MARK}"
        mine = {s.step_key for s in info.claimed_slots if s.run_id == self.run_id and s.step_key.startswith(prefix)}
        mine |= {p.step_key for p in info.pending_steps if p.run_id == self.run_id and p.step_key.startswith(prefix)}
        for claim in sorted(mine):
            storage.free_concurrency_slot_for_step(self.run_id, claim)
        return len(mine)

    def _pool_is_limited(self) -> bool:
        """As Dagster decides for a step: a pool without a limit (and no default limit) is open."""
        storage = self.instance.event_log_storage
        if not storage.supports_global_concurrency_limits:
            return False
        if any(pool.name == LLM_POOL for pool in storage.get_pool_limits()):
            return True
        if storage.get_pool_config().default_pool_limit is None:
            return False
        storage.initialize_concurrency_limit_to_default(LLM_POOL)
        return True

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if not self._pool_is_limited():
            yield
            return
        _free_again()
        storage = self.instance.event_log_storage
        claim = f"{self.step_key}{CALL_MARK}{analyst_mark(self.user)}|{uuid.uuid4().hex[:12]}"
        try:
            self._wait_for_slot(claim)
        except BaseException:
            _free(storage, self.run_id, claim)  # interrupted: leave no claim queued
            raise
        try:
            yield
        finally:
            _free(storage, self.run_id, claim)

    def _wait_for_slot(self, claim: str) -> None:
        storage = self.instance.event_log_storage
        queued: int | None = None  # the priority the claim waits in Dagster's queue with
        watcher: _PoolWatcher | None = None  # joined once the claim has to wait
        # Where the process's watcher read the pool a moment ago, that read decides the claim's
        # priority and limit (a claim is checked again once it holds its slot: _still_mine).
        recent = _PoolWatcher.recent(self.instance)
        state = self._state_of(recent, claim) if recent is not None else self._pool_state(claim)
        try:
            while True:
                within_limit = not self.per_user_limit or state.held_by_analyst < self.per_user_limit
                priority = self._priority(state)
                if queued is not None and claim not in state.assigned and state.reorders(claim, queued, priority):
                    # Standings changed while it waited (slots were given back, a document
                    # finished): join the queue again at the priority it has now, so that waiting
                    # claims are ordered by where their analysts and runs stand now, not when each
                    # one arrived. Only when that moves it past another waiting claim: a lone
                    # analyst's claims all shift together with every call that starts or ends, and
                    # joining again costs a free and a claim (~30 ms of CPU on SQLite) each look.
                    _free(storage, self.run_id, claim)
                    queued = None
                # Waiting in Dagster's queue at the right priority: freeing a slot assigns it to
                # the queue's head, which a look sees; claiming again before that would only write.
                in_line = queued is not None and claim in state.queued and claim not in state.assigned
                if not in_line and (queued is not None or within_limit):
                    status = storage.claim_concurrency_slot(LLM_POOL, self.run_id, claim, priority=priority)
                    _PoolWatcher.wrote()
                    queued = priority
                    if status.is_claimed and self._still_mine(claim):
                        return
                    if status.is_claimed:
                        # Another claim took the same slot, or two of this analyst's runs claimed
                        # past the limit at once: give it back and wait again.
                        _free(storage, self.run_id, claim)
                        queued = None
                # The next look is the process's next read of the pool, begun after what this
                # claim just wrote: every claim waiting in this process sees each read, for one
                # read. A read that failed (or a watcher that stopped) is made again by the claim.
                if watcher is not None and not watcher.running:
                    watcher.leave()
                    watcher = None
                watcher = watcher or _PoolWatcher.joined(self.instance)
                info = watcher.look(after=time.monotonic())
                state = self._state_of(info, claim) if info is not None else self._pool_state(claim)
        finally:
            if watcher is not None:
                watcher.leave()

    def _priority(self, state: PoolState) -> int:
        """Higher is served first: an analyst holding fewer slots (fair share), then a run holding
        no slot before a run holding one (runs progress evenly), then the run with more documents
        left (the batch ends when its slowest run does)."""
        left = max(0, min(RUN_STEP - 1, self.run_documents_left()))
        return -ANALYST_STEP * state.held_by_analyst - RUN_STEP * state.held_by_run + left

    def _still_mine(self, claim: str) -> bool:
        """Dagster's slot claim is not atomic (a read-then-write on SQLite; on PostgreSQL its
        ``SELECT … FOR UPDATE`` runs on an autocommit connection): two claims a few milliseconds
        apart can both write the same free slot, and the later one wins. Check that the slot
        still names this claim a moment later, before calling (one read after the window: a slot
        overwritten before it names another claim then too, and each read of a large pool costs
        ~5-10 ms of a run's CPU, on the path from a freed slot to the next call)."""
        time.sleep(OVERWRITE_WINDOW_SECONDS)
        state = self._pool_state(claim)
        if claim not in state.held_keys:
            return False
        return not (self.per_user_limit and state.held_by_analyst > self.per_user_limit)


# Claims whose freeing failed (Dagster's storage down for a moment): freed again at the next
# call's gate. Without that a claim stays until its run ends, and a run of hundreds of documents
# whose step is retried in the same process would call with one slot fewer for all of them.
_UNFREED: list[tuple[Any, str, str]] = []
_UNFREED_LOCK = threading.Lock()


def _free(storage: Any, run_id: str, claim: str) -> None:
    try:
        storage.free_concurrency_slot_for_step(run_id, claim)
        _PoolWatcher.wrote()
    except Exception:
        with _UNFREED_LOCK:
            _UNFREED.append((storage, run_id, claim))
        raise


def _free_again() -> None:
    with _UNFREED_LOCK:
        pending, _UNFREED[:] = list(_UNFREED), []
    for storage, run_id, claim in pending:
        with contextlib.suppress(Exception):  # still down: kept by _free for the next call
            _free(storage, run_id, claim)


class _PoolWatcher:
    """One reader of the `llm` pool per process and instance for all of its claims waiting in
    Dagster's queue. Each claim used to read the pool on its own every 0.2-1.5 s: with a reserve
    of dozens of prepared claims that was most of a run's storage reads (each behind a lock the
    run's lanes share on SQLite), and a claim far back in the line, looking every 1.5 s, took a
    slot given to it a second late when a round of answers came back at once. Now a claim looks
    at the newest read, and a read is made every ``WATCH_SECONDS`` while any claim waits."""

    _lock: ClassVar[threading.Lock] = threading.Lock()  # the registry and every count of waiting claims
    _by_instance: ClassVar[dict[int, _PoolWatcher]] = {}
    _last_write: ClassVar[float] = -math.inf  # when a claim of this process last changed the pool

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.waiting = 0
        self.running = False
        self._read = threading.Condition()
        self._read_started = -math.inf  # when the newest read began (time.monotonic())
        self._info: ConcurrencyKeyInfo | None = None
        self._error: BaseException | None = None

    @classmethod
    def joined(cls, instance: dg.DagsterInstance) -> _PoolWatcher:
        """The instance's watcher, with one more claim waiting (``leave`` when it stops)."""
        with cls._lock:
            watcher = cls._by_instance.get(id(instance))
            if watcher is None or watcher.instance is not instance:
                watcher = cls._by_instance[id(instance)] = _PoolWatcher(instance)
            if not watcher.running:
                # Started before it counts the claim: a thread that cannot start leaves nothing
                # registered that a claim could wait on.
                threading.Thread(target=watcher._watch, name="llm pool watcher", daemon=True).start()
                watcher.running = True
            watcher.waiting += 1
            return watcher

    def leave(self) -> None:
        with self._lock:
            self.waiting -= 1

    @classmethod
    def wrote(cls) -> None:
        """A claim of this process just claimed or freed a slot: reads begun before are stale."""
        with cls._lock:
            cls._last_write = time.monotonic()

    @classmethod
    def recent(cls, instance: dg.DagsterInstance) -> ConcurrencyKeyInfo | None:
        """The pool as the instance's watcher read it within the last ``WATCH_SECONDS`` and since
        this process last changed it, if it did (a claim arriving while others wait needs no read
        of its own; one that saw a slot this process just freed as held would wait for nothing)."""
        with cls._lock:
            watcher = cls._by_instance.get(id(instance))
            last_write = cls._last_write
        if watcher is None or watcher.instance is not instance:
            return None
        with watcher._read:
            started = watcher._read_started
            fresh = time.monotonic() - started <= WATCH_SECONDS and started >= last_write
            return watcher._info if fresh and watcher._error is None else None

    def look(self, after: float) -> ConcurrencyKeyInfo | None:
        """The pool as the first read begun at or after ``after`` saw it; None when that read
        failed or the watcher stopped (the claim then reads the pool itself and meets the error
        as its own)."""
        with self._read:
            while self._read_started < after and self.running:
                self._read.wait(timeout=WATCH_SECONDS)
            return self._info if self._read_started >= after and self._error is None else None

    def _stop(self) -> None:
        """Under ``_lock``: a claim joining from now on gets a new watcher."""
        self.running = False
        if self._by_instance.get(id(self.instance)) is self:
            del self._by_instance[id(self.instance)]

    def _watch(self) -> None:
        try:
            self._read_while_watched()
        finally:
            with self._lock:
                if self.running:  # ended by an error, not by being idle
                    self._stop()
            with self._read:
                self._read.notify_all()  # a claim looking now reads for itself

    def _read_while_watched(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._lock:
                if self.waiting > 0:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > WATCHER_IDLE_SECONDS:
                    self._stop()  # in the same hold as the decision: no claim joins in between
                    return
                watched = self.waiting > 0
            if watched:
                started = time.monotonic()
                try:
                    info, error = self.instance.event_log_storage.get_concurrency_info(LLM_POOL), None
                except Exception as exc:  # each claim looking reads again, and meets it as its own
                    info, error = None, exc
                with self._read:
                    self._read_started, self._info, self._error = started, info, error
                    self._read.notify_all()
            time.sleep(WATCH_SECONDS)


@dataclass(frozen=True)
class PoolState:
    held_by_analyst: int  # slots held by this analyst's calls
    held_by_run: int  # slots held by this run's other calls (its other lane)
    held_keys: set[str]  # every held slot's claim
    queued: set[str]  # every claim in Dagster's queue (assigned or not)
    assigned: set[str]  # claims Dagster has given a slot to, not yet taken up
    waiting: dict[str, tuple[int, float]]  # claims in the queue not given a slot yet: priority, when queued

    def reorders(self, claim: str, queued: int, priority: int) -> bool:
        """Whether ``claim``, queued at ``queued``, would stand elsewhere among other analysts'
        waiting claims at ``priority`` (Dagster serves the highest priority first, ties in the
        order they joined: claims tied with either priority may be passed). Its own analyst's
        claims are not compared: each call that starts or ends moves the analyst's term of all of
        them by the same step, and re-queueing them would cost writes on every look; among one
        analyst's claims the order is the one their runs' standing gave them when they joined."""
        if priority == queued or claim not in self.waiting:
            return False
        mine, since = _analyst_of(claim), self.waiting[claim][1]
        others = [(p, t) for key, (p, t) in self.waiting.items() if key != claim and _analyst_of(key) != mine]
        if priority > queued:  # passes those between, and its ties that joined before it
            return any(queued < p < priority or (p == queued and t < since) for p, t in others)
        # Falls behind those between, the ties of its new priority, and its ties that joined after it.
        return any(priority <= p < queued or (p == queued and t > since) for p, t in others)


def _analyst_of(claim: str) -> str:
    """The analyst's mark in a claim's key ("<step>|call|<mark>|<unique>")."""
    return claim.partition(CALL_MARK)[2].partition("|")[0]
