"""The claim protocol: who may call the model for a document, and what every way out leaves.

The order is what makes it safe: claim (pending -> extracting) before any call; on a transient
error release the item back to pending *before* raising for retry; on a permanent error mark it
``error``; a bug or an interrupt never leaves it stuck in ``extracting``. A duplicate or late
execution loses the claim and makes no call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.backoff import BreakerPolicy
from extraction_pipeline.core.errors import InternalError, PermanentError, TransientError
from extraction_pipeline.core.extraction.assembly import Meter
from extraction_pipeline.core.ledger import ItemStatus, Ledger
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.breakers import record_failure
from extraction_pipeline.core.ledger.items import TRANSIENT_MESSAGE_PREFIX
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.runs.interrupts import interrupts_deferred
from extraction_pipeline.core.usage import Usage


@dataclass(frozen=True)
class Claim:
    """Whether this execution holds the item; if not, the item's state and why."""

    won: bool
    item_status: str = ""
    reason: str = ""


def claim_item(
    ledger: Ledger,
    item_id: int,
    *,
    run_id: str,
    worker: str,
    crashed_run_id: str | None = None,
    dispatch_round: int | None = None,
) -> Claim:
    """pending -> extracting for this run; or, for Dagster's retry of a run whose worker died
    (``crashed_run_id``), the item that run left; or the same run re-entering after a step retry."""
    claimed = item_states.claim(ledger, item_id, run_id=run_id, worker=worker, dispatch_round=dispatch_round)
    if not claimed and crashed_run_id:
        claimed = item_states.take_over(ledger, item_id, dead_run_id=crashed_run_id, run_id=run_id, worker=worker)
    current = None if claimed else item_states.get_item(ledger, item_id)
    if current and current["status"] == ItemStatus.EXTRACTING and current["run_id"] == run_id:
        # This run's previous attempt died between claim and release (e.g. database outage).
        claimed = item_states.resume(ledger, item_id, run_id=run_id, worker=worker)
    if claimed:
        return Claim(True)
    current = item_states.get_item(ledger, item_id)
    state_name = current["status"] if current else "missing"
    holder = f" by run {current['run_id']}" if current and current.get("run_id") else ""
    return Claim(False, state_name, f"item is {state_name}{holder}; not claimed, no LLM call")


@contextlib.contextmanager
def settled_on_failure(
    ledger: Ledger, item_id: int, run_id: str, meter: Meter, *, model: str, breaker: BreakerPolicy | None
) -> Iterator[None]:
    """Every way out of a claimed item's block but success leaves it released, failed or handed
    back, with whatever was paid for recorded on it. ``breaker`` (None: offline) hears of
    provider failures."""
    try:
        yield
    except TransientError as exc:
        exc.usage = meter.plus(exc.usage)
        hand_back(ledger, item_id, run_id, f"{TRANSIENT_MESSAGE_PREFIX}{exc}", exc.usage)
        if exc.provider and breaker is not None:
            with contextlib.suppress(SQLAlchemyError):
                record_failure(ledger, model, str(exc), policy=breaker, retry_after=exc.retry_after)
        raise
    except PermanentError as exc:
        exc.usage = meter.plus(exc.usage)
        item_states.fail(ledger, item_id, run_id=run_id, message=str(exc), usage=exc.usage)
        raise
    except SQLAlchemyError as exc:
        spent = meter.usage
        if not is_database_outage(exc):
            _fail_internal(ledger, item_id, run_id, exc, spent)
            raise InternalError(f"internal error: {exc}", original=exc) from exc
        # The ledger itself is unreachable: worth a retry. Try to hand the item back; if even that
        # fails, the retry of this same run resumes it.
        cause = describe_database_outage(exc)
        hand_back(ledger, item_id, run_id, f"{TRANSIENT_MESSAGE_PREFIX}{cause}", spent)
        raise TransientError(cause, original=exc, usage=spent) from exc
    except Exception as exc:
        # An unexpected bug must not leave the item stuck in extracting.
        _fail_internal(ledger, item_id, run_id, exc, meter.usage)
        raise InternalError(f"internal error: {exc}", original=exc) from exc
    except BaseException:
        # Interrupted (the run was terminated, its worker is shutting down): hand the document
        # back so another run can take it, with what was already paid for; a second interrupt
        # waits until that is written.
        with interrupts_deferred():
            hand_back(ledger, item_id, run_id, INTERRUPTED_MESSAGE, meter.usage, failing=False)
        raise


INTERRUPTED_MESSAGE = f"{TRANSIENT_MESSAGE_PREFIX}interrupted: the run was stopped before the document was extracted"


def hand_back(
    ledger: Ledger, item_id: int, run_id: str, message: str, usage: Usage | None = None, *, failing: bool = True
) -> None:
    """extracting -> pending (best effort: with the database down, a later attempt resumes it).
    Also used for the documents a multi-document run has in flight when it is interrupted."""
    with contextlib.suppress(SQLAlchemyError):
        item_states.release(ledger, item_id, run_id=run_id, message=message, usage=usage, failing=failing)


def _fail_internal(ledger: Ledger, item_id: int, run_id: str, exc: BaseException, spent: Usage | None) -> None:
    message = f"internal error: {type(exc).__name__}: {exc}"
    with contextlib.suppress(SQLAlchemyError):
        item_states.fail(ledger, item_id, run_id=run_id, message=message, usage=spent)
