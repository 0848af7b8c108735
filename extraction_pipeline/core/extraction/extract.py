"""Extraction of one batch item, with the ledger's guarantees: the claim protocol
(``claiming.py``) around the answer's assembly (``assembly.py``), grounded (``grounded.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from extraction_pipeline.core.backoff import BreakerPolicy
from extraction_pipeline.core.extraction.assembly import Meter, assemble
from extraction_pipeline.core.extraction.claiming import INTERRUPTED_MESSAGE, claim_item, hand_back, settled_on_failure
from extraction_pipeline.core.extraction.grounded import GroundedFields
from extraction_pipeline.core.ledger import ItemStatus, Ledger
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.breakers import may_call, record_success
from extraction_pipeline.core.ledger.templates import definition_of, label_of, template_of_item
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.arms import study_arms
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.grounding import VERIFIED


class OutcomeStatus(StrEnum):
    """What one execution did with its document."""

    COMPLETED = "completed"
    SKIPPED = "skipped"  # not claimed: another run holds it, or it is finished
    DISCARDED = "discarded"  # answered, but the item was no longer this run's: the result is not stored
    WAITING = "waiting"  # the model's circuit breaker is open: no call made


@dataclass(frozen=True)
class ExtractionOutcome:
    """What happened to the item in this execution."""

    status: OutcomeStatus
    reason: str = ""
    model: str = ""
    fields_found: int = 0
    values_verified: int = 0  # verified and no check flagged them
    values_flagged: int = 0
    outcomes: int = 0
    template: str = ""
    usage: Usage | None = None
    result: dict[str, Any] = field(default_factory=dict)
    item_status: str = ""  # the item's state when this execution ended
    wait_until: datetime | None = None  # "waiting": the model's breaker is open until then
    reused: dict[str, Any] | None = None  # the stored answer reused instead of a call (paid once)
    second_model: str = ""  # double extraction: the second model
    agreement: float | None = None  # double extraction: share of compared values both models agree on


RUN_STOPPING = "the run is stopping: not claimed, no LLM call"


def extract_item(
    ledger: Ledger,
    *,
    item_id: int,
    run_id: str,
    worker: str,
    parsed: ParsedDocument,
    llm: LLMConfig,
    crashed_run_id: str | None = None,
    breaker: BreakerPolicy | None = None,
    dispatch_round: int | None = None,
    stopping: Callable[[], bool] | None = None,
) -> ExtractionOutcome:
    """Run the extraction for ``item_id`` if this execution wins the claim.

    ``crashed_run_id``: when this run is Dagster's automatic retry of a run whose worker died,
    the id of that run; the item it left ``extracting`` is taken over instead of skipped.
    ``breaker``: the circuit-breaker policy; while the model's breaker is open no call is made
    and the outcome is ``waiting`` (the item stays pending, its retry budget untouched). When the
    cooldown ends, one caller wins the probe and the others keep waiting.
    ``dispatch_round``: the round this run was launched for (see ``items.claim``).
    ``stopping``: true once the run is interrupted. A document of another lane may reach its
    claim after the run handed back what it had in flight; it then claims nothing, or hands
    straight back what it just claimed, so no document is left to a run that is ending.
    """
    breaker = breaker or BreakerPolicy()
    if not llm.is_offline:
        state = may_call(ledger, llm.effective_model, breaker)
        if state is not None:
            return ExtractionOutcome(OutcomeStatus.WAITING, reason=state.describe(), wait_until=state.open_until)
    if stopping is not None and stopping():
        return ExtractionOutcome(OutcomeStatus.SKIPPED, reason=RUN_STOPPING, item_status=ItemStatus.PENDING)
    claim = claim_item(
        ledger, item_id, run_id=run_id, worker=worker, crashed_run_id=crashed_run_id, dispatch_round=dispatch_round
    )
    if not claim.won:
        return ExtractionOutcome(OutcomeStatus.SKIPPED, reason=claim.reason, item_status=claim.item_status)
    if stopping is not None and stopping():  # interrupted while claiming: the hand-back may have missed it
        hand_back(ledger, item_id, run_id, INTERRUPTED_MESSAGE, failing=False)
        return ExtractionOutcome(OutcomeStatus.SKIPPED, reason=RUN_STOPPING, item_status=ItemStatus.PENDING)

    # From here on the item is ours: every exit must complete, release or fail it, and whatever
    # was paid for (the meter counts each call as it returns) is recorded on it in every case.
    meter = Meter()
    with settled_on_failure(
        ledger, item_id, run_id, meter, model=llm.effective_model, breaker=None if llm.is_offline else breaker
    ):
        frozen = template_of_item(ledger, item_id)
        made = assemble(
            ledger,
            item_id=item_id,
            run_id=run_id,
            llm=llm,
            frozen=frozen,
            template=definition_of(frozen),
            parsed=parsed,
            meter=meter,
        )
        stored = item_states.complete(ledger, item_id, run_id=run_id, result=made.result, usage=made.usage)
        if not llm.is_offline:
            record_success(ledger, llm.effective_model)
    if not stored:
        return _discarded(ledger, item_id, made.usage)
    grounded = made.fields
    return ExtractionOutcome(
        OutcomeStatus.COMPLETED,
        model=made.usage.model,
        fields_found=sum(1 for f in grounded.values() if f.found),
        values_verified=sum(1 for f in grounded.values() if f.status == VERIFIED and not f.flags),
        values_flagged=sum(1 for f in grounded.values() if f.flags),
        outcomes=_outcome_count(grounded),
        template=label_of(frozen),
        usage=made.usage,
        result=made.result,
        item_status=ItemStatus.COMPLETED.value,
        reused=made.reused,
        second_model=str((made.result.get("second") or {}).get("model") or ""),
        agreement=made.result.get("agreement_rate"),
    )


def _outcome_count(grounded: GroundedFields) -> int:
    """How many outcomes the answer reports (an outcome at a time point in a population, whatever
    number of arms it has results for; version 1: its outcome entries)."""
    return len(study_arms(grounded, lambda path: grounded[path].value).outcomes)


def _discarded(ledger: Ledger, item_id: int, usage: Usage) -> ExtractionOutcome:
    """Swept or taken over while we worked: the ledger keeps the other verdict, but what this
    call cost is still counted on the item."""
    item_states.add_usage(ledger, item_id, usage)
    current = item_states.get_item(ledger, item_id)
    state_name = current["status"] if current else "missing"
    holder = f" (run {current['run_id']})" if current and current.get("run_id") else ""
    return ExtractionOutcome(
        OutcomeStatus.DISCARDED,
        reason=f"result discarded: the item was {state_name}{holder} when this run finished; "
        f"its {usage.tokens_in}+{usage.tokens_out} tokens are counted on the item",
        item_status=state_name,
        usage=usage,
        model=usage.model,
    )
