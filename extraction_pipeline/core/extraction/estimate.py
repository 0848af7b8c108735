"""The price before the launch: what a batch will send, cost and take, before it exists.

The documents' calls and tokens are counted as the extraction will ask (``token_counts.py``),
priced with litellm's model map (``pricing.py``), and timed by the model's per-minute budget and
the pool's pace so far (``pace.py``). The result is figures only: the command line
(cli/estimate_report.py) and the project page (web/estimate_text.py) put them in words.

Prompt caching is counted as the calls will meet it (``_cache_use``): the template (the system
prompt, the same for every document) is read from the provider's cache by every call but those sent
before the first answer came back (as many as the pool has slots), at the cache's read price; a
provider that caches only what is marked (Anthropic) charges those first calls for writing it, and,
when the batch asks the follow-up question, each paper asked whole for writing the paper too (the
follow-up then reads it). A prefix shorter than ``CACHE_MIN_TOKENS`` is not cached.

Not counted: the follow-up question (one more call per document whose recall check finds
possibly missed outcomes, known only after the answer; it reads the paper from the cache), the
adjudicator (asked only about disputed values), a repair call after an invalid answer, and smaller
questions after an answer cut at the output limit.

Pure domain: no Dagster, no web. The pool's slot count is given by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from extraction_pipeline.core.extraction.pace import NO_BUDGET_NEEDED, CallBudget, call_budget, seconds_per_document
from extraction_pipeline.core.extraction.pricing import Price, price_of, supports_provider_batches
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.extraction.token_counts import (
    AnswerLength,
    ChosenDocument,
    DocumentCount,
    DocumentText,
    ParseMode,
    Progress,
    TextSource,
    Unreadable,
    answer_length,
    chosen_documents,
    count_prompts,
    read_texts,
)
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.llm.gateway import LLMConfig, caches_only_marked, count_tokens, schema_prompt_tokens
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE

# The shortest prompt prefix a provider caches: OpenAI's and Anthropic's Sonnet and Opus figure
# (their prompt caching guides); Claude Haiku 4.5 and Gemini 2.5 Pro need more, so for them the
# estimate may count reads that will not come.
CACHE_MIN_TOKENS = 1024


class ModelRole(StrEnum):
    FIRST = "first"
    SECOND = "second"  # double extraction: the same prompts, independently


@dataclass(frozen=True)
class NewBatchTemplate:
    """The template version a new batch of ``project`` would freeze."""

    definition: TemplateDefinition
    project: str
    version: int
    saved: bool  # False: the batch saves it when it starts (a first version, or a newer base)


@dataclass(frozen=True)
class ModelEstimate:
    model: str
    role: ModelRole
    documents: int  # documents with at least one call to pay for
    already_answered: int  # documents whose every call's answer is stored (no cost)
    calls: int  # calls to pay for
    prompt_tokens: int
    answer: AnswerLength  # what each call is expected to answer
    answer_tokens: int
    price: Price
    cost_usd: float | None  # None: litellm has no price for the model
    batch_cost_usd: float | None  # None: no batch API (or no price)
    budget: CallBudget
    minutes_by_budget: float | None  # None: no budget known
    unreadable: list[Unreadable] = field(default_factory=list)  # papers this model cannot take
    cache_read_tokens: int = 0  # of prompt_tokens, expected to be read from the provider's cache
    cache_written_tokens: int = 0  # of prompt_tokens, expected to be written to it at its write price

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.answer_tokens


@dataclass(frozen=True)
class BatchEstimate:
    project: str
    template: NewBatchTemplate
    documents: int  # documents chosen
    fresh: bool
    models: list[ModelEstimate]
    unreadable: list[Unreadable]  # PDFs that cannot be parsed: listed, never counted
    sources: dict[TextSource, int]  # documents per source of their text
    llm_slots: int | None
    seconds_per_document: float | None  # the first model's median finished document, from the ledger
    minutes_by_slots: float | None

    @property
    def approximate(self) -> int:
        return self.sources.get(TextSource.QUICK, 0)

    @property
    def priced_by_litellm(self) -> bool:
        """Some model has prompts to pay for at a price from litellm's map."""
        return any(m.cost_usd is not None and m.prompt_tokens for m in self.models)

    @property
    def cost_usd(self) -> float | None:
        costs = [m.cost_usd for m in self.models]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def batch_cost_usd(self) -> float | None:
        """With ``--provider-batch``: the models it sends at the batch price, the others at the
        ordinary one (None: no model goes through a batch API, or a price is unknown)."""
        if not any(m.batch_cost_usd is not None for m in self.models):
            return None
        costs = [m.batch_cost_usd if m.batch_cost_usd is not None else m.cost_usd for m in self.models]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def minutes(self) -> float | None:
        """The expected duration: the slowest of the models' budgets and the pool's slots (they
        run side by side); None when no model's budget is known."""
        known = [m.minutes_by_budget for m in self.models if m.minutes_by_budget is not None]
        if not known or self.without_budget:  # a model without a budget may take any time
            return None
        return max([*known, *([self.minutes_by_slots] if self.minutes_by_slots is not None else [])])

    @property
    def without_budget(self) -> list[str]:
        """The models whose calls have no known budget (the offline extractor needs none)."""
        return [m.model for m in self.models if m.minutes_by_budget is None and m.budget.needed]


def template_for_new_batch(ledger: Ledger, project: str) -> NewBatchTemplate:
    """What ``create_batch`` would freeze (``current_template``), without saving anything: the
    latest version, the built-in base for a project without one, a newer base under the
    project's own fields."""
    latest = latest_version(ledger, project)
    if latest is None:
        return NewBatchTemplate(BASE_TEMPLATES[RCT_BASE], project, 1, saved=False)
    base = BASE_TEMPLATES.get(latest.definition.base)
    if base is not None and latest.definition.base_version < base.base_version:
        rebased = replace(
            base, custom_fields=latest.definition.custom_fields, instructions=latest.definition.instructions
        )
        return NewBatchTemplate(rebased, project, latest.version + 1, saved=False)
    return NewBatchTemplate(latest.definition, project, latest.version, saved=True)


def estimate_batch(
    ledger: Ledger,
    *,
    project: str,
    document_ids: Sequence[int],
    llm: LLMConfig,
    second_model: str | None = None,
    fresh: bool = False,
    parse: ParseMode = ParseMode.PARSE,
    parse_options: ParseOptions | None = None,
    pinned_budget: tuple[int | None, int | None] = (None, None),
    llm_slots: int | None = None,
    progress: Progress | None = None,
    follow_up: bool = False,
) -> BatchEstimate:
    """The estimate for a batch of ``document_ids`` of ``project`` with ``llm`` (and
    ``second_model``, double extraction on the same endpoint). ``pinned_budget``: the tokens and
    requests per minute the environment sets for ``llm``'s model (every run states them again).
    ``llm_slots``: the `llm` pool's size (None: unknown). ``follow_up``: the batch asks the
    follow-up question (the first model's papers are then cached for it)."""
    options = parse_options or ParseOptions()
    template = template_for_new_batch(ledger, project)
    chosen = chosen_documents(ledger, document_ids)
    texts, unreadable = read_texts(ledger, chosen, options, parse, progress)
    configs = [llm] + ([llm.for_model(second_model)] if second_model else [])
    models = []
    for number, config in enumerate(configs):
        role = ModelRole.FIRST if number == 0 else ModelRole.SECOND
        pinned = pinned_budget if role is ModelRole.FIRST else (None, None)
        asked = _Asked(fresh, pinned, role, follow_up and role is ModelRole.FIRST, llm_slots)
        models.append(_model_estimate(ledger, config, template.definition, chosen, texts, asked))
    sources: dict[TextSource, int] = {}
    for text in texts.values():
        sources[text.source] = sources.get(text.source, 0) + 1
    per_document = seconds_per_document(ledger, llm.effective_model)
    to_call = models[0].documents if models else 0
    by_slots = to_call * per_document / llm_slots / 60 if per_document and llm_slots else None
    return BatchEstimate(
        project=project,
        template=template,
        documents=len(chosen),
        fresh=fresh,
        models=models,
        unreadable=unreadable,
        sources=sources,
        llm_slots=llm_slots,
        seconds_per_document=per_document,
        minutes_by_slots=by_slots,
    )


@dataclass(frozen=True)
class _Asked:
    """How one model is asked: what ``_model_estimate`` needs beyond the documents."""

    fresh: bool
    pinned: tuple[int | None, int | None]
    role: ModelRole
    follow_up: bool
    llm_slots: int | None


def _model_estimate(
    ledger: Ledger,
    llm: LLMConfig,
    template: TemplateDefinition,
    chosen: list[ChosenDocument],
    texts: dict[int, DocumentText],
    asked: _Asked,
) -> ModelEstimate:
    model, role, pinned = llm.effective_model, asked.role, asked.pinned
    counts, too_long = count_prompts(ledger, llm, template, chosen, texts, fresh=asked.fresh)
    answer = answer_length(ledger, model)
    calls = sum(c.calls_to_pay for c in counts)
    prompt_tokens = sum(c.prompt_tokens for c in counts)
    answer_total = answer.tokens_per_call * calls
    price = price_of(model)
    # Only what `--provider-batch` sends goes at the batch price: the first model's first prompts,
    # on a provider whose batch API is driven here.
    batch_cost = None
    if price.known and price.has_batch_api and role is ModelRole.FIRST and supports_provider_batches(model):
        batch_cost = price.batch_cost(prompt_tokens, answer_total)
    read, written = _cache_use(llm, template, counts, price, asked)
    budget = NO_BUDGET_NEEDED if llm.is_offline else call_budget(ledger, model, pinned)
    return ModelEstimate(
        model=model,
        role=role,
        documents=sum(1 for c in counts if c.calls_to_pay),
        already_answered=sum(1 for c in counts if not c.calls_to_pay),
        calls=calls,
        prompt_tokens=prompt_tokens,
        answer=answer,
        answer_tokens=answer_total,
        price=price,
        cost_usd=price.cached_cost(prompt_tokens, answer_total, read=read, written=written),
        batch_cost_usd=batch_cost,
        budget=budget,
        minutes_by_budget=budget.minutes(prompt_tokens + answer_total, calls),
        unreadable=too_long,
        cache_read_tokens=read,
        cache_written_tokens=written,
    )


def _cache_use(
    llm: LLMConfig, template: TemplateDefinition, counts: list[DocumentCount], price: Price, asked: _Asked
) -> tuple[int, int]:
    """(read, written): the first asks' prompt tokens expected to be read from the provider's cache
    and written to it at its write price (see the module's docstring)."""
    calls = sum(c.calls_to_pay for c in counts)
    if llm.is_offline or not price.known or not calls:
        return 0, 0
    # The system prompt (the template), after the response schema where the provider bills and
    # caches it as the prompt's first part (OpenAI).
    shared = count_tokens(llm, build_messages(template, [])[:1]) + schema_prompt_tokens(llm, template)
    shared = shared if shared >= CACHE_MIN_TOKENS else 0
    first_wave = min(calls, asked.llm_slots or 1)  # sent before any answer came back: none reads
    read = shared * (calls - first_wave) if price.cache_read_per_token is not None else 0
    if not caches_only_marked(llm):
        return read, 0  # cached unasked: nothing to pay for the write
    written = shared * first_wave
    if asked.follow_up:  # a paper asked whole is marked for its follow-up to read
        written += sum(max(0, c.prompt_tokens - shared) for c in counts if c.calls == 1 and c.calls_to_pay == 1)
    return read, written
