"""Transient failures inside a step become Dagster step retries, within a time budget.

A rate limit, a provider outage or a dropped ledger connection raises ``dg.RetryRequested`` with
the wait the schedule gives (exponential, jittered, at least the provider's ``Retry-After``; for
the provider's failures at most ``PROVIDER_RETRY_AT_LEAST_EVERY_SECONDS``, since its circuit
breaker, not the document's backoff, spares it; rate limits the provider names a ``Retry-After``
for are waited out inside the call, core/llm/gateway.py); the
run stays alive and keeps its place, and the run's ``extraction/waiting_for`` tag says what it is
waiting for since when. Once the failures have lasted the whole budget the step fails for good
with the real cause. The budget is time, not a count of attempts (core/backoff.py).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import dagster as dg
from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.backoff import PROVIDER_RETRY_AT_LEAST_EVERY_SECONDS, RetrySchedule
from extraction_pipeline.core.ledger import utcnow
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage

WAITING_TAG = "extraction/waiting_for"
# Dagster needs a cap on step retries; the time budget is what really ends them.
MAX_STEP_RETRIES = 100_000
# Steps of one run retry in the same process (in-process executor): when a streak of failures
# began, per run and asset, for failures that happen while the ledger cannot be read.
_STREAKS: dict[str, float] = {}
_WAITING_RUNS: set[str] = set()  # runs whose waiting tag this process set


def _streak_key(context: dg.AssetExecutionContext, kind: str) -> str:
    # One streak per kind of cause: a database blip early on does not shorten a later provider outage.
    return f"{context.run.run_id}:{context.asset_key.to_user_string()}:{kind}"


def _mark_waiting(context: dg.AssetExecutionContext, text: str) -> None:
    with contextlib.suppress(Exception):  # a tag is a courtesy to the operator, never a reason to fail
        context.instance.add_run_tags(context.run.run_id, {WAITING_TAG: text[:250]})
        _WAITING_RUNS.add(context.run.run_id)


def clear_waiting(context: dg.AssetExecutionContext) -> None:
    """After a success: forget the streaks and say the run is no longer waiting."""
    for kind in ("provider", "database"):
        _STREAKS.pop(_streak_key(context, kind), None)
    if context.run.run_id in _WAITING_RUNS:
        _WAITING_RUNS.discard(context.run.run_id)
        _mark_waiting(context, f"nothing (recovered {utcnow():%H:%M:%S} UTC)")
        _WAITING_RUNS.discard(context.run.run_id)


def retry_or_give_up(
    context: dg.AssetExecutionContext,
    *,
    cause: str,
    schedule: RetrySchedule,
    retry_after: float | None = None,
    on_give_up: Callable[[str], None] | None = None,
) -> Exception:
    """The exception the step raises for a transient ``cause``: a RetryRequested while the
    budget lasts, then a final Failure (after ``on_give_up`` recorded the message).

    The budget is the time this run has been failing for this kind of cause: time spent queued,
    or while the daemon or the machine was down, never counts against a document."""
    key = _streak_key(context, _what(cause))
    local_start = _STREAKS.setdefault(key, time.monotonic())
    failing_for = time.monotonic() - local_start
    wait = schedule.next_wait(attempt=context.retry_number, failing_for=failing_for, retry_after=retry_after)
    if wait is not None and _what(cause) == "provider":
        wait = min(wait, max(retry_after or 0.0, PROVIDER_RETRY_AT_LEAST_EVERY_SECONDS))
    if wait is None:
        message = f"gave up after {failing_for / 60:.1f} min of transient failures: {cause}"
        if on_give_up is not None:
            with contextlib.suppress(SQLAlchemyError):
                on_give_up(message)
        _STREAKS.pop(key, None)
        return dg.Failure(message, allow_retries=False)
    since = utcnow().timestamp() - failing_for
    since_text = datetime.fromtimestamp(since).strftime("%H:%M:%S")
    what = "the ledger database" if _what(cause) == "database" else "the provider"
    _mark_waiting(context, f"{what} since {since_text} UTC: {cause}")
    context.log.warning(
        f"{cause}; retry {context.retry_number + 1} in {wait:.0f} s "
        f"(failing for {failing_for / 60:.1f} of {schedule.budget_seconds / 60:g} min)"
    )
    return dg.RetryRequested(max_retries=MAX_STEP_RETRIES, seconds_to_wait=wait)


def say_waiting(context: dg.AssetExecutionContext, reason: str) -> None:
    """The run's log and its waiting tag say what the step waits for, in the step."""
    _mark_waiting(context, reason)
    context.log.warning(reason)


def wait_for_breaker(context: dg.AssetExecutionContext, *, until: datetime | None, reason: str) -> Exception:
    """The model's circuit breaker is open: wait it out without calling (and without spending
    this document's budget: the document did not fail, its provider did)."""
    remaining = (until - utcnow()).total_seconds() if until else 1.0
    wait = max(0.5, remaining) + random.uniform(0, 2)  # noqa: S311  (spread the probes, nothing secret)
    _mark_waiting(context, reason)
    context.log.warning(f"{reason}; not calling, checking again in {wait:.0f} s")
    return dg.RetryRequested(max_retries=MAX_STEP_RETRIES, seconds_to_wait=wait)


def _what(cause: str) -> str:
    return "database" if cause.startswith("ledger database") else "provider"


@contextlib.contextmanager
def retry_database_outages(context: dg.AssetExecutionContext, schedule: RetrySchedule) -> Iterator[None]:
    """Turn a dropped or unreachable ledger database anywhere in the block into a step retry.
    Other database errors (bugs, constraint violations) pass through unchanged."""
    try:
        yield
    except SQLAlchemyError as exc:
        if not is_database_outage(exc):
            raise
        raise retry_or_give_up(context, cause=describe_database_outage(exc), schedule=schedule) from exc
