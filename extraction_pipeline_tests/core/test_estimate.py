"""The price before the launch (core/extraction/estimate.py), checked against what the batch then
cost: the loopback fake reports the prompt's tokens as OpenAI counts them (tiktoken through
litellm) and answers of realistic length, litellm prices the usage with gpt-4o-mini's prices, and
the estimate must be within 10% of the sum of the batch's ``cost_usd``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import litellm
import pytest

from extraction_pipeline.core.extraction.estimate import (
    DEFAULT_ANSWER_TOKENS,
    BatchEstimate,
    ParseMode,
    TextSource,
    describe,
    estimate_batch,
    price_of,
)
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.budgets import configure
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.engine import import_pymupdf
from extraction_pipeline.core.pdf.parsing import parse_document, parsed_contents
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, report_pages, write_report
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.ledgers import add_documents

MODEL = "openai/gpt-4o-mini"  # priced in litellm's map, with batch prices (half)
PROJECT = "trials"


@dataclass
class Home:
    settings: Settings
    ledger: Ledger

    def register(self, path: Path) -> int:
        return register_pdf(self.ledger, self.settings.documents_dir, PROJECT, path).id

    def estimate(self, ids: list[int], llm: LLMConfig, **options: object) -> BatchEstimate:
        return estimate_batch(
            self.ledger,
            project=PROJECT,
            document_ids=ids,
            llm=llm,
            parse_options=self.settings.parse_options(),
            **options,  # type: ignore[arg-type]
        )

    def run_batch(self, key: str, ids: list[int], llm: LLMConfig, **options: object) -> float:
        """Create the batch, extract every document as a run would (no Dagster); its total cost."""
        batch = create_batch(
            self.ledger,
            idempotency_key=key,
            project=PROJECT,
            user="u",
            document_ids=ids,
            **options,  # type: ignore[arg-type]
        ).id
        for item in batch_item_rows(self.ledger, batch):
            parsed = parse_document(
                self.ledger,
                sha256=item["sha256"],
                stored_path=item["stored_path"],
                options=self.settings.parse_options(),
            )
            outcome = extract_item(self.ledger, item_id=item["id"], run_id=key, worker="w", parsed=parsed, llm=llm)
            assert outcome.status == "completed", outcome.reason
        return sum(float(item["cost_usd"]) for item in batch_item_rows(self.ledger, batch))


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    yield Home(settings, ledger)
    ledger.dispose()


def honest(fake: FakeLLMServer) -> list[int]:
    """The fake answers every document with three outcomes quoted from its own text (about 800
    tokens, a real answer's size) and reports its usage as OpenAI would: the prompt counted by
    tiktoken, the answer's own tokens. Returns the list its answers' lengths are appended to."""
    lengths: list[int] = []

    def answer(messages: list[dict[str, str]]) -> Reply:
        document = document_from_messages(messages)
        sentences = [s.strip() + "." for s in document.replace("\n", " ").split(".") if len(s.strip()) > 30]
        values: dict[str, tuple[object, str | None]] = {
            "metadata.nct_number": ("NCT" + hashlib.sha256(document.encode()).hexdigest()[:8], sentences[0]),
        }
        for n in range(1, 4):
            quote = sentences[n % len(sentences)]
            values |= {
                f"outcomes.{n}.outcome_name": (f"outcome {n}: {quote[:60]}", quote),
                f"outcomes.{n}.timepoint": ("12 months", quote),
                f"outcomes.{n}.effect_measure": ("HR", quote),
                f"outcomes.{n}.effect_estimate": (0.8, quote),
            }
        content = extraction_json(values)
        tokens_in = litellm.token_counter(model="gpt-4o-mini", messages=messages)
        tokens_out = litellm.token_counter(model="gpt-4o-mini", text=content)
        lengths.append(tokens_out)
        return Reply(content, tokens_in=tokens_in, tokens_out=tokens_out)

    fake.answer = answer
    return lengths


def long_report(index: int, directory: Path, pages: int) -> Path:
    """A trial report of ``pages`` pages (the synthetic report and pages of methods prose)."""
    pymupdf = import_pymupdf()
    trial = make_trial(index)
    filler = [
        f"Methods, part {p}. "
        + " ".join(f"Site {p}-{k} enrolled {17 * k + p} patients with {trial.condition}." for k in range(40))
        for p in range(1, pages - 1)
    ]
    path = directory / f"long-{index}.pdf"
    directory.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as doc:
        for text in [*report_pages(trial), *filler]:
            page = doc.new_page(width=595, height=842)
            page.insert_textbox(pymupdf.Rect(40, 40, 555, 802), text, fontsize=8, fontname="helv")
        doc.save(path)
    return path


def test_the_estimate_is_within_ten_percent_of_what_the_batch_then_cost(
    home: Home, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    lengths = honest(fake_llm)
    # A small window so the long paper is asked in parts, as the extraction will.
    llm = LLMConfig(
        MODEL, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret", context_tokens=9000, output_tokens=2000
    )
    short = [
        home.register(write_report(make_trial(i), tmp_path / "pdf", extra_text=f"Note {i}. " * (20 * i)))
        for i in range(1, 6)
    ]
    long = home.register(long_report(9, tmp_path / "pdf", pages=12))
    # An earlier batch answered two of them: its answers are the history the answer length comes from.
    home.run_batch("history", short[:2], llm)
    history = list(lengths)
    configure(home.ledger, MODEL, tokens_per_minute=100_000, requests_per_minute=None)

    chosen = [*short[1:], long]  # short[1] is already answered: it costs nothing
    estimate = home.estimate(chosen, llm)
    [first] = estimate.models
    assert estimate.documents == 5 and not estimate.unreadable
    assert first.already_answered == 1 and first.documents == 4
    parts = first.calls - 3
    assert parts >= 2  # the long paper is counted as the calls it will really be
    expected_answer = sorted(history)[len(history) // 2] if len(history) % 2 else sum(sorted(history)) / 2
    assert first.answer_tokens_per_call == round(expected_answer)
    assert first.answer_source.startswith(f"median of {len(history)} stored answer(s) of {MODEL}")
    assert first.cost_usd is not None and first.batch_cost_usd == pytest.approx(first.cost_usd / 2)
    assert first.minutes_by_budget == pytest.approx((first.prompt_tokens + first.answer_tokens) / 100_000)
    assert estimate.sources == {TextSource.CACHED.value: 1, TextSource.PARSED.value: 4}  # parsed for `history`

    fake_llm.reset()
    served_before = fake_llm.served_tokens_in
    actual = home.run_batch("measured", chosen, llm)
    calls = len(fake_llm.requests)
    assert calls == first.calls  # as many calls as counted: the answered paper asked nothing
    assert fake_llm.served_tokens_in - served_before == first.prompt_tokens  # the very prompts counted
    print(
        f"estimated ${first.cost_usd:.6f} ({first.prompt_tokens} prompt + {first.answer_tokens} answer tokens), "
        f"actual ${actual:.6f} ({fake_llm.served_tokens_in - served_before} + {sum(lengths[len(history) :])}) "
        f"over {calls} calls"
    )
    assert actual > 0
    assert abs(first.cost_usd - actual) <= 0.10 * actual, (first.cost_usd, actual)


def test_double_extraction_counts_both_models_and_says_what_it_assumed(home: Home, tmp_path: Path) -> None:
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2, 3)]
    llm = LLMConfig(MODEL, api_key="sk-test-not-a-secret")
    estimate = home.estimate(ids, llm, second_model="mistral/mistral-small-latest")
    first, second = estimate.models
    assert (first.role, second.role) == ("first model", "second model")
    assert first.documents == second.documents == 3 and first.calls == second.calls == 3
    assert first.answer_tokens == second.answer_tokens == 3 * DEFAULT_ANSWER_TOKENS
    assert "default 1,057 tokens per call (the corpus median answer" in first.answer_source
    mistral = price_of("mistral/mistral-small-latest")
    assert second.cost_usd == pytest.approx(
        second.prompt_tokens * mistral.input_per_token + second.answer_tokens * mistral.output_per_token
    )
    assert second.batch_cost_usd is None and second.price_note == "no batch API"
    # --provider-batch sends the first model's prompts at the batch price, the second's as ordinary calls.
    assert estimate.batch_cost_usd == pytest.approx((first.batch_cost_usd or 0) + (second.cost_usd or 0))
    assert first.batch_cost_usd == pytest.approx((first.cost_usd or 0) / 2)
    assert estimate.cost_usd == pytest.approx((first.cost_usd or 0) + (second.cost_usd or 0))
    assert first.budget_source == "no budget known" and estimate.minutes is None
    text = "\n".join(describe(estimate))
    assert "with the provider's batch API: no batch API" in text and "expected duration: no budget known" in text
    json.dumps(estimate.as_dict(), default=str)  # the --json form is serializable
    assert latest_version(home.ledger, PROJECT) is None  # nothing saved: not even the template


def test_answered_documents_cost_nothing_unless_fresh_answers_are_asked(
    home: Home, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    honest(fake_llm)
    llm = LLMConfig(MODEL, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2)]
    before = home.estimate(ids, llm).models[0]
    home.run_batch("first", ids[:1], llm)
    after = home.estimate(ids, llm).models[0]
    fresh = home.estimate(ids, llm, fresh=True).models[0]
    assert (after.documents, after.already_answered) == (1, 1)
    assert after.prompt_tokens < before.prompt_tokens
    assert (fresh.documents, fresh.already_answered, fresh.prompt_tokens) == (2, 0, before.prompt_tokens)


def test_unparsed_pdfs_are_parsed_and_cached_or_read_quickly_and_a_broken_one_is_listed(
    home: Home, tmp_path: Path
) -> None:
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2)]
    [missing] = add_documents(home.ledger, 1, project=PROJECT)  # its stored copy does not exist
    llm = LLMConfig(MODEL)
    quick = home.estimate([*ids, missing], llm, parse=ParseMode.QUICK)
    assert quick.sources == {TextSource.QUICK.value: 2} and quick.approximate == 2
    assert [u.document_id for u in quick.unreadable] == [missing]
    assert not parsed_contents(home.ledger, _shas(home, ids), _version(home))  # nothing parsed
    seen: list[tuple[int, int]] = []
    exact = home.estimate([*ids, missing], llm, progress=lambda done, total, name: seen.append((done, total)))
    assert exact.sources == {TextSource.PARSED.value: 2} and exact.approximate == 0
    assert seen == [(1, 3), (2, 3), (3, 3)]
    [broken] = exact.unreadable
    assert broken.document_id == missing and "missing" in broken.reason
    assert "cannot be parsed: document" in "\n".join(describe(exact))
    # Synthetic reports have no tables: the quick text is the parsed text, so the counts agree.
    assert quick.models[0].prompt_tokens == exact.models[0].prompt_tokens
    again = home.estimate(ids, llm, parse=ParseMode.QUICK)  # parsed above: cached now, exact
    assert again.sources == {TextSource.CACHED.value: 2}


def test_a_paper_no_split_can_fit_is_listed_for_that_model(home: Home, tmp_path: Path) -> None:
    ids = [home.register(long_report(5, tmp_path / "pdf", pages=4))]
    llm = LLMConfig(MODEL, context_tokens=4000, output_tokens=500)  # a page alone is over the window
    [model] = home.estimate(ids, llm).models
    assert model.documents == 0 and model.calls == 0
    [problem] = model.unreadable
    assert "cannot be split into parts that fit" in problem.reason and problem.model == MODEL


def _shas(home: Home, ids: list[int]) -> list[str]:
    from extraction_pipeline.core.ledger.documents import get_document

    return [str((get_document(home.ledger, i) or {"sha256": ""})["sha256"]) for i in ids]


def _version(home: Home) -> str:
    return home.settings.parse_options().limits.parser_version
