"""The estimate before a launch (core/extraction/estimate.py) in words: dollars, durations, where
each figure comes from. The project page shows these words, and `batch create --estimate`
(cli/estimate_report.py) prints the same ones, so the two never disagree about a launch.

Only core imports here: the command line loads this module without the web framework.
"""

from __future__ import annotations

from extraction_pipeline.core.extraction.estimate import BatchEstimate, ModelEstimate, ModelRole, NewBatchTemplate
from extraction_pipeline.core.extraction.pace import CallBudget, Limit, LimitOrigin
from extraction_pipeline.core.extraction.pricing import PriceSource
from extraction_pipeline.core.extraction.token_counts import DEFAULT_ANSWER_TOKENS, AnswerLength, TextSource

NOT_COUNTED = (
    "not counted: the follow-up question (one more call per document with possibly missed outcomes, "
    "when the batch asks for it), the adjudicator, repair calls and answers cut at the output limit"
)
LITELLM_PRICES = "prices from litellm's model map; the provider's invoice decides"
NO_BUDGET_KNOWN = "no budget known"
NO_BUDGET_NEEDED = "no budget needed"

ROLES = {ModelRole.FIRST: "first model", ModelRole.SECOND: "second model"}
TEXT_SOURCES = {
    TextSource.CACHED: "cached parse",
    TextSource.PARSED: "parsed now",
    TextSource.QUICK: "quick text read (approximate: no tables)",
}
LIMIT_ORIGINS = {
    LimitOrigin.CONFIGURED: "configured",
    LimitOrigin.LEARNED: "learned from the provider",
    LimitOrigin.BOTH: "configured and learned",
}


def cache_words(read: int, written: int) -> str:
    """The prompt tokens' share of the provider's prompt cache, in words ('' when none)."""
    said = [f"{read:,} read from the provider's cache" if read else "", f"{written:,} written to it" if written else ""]
    return "; ".join(s for s in said if s)


def money(value: float | None, unknown: str) -> str:
    if value is None:
        return unknown or "price unknown"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def duration(minutes: float | None) -> str:
    if minutes is None:
        return NO_BUDGET_KNOWN
    if minutes < 1:
        return "under a minute"
    if minutes < 90:
        return f"about {minutes:.0f} min"
    return f"about {minutes / 60:.1f} h"


def template_label(template: NewBatchTemplate) -> str:
    """As the ledger labels a saved version (``TemplateVersion.label``), and says when it is not saved yet."""
    definition = template.definition
    later = "" if template.saved else "; saved when the batch starts"
    return f"{template.project} v{template.version} ({definition.base} base v{definition.base_version}{later})"


def answer_source(answer: AnswerLength) -> str:
    """Which figure the expected answer length is."""
    if not answer.stored_answers:
        return (
            f"default {DEFAULT_ANSWER_TOKENS:,} tokens per call (the corpus median answer; "
            f"no stored answer of {answer.model})"
        )
    return (
        f"median of {answer.stored_answers} stored answer(s) of {answer.model}: "
        f"{answer.tokens_per_call:,} tokens per call"
    )


def price_note(model: ModelEstimate) -> str:
    """What the price leaves out, or why there is none ("" when nothing)."""
    price = model.price
    if price.source is PriceSource.UNKNOWN:
        return f"litellm has no price for {model.model}"
    if price.source is PriceSource.OFFLINE:
        return "the offline extractor costs nothing"
    return "" if price.has_batch_api else "no batch API"


def budget_source(budget: CallBudget) -> str:
    """Where the model's per-minute budget comes from."""
    if not budget.needed:
        return NO_BUDGET_NEEDED
    limits = [(budget.tokens, "tokens"), (budget.requests, "requests")]
    said = [_limit(limit, unit) for limit, unit in limits if limit is not None]
    return ", ".join(said) if said else NO_BUDGET_KNOWN


def _limit(limit: Limit, unit: str) -> str:
    return f"{limit.per_minute:,} {unit}/min ({LIMIT_ORIGINS[limit.origin]})"


def duration_words(estimate: BatchEstimate) -> str:
    """The expected duration, or which models have no known budget when some have one."""
    waiting = estimate.without_budget
    if estimate.minutes is None and waiting and len(waiting) < len(estimate.models):
        return f"no budget known for {', '.join(waiting)}"
    return duration(estimate.minutes)


def notes(estimate: BatchEstimate) -> list[str]:
    """What the figures leave out, and where the prices come from."""
    return [NOT_COUNTED, *([LITELLM_PRICES] if estimate.priced_by_litellm else [])]
