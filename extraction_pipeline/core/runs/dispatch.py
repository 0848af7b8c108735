"""How the dispatcher groups a batch's pending documents into runs.

A run may carry several documents (its start-up — a process, the imports, the code location — is
then paid once for all of them), but Dagster gives a run a *range* of partitions: the documents of
one run must be consecutive in the partition order, or the range would take in documents of other
batches. Documents of one run also share their batch (the run is tagged with it) and their
dispatch round (a retried document never rides along with the first launch of another).

Small batches are spread rather than packed: 20 documents, where one analyst's batch gets 5 runs at
once, become 4 runs of 5, not one run of 20. A run parses all of its documents before it extracts
any, and one process works the CPU one document at a time: runs side by side parse and reach the
model sooner. Spread no wider than the runs Dagster starts at once: with a pool of 50 model
slots and 5 runs per analyst, 200 documents cut into 50 runs of 4 ran 5 at a time (20 calls in
flight, 50 run start-ups); cut into 10 runs of 20, each run puts more of its documents in flight,
but the runs queued behind the first five pay their start-up while the slots of the runs that
finished sit idle; cut into 5 runs of 40, the running ones widen into those slots instead.
Never thinner than ``MIN_SPREAD_RUN`` documents a run: a run's start-up costs ~8 CPU-s (its process
and imports; litellm alone is 4-5), ten times a document's own extraction (0.4-0.8 CPU-s), and a
run puts its documents in flight together (``lanes_to_open``): a batch of 5 is one run, not five
start-ups competing with the documents for a small machine's cores.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIN_SPREAD_RUN = 5


@dataclass(frozen=True)
class PendingDocument:
    item_id: int
    partition_key: str
    batch_uid: str
    dispatch_round: int


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container or `taskset` sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def runs_at_once(slots: int, analyst_limit: int | None, cores: int | None) -> int:
    """How many runs a batch is spread over: as many as it can have going at once, i.e. the `llm`
    pool's ``slots``, but no more than Dagster's run queue starts for one analyst
    (``analyst_limit``): runs beyond that only wait in the queue, each with its own start-up,
    while the running ones could have widened. Where the runs' steps work on this machine, no more
    than its ``cores`` either (at least two): a run's process works on one core at a time
    (Python's interpreter lock), so a run beyond the cores adds only its start-up (~8 CPU-s) to
    the cores' work while the batch's documents wait to be prepared; the runs there widen into
    the pool all the same."""
    limit = min(slots, analyst_limit or slots)
    if cores:
        limit = min(limit, max(2, cores))
    return max(1, limit)


def plan_runs(
    pending: Sequence[PendingDocument], position: Mapping[str, int], *, per_run: int, runs_at_once: int
) -> list[list[PendingDocument]]:
    """The runs to request: lists of documents, each list consecutive in ``position`` (the
    partition order), of one batch and round, at most ``per_run`` long and, for a group smaller
    than ``per_run`` × ``runs_at_once``, cut into about ``runs_at_once`` runs of at least
    ``MIN_SPREAD_RUN`` (``per_run`` when that is lower). A document whose
    partition has no position yet runs alone."""
    groups: dict[tuple[str, int], list[PendingDocument]] = {}
    for doc in pending:
        groups.setdefault((doc.batch_uid, doc.dispatch_round), []).append(doc)
    runs: list[list[PendingDocument]] = []
    for group in groups.values():
        placed = sorted((d for d in group if d.partition_key in position), key=lambda d: position[d.partition_key])
        runs.extend([d] for d in group if d.partition_key not in position)
        spread = max(1, min(runs_at_once, len(placed) // MIN_SPREAD_RUN))
        size = max(1, min(per_run, math.ceil(len(placed) / spread)))
        current: list[PendingDocument] = []
        for doc in placed:
            follows = bool(current) and position[doc.partition_key] == position[current[-1].partition_key] + 1
            if current and (not follows or len(current) >= size):
                runs.append(current)
                current = []
            current.append(doc)
        if current:
            runs.append(current)
    return runs


def run_key(documents: Sequence[PendingDocument]) -> str:
    """Deterministic per set of documents and round: a repeated tick never launches a duplicate
    run, and a different set never collides with an earlier one. One document keeps the key of
    earlier releases (``<batch uid>-item-<id>[-r<round>]``)."""
    ordered = sorted(documents, key=lambda d: d.item_id)
    first = ordered[0]
    suffix = f"-r{first.dispatch_round}" if first.dispatch_round else ""
    if len(ordered) == 1:
        return f"{first.batch_uid}-item-{first.item_id}{suffix}"
    ids = ",".join(str(d.item_id) for d in ordered)
    digest = hashlib.sha256(ids.encode()).hexdigest()[:12]
    return f"{first.batch_uid}-items-{first.item_id}-n{len(documents)}-{digest}{suffix}"
