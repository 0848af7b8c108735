"""The calls and tokens a batch will take (core/extraction/token_counts.py), counted through the
estimate as the command line asks it: answers already paid for cost nothing unless fresh ones are
asked; unparsed PDFs are parsed (and cached) or read quickly, a broken one listed; a paper no
split fits is listed for its model; the answer length falls back to the corpus median."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_pipeline.core.extraction.token_counts import (
    DEFAULT_ANSWER_TOKENS,
    AnswerLength,
    ParseMode,
    TextSource,
    answer_length,
)
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import parsed_contents
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.estimates import (
    MODEL,
    PROJECT,
    Home,
    estimate_home,
    honest,
    long_report,
    parser_version,
    shas,
)
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.ledgers import add_documents


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    with estimate_home(tmp_path) as home:
        yield home


def test_answered_documents_cost_nothing_unless_fresh_answers_are_asked(
    home: Home, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    lengths = honest(fake_llm)
    llm = LLMConfig(MODEL, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2)]
    before = home.estimate(ids, llm).models[0]
    assert answer_length(home.ledger, MODEL) == AnswerLength(MODEL, DEFAULT_ANSWER_TOKENS, 0)
    home.run_batch("first", ids[:1], llm)
    after = home.estimate(ids, llm).models[0]
    fresh = home.estimate(ids, llm, fresh=True).models[0]
    assert (after.documents, after.already_answered) == (1, 1)
    assert after.prompt_tokens < before.prompt_tokens
    assert (fresh.documents, fresh.already_answered, fresh.prompt_tokens) == (2, 0, before.prompt_tokens)
    assert answer_length(home.ledger, MODEL) == AnswerLength(MODEL, lengths[0], 1)  # the one stored answer


def test_unparsed_pdfs_are_parsed_and_cached_or_read_quickly_and_a_broken_one_is_listed(
    home: Home, tmp_path: Path
) -> None:
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2)]
    [missing] = add_documents(home.ledger, 1, project=PROJECT)  # its stored copy does not exist
    llm = LLMConfig(MODEL)
    quick = home.estimate([*ids, missing], llm, parse=ParseMode.QUICK)
    assert quick.sources == {TextSource.QUICK.value: 2} and quick.approximate == 2
    assert [u.document_id for u in quick.unreadable] == [missing]
    assert not parsed_contents(home.ledger, shas(home, ids), parser_version(home))  # nothing parsed
    seen: list[tuple[int, int]] = []
    exact = home.estimate([*ids, missing], llm, progress=lambda done, total, name: seen.append((done, total)))
    assert exact.sources == {TextSource.PARSED.value: 2} and exact.approximate == 0
    assert seen == [(1, 3), (2, 3), (3, 3)]
    [broken] = exact.unreadable
    assert broken.document_id == missing and "missing" in broken.reason
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
