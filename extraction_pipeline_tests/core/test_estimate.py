"""The price before the launch (core/extraction/estimate.py), checked against what the batch then
cost: the loopback fake reports the prompt's tokens as OpenAI counts them (tiktoken through
litellm) and answers of realistic length, litellm prices the usage with gpt-4o-mini's prices, and
the estimate must be within 10% of the sum of the batch's ``cost_usd``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_pipeline.core.extraction.estimate import ModelRole
from extraction_pipeline.core.extraction.pace import Limit, LimitOrigin
from extraction_pipeline.core.extraction.pricing import price_of
from extraction_pipeline.core.extraction.token_counts import DEFAULT_ANSWER_TOKENS, TextSource
from extraction_pipeline.core.ledger.budgets import configure
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.estimates import MODEL, PROJECT, Home, estimate_home, honest, long_report
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    with estimate_home(tmp_path) as home:
        yield home


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
    # This fake keeps no prompt cache: with as many slots as calls, none is expected to read one
    # (every call goes before an answer came back); the cache is estimated against the provider
    # fakes that keep one (test_provider_matrix).
    estimate = home.estimate(chosen, llm, llm_slots=64)
    [first] = estimate.models
    assert estimate.documents == 5 and not estimate.unreadable
    assert first.already_answered == 1 and first.documents == 4
    parts = first.calls - 3
    assert parts >= 2  # the long paper is counted as the calls it will really be
    expected_answer = sorted(history)[len(history) // 2] if len(history) % 2 else sum(sorted(history)) / 2
    assert first.answer.tokens_per_call == round(expected_answer)
    assert (first.answer.model, first.answer.stored_answers) == (MODEL, len(history))  # the median of the history
    assert first.cost_usd is not None and first.batch_cost_usd == pytest.approx(first.cost_usd / 2)
    assert first.cache_read_tokens == first.cache_written_tokens == 0
    assert first.budget.tokens == Limit(100_000, LimitOrigin.CONFIGURED)
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
    assert (first.role, second.role) == (ModelRole.FIRST, ModelRole.SECOND)
    assert first.documents == second.documents == 3 and first.calls == second.calls == 3
    assert first.answer_tokens == second.answer_tokens == 3 * DEFAULT_ANSWER_TOKENS
    assert first.answer.stored_answers == 0 and first.answer.tokens_per_call == DEFAULT_ANSWER_TOKENS == 1057
    mistral = price_of("mistral/mistral-small-latest")
    # One slot: the first call writes the template to the cache, the other two read it at the
    # cache's price (where the model map has one).
    shared = second.cache_read_tokens // 2
    assert shared >= 1024 and first.cache_read_tokens == 2 * (first.cache_read_tokens // 2) >= 2048
    read_rate = mistral.cache_read_per_token if mistral.cache_read_per_token is not None else mistral.input_per_token
    assert second.cost_usd == pytest.approx(
        (second.prompt_tokens - second.cache_read_tokens) * mistral.input_per_token
        + second.cache_read_tokens * read_rate
        + second.answer_tokens * mistral.output_per_token
    )
    assert second.batch_cost_usd is None and second.price.known and not second.price.has_batch_api
    # --provider-batch sends the first model's prompts at the batch price, the second's as ordinary calls.
    assert estimate.batch_cost_usd == pytest.approx((first.batch_cost_usd or 0) + (second.cost_usd or 0))
    assert first.batch_cost_usd == pytest.approx(first.price.batch_cost(first.prompt_tokens, first.answer_tokens))
    assert estimate.cost_usd == pytest.approx((first.cost_usd or 0) + (second.cost_usd or 0))
    assert not first.budget.known and first.budget.needed and estimate.minutes is None
    assert estimate.without_budget == [MODEL, "mistral/mistral-small-latest"] and estimate.priced_by_litellm
    assert latest_version(home.ledger, PROJECT) is None  # nothing saved: not even the template
    assert (estimate.template.version, estimate.template.saved) == (1, False)


def test_the_offline_extractor_costs_nothing_and_needs_no_budget(home: Home, tmp_path: Path) -> None:
    ids = [home.register(write_report(make_trial(1), tmp_path / "pdf"))]
    [model] = home.estimate(ids, LLMConfig(None)).models
    assert model.cost_usd == 0.0 and model.batch_cost_usd is None and model.calls == 1
    assert not model.budget.needed and model.minutes_by_budget is None
