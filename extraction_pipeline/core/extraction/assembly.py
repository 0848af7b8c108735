"""The answer's assembly: what a document's extraction is made of, call by call.

One model's answer (paid once: a stored answer to the same prompt is reused), a long paper in
parts merged into one, the second model's independent answer and the adjudicator's suggestions
for double extraction; every call counted by a ``Meter`` as it returns, so a failure later still
records what was paid for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from extraction_pipeline.core.extraction.adjudication import adjudicate
from extraction_pipeline.core.extraction.consensus import agreement_rate, compare
from extraction_pipeline.core.extraction.grounded import add_checks, ground_entries, ground_output
from extraction_pipeline.core.extraction.long_papers import Part, merge_parts, plan_parts
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.answers import (
    StoredAnswer,
    answer_key,
    second_model_of,
    store_answer,
    stored_answer,
    wants_fresh_answers,
)
from extraction_pipeline.core.ledger.audit import record_prompt
from extraction_pipeline.core.ledger.templates import TemplateVersion
from extraction_pipeline.core.llm.gateway import LLMConfig, LLMResult, complete_extraction, parse_answer
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.grounding import Grounder


@dataclass(frozen=True)
class Assembled:
    """The result to store for the document, what its calls cost, and its first model's fields."""

    result: dict[str, Any]
    usage: Usage
    fields: dict[str, Any]
    reused: dict[str, Any] | None


def assemble(
    ledger: Ledger,
    *,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    frozen: TemplateVersion | None,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    meter: Meter,
) -> Assembled:
    """Every answer the document's batch asks for, grounded and put together."""
    reply, reused, grounded, part_notes = grounded_answer(ledger, item_id, run_id, llm, template, parsed, meter)
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
    usage = reply.usage
    second_model, adjudicator = second_model_of(ledger, item_id)
    if second_model:
        second = _second_extraction(ledger, item_id, run_id, replace(llm, model=second_model), template, parsed, meter)
        result.update(second.result(grounded, usage))
        usage = usage + second.usage
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
            usage = usage + judge_usage
    return Assembled(result, usage, grounded, reused)


@dataclass
class Meter:
    """What this execution has paid for so far, counted as each call returns, so a failure after
    a paid call (grounding, the second model, the ledger) still records its tokens on the item."""

    usage: Usage | None = None

    def add(self, usage: Usage) -> None:
        self.usage = usage if self.usage is None else self.usage + usage

    def plus(self, failed_call: Usage | None) -> Usage | None:
        """The total with what the failing call itself had spent (e.g. a first answer before its repair)."""
        if failed_call is None:
            return self.usage
        return failed_call if self.usage is None else self.usage + failed_call


def grounded_answer(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    meter: Meter,
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
    meter: Meter,
) -> SecondExtraction:
    """The same prompt to the second model, independently (it never sees the first answer)."""
    reply, reused, grounded, _parts = grounded_answer(ledger, item_id, run_id, llm, template, parsed, meter)
    return SecondExtraction(llm.effective_model, grounded, reply.usage, reused)


def _answer_in_parts(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    template: TemplateDefinition,
    parsed: ParsedDocument,
    parts: list[Part],
    meter: Meter,
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
        usage = usage + reply.usage
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


def _answer(
    ledger: Ledger,
    item_id: int,
    run_id: str,
    llm: LLMConfig,
    messages: list[dict[str, str]],
    template: TemplateDefinition,
    meter: Meter,
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
