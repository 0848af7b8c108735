"""Deciding the fate of items whose runs are gone (a dead-letter queue's job).

The aggregator sensor gathers, per active item, the Dagster runs of its current dispatch round;
this module decides — without any Dagster import — what to do:

- a run of the item is queued or working: nothing (its worker finishes the item, or Dagster's
  run monitoring fails the run when the worker dies and the next tick sees that);
- every run ended, the last one less than ``grace_seconds`` ago: nothing yet (Dagster's run retry
  may still launch a retry that takes the item over);
- the last run was canceled by a person: ``error`` (canceled work is not restarted behind their back);
- the last run succeeded without extracting it (a parse-only materialization from the UI):
  ``error`` saying so — requeueing would start a paid extraction nobody asked for;
- otherwise the runs died or were interrupted without finishing the document, which is never the
  document's fault: ``requeue`` it for a fresh run — unless the limit of dispatch rounds (counted
  since the last `batch retry`) is spent, then ``error`` with the real cause. Time spent queued or
  while the daemon was down never counts: the time budget for transient failures is measured
  inside a run (defs/step_retries.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from extraction_pipeline.core.ledger.items import TRANSIENT_MESSAGE_PREFIX

TERMINAL_RUN_STATUSES = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    status: str  # DagsterRunStatus name
    created_at: float  # epoch seconds
    ended_at: float | None
    user: str | None = None  # who launched it (the run's extraction/user tag)


class Action(StrEnum):
    FAIL = "fail"
    REQUEUE = "requeue"


@dataclass(frozen=True)
class Verdict:
    item_id: int
    action: Action
    message: str


@dataclass(frozen=True)
class ItemView:
    """What the judge needs to know of an item."""

    id: int
    status: str
    message: str | None
    dispatch_round: int
    retry_round: int = 0  # the round the last `batch retry` started


@dataclass(frozen=True)
class Limits:
    grace_seconds: float = 30.0
    max_rounds: int = 5


def _last_cause(item: ItemView, latest: RunInfo) -> str:
    last = (item.message or "").removeprefix(TRANSIENT_MESSAGE_PREFIX)
    if item.status == "extracting":
        return f"run {latest.run_id} ended {latest.status} while extracting (its worker died or was stopped)"
    if last:
        return f"run {latest.run_id} ended {latest.status}; last error: {last}"
    return f"run {latest.run_id} ended {latest.status} before the document was extracted"


def judge_item(
    item: ItemView,
    *,
    runs: list[RunInfo],
    now: float,
    launcher_finished: bool,
    limits: Limits,
) -> Verdict | None:
    """Return what to do with an active item, or None to leave it alone.

    ``runs``: the runs of this item's current dispatch round (the dispatcher's run and Dagster's
    automatic retries of it, or the UI backfill's run).
    ``launcher_finished``: no further run will be launched for this round by whoever launches it
    (the backfill is over, or the dispatcher already requested its run).
    """
    if any(run.status not in TERMINAL_RUN_STATUSES for run in runs):
        return None  # a run is queued or working on it
    if not runs:
        if launcher_finished:
            return Verdict(item.id, Action.FAIL, "no run was ever started for this document (launch ended or canceled)")
        return None
    latest = max(runs, key=lambda run: run.created_at)
    if latest.ended_at is not None and now - latest.ended_at < limits.grace_seconds:
        return None  # Dagster's run retry launches a retry a few seconds after a crash: wait for it
    cause = _last_cause(item, latest)
    if latest.status == "CANCELED":
        who = f" by {latest.user}" if latest.user else ""
        return Verdict(item.id, Action.FAIL, f"canceled{who} (run {latest.run_id}); not retried automatically")
    if latest.status == "SUCCESS":
        return Verdict(
            item.id, Action.FAIL, f"run {latest.run_id} ended SUCCESS without extracting it (nothing asked for it)"
        )
    rounds = item.dispatch_round - item.retry_round + 1
    if rounds >= limits.max_rounds:
        return Verdict(item.id, Action.FAIL, f"gave up after {rounds} rounds of runs: {cause}")
    return Verdict(item.id, Action.REQUEUE, f"dispatched again (round {item.dispatch_round + 1}): {cause}")
