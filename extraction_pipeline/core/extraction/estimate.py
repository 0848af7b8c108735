"""The price before the launch: what a batch will send, cost and take, counted before it exists.

Counted exactly as the extraction will ask (``assembly.py``): for each document and model, the
real prompt (``build_messages`` with the template a new batch would freeze and the document's
parsed pages and tables; a paper over the model's window in its parts, ``plan_parts``), counted
with the gateway's ``count_tokens``. A call whose exact prompt the same model already answered
(``answer_key`` in ``model_answers``) costs nothing unless the batch asks for fresh answers, so
those documents are counted apart.

The answer is not known before it is written: each call is expected to answer the median of
this model's stored answers (``model_answers``), or ``DEFAULT_ANSWER_TOKENS`` (the corpus
median) while the ledger holds none; the estimate says which.

The text of a document not parsed yet (``ParseMode``): ``PARSE`` parses it the way a run would
(isolated, cached by content: the batch's runs then find it parsed, so the work is not lost) and
the count is exact; ``QUICK`` reads the PDF's plain text in this process (no tables, no child
process: milliseconds per paper) and marks those documents approximate. The command line parses
(a user asking for a price wants the real one, and pays the parse only once); the project page
reads quickly (a page must answer in seconds, and its upload parses new PDFs in the background).

Not counted (said in ``notes``): the follow-up question (one more call per document whose recall
check finds possibly missed outcomes, known only after the answer), the adjudicator (asked only
about disputed values), a repair call after an invalid answer, and smaller questions after an
answer cut at the output limit.

Pure domain: no Dagster, no web. The pool's slot count is given by the caller.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import desc, select

from extraction_pipeline.core.errors import ExtractionError
from extraction_pipeline.core.extraction.long_papers import plan_parts
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import answer_key
from extraction_pipeline.core.ledger.budgets import get_budget
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.schema import batch_items, documents, model_answers, parsed_documents
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.llm.gateway import LLMConfig, count_tokens
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.pdf.parsing import ParseOptions, parse_document
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE

# The median answer of the real corpus (23 trial reports, one call each): what a call is expected
# to write while the ledger holds no answer of the model yet.
DEFAULT_ANSWER_TOKENS = 1057
# How many of a model's latest stored answers (and finished documents) make its median: recent
# enough to follow a template change, many enough to be steady.
HISTORY = 500
PARSE_WORKERS = 4  # parses at once (each a child process): a CLI estimate of 500 new PDFs in minutes


class ParseMode(StrEnum):
    PARSE = "parse"  # parse what is not parsed yet (cached: the runs reuse it); exact
    QUICK = "quick"  # plain PDF text of what is not parsed yet, in-process; approximate


class TextSource(StrEnum):
    CACHED = "cached parse"
    PARSED = "parsed now"
    QUICK = "quick text read (approximate: no tables)"


@dataclass(frozen=True)
class Unreadable:
    """A document the estimate (and so the batch) cannot send: a PDF that does not parse, or a
    paper no split fits into the model's window."""

    document_id: int
    filename: str
    reason: str
    model: str | None = None  # set when only this model cannot take it


@dataclass(frozen=True)
class DocumentCount:
    """One document as one model will be asked about it."""

    document_id: int
    filename: str
    model: str
    source: TextSource
    calls: int  # 1, or the parts of a long paper
    prompt_tokens: int  # of the calls still to pay for
    calls_to_pay: int  # calls whose exact prompt the model has not answered yet (all, with fresh)


@dataclass(frozen=True)
class Price:
    """Dollars per token from litellm's model map; batch prices only where the provider has a
    batch API (``input_cost_per_token_batches``)."""

    known: bool
    input_per_token: float = 0.0
    output_per_token: float = 0.0
    batch_input_per_token: float | None = None
    batch_output_per_token: float | None = None
    note: str = ""

    @property
    def has_batch_api(self) -> bool:
        return self.batch_input_per_token is not None and self.batch_output_per_token is not None


@dataclass(frozen=True)
class ModelEstimate:
    model: str
    role: str  # "first model" | "second model"
    documents: int  # documents with at least one call to pay for
    already_answered: int  # documents whose every call's answer is stored (no cost)
    calls: int  # calls to pay for
    prompt_tokens: int
    answer_tokens_per_call: int
    answer_source: str  # which figure the answer length is, in words
    answer_tokens: int
    cost_usd: float | None  # None: litellm has no price for the model
    batch_cost_usd: float | None  # None: no batch API (or no price)
    price_note: str
    tokens_per_minute: int | None
    requests_per_minute: int | None
    budget_source: str  # where the budget comes from, or "no budget known"
    minutes_by_budget: float | None  # None: no budget known
    unreadable: list[Unreadable] = field(default_factory=list)  # papers this model cannot take

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.answer_tokens


@dataclass(frozen=True)
class BatchEstimate:
    project: str
    template: str  # the label of the template version a new batch freezes
    documents: int  # documents chosen
    fresh: bool
    models: list[ModelEstimate]
    unreadable: list[Unreadable]  # PDFs that cannot be parsed: listed, never counted
    sources: dict[str, int]  # documents per TextSource value
    llm_slots: int | None
    seconds_per_document: float | None  # the first model's median finished document, from the ledger
    minutes_by_slots: float | None
    notes: list[str]

    @property
    def approximate(self) -> int:
        return self.sources.get(TextSource.QUICK.value, 0)

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
        return [m.model for m in self.models if m.minutes_by_budget is None and m.budget_source != "no budget needed"]

    @property
    def duration_words(self) -> str:
        if self.minutes is None and self.without_budget and len(self.without_budget) < len(self.models):
            return f"no budget known for {', '.join(self.without_budget)}"
        return duration(self.minutes)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {
            "cost_usd": self.cost_usd,
            "batch_cost_usd": self.batch_cost_usd,
            "minutes": self.minutes,
            "approximate_documents": self.approximate,
            "duration": self.duration_words,
        }
        for model, estimate in zip(data["models"], self.models, strict=True):
            model["tokens"] = estimate.tokens
        return data


@dataclass(frozen=True)
class _Document:
    id: int
    filename: str
    sha256: str
    stored_path: str


@dataclass(frozen=True)
class _Text:
    parsed: ParsedDocument
    source: TextSource


Progress = Callable[[int, int, str], None]  # (parsed so far, to parse, file name)


def template_for_new_batch(ledger: Ledger, project: str) -> tuple[TemplateDefinition, str]:
    """What ``create_batch`` would freeze (``current_template``), without saving anything: the
    latest version, the built-in base for a project without one, a newer base under the
    project's own fields."""
    latest = latest_version(ledger, project)
    if latest is None:
        builtin = BASE_TEMPLATES[RCT_BASE]
        return builtin, f"{project} v1 ({builtin.base} base v{builtin.base_version}; saved when the batch starts)"
    base = BASE_TEMPLATES.get(latest.definition.base)
    if base is not None and latest.definition.base_version < base.base_version:
        rebased = replace(
            base, custom_fields=latest.definition.custom_fields, instructions=latest.definition.instructions
        )
        return rebased, (
            f"{project} v{latest.version + 1} ({base.base} base v{base.base_version}; saved when the batch starts)"
        )
    return latest.definition, latest.label


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
) -> BatchEstimate:
    """The estimate for a batch of ``document_ids`` of ``project`` with ``llm`` (and
    ``second_model``, double extraction on the same endpoint). ``pinned_budget``: the tokens and
    requests per minute the environment sets for ``llm``'s model (every run states them again).
    ``llm_slots``: the `llm` pool's size (None: unknown)."""
    options = parse_options or ParseOptions()
    template, label = template_for_new_batch(ledger, project)
    chosen = _documents(ledger, document_ids)
    texts, unreadable = _texts(ledger, chosen, options, parse, progress)
    configs = [llm] + ([replace(llm, model=second_model)] if second_model else [])
    models = []
    for number, config in enumerate(configs):
        pinned = pinned_budget if number == 0 else (None, None)
        models.append(_model_estimate(ledger, config, template, chosen, texts, fresh, pinned, number))
    sources: dict[str, int] = {}
    for text in texts.values():
        sources[text.source.value] = sources.get(text.source.value, 0) + 1
    per_document = _seconds_per_document(ledger, llm.effective_model)
    to_call = models[0].documents if models else 0
    by_slots = to_call * per_document / llm_slots / 60 if per_document and llm_slots else None
    notes = [
        "not counted: the follow-up question (one more call per document with possibly missed outcomes, "
        "when the batch asks for it), the adjudicator, repair calls and answers cut at the output limit"
    ]
    if any(m.cost_usd is not None and m.prompt_tokens for m in models):
        notes.append("prices from litellm's model map; the provider's invoice decides")
    return BatchEstimate(
        project=project,
        template=label,
        documents=len(chosen),
        fresh=fresh,
        models=models,
        unreadable=unreadable,
        sources=sources,
        llm_slots=llm_slots,
        seconds_per_document=per_document,
        minutes_by_slots=by_slots,
        notes=notes,
    )


def _documents(ledger: Ledger, document_ids: Sequence[int]) -> list[_Document]:
    unique = list(dict.fromkeys(document_ids))
    if not unique:
        return []
    with ledger.engine.connect() as conn:
        wanted = id_in(documents.c.id, conn.dialect.name, unique)
        rows = conn.execute(
            select(documents.c.id, documents.c.filename, documents.c.sha256, documents.c.stored_path).where(wanted)
        ).all()
    found = {row[0]: _Document(row[0], row[1], row[2], row[3]) for row in rows}
    return [found[doc_id] for doc_id in unique if doc_id in found]


def _cached(ledger: Ledger, sha256s: list[str], parser_version: str) -> dict[str, str | None]:
    """Each content's cached parse verdict for this parser version: None (parsed) or its error."""
    if not sha256s:
        return {}
    statement = select(parsed_documents.c.sha256, parsed_documents.c.error).where(
        parsed_documents.c.sha256.in_(sorted(set(sha256s))), parsed_documents.c.parser_version == parser_version
    )
    with ledger.engine.connect() as conn:
        return {row[0]: row[1] for row in conn.execute(statement)}


def _texts(
    ledger: Ledger, chosen: list[_Document], options: ParseOptions, mode: ParseMode, progress: Progress | None
) -> tuple[dict[int, _Text], list[Unreadable]]:
    cached = _cached(ledger, [d.sha256 for d in chosen], options.limits.parser_version)
    texts: dict[int, _Text] = {}
    unreadable: list[Unreadable] = []
    missing: list[_Document] = []
    for document in chosen:
        if document.sha256 not in cached:
            missing.append(document)
        elif (error := cached[document.sha256]) is not None:
            unreadable.append(Unreadable(document.id, document.filename, error))
        else:  # a cache hit: one row read, no parse
            parsed = _parse(ledger, document, options)
            if isinstance(parsed, Unreadable):
                unreadable.append(parsed)
            else:
                texts[document.id] = _Text(parsed, TextSource.CACHED)
    if mode is ParseMode.QUICK:
        for document in missing:
            quick = _quick_text(document, options)
            if isinstance(quick, Unreadable):
                unreadable.append(quick)
            else:
                texts[document.id] = _Text(quick, TextSource.QUICK)
        return texts, unreadable
    done = 0
    # Each parse is a child process waiting on its own CPU: a few at once, results in order.
    with ThreadPoolExecutor(max_workers=PARSE_WORKERS) as pool:
        for document, parsed in zip(missing, pool.map(lambda d: _parse(ledger, d, options), missing), strict=True):
            done += 1
            if progress is not None:
                progress(done, len(missing), document.filename)
            if isinstance(parsed, Unreadable):
                unreadable.append(parsed)
            else:
                texts[document.id] = _Text(parsed, TextSource.PARSED)
    unreadable.sort(key=lambda u: u.document_id)
    return texts, unreadable


def _parse(ledger: Ledger, document: _Document, options: ParseOptions) -> ParsedDocument | Unreadable:
    try:
        return parse_document(ledger, sha256=document.sha256, stored_path=document.stored_path, options=options)
    except ExtractionError as exc:
        return Unreadable(document.id, document.filename, str(exc))


def _quick_text(document: _Document, options: ParseOptions) -> ParsedDocument | Unreadable:
    """The PDF's plain text per page, read here without the child process or table detection:
    the same PyMuPDF text the parse engine starts from, so only the tables' HTML is missing. The
    file was opened the same way when it was registered."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()
    path = Path(document.stored_path)
    try:
        with pymupdf.open(path, filetype="pdf") as pdf:
            if pdf.page_count > options.limits.max_pages:
                return Unreadable(
                    document.id,
                    document.filename,
                    f"{pdf.page_count} pages exceeds the limit of {options.limits.max_pages} pages",
                )
            pages = [page.get_text("text") for page in pdf]
    except Exception as exc:  # a missing copy or a damaged file: pymupdf raises several types
        return Unreadable(document.id, document.filename, f"cannot be read: {str(exc).splitlines()[0][:200]}")
    return ParsedDocument(sha256=document.sha256, pages_text=pages)


def _questions(template: TemplateDefinition, parsed: ParsedDocument, llm: LLMConfig) -> list[list[dict[str, str]]]:
    """The prompts of the calls the extraction makes for this paper (``grounded_answer``)."""
    parts = plan_parts(template, parsed, llm)
    if parts is None:
        return [build_messages(template, parsed.pages_text, parsed.tables)]
    return [part.messages(template, parsed, k, len(parts)) for k, part in enumerate(parts, start=1)]


def _stored_keys(ledger: Ledger, keys: list[str]) -> set[str]:
    if not keys:
        return set()
    found: set[str] = set()
    with ledger.engine.connect() as conn:
        for start in range(0, len(keys), 500):  # bounded IN lists
            chunk = keys[start : start + 500]
            found.update(conn.execute(select(model_answers.c.key).where(model_answers.c.key.in_(chunk))).scalars())
    return found


def answer_tokens(ledger: Ledger, model: str) -> tuple[int, str]:
    """(tokens a call is expected to answer, where the figure comes from, in words)."""
    statement = (
        select(model_answers.c.tokens_out)
        .where(model_answers.c.model == model, model_answers.c.tokens_out > 0)
        .order_by(desc(model_answers.c.created_at))
        .limit(HISTORY)
    )
    with ledger.engine.connect() as conn:
        stored = list(conn.execute(statement).scalars())
    if not stored:
        return DEFAULT_ANSWER_TOKENS, (
            f"default {DEFAULT_ANSWER_TOKENS:,} tokens per call (the corpus median answer; no stored answer of {model})"
        )
    median = round(statistics.median(stored))
    return median, f"median of {len(stored)} stored answer(s) of {model}: {median:,} tokens per call"


def supports_provider_batches(model: str) -> bool:
    from extraction_pipeline.core.llm.batch_api import supports_provider_batches as drivable

    return drivable(model)


def price_of(model: str) -> Price:
    """The model's prices from litellm's model map (no network: the bundled map)."""
    from extraction_pipeline.core.llm.gateway import _import_litellm
    from extraction_pipeline.core.llm.offline import OFFLINE_PROVIDER

    if model.startswith(f"{OFFLINE_PROVIDER}/"):
        return Price(True, note="the offline extractor costs nothing")
    litellm = _import_litellm()
    # litellm answers some unmapped models with zeros: only a model the map names has a price.
    bare = model.split("/", 1)[1] if "/" in model else model
    if model not in litellm.model_cost and bare not in litellm.model_cost:
        return Price(False, note=f"litellm has no price for {model}")
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return Price(False, note=f"litellm has no price for {model}")
    prompt, answer = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or answer is None:
        return Price(False, note=f"litellm has no price for {model}")
    batch_in, batch_out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    has_batch = batch_in is not None and batch_out is not None
    return Price(
        True,
        float(prompt),
        float(answer),
        float(batch_in) if has_batch else None,
        float(batch_out) if has_batch else None,
        note="" if has_batch else "no batch API",
    )


def _budget(ledger: Ledger, model: str, pinned: tuple[int | None, int | None]) -> tuple[int | None, int | None, str]:
    """(tokens/min, requests/min, where they come from): the lower of the configured limit
    (the environment's, which every run states again, else the project page's) and the learned one."""
    budget = get_budget(ledger, model)
    configured_tokens = pinned[0] or (budget.configured_tokens if budget else None)
    configured_requests = pinned[1] or (budget.configured_requests if budget else None)
    learned_tokens = budget.learned_tokens if budget else None
    learned_requests = budget.learned_requests if budget else None
    tokens = min([v for v in (configured_tokens, learned_tokens) if v], default=None)
    requests = min([v for v in (configured_requests, learned_requests) if v], default=None)
    if not tokens and not requests:
        return None, None, "no budget known"
    said = []
    for value, unit, configured, learned in (
        (tokens, "tokens", configured_tokens, learned_tokens),
        (requests, "requests", configured_requests, learned_requests),
    ):
        if value:
            origin = "configured" if value == configured else "learned from the provider"
            if value == configured and value == learned:
                origin = "configured and learned"
            said.append(f"{value:,} {unit}/min ({origin})")
    return tokens, requests, ", ".join(said)


def _model_estimate(
    ledger: Ledger,
    llm: LLMConfig,
    template: TemplateDefinition,
    chosen: list[_Document],
    texts: dict[int, _Text],
    fresh: bool,
    pinned: tuple[int | None, int | None],
    number: int,
) -> ModelEstimate:
    model = llm.effective_model
    counts: list[DocumentCount] = []
    too_long: list[Unreadable] = []
    asked: list[tuple[_Document, _Text, list[tuple[str, int]]]] = []
    for document in chosen:
        text = texts.get(document.id)
        if text is None:
            continue
        try:
            questions = _questions(template, text.parsed, llm)
        except ExtractionError as exc:  # no split of the paper fits the model's window
            too_long.append(Unreadable(document.id, document.filename, str(exc), model))
            continue
        asked.append(
            (document, text, [(answer_key(model, messages), count_tokens(llm, messages)) for messages in questions])
        )
    # The offline extractor stores nothing (and costs nothing): every call is made again.
    stored = set() if fresh or llm.is_offline else _stored_keys(ledger, [k for _, _, calls in asked for k, _ in calls])
    for document, text, prompts in asked:
        to_pay = [(key, tokens) for key, tokens in prompts if key not in stored]
        counts.append(
            DocumentCount(
                document.id,
                document.filename,
                model,
                text.source,
                calls=len(prompts),
                prompt_tokens=sum(tokens for _, tokens in to_pay),
                calls_to_pay=len(to_pay),
            )
        )
    per_call, answer_source = answer_tokens(ledger, model)
    calls = sum(c.calls_to_pay for c in counts)
    prompt_tokens = sum(c.prompt_tokens for c in counts)
    answer_total = per_call * calls
    price = price_of(model)
    cost = prompt_tokens * price.input_per_token + answer_total * price.output_per_token if price.known else None
    batch_cost = None
    # Only what `--provider-batch` sends goes at the batch price: the first model's first prompts,
    # on a provider whose batch API is driven here.
    if price.known and price.has_batch_api and number == 0 and supports_provider_batches(model):
        assert price.batch_input_per_token is not None and price.batch_output_per_token is not None
        batch_cost = prompt_tokens * price.batch_input_per_token + answer_total * price.batch_output_per_token
    tpm, rpm, budget_source = (None, None, "no budget needed") if llm.is_offline else _budget(ledger, model, pinned)
    minutes = None
    if tpm or rpm:
        # What the provider counts per minute: the prompt and the answer written (the rest of
        # max_tokens is given back when the answer arrives, core/ledger/budgets.py).
        minutes = max((prompt_tokens + answer_total) / tpm if tpm else 0.0, calls / rpm if rpm else 0.0)
    return ModelEstimate(
        model=model,
        role="first model" if number == 0 else "second model",
        documents=sum(1 for c in counts if c.calls_to_pay),
        already_answered=sum(1 for c in counts if not c.calls_to_pay),
        calls=calls,
        prompt_tokens=prompt_tokens,
        answer_tokens_per_call=per_call,
        answer_source=answer_source,
        answer_tokens=answer_total,
        cost_usd=cost,
        batch_cost_usd=batch_cost,
        price_note=price.note,
        tokens_per_minute=tpm,
        requests_per_minute=rpm,
        budget_source=budget_source,
        minutes_by_budget=minutes,
        unreadable=too_long,
    )


def _seconds_per_document(ledger: Ledger, model: str) -> float | None:
    """The median time a document of this model took, claim to finish, over its latest finished
    documents (None: none yet): with the pool's slots, how long the calls keep the pool busy."""
    statement = (
        select(batch_items.c.started_at, batch_items.c.finished_at)
        .where(
            batch_items.c.model == model,
            batch_items.c.status == "completed",
            batch_items.c.started_at.is_not(None),
            batch_items.c.finished_at.is_not(None),
        )
        .order_by(desc(batch_items.c.finished_at))
        .limit(HISTORY)
    )
    with ledger.engine.connect() as conn:
        spans = [(finished - started).total_seconds() for started, finished in conn.execute(statement)]
    spans = [s for s in spans if s > 0]
    return float(statistics.median(spans)) if spans else None


def describe(estimate: BatchEstimate) -> list[str]:
    """The estimate in lines of text (the command line prints them; the page shows the same)."""
    lines = [
        f"estimate for {estimate.documents} document(s) of project {estimate.project}, template {estimate.template}"
        + ("; fresh answers asked" if estimate.fresh else "")
    ]
    if estimate.sources:
        lines.append("text: " + ", ".join(f"{count} {source}" for source, count in sorted(estimate.sources.items())))
    for model in estimate.models:
        lines.append(f"{model.role} {model.model}:")
        lines.append(
            f"  documents to send: {model.documents} ({model.calls} call(s)); already answered, no cost: "
            f"{model.already_answered}"
        )
        lines.append(f"  prompt tokens: {model.prompt_tokens:,}")
        lines.append(f"  answer tokens: {model.answer_tokens:,} ({model.answer_source})")
        lines.append(f"  cost: {money(model.cost_usd, model.price_note)}")
        batch = (
            money(model.batch_cost_usd, "")
            if model.batch_cost_usd is not None
            else "no batch API (ordinary calls)"
            if model.role == "first model"
            else "no batch API (a second model is asked by ordinary calls)"
        )
        lines.append(f"  with the provider's batch API: {batch}")
        lines.append(f"  budget: {model.budget_source}; duration by budget: {duration(model.minutes_by_budget)}")
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
    lines.append(f"expected duration: {estimate.duration_words} ({slots})")
    if estimate.approximate:
        lines.append(
            f"approximate: {estimate.approximate} document(s) not parsed yet were counted from their plain text "
            "(their tables are left out; `batch create --estimate` without --quick parses them)"
        )
    for problem in estimate.unreadable:
        lines.append(f"cannot be parsed: document {problem.document_id} {problem.filename}: {problem.reason}")
    lines.extend(f"note: {note}" for note in estimate.notes)
    return lines


def money(value: float | None, unknown: str) -> str:
    if value is None:
        return unknown or "price unknown"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def duration(minutes: float | None) -> str:
    if minutes is None:
        return "no budget known"
    if minutes < 1:
        return "under a minute"
    if minutes < 90:
        return f"about {minutes:.0f} min"
    return f"about {minutes / 60:.1f} h"
