"""Extraction of one batch item, with the ledger's guarantees.

The order is what makes it safe: claim (pending -> extracting) before any LLM call; on a
transient error release the item back to pending *before* raising for retry; on a permanent
error mark it ``error`` and raise a non-retryable failure; on success complete it only if this
run still holds it. A duplicate or late execution loses the claim and makes no LLM call.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.backoff import BreakerPolicy
from extraction_pipeline.core.errors import PermanentError, TransientError
from extraction_pipeline.core.extraction.adjudication import adjudicate
from extraction_pipeline.core.extraction.consensus import agreement_rate, compare
from extraction_pipeline.core.extraction.long_papers import Part, merge_parts, plan_parts
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import ItemStatus, Ledger, utcnow
from extraction_pipeline.core.ledger import items as item_states
from extraction_pipeline.core.ledger.answers import (
    StoredAnswer,
    answer_key,
    second_model_of,
    store_answer,
    stored_answer,
    wants_fresh_answers,
)
from extraction_pipeline.core.ledger.audit import record_prompt
from extraction_pipeline.core.ledger.breakers import may_call, record_failure, record_success
from extraction_pipeline.core.ledger.items import TRANSIENT_MESSAGE_PREFIX, Usage
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.templates import definition_of, label_of, template_of_item
from extraction_pipeline.core.llm.gateway import LLMConfig, LLMResult, complete_extraction, parse_answer
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.runs.interrupts import interrupts_deferred
from extraction_pipeline.core.templates.definition import FieldType, TemplateDefinition
from extraction_pipeline.core.templates.schema import ExtractedValue, extracted_values
from extraction_pipeline.core.verification.checks import check_values
from extraction_pipeline.core.verification.grounding import (
    INSIDE_A_WORD,
    NOT_REPORTED,
    SIGN_DIFFERS,
    UNVERIFIED,
    VERIFIED,
    Grounder,
    Grounding,
    normalize,
    signed_in_quote,
    value_match,
)

NUMERIC = (FieldType.INTEGER, FieldType.NUMBER)


@dataclass(frozen=True)
class ExtractionOutcome:
    """What happened to the item in this execution."""

    status: str  # "completed" | "skipped" (not claimed) | "discarded" (result not stored) | "waiting" (breaker)
    reason: str = ""
    model: str = ""
    fields_found: int = 0
    quotes_verified: int = 0
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


def ground_output(template: TemplateDefinition, answer: BaseModel, parsed: ParsedDocument) -> dict[str, Any]:
    """Every field of the answer, by path, with its grounding verdict and plausibility flags."""
    return add_checks(ground_entries(template, answer, Grounder(parsed)))


def ground_entries(template: TemplateDefinition, answer: BaseModel, grounder: Grounder) -> dict[str, Any]:
    """Every field of the answer with its grounding verdict and its value flag (sign, label)."""
    grounded: dict[str, Any] = {}
    for found in extracted_values(template, answer):
        flag = _value_flag(found)
        grounded[found.path] = {
            "module": found.module,
            "index": found.index,
            "field": found.field.name,
            "value": found.value,
            "quote": found.quote,
            **_verdict(grounder, found).as_dict(),
            "flags": [flag] if flag else [],
        }
    return grounded


def add_checks(grounded: dict[str, Any]) -> dict[str, Any]:
    """The plausibility rules over the values together (an estimate outside its CI, ...)."""
    for path, reasons in check_values({path: entry["value"] for path, entry in grounded.items()}).items():
        grounded[path]["flags"] = [*reasons, *grounded[path]["flags"]]
    return grounded


def _value_flag(found: ExtractedValue) -> str | None:
    """A number whose digits are in the quote but not as printed: the sign differs (an effect's
    direction!) or the digits are only part of a label such as "H2"."""
    if found.value is None or not found.quote or found.field.judgement or found.field.type not in NUMERIC:
        return None
    quote = normalize(found.quote)
    match = value_match(found.value, quote)
    if match == SIGN_DIFFERS:
        printed = ", ".join(str(n) for n in signed_in_quote(found.value, quote))
        return f"the quote prints {printed}: the value's sign differs"
    if match == INSIDE_A_WORD:
        return "the value appears in the quote only inside a word or label (such as H2)"
    return None


def _verdict(grounder: Grounder, found: ExtractedValue) -> Grounding:
    if found.value is None and found.rejected is None:
        verdict = grounder.ground(None, found.quote)
        if verdict.status != NOT_REPORTED:  # a quote without a value: located, but nothing to verify
            return replace(verdict, status=NOT_REPORTED, reason="no value given")
        return verdict
    verdict = grounder.ground(found.value, found.quote, judgement=found.field.judgement)
    if found.rejected is not None:
        kind = f"one of {', '.join(found.field.choices)}" if found.field.choices else f"a valid {found.field.type}"
        reason = f"the model's value {found.rejected} is not {kind}; left empty"
        return replace(verdict, status=UNVERIFIED, confidence=0.0, reason=reason)
    return verdict


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
) -> ExtractionOutcome:
    """Run the extraction for ``item_id`` if this execution wins the claim.

    ``crashed_run_id``: when this run is Dagster's automatic retry of a run whose worker died,
    the id of that run; the item it left ``extracting`` is taken over instead of skipped.
    ``breaker``: the circuit-breaker policy; while the model's breaker is open no call is made
    and the outcome is ``waiting`` (the item stays pending, its retry budget untouched). When the
    cooldown ends, one caller wins the probe and the others keep waiting.
    ``dispatch_round``: the round this run was launched for (see ``items.claim``).
    """
    breaker = breaker or BreakerPolicy()
    if not llm.is_offline:
        state = may_call(ledger, llm.effective_model, breaker)
        if state is not None:
            return ExtractionOutcome("waiting", reason=state.describe(), wait_until=state.open_until)
    claimed = item_states.claim(ledger, item_id, run_id=run_id, worker=worker, dispatch_round=dispatch_round)
    if not claimed and crashed_run_id:
        claimed = item_states.take_over(ledger, item_id, dead_run_id=crashed_run_id, run_id=run_id, worker=worker)
    current = None if claimed else item_states.get_item(ledger, item_id)
    if current and current["status"] == ItemStatus.EXTRACTING and current["run_id"] == run_id:
        # This run's previous attempt died between claim and release (e.g. database outage).
        claimed = item_states.resume(ledger, item_id, run_id=run_id, worker=worker)
    if not claimed:
        current = item_states.get_item(ledger, item_id)
        state_name = current["status"] if current else "missing"
        holder = f" by run {current['run_id']}" if current and current.get("run_id") else ""
        return ExtractionOutcome(
            "skipped", reason=f"item is {state_name}{holder}; not claimed, no LLM call", item_status=state_name
        )

    # From here on the item is ours: every exit must complete, release or fail it, and whatever
    # was paid for (the meter counts each call as it returns) is recorded on it in every case.
    meter = _Meter()
    try:
        frozen = template_of_item(ledger, item_id)
        template = definition_of(frozen)
        reply, reused, grounded, part_notes = _extract_answer(ledger, item_id, run_id, llm, template, parsed, meter)
        result: dict[str, Any] = {
            "model": reply.usage.model,
            "repaired": reply.repaired,
            "template": {"id": frozen.id, "version": frozen.version} if frozen else None,
            "fields": grounded,
        }
        if reused is not None:
            result["reused"] = reused
        if part_notes:
            result["parts"] = part_notes
        second_model, adjudicator = second_model_of(ledger, item_id)
        if second_model:
            second_llm = replace(llm, model=second_model)
            second = _second_extraction(ledger, item_id, run_id, second_llm, template, parsed, meter)
            result.update(second.result(grounded, reply.usage))
            reply = replace(reply, usage=_sum_usage(reply.usage, second.usage))
            if adjudicator:
                judged, judge_usage = adjudicate(
                    ledger,
                    item_id=item_id,
                    run_id=run_id,
                    llm=replace(llm, model=adjudicator),
                    parsed=parsed,
                    first=grounded,
                    second=second.fields,
                    agreement=result["agreement"],
                )
                meter.add(judge_usage)
                result["adjudication"] = judged
                result["usage_by_model"][adjudicator] = {
                    "tokens_in": judge_usage.tokens_in,
                    "tokens_out": judge_usage.tokens_out,
                    "cost_usd": judge_usage.cost_usd,
                }
                reply = replace(reply, usage=_sum_usage(reply.usage, judge_usage))
        stored = item_states.complete(ledger, item_id, run_id=run_id, result=result, usage=reply.usage)
        if not llm.is_offline:
            record_success(ledger, llm.effective_model)
    except TransientError as exc:
        exc.usage = meter.plus(exc.usage)
        hand_back(ledger, item_id, run_id, f"{TRANSIENT_MESSAGE_PREFIX}{exc}", exc.usage)
        if exc.provider:
            with contextlib.suppress(SQLAlchemyError):
                record_failure(ledger, llm.effective_model, str(exc), policy=breaker, retry_after=exc.retry_after)
        raise
    except PermanentError as exc:
        exc.usage = meter.plus(exc.usage)
        item_states.fail(ledger, item_id, run_id=run_id, message=str(exc), usage=exc.usage)
        raise
    except SQLAlchemyError as exc:
        spent = meter.usage
        if not is_database_outage(exc):
            _fail_internal(ledger, item_id, run_id, exc, spent)
            raise PermanentError(f"internal error: {exc}", original=exc) from exc
        # The ledger itself is unreachable: worth a retry. Try to hand the item back; if even that
        # fails, the retry of this same run resumes it.
        cause = describe_database_outage(exc)
        hand_back(ledger, item_id, run_id, f"{TRANSIENT_MESSAGE_PREFIX}{cause}", spent)
        raise TransientError(cause, original=exc, usage=spent) from exc
    except Exception as exc:
        # An unexpected bug must not leave the item stuck in extracting.
        _fail_internal(ledger, item_id, run_id, exc, meter.usage)
        raise PermanentError(f"internal error: {exc}", original=exc) from exc
    except BaseException:
        # Interrupted (the run was terminated, its worker is shutting down): hand the document
        # back so another run can take it, with what was already paid for; a second interrupt
        # waits until that is written.
        with interrupts_deferred():
            hand_back(ledger, item_id, run_id, INTERRUPTED_MESSAGE, meter.usage, failing=False)
        raise

    if not stored:
        # Swept or taken over while we worked: the ledger keeps the other verdict, but what this
        # call cost is still counted on the item.
        item_states.add_usage(ledger, item_id, reply.usage)
        current = item_states.get_item(ledger, item_id)
        state_name = current["status"] if current else "missing"
        holder = f" (run {current['run_id']})" if current and current.get("run_id") else ""
        return ExtractionOutcome(
            "discarded",
            reason=f"result discarded: the item was {state_name}{holder} when this run finished; "
            f"its {reply.usage.tokens_in}+{reply.usage.tokens_out} tokens are counted on the item",
            item_status=state_name,
            usage=reply.usage,
            model=reply.usage.model,
        )
    return ExtractionOutcome(
        "completed",
        model=reply.usage.model,
        fields_found=sum(1 for f in grounded.values() if f["value"] is not None),
        quotes_verified=sum(1 for f in grounded.values() if f["status"] == VERIFIED),
        values_flagged=sum(1 for f in grounded.values() if f["flags"]),
        outcomes=len({f["index"] for f in grounded.values() if f["index"] is not None}),
        template=label_of(frozen),
        usage=reply.usage,
        result=result,
        item_status=ItemStatus.COMPLETED.value,
        reused=reused,
        second_model=str((result.get("second") or {}).get("model") or ""),
        agreement=result.get("agreement_rate"),
    )


@dataclass
class _Meter:
    """What this execution has paid for so far, counted as each call returns, so a failure after
    a paid call (grounding, the second model, the ledger) still records its tokens on the item."""

    usage: Usage | None = None

    def add(self, usage: Usage) -> None:
        self.usage = usage if self.usage is None else _sum_usage(self.usage, usage)

    def plus(self, failed_call: Usage | None) -> Usage | None:
        """The total with what the failing call itself had spent (e.g. a first answer before its repair)."""
        if failed_call is None:
            return self.usage
        return failed_call if self.usage is None else _sum_usage(self.usage, failed_call)


def _extract_answer(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    meter: _Meter,
) -> tuple[LLMResult, dict[str, Any] | None, dict[str, Any], list[dict[str, Any]]]:
    """One model's grounded answer: (reply with its usage, reuse note, fields, parts)."""
    parts = plan_parts(template, parsed, llm)
    if parts is None:
        messages = build_messages(template, parsed.pages_text, parsed.tables)
        reply, reused = _answer(ledger, item_id, run_id, llm, messages, template, meter)
        return reply, reused, ground_output(template, reply.output, parsed), []
    return _answer_in_parts(ledger, item_id, run_id, llm, template, parsed, parts, meter)


@dataclass(frozen=True)
class SecondExtraction:
    model: str
    fields: dict[str, Any]
    usage: Usage
    reused: dict[str, Any] | None

    def result(self, first: dict[str, Any], first_usage: Usage) -> dict[str, Any]:
        """What double extraction adds to the stored result."""
        agreement = compare(first, self.fields)

        def spent(usage: Usage) -> dict[str, Any]:
            return {"tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out, "cost_usd": usage.cost_usd}

        return {
            "second": {"model": self.model, "fields": self.fields, "reused": self.reused},
            "agreement": agreement,
            "agreement_rate": agreement_rate(agreement),
            "usage_by_model": {first_usage.model: spent(first_usage), self.model: spent(self.usage)},
        }


def _second_extraction(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    meter: _Meter,
) -> SecondExtraction:
    """The same prompt to the second model, independently (it never sees the first answer)."""
    reply, reused, grounded, _parts = _extract_answer(ledger, item_id, run_id, llm, template, parsed, meter)
    return SecondExtraction(llm.effective_model, grounded, reply.usage, reused)


def _answer_in_parts(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    parts: list[Part],
    meter: _Meter,
) -> tuple[LLMResult, dict[str, Any] | None, dict[str, Any], list[dict[str, Any]]]:
    """A long paper: one call per part (each paid once, so a retry after a failure in part 3
    does not pay for parts 1 and 2 again), every answer grounded against the whole document,
    then merged (long_papers.py)."""
    grounder = Grounder(parsed)
    answers, notes, stored = [], [], []
    usage = Usage(llm.effective_model)
    repaired = False
    for number, part in enumerate(parts, start=1):
        messages = part.messages(template, parsed, number, len(parts))
        reply, reused = _answer(ledger, item_id, run_id, llm, messages, template, meter)
        usage = _sum_usage(usage, reply.usage)
        repaired = repaired or reply.repaired
        if reused is not None:
            stored.append(reused)
        answers.append(ground_entries(template, reply.output, grounder))
        notes.append({"pages": part.label, "reused": reused is not None})
    merged = add_checks(merge_parts(answers))
    # The merged fields are the result; the combined reply carries what the calls cost.
    combined = LLMResult(reply.output, usage, repaired=repaired)
    reused = None
    if len(stored) == len(parts):  # every part's answer was already paid for
        reused = {
            **stored[0],
            **{key: sum(s[key] for s in stored) for key in ("tokens_in", "tokens_out", "cost_usd")},
        }
    return combined, reused, merged, notes


def _sum_usage(a: Usage, b: Usage | None) -> Usage:
    if b is None:
        return a
    return Usage(a.model or b.model, a.tokens_in + b.tokens_in, a.tokens_out + b.tokens_out, a.cost_usd + b.cost_usd)


def _answer(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    messages: list[dict[str, str]],
    template: TemplateDefinition,
    meter: _Meter,
) -> tuple[LLMResult, dict[str, Any] | None]:
    """The model's answer: the one already paid for when the exact same prompt went to the same
    model before (unless the batch asks for fresh answers), else a new call, stored for next time.
    The offline extractor costs nothing and is not stored."""
    key = answer_key(llm.effective_model, messages)
    if not llm.is_offline and not wants_fresh_answers(ledger, item_id):
        stored = stored_answer(ledger, key)
        if stored is not None:
            output = parse_answer(stored.content, template)
            reused = {
                "item": stored.item_id,
                "paid_at": stored.created_at.isoformat(timespec="seconds"),
                "tokens_in": stored.tokens_in,
                "tokens_out": stored.tokens_out,
                "cost_usd": stored.cost_usd,
            }
            return LLMResult(output, Usage(stored.model), repaired=False, content=stored.content), reused
    record_prompt(ledger, item_id=item_id, run_id=run_id, model=llm.effective_model, messages=messages)
    reply = complete_extraction(llm, messages, template)
    meter.add(reply.usage)
    if not llm.is_offline and reply.content:
        usage = reply.usage
        store_answer(
            ledger,
            StoredAnswer(
                key, usage.model, reply.content, usage.tokens_in, usage.tokens_out, usage.cost_usd, item_id, utcnow()
            ),
        )
    return reply, None


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
