"""What a batch's documents will send and get back, in calls and tokens, counted before it exists.

Counted exactly as the extraction will ask (``assembly.py``): for each document and model, the
real prompt (``build_messages`` with the template a new batch would freeze and the document's
parsed pages and tables; a paper over the model's window in its parts, ``plan_parts``), counted
with the gateway's ``count_tokens``. A call whose exact prompt the same model already answered
(``answer_key`` in ``model_answers``) costs nothing unless the batch asks for fresh answers, so
those calls are counted apart.

The answer is not known before it is written: each call is expected to answer the median of
this model's stored answers (``model_answers``), or ``DEFAULT_ANSWER_TOKENS`` while the ledger
holds none (``AnswerLength`` says which).

The text of a document not parsed yet (``ParseMode``): ``PARSE`` parses it the way a run would
(isolated, cached by content: the batch's runs then find it parsed, so the work is not lost) and
the count is exact; ``QUICK`` reads the PDF's plain text in this process (no tables, no child
process: milliseconds per paper) and marks those documents approximate. The command line parses
(a user asking for a price wants the real one, and pays the parse only once); the project page
reads quickly (a page must answer in seconds, and its upload parses new PDFs in the background).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy import desc, select

from extraction_pipeline.core.errors import ExtractionError, PermanentError
from extraction_pipeline.core.extraction.long_papers import plan_parts
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import answer_key
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.schema import documents, model_answers, parsed_documents
from extraction_pipeline.core.llm.gateway import LLMConfig, count_tokens, schema_prompt_tokens
from extraction_pipeline.core.pdf.isolation import ParseOptions, run_each
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import open_stored_copy
from extraction_pipeline.core.templates.definition import TemplateDefinition

# What a call is expected to answer while the ledger holds no answer of the model yet: the median
# answer length of the real corpus (23 trial reports with gold outcomes, one answer each), measured
# with `python -m benchmarks.prompt_sizes --answers-only` (gpt-4o tokenizer) on the oracle's answers,
# which hold the gold outcomes' printed values with their quotes (docs/guide.md, "Long answers").
# A lower bound: a model also answers the study details, baseline and Risk of Bias.
DEFAULT_ANSWER_TOKENS = 1057
# How many of a model's latest stored answers (and finished documents) make its median: recent
# enough to follow a template change, many enough to be steady.
HISTORY = 500
PARSE_WORKERS = 4  # parses at once (each a child process): a CLI estimate of 500 new PDFs in minutes


class ParseMode(StrEnum):
    PARSE = "parse"  # parse what is not parsed yet (cached: the runs reuse it); exact
    QUICK = "quick"  # plain PDF text of what is not parsed yet, in-process; approximate


class TextSource(StrEnum):
    """Where a document's counted text came from."""

    CACHED = "cached"  # the parse cache held it
    PARSED = "parsed"  # parsed now (and cached for the batch's runs)
    QUICK = "quick"  # the PDF's plain text, read in-process: approximate, no tables


@dataclass(frozen=True)
class Unreadable:
    """A document the estimate (and so the batch) cannot send: a PDF that does not parse, or a
    paper no split fits into the model's window. ``reason`` is the parse's own error (the one the
    parse cache stores) or the split's."""

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
class AnswerLength:
    """The tokens each call of ``model`` is expected to answer, and what the figure rests on."""

    model: str
    tokens_per_call: int
    stored_answers: int  # the stored answers it is the median of; 0: DEFAULT_ANSWER_TOKENS


@dataclass(frozen=True)
class ChosenDocument:
    id: int
    filename: str
    sha256: str
    stored_path: str


@dataclass(frozen=True)
class DocumentText:
    parsed: ParsedDocument
    source: TextSource


Progress = Callable[[int, int, str], None]  # (parsed so far, to parse, file name)


def chosen_documents(ledger: Ledger, document_ids: Sequence[int]) -> list[ChosenDocument]:
    """The documents of ``document_ids`` the ledger knows, once each, in the order asked."""
    unique = list(dict.fromkeys(document_ids))
    if not unique:
        return []
    with ledger.engine.connect() as conn:
        wanted = id_in(documents.c.id, conn.dialect.name, unique)
        rows = conn.execute(
            select(documents.c.id, documents.c.filename, documents.c.sha256, documents.c.stored_path).where(wanted)
        ).all()
    found = {row[0]: ChosenDocument(row[0], row[1], row[2], row[3]) for row in rows}
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


def read_texts(
    ledger: Ledger, chosen: list[ChosenDocument], options: ParseOptions, mode: ParseMode, progress: Progress | None
) -> tuple[dict[int, DocumentText], list[Unreadable]]:
    """Each readable document's text by id, and the documents that cannot be read."""
    cached = _cached(ledger, [d.sha256 for d in chosen], options.limits.parser_version)
    texts: dict[int, DocumentText] = {}
    unreadable: list[Unreadable] = []
    missing: list[ChosenDocument] = []
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
                texts[document.id] = DocumentText(parsed, TextSource.CACHED)
    if mode is ParseMode.QUICK:
        for document, quick in zip(missing, _quick_texts(missing, options), strict=True):
            if isinstance(quick, Unreadable):
                unreadable.append(quick)
            else:
                texts[document.id] = DocumentText(quick, TextSource.QUICK)
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
                texts[document.id] = DocumentText(parsed, TextSource.PARSED)
    unreadable.sort(key=lambda u: u.document_id)
    return texts, unreadable


def _parse(ledger: Ledger, document: ChosenDocument, options: ParseOptions) -> ParsedDocument | Unreadable:
    try:
        return parse_document(ledger, sha256=document.sha256, stored_path=document.stored_path, options=options)
    except ExtractionError as exc:
        return Unreadable(document.id, document.filename, str(exc))


def _quick_texts(documents: list[ChosenDocument], options: ParseOptions) -> list[ParsedDocument | Unreadable]:
    """Each PDF's plain text per page, without table detection: the same PyMuPDF text the parse
    engine starts from, so only the tables' HTML is missing. Read in one child process under the
    parse's limits (a PDF that hangs or exhausts it costs itself only, pdf/isolation.py)."""
    refused: dict[int, str] = {}
    for document in documents:
        try:  # a stored copy is read only as a regular file, never through a link
            open_stored_copy(Path(document.stored_path)).close()
        except PermanentError as exc:
            refused[document.id] = str(exc)
    readable = [d for d in documents if d.id not in refused]
    outcomes = iter(
        run_each(
            [Path(d.stored_path) for d in readable],
            timeout_seconds=options.timeout_seconds,
            limits=options.limits,
            task="text",
        )
        if readable
        else []
    )
    texts: list[ParsedDocument | Unreadable] = []
    for document in documents:
        if document.id in refused:
            texts.append(Unreadable(document.id, document.filename, refused[document.id]))
            continue
        outcome = next(outcomes)
        if outcome.error is not None or outcome.value is None:
            texts.append(Unreadable(document.id, document.filename, str(outcome.error)))
        else:
            texts.append(ParsedDocument(sha256=document.sha256, pages_text=list(outcome.value["pages_text"])))
    return texts


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


def count_prompts(
    ledger: Ledger,
    llm: LLMConfig,
    template: TemplateDefinition,
    chosen: list[ChosenDocument],
    texts: dict[int, DocumentText],
    *,
    fresh: bool,
) -> tuple[list[DocumentCount], list[Unreadable]]:
    """Each readable document's calls and prompt tokens for ``llm``'s model, and the papers no
    split fits into its window."""
    model = llm.effective_model
    schema = schema_prompt_tokens(llm, template)  # billed with every call's messages, where it is
    too_long: list[Unreadable] = []
    asked: list[tuple[ChosenDocument, DocumentText, list[tuple[str, int]]]] = []
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
            (
                document,
                text,
                [(answer_key(model, messages), count_tokens(llm, messages) + schema) for messages in questions],
            )
        )
    # The offline extractor stores nothing (and costs nothing): every call is made again.
    stored = set() if fresh or llm.is_offline else _stored_keys(ledger, [k for _, _, calls in asked for k, _ in calls])
    counts = []
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
    return counts, too_long


def answer_length(ledger: Ledger, model: str) -> AnswerLength:
    """What each call of ``model`` is expected to answer: the median of its latest stored answers."""
    statement = (
        select(model_answers.c.tokens_out)
        .where(model_answers.c.model == model, model_answers.c.tokens_out > 0)
        .order_by(desc(model_answers.c.created_at))
        .limit(HISTORY)
    )
    with ledger.engine.connect() as conn:
        stored = list(conn.execute(statement).scalars())
    if not stored:
        return AnswerLength(model, DEFAULT_ANSWER_TOKENS, 0)
    return AnswerLength(model, round(statistics.median(stored)), len(stored))
