"""Deciding the fate of items whose runs are gone (the seeds' dead-letter handling).

The aggregator sensor gathers, per active item, the Dagster runs that worked on it; this module
decides — without any Dagster import — whether the item must be failed and with what message.
"""

from __future__ import annotations

from dataclasses import dataclass

from extraction_pipeline.core.ledger.items import TRANSIENT_MESSAGE_PREFIX

TERMINAL_RUN_STATUSES = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    status: str  # DagsterRunStatus name
    created_at: float  # epoch seconds
    ended_at: float | None


@dataclass(frozen=True)
class Verdict:
    item_id: int
    from_status: str
    message: str


def judge_item(
    *,
    item_id: int,
    item_status: str,
    item_message: str | None,
    runs: list[RunInfo],
    now: float,
    grace_seconds: float,
    launcher_finished: bool,
) -> Verdict | None:
    """Return a Verdict failing the item, or None to leave it alone.

    ``runs``: every run of this item's batch that targeted its document.
    ``launcher_finished``: no further run will be launched for it (the backfill is over, or the
    dispatcher has already requested its run).
    """
    if any(run.status not in TERMINAL_RUN_STATUSES for run in runs):
        return None  # a run is queued or working on it
    if not runs:
        if launcher_finished:
            return Verdict(item_id, item_status, "no run was ever started for this document (launch ended or canceled)")
        return None
    latest = max(runs, key=lambda run: run.created_at)
    # Run retries (for crashed workers) launch a new run a few seconds after the failure: wait.
    if latest.ended_at is not None and now - latest.ended_at < grace_seconds:
        return None
    if item_status == "extracting":
        message = (
            f"run {latest.run_id} ended {latest.status} while extracting "
            "(worker died or run was canceled); no retry took it over"
        )
    else:
        last = (item_message or "").removeprefix(TRANSIENT_MESSAGE_PREFIX)
        previous = f"; last error (retries exhausted): {last}" if last else ""
        message = f"run {latest.run_id} ended {latest.status} and the document was not extracted{previous}"
    return Verdict(item_id, item_status, message)
