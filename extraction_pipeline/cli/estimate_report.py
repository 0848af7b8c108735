"""`batch create --estimate` as the terminal shows it: the estimate's lines of text, and its
``--json`` form (the figures with the same words the lines use, for scripts)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from extraction_pipeline.core.extraction.estimate import BatchEstimate, ModelEstimate, ModelRole
from extraction_pipeline.web.estimate_text import (
    ROLES,
    TEXT_SOURCES,
    answer_source,
    budget_source,
    cache_words,
    duration,
    duration_words,
    money,
    notes,
    price_note,
    template_label,
)


def describe(estimate: BatchEstimate) -> list[str]:
    """The estimate in lines of text."""
    lines = [
        f"estimate for {estimate.documents} document(s) of project {estimate.project}, "
        f"template {template_label(estimate.template)}" + ("; fresh answers asked" if estimate.fresh else "")
    ]
    if estimate.sources:
        said = sorted((TEXT_SOURCES[source], count) for source, count in estimate.sources.items())
        lines.append("text: " + ", ".join(f"{count} {source}" for source, count in said))
    for model in estimate.models:
        lines.append(f"{ROLES[model.role]} {model.model}:")
        lines.append(
            f"  documents to send: {model.documents} ({model.calls} call(s)); already answered, no cost: "
            f"{model.already_answered}"
        )
        cached = cache_words(model.cache_read_tokens, model.cache_written_tokens)
        lines.append(f"  prompt tokens: {model.prompt_tokens:,}" + (f" ({cached})" if cached else ""))
        lines.append(f"  answer tokens: {model.answer_tokens:,} ({answer_source(model.answer)})")
        lines.append(f"  cost: {money(model.cost_usd, price_note(model))}")
        lines.append(f"  with the provider's batch API: {_batch(model)}")
        lines.append(
            f"  budget: {budget_source(model.budget)}; duration by budget: {duration(model.minutes_by_budget)}"
        )
        for problem in model.unreadable:
            lines.append(f"  cannot be sent: document {problem.document_id} {problem.filename}: {problem.reason}")
    if len(estimate.models) > 1:
        lines.append(
            f"total cost: {money(estimate.cost_usd, 'price unknown')}; with batch APIs: "
            f"{money(estimate.batch_cost_usd, 'no model goes through a batch API')}"
        )
    slots = f"{estimate.llm_slots} llm slot(s)" if estimate.llm_slots else "llm slots unknown"
    if estimate.minutes_by_slots is not None and estimate.seconds_per_document is not None:
        slots += f", {estimate.seconds_per_document:.0f} s per document so far: {duration(estimate.minutes_by_slots)}"
    else:
        slots += " (no finished document of this model yet to time)"
    lines.append(f"expected duration: {duration_words(estimate)} ({slots})")
    if estimate.approximate:
        lines.append(
            f"approximate: {estimate.approximate} document(s) not parsed yet were counted from their plain text "
            "(their tables are left out; `batch create --estimate` without --quick parses them)"
        )
    for problem in estimate.unreadable:
        lines.append(f"cannot be parsed: document {problem.document_id} {problem.filename}: {problem.reason}")
    lines.extend(f"note: {note}" for note in notes(estimate))
    return lines


def _batch(model: ModelEstimate) -> str:
    if model.batch_cost_usd is not None:
        return money(model.batch_cost_usd, "")
    if model.role is ModelRole.FIRST:
        return "no batch API (ordinary calls)"
    return "no batch API (a second model is asked by ordinary calls)"


def as_json(estimate: BatchEstimate) -> dict[str, Any]:
    """The ``--json`` form: every figure, each source in the words the lines use."""
    return {
        "project": estimate.project,
        "template": template_label(estimate.template),
        "documents": estimate.documents,
        "fresh": estimate.fresh,
        "models": [_model_json(model) for model in estimate.models],
        "unreadable": [asdict(problem) for problem in estimate.unreadable],
        "sources": {TEXT_SOURCES[source]: count for source, count in estimate.sources.items()},
        "llm_slots": estimate.llm_slots,
        "seconds_per_document": estimate.seconds_per_document,
        "minutes_by_slots": estimate.minutes_by_slots,
        "notes": notes(estimate),
        "cost_usd": estimate.cost_usd,
        "batch_cost_usd": estimate.batch_cost_usd,
        "minutes": estimate.minutes,
        "approximate_documents": estimate.approximate,
        "duration": duration_words(estimate),
    }


def _model_json(model: ModelEstimate) -> dict[str, Any]:
    return {
        "model": model.model,
        "role": ROLES[model.role],
        "documents": model.documents,
        "already_answered": model.already_answered,
        "calls": model.calls,
        "prompt_tokens": model.prompt_tokens,
        "cache_read_tokens": model.cache_read_tokens,
        "cache_written_tokens": model.cache_written_tokens,
        "answer_tokens_per_call": model.answer.tokens_per_call,
        "answer_source": answer_source(model.answer),
        "answer_tokens": model.answer_tokens,
        "cost_usd": model.cost_usd,
        "batch_cost_usd": model.batch_cost_usd,
        "price_note": price_note(model),
        "tokens_per_minute": model.budget.tokens_per_minute,
        "requests_per_minute": model.budget.requests_per_minute,
        "budget_source": budget_source(model.budget),
        "minutes_by_budget": model.minutes_by_budget,
        "unreadable": [asdict(problem) for problem in model.unreadable],
        "tokens": model.tokens,
    }
