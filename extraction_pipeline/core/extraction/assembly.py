"""The answer's assembly: what a document's extraction is made of, call by call.

One model's answer (paid once: a stored answer to the same prompt is reused), a long paper in
parts merged into one, the second model's independent answer and the adjudicator's suggestions
for double extraction; every call counted by a ``Meter`` as it returns, so a failure later still
records what was paid for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from extraction_pipeline.core.errors import AnswerCutError
from extraction_pipeline.core.extraction.adjudication import adjudicate
from extraction_pipeline.core.extraction.consensus import agreement_rate, align, compare
from extraction_pipeline.core.extraction.follow_up import check_recall, follows_up
from extraction_pipeline.core.extraction.grounded import GroundedFields, add_checks, ground_entries, stored_fields
from extraction_pipeline.core.extraction.long_papers import Part, merge_parts, plan_parts
from extraction_pipeline.core.extraction.narrowing import module_questions
from extraction_pipeline.core.extraction.prompt_cache import PromptCache, prefix_key
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import (
    StoredAnswer,
    answer_for,
    answer_key,
    second_model_of,
    store_answer,
    wants_fresh_answers,
)
from extraction_pipeline.core.ledger.audit import record_prompt
from extraction_pipeline.core.ledger.templates import TemplateVersion
from extraction_pipeline.core.llm.gateway import (
    LLMConfig,
    LLMResult,
    cache_lifetime,
    complete_extraction,
    fits_window,
    parse_answer,
)
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.grounding import Grounder


@dataclass(frozen=True)
class Assembled:
    """The result to store for the document, what its calls cost, and its first model's fields."""

    result: dict[str, Any]
    usage: Usage
    fields: GroundedFields
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
    follow_up = follows_up(ledger, item_id)
    cache = PromptCache(cache_lifetime(llm), follow_up=follow_up)
    first = ModelAsk(ledger, item_id, run_id, llm, template, parsed, meter, cache)
    reply, reused, grounded, part_notes = grounded_answer(first)
    checked = check_recall(
        grounded,
        parsed,
        template,
        follow_up=follow_up,
        # Parts of a long paper carry their pages; a cut answer asked module by module does not.
        whole_paper_fits=all(note.get("pages", "all") == "all" for note in part_notes),
        ask=lambda messages, asked: _answer(first, messages, asked, later=False),
        fits=lambda messages: fits_window(llm, messages),
    )
    grounded = checked.fields
    result: dict[str, Any] = {
        "model": reply.usage.model,
        "repaired": reply.repaired,
        "template": {"id": frozen.id, "version": frozen.version} if frozen else None,
        "fields": stored_fields(grounded),
        # None: the check failed (its note is stored): the review page says "not checked".
        "possibly_missed": None if checked.missed is None else [item.as_dict() for item in checked.missed],
    }
    if checked.notes:
        result["recall_notes"] = checked.notes
    if checked.follow_up is not None:
        result["follow_up"] = checked.follow_up
    if reused is not None:
        result["reused"] = reused
    if part_notes:
        result["parts"] = part_notes
    usage = reply.usage if checked.usage is None else reply.usage + checked.usage
    second_model, adjudicator = second_model_of(ledger, item_id)
    if second_model:
        second = _second_extraction(first.by(second_model), grounded)
        result.update(second.result(grounded, usage))
        usage = usage + second.usage
        if adjudicator:
            judged, judge_usage = adjudicate(
                ledger,
                item_id=item_id,
                run_id=run_id,
                llm=llm.for_model(adjudicator),
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


@dataclass(frozen=True)
class ModelAsk:
    """One model asked about one document: the paper and the template it is asked with, the item
    and run its calls are recorded under, and the meter they are counted on as they return (the
    first model's and the second model's answers differ only in ``llm``)."""

    ledger: Ledger
    item_id: int
    run_id: str
    llm: LLMConfig
    template: TemplateDefinition
    parsed: ParsedDocument
    meter: Meter
    cache: PromptCache  # its calls about the paper, as the provider's prompt cache sees them

    def by(self, model: str) -> ModelAsk:
        """The same questions to another model (with its own key and endpoint: ``for_model``, and
        its own provider's cache; no follow-up is asked of it)."""
        llm = self.llm.for_model(model)
        return replace(self, llm=llm, cache=PromptCache(cache_lifetime(llm)))


def grounded_answer(ask: ModelAsk) -> tuple[LLMResult, dict[str, Any] | None, GroundedFields, list[dict[str, Any]]]:
    """One model's grounded answer: (reply with its usage, reuse note, fields, notes on the calls
    when there was more than one)."""
    llm = ask.llm
    questions = first_questions(ask.template, ask.parsed, llm)
    if len(questions) == 1 and questions[0].part is None:  # asked whole: the follow-up reads its prefix
        questions = [replace(questions[0], later=ask.cache.follow_up)]
    asked = Asking(ask, Grounder(ask.parsed))
    answers = [
        answer
        for number, question in enumerate(questions, start=1)
        for answer in asked.fitting(question, len(questions), number)
    ]
    if len(answers) == 1 and not asked.cut:
        [one] = answers
        return one.reply, one.reused, add_checks(one.fields, ask.parsed), []
    # The merged fields are the result; the combined reply carries what the calls cost.
    usage = sum((answer.reply.usage for answer in answers), asked.cut_usage or Usage(llm.effective_model))
    combined = LLMResult(answers[-1].reply.output, usage, repaired=any(a.reply.repaired for a in answers))
    stored = [answer.reused for answer in answers if answer.reused is not None]
    reused = None
    if len(stored) == len(answers) and not asked.cut:  # every call's answer was already paid for
        reused = {
            **stored[0],
            **{key: sum(s[key] for s in stored) for key in ("tokens_in", "tokens_out", "cost_usd")},
        }
    notes = [answer.note for answer in answers]
    notes.extend({"cut": cut} for cut in asked.cut)
    return combined, reused, add_checks(merge_parts([answer.fields for answer in answers]), ask.parsed), notes


def first_questions(template: TemplateDefinition, parsed: ParsedDocument, llm: LLMConfig) -> list[Question]:
    """What a document's first answer asks: the whole paper in one call, or a long one in parts."""
    parts = plan_parts(template, parsed, llm)
    return [Question(template, None)] if parts is None else [Question(template, part) for part in parts]


def first_prompts(template: TemplateDefinition, parsed: ParsedDocument, llm: LLMConfig) -> list[list[dict[str, str]]]:
    """The prompts of ``first_questions``, exactly as the extraction sends them (a provider batch
    submits these, and the document's run finds their answers under the same keys)."""
    questions = first_questions(template, parsed, llm)
    return [
        question.messages(template, parsed, number, len(questions))
        for number, question in enumerate(questions, start=1)
    ]


@dataclass(frozen=True)
class Question:
    """What one call asks: a template (the whole one, or one module of it) about some pages
    (``part``; None: the whole paper)."""

    template: TemplateDefinition
    part: Part | None
    module: str | None = None  # set when the template was narrowed to one module ("outcomes with arms")
    later: bool = False  # another call about the same prompt prefix is expected right after this one

    def messages(self, whole: TemplateDefinition, parsed: ParsedDocument, number: int, of: int) -> list[dict[str, str]]:
        """The prompt: ``whole`` (the batch's template) first, as every call of the batch repeats
        it, this question's narrower template (if it is one) in the call's own part."""
        if self.part is None:
            return build_messages(whole, parsed.pages_text, parsed.tables, only=self.template)
        return self.part.messages(whole, parsed, number, of, only=self.template)

    @property
    def label(self) -> str:
        pages = f"pages {self.part.label}" if self.part else "the whole paper"
        return f"{self.module} on {pages}" if self.module else pages


@dataclass(frozen=True)
class Answer:
    reply: LLMResult
    reused: dict[str, Any] | None
    fields: GroundedFields
    note: dict[str, Any]


@dataclass
class Asking:
    """Asks the questions one model's answer needs; an answer cut at the output limit is asked
    again in smaller questions: module by module, then (a repeated module such as outcomes) half
    the pages at a time, so a paper with many outcomes still completes with every value grounded.
    Each answer is grounded against the whole document."""

    ask: ModelAsk
    grounder: Grounder
    cut: list[str] = field(default_factory=list)  # what was cut, in words
    cut_usage: Usage | None = None  # what the cut answers cost (paid, and part of the document's cost)

    def fitting(self, question: Question, of: int, number: int = 1) -> list[Answer]:
        try:
            return [self._ask(question, number, of)]
        except AnswerCutError as exc:
            if exc.usage is not None:
                self.cut_usage = exc.usage if self.cut_usage is None else self.cut_usage + exc.usage
            smaller = self._smaller(question)
            if not smaller:
                raise AnswerCutError(
                    f"{exc}, even when asked for {question.label} alone; raise EXTRACTION_OUTPUT_TOKENS "
                    "or use a model with a larger output limit",
                    output_tokens=exc.output_tokens,
                    usage=None,  # every cut answer is already on the meter
                ) from exc
            self.cut.append(f"{exc} for {question.label}: asked again in {len(smaller)} smaller questions")
            by_pages = smaller[0].part != question.part  # halves are numbered as parts of their own
            if not by_pages:  # module by module over the same pages: each but the last is read again
                smaller = [
                    replace(piece, later=k < len(smaller) or question.later) for k, piece in enumerate(smaller, start=1)
                ]
            return [
                answer
                for k, piece in enumerate(smaller, start=1)
                for answer in self.fitting(piece, len(smaller) if by_pages else of, k if by_pages else number)
            ]

    def _smaller(self, question: Question) -> list[Question]:
        """The same question module by module (a module naming arms with the arms: see
        ``core.extraction.narrowing``); a single repeated module about half the pages."""
        template = question.template
        if question.module is None:
            narrowed = module_questions(template)
            if len(narrowed) > 1:
                return [Question(n.template, question.part, n.label) for n in narrowed]
        repeated = any(m.repeated for m in template.all_modules())
        first, last = (
            (question.part.first_page, question.part.last_page)
            if question.part
            else (1, len(self.ask.parsed.pages_text))
        )
        if not repeated or first == last:
            return []  # a single-valued module, or one page: nothing smaller to ask
        middle = (first + last) // 2
        return [
            Question(template, Part(first, middle), question.module),
            Question(template, Part(middle + 1, last), question.module),
        ]

    def _ask(self, question: Question, number: int, of: int) -> Answer:
        messages = question.messages(self.ask.template, self.ask.parsed, number, of)
        reply, reused = _answer(self.ask, messages, question.template, later=question.later)
        note: dict[str, Any] = {"pages": question.part.label if question.part else "all", "reused": reused is not None}
        if question.module:
            note["module"] = question.module
        return Answer(reply, reused, ground_entries(question.template, reply.output, self.grounder), note)


@dataclass(frozen=True)
class SecondExtraction:
    model: str
    fields: GroundedFields
    usage: Usage
    reused: dict[str, Any] | None

    def result(self, first: GroundedFields, first_usage: Usage) -> dict[str, Any]:
        """What double extraction adds to the stored result."""
        agreement = compare(first, self.fields)

        def spent(usage: Usage) -> dict[str, Any]:
            return {"tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out, "cost_usd": usage.cost_usd}

        return {
            "second": {"model": self.model, "fields": stored_fields(self.fields), "reused": self.reused},
            "agreement": agreement,
            "agreement_rate": agreement_rate(agreement),
            "usage_by_model": {first_usage.model: spent(first_usage), self.model: spent(self.usage)},
        }


def _second_extraction(ask: ModelAsk, first: GroundedFields) -> SecondExtraction:
    """The same prompt to the second model, independently (it never sees the first answer); its
    entries aligned to ``first``'s by meaning, so each path names the same arm, outcome result or
    comparison in both answers."""
    reply, reused, grounded, _parts = grounded_answer(ask)
    return SecondExtraction(ask.llm.effective_model, align(first, grounded), reply.usage, reused)


def _answer(
    ask: ModelAsk, messages: list[dict[str, str]], template: TemplateDefinition, *, later: bool
) -> tuple[LLMResult, dict[str, Any] | None]:
    """The model's answer to ``messages`` (asked with ``template``: the whole one, or one module
    of it): the one already paid for when the exact same prompt went to the same model before
    (unless the batch asks for fresh answers), else a new call, stored for next time. The offline
    extractor costs nothing and is not stored. ``later``: another call about the same prefix comes
    right after this one (``PromptCache`` decides the cache marks)."""
    ledger, item_id, llm, meter = ask.ledger, ask.item_id, ask.llm, ask.meter
    key = answer_key(llm.effective_model, messages)
    stored = None if llm.is_offline else answer_for(ledger, key, item_id)
    # A fresh batch asks again, except what this very document already paid for (its provider
    # batch's answer, or an earlier attempt's): that answer is this batch's own.
    if stored is not None and (stored.item_id == item_id or not wants_fresh_answers(ledger, item_id)):
        output = parse_answer(stored.content, template)
        reused = {
            "item": stored.item_id,
            "own": stored.item_id == item_id,  # paid by this document (its provider batch, an earlier attempt)
            "paid_at": stored.created_at.isoformat(timespec="seconds"),
            "tokens_in": stored.tokens_in,
            "tokens_out": stored.tokens_out,
            "cost_usd": stored.cost_usd,
        }
        return LLMResult(output, Usage(stored.model), repaired=False, content=stored.content), reused
    record_prompt(ledger, item_id=item_id, run_id=ask.run_id, model=llm.effective_model, messages=messages)
    prefix = prefix_key(messages)
    marked, sent_at = ask.cache.marks(prefix, later=later), time.monotonic()
    try:
        reply = complete_extraction(llm, messages, template, cache=marked)
    except AnswerCutError as cut:
        ask.cache.sent(prefix, marked, sent_at)  # a cut answer's prompt was read and cached all the same
        if cut.usage is not None:
            meter.add(cut.usage)  # paid for, even though it cannot be used
        raise
    ask.cache.sent(prefix, marked, sent_at)
    meter.add(reply.usage)
    if not llm.is_offline and reply.content:
        store_answer(ledger, StoredAnswer.paid(key, reply.content, reply.usage, item_id))
    return reply, None
