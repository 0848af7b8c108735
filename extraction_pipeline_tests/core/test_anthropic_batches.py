"""Anthropic's Message Batches (``providers/anthropic_batches.py``, through the ``anthropic`` SDK)
behind ``batch_api``: submit, poll, collect and cancel over real HTTP against a loopback fake of
Anthropic's documented API (support/fake_anthropic_batches.py), whose lifecycle the tests drive;
and one batch of synthetic PDFs through ``prepare`` + ``follow``. What both drivers do alike is in
test_batch_api.py.

The model is a priced one (``anthropic/claude-sonnet-4-5-20250929``) pointed at the fake: an
answer's cost is the model map's batch price for it (``*_batches``: half the ordinary rates).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm as litellm_module
import pytest

from extraction_pipeline.core.errors import (
    AnswerCutError,
    OutputParseError,
    PermanentError,
    RateLimitedError,
    TransientError,
)
from extraction_pipeline.core.extraction import batch_job_flow as flow
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import stored_answer
from extraction_pipeline.core.ledger.batch_jobs import entries_of, open_provider_batches, provider_batches_of
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import progress
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.llm import batch_api as pb
from extraction_pipeline.core.llm.batch_model import (
    BatchAnswer,
    BatchFailure,
    BatchRequest,
    FailureKind,
    ProviderJobStatus,
)
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.llm.providers.anthropic_batches import AnthropicBatchDriver, batch_usage, same_origin
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.extraction_cases import paper, paper_answer, paper_requests
from extraction_pipeline_tests.support.fake_anthropic_batches import FakeAnthropicBatchServer
from extraction_pipeline_tests.support.fake_llm import Reply

MODEL = "anthropic/claude-sonnet-4-5-20250929"
KEY = "sk-ant-batch-test-0123456789abcdef"
PRICES = litellm_module.model_cost["claude-sonnet-4-5-20250929"]


@pytest.fixture
def fake() -> Iterator[FakeAnthropicBatchServer]:
    server = FakeAnthropicBatchServer().start()
    server.api_key = KEY
    server.answer = _answer
    yield server
    server.stop()


def _config(fake: FakeAnthropicBatchServer, **overrides: object) -> LLMConfig:
    settings: dict[str, object] = {"model": MODEL, "api_base": fake.api_base, "api_key": KEY, "output_tokens": 2000}
    return LLMConfig(**(settings | overrides))  # type: ignore[arg-type]


def _driver(config: LLMConfig) -> AnthropicBatchDriver:
    driver = pb.driver_for(config)
    assert isinstance(driver, AnthropicBatchDriver)
    return driver


def _last_text(params: dict[str, Any]) -> str:
    content = params["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def _answer(params: dict[str, Any]) -> Reply:
    """The trial's registration and size, quoted from the paper in the prompt."""
    return Reply(paper_answer(_last_text(params))[1])


def _templates(requests: list[BatchRequest]) -> dict[str, TemplateDefinition]:
    return {r.custom_id: r.template for r in requests}


def _batch_cost(fresh: int, out: int, read: int = 0, written: int = 0) -> float:
    return math.fsum(
        (
            fresh * PRICES["input_cost_per_token_batches"],
            out * PRICES["output_cost_per_token_batches"],
            read * PRICES["cache_read_input_token_cost_batches"],
            written * PRICES["cache_creation_input_token_cost_batches"],
        )
    )


def test_the_params_are_the_body_of_an_ordinary_call(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake)
    messages = build_messages(RCT_TEMPLATE, [paper(1)])
    complete_extraction(config, messages, RCT_TEMPLATE)  # an ordinary call, to the same fake
    [sent] = fake.message_requests
    params, beta = _driver(config).message_params(config, messages, RCT_TEMPLATE)
    assert {k: v for k, v in sent.items() if k != "stream"} == params  # key for key
    assert params["max_tokens"] == 2000 and params["temperature"] == 0
    # The system prompt (the template, shared by the batch's requests) is marked; the paper is not:
    # its next call comes after the batch has ended, long past the cache's 5 minutes.
    assert params["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps(params["messages"])
    assert "output_format" not in params and beta == {}  # JSON mode: the schema is too large to compile


def test_submit_poll_and_collect_answers_at_the_batch_price(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(3)
    assert pb.supports_provider_batches(MODEL) and pb.supports_provider_batches("anthropic/claude-sonnet-4-5")
    submitted = pb.submit(config, requests)
    assert submitted.batch_id.startswith("msgbatch_") and submitted.count == 3
    assert submitted.custom_ids == ("paper-1", "paper-2", "paper-3")
    assert [r["custom_id"] for r in fake.batches[submitted.batch_id].requests] == list(submitted.custom_ids)
    state = pb.poll(config, submitted.batch_id)
    assert state.status is ProviderJobStatus.IN_PROGRESS and state.counts.total == 3 and state.counts.completed == 0
    assert state.expires_at is not None and state.expires_at > submitted.submitted_at
    fake.advance(submitted.batch_id, lines=2)
    state = pb.poll(config, submitted.batch_id)
    assert state.status is ProviderJobStatus.IN_PROGRESS and state.counts.completed == 2
    with pytest.raises(PermanentError, match="is in_progress: collect it once it has ended"):
        pb.collect(config, state, _templates(requests))
    fake.advance(submitted.batch_id)
    state = pb.poll(config, submitted.batch_id)
    assert state.status is ProviderJobStatus.COMPLETED and state.counts.completed == 3
    assert state.results_url == f"{fake.api_base}/v1/messages/batches/{submitted.batch_id}/results"
    outcomes = pb.collect(config, state, _templates(requests))  # the results come in reverse order
    assert [o.custom_id for o in outcomes] == ["paper-1", "paper-2", "paper-3"]
    for n, outcome in enumerate(outcomes, start=1):
        assert isinstance(outcome, BatchAnswer)
        assert outcome.output.model_dump()["metadata"]["nct_number"]["value"] == f"NCT0000000{n}"
        assert json.loads(outcome.content)
    for answered, outcome in zip(fake.messages_api.answered, outcomes, strict=True):
        assert isinstance(outcome, BatchAnswer)
        usage = outcome.usage
        fresh = answered.prompt_tokens - answered.cached_tokens - answered.cache_written
        assert usage.tokens_in == answered.prompt_tokens and usage.tokens_out == answered.completion_tokens
        assert usage.cost_usd == pytest.approx(
            _batch_cost(fresh, usage.tokens_out, answered.cached_tokens, answered.cache_written)
        )
        ordinary = usage.tokens_in * PRICES["input_cost_per_token"] + usage.tokens_out * PRICES["output_cost_per_token"]
        assert usage.saved_usd == pytest.approx(ordinary - usage.cost_usd) and usage.saved_usd > 0
    assert fake.answered == [_driver(config).batch_request(config, r)["params"] for r in requests]
    assert fake.refusals == []


def test_cached_tokens_are_counted_at_the_batch_cache_rates(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(2)
    submitted = pb.submit(config, requests)
    fake.advance(submitted.batch_id)
    first, second = pb.collect(config, pb.poll(config, submitted.batch_id), _templates(requests))
    assert isinstance(first, BatchAnswer) and isinstance(second, BatchAnswer)
    written, read = fake.messages_api.answered[0].cache_written, fake.messages_api.answered[1].cached_tokens
    assert written > 1024 and read > 1024  # the system prompt and the fields are one long marked prefix
    assert first.usage.cached_tokens == 0 and second.usage.cached_tokens == read
    again = fake.messages_api.answered[1].cache_written  # the second paper's own prefix
    fresh = second.usage.tokens_in - read - again
    assert second.usage.cost_usd == pytest.approx(_batch_cost(fresh, second.usage.tokens_out, read, again))
    # Directly: the map's batch rates for each kind of token.
    usage = batch_usage(
        litellm_module,
        config,
        {"input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300, "output_tokens": 50},
    )
    assert (usage.tokens_in, usage.cached_tokens, usage.tokens_out) == (2400, 2000, 50)
    assert usage.cost_usd == pytest.approx(_batch_cost(100, 50, read=2000, written=300))


def test_errored_canceled_and_expired_requests_fall_back_with_their_reason(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(4)
    replies = {
        "NCT00000001": Reply(status=529, error="overloaded"),
        "NCT00000002": Reply(status=400, error_message="messages: something the provider refused"),
    }
    fake.answer = lambda params: next((r for k, r in replies.items() if k in _last_text(params)), _answer(params))
    submitted = pb.submit(config, requests)
    fake.advance(submitted.batch_id, lines=3)
    fake.expire(submitted.batch_id)
    state = pb.poll(config, submitted.batch_id)
    assert state.status is ProviderJobStatus.EXPIRED and (state.counts.completed, state.counts.failed) == (1, 3)
    overloaded, refused, answered, expired = pb.collect(config, state, _templates(requests))
    assert isinstance(overloaded, BatchFailure) and overloaded.kind is FailureKind.REQUEST_FAILED
    assert overloaded.transient and overloaded.status_code == 529 and "overloaded_error" in overloaded.message
    assert isinstance(overloaded.error(), TransientError)
    assert isinstance(refused, BatchFailure) and refused.kind is FailureKind.REQUEST_FAILED
    assert not refused.transient and refused.status_code == 400 and "something the provider refused" in refused.message
    assert isinstance(refused.error(), PermanentError)
    assert isinstance(answered, BatchAnswer)
    assert isinstance(expired, BatchFailure) and expired.kind is FailureKind.EXPIRED and expired.transient


def test_a_cut_answer_and_an_invalid_one_are_failures_that_were_paid(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake, output_tokens=40)
    requests = paper_requests(2)
    fake.answer = lambda params: (
        _answer(params) if "NCT00000001" in _last_text(params) else Reply("this is not the JSON asked for")
    )
    submitted = pb.submit(config, requests)
    fake.advance(submitted.batch_id)
    cut, invalid = pb.collect(config, pb.poll(config, submitted.batch_id), _templates(requests))
    assert isinstance(cut, BatchFailure) and cut.kind is FailureKind.ANSWER_CUT and not cut.transient
    assert cut.usage is not None and cut.usage.tokens_out == 40 and cut.usage.cost_usd > 0
    assert isinstance(cut.error(), AnswerCutError) and "answer cut at 40 output tokens" in cut.message
    assert isinstance(invalid, BatchFailure) and invalid.kind is FailureKind.INVALID_ANSWER
    assert invalid.content == "this is not the JSON asked for" and isinstance(invalid.error(), OutputParseError)


def test_a_request_anthropic_refuses_errors_at_the_end_and_an_overloaded_create_is_transient(
    fake: FakeAnthropicBatchServer,
) -> None:
    requests = paper_requests(2)
    # More output than the model writes: Anthropic takes the batch and errors the requests when it
    # runs them (each is checked as a Messages call), not at creation.
    config = _config(fake, output_tokens=100_000)
    submitted = pb.submit(config, requests)
    fake.advance(submitted.batch_id)
    outcomes = pb.collect(config, pb.poll(config, submitted.batch_id), _templates(requests))
    for failure in outcomes:
        assert isinstance(failure, BatchFailure) and failure.kind is FailureKind.REQUEST_FAILED
        assert not failure.transient and failure.status_code == 400
        assert "max_tokens: 100000 > 64000" in failure.message
    fake.batches.clear()
    fake.fail_next("create", Reply(status=529, error="overloaded"))
    with pytest.raises(TransientError, match=r"HTTP 529 .*overloaded_error") as overloaded:
        pb.submit(_config(fake), requests)
    assert not isinstance(overloaded.value, RateLimitedError)
    assert fake.batches == {}
    with pytest.raises(PermanentError, match="unique"):
        pb.submit(_config(fake), [*requests, requests[0]])
    with pytest.raises(PermanentError, match="1-64 letters"):
        pb.submit(_config(fake), [BatchRequest("paper 1", requests[0].messages, RCT_TEMPLATE)])
    with pytest.raises(PermanentError, match="no requests"):
        pb.submit(_config(fake), [])


def test_split_requests_uses_anthropic_sizes_and_limits(fake: FakeAnthropicBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(5)
    size = _driver(config).request_size(config, requests[0])
    assert pb.split_requests(config, requests) == [requests]
    assert [len(g) for g in pb.split_requests(config, requests, max_requests=2)] == [2, 2, 1]
    assert [len(g) for g in pb.split_requests(config, requests, max_bytes=size * 2 + 10)] == [2, 2, 1]


# -- one batch of synthetic PDFs, end to end ------------------------------------------------------


def test_prepare_and_follow_store_the_answers_at_the_batch_price(
    ledger_url: str, tmp_path: Path, fake: FakeAnthropicBatchServer
) -> None:
    ledger = Ledger.connect(ledger_url)
    try:
        pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in (1, 2, 3)]
        docs = [document.id for document in register_all(ledger, tmp_path / "documents", "p", pdfs)]
        batch = create_batch(
            ledger, idempotency_key="pb", project="p", user="u", document_ids=docs, provider_batch=True
        )
        fake.answer = lambda params: answer_from_trial(fake.messages_of(params))
        llm = LLMConfig(model=MODEL, api_base=fake.api_base, api_key=KEY)

        def parse(item: ItemListing) -> ParsedDocument:
            return parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])

        done = flow.prepare(ledger, batch.id, llm, parse)
        assert done.prompts == 3 and len(done.provider_batch_ids) == 1, done.describe()
        [record] = open_provider_batches(ledger)
        assert not flow.follow(ledger, record, llm)  # still in progress
        fake.advance(record.provider_batch_id)
        assert flow.follow(ledger, record, llm)
        [ended] = provider_batches_of(ledger, batch.id)
        assert ended.status == "completed" and ended.fallen_back == 0
        stored = [stored_answer(ledger, entry.answer_key) for entry in entries_of(ledger, record.id)]
        assert all(answer is not None and answer.model == MODEL for answer in stored)
        expected = math.fsum(
            _batch_cost(
                a.prompt_tokens - a.cached_tokens - a.cache_written,
                a.completion_tokens,
                a.cached_tokens,
                a.cache_written,
            )
            for a in fake.messages_api.answered
        )
        assert math.fsum(a.cost_usd for a in stored if a is not None) == pytest.approx(expected)
        counted = progress(ledger, batch.id)
        assert counted.cost_usd == pytest.approx(expected, abs=1e-6) and counted.saved_usd > 0  # micro-dollars
        assert counted.tokens_in == sum(a.prompt_tokens for a in fake.messages_api.answered)
        assert fake.refusals == [] and fake.message_requests == []  # nothing asked twice
    finally:
        ledger.dispose()


def test_a_results_address_on_another_host_is_never_sent_the_key() -> None:
    base = "https://api.anthropic.com"
    assert same_origin(f"{base}/v1/messages/batches/b1/results", base) == f"{base}/v1/messages/batches/b1/results"
    assert same_origin("https://evil.example/v1/messages/batches/b1/results", base) is None
    assert same_origin("http://api.anthropic.com/v1/messages/batches/b1/results", base) is None  # not https
    assert same_origin("https://api.anthropic.com:8443/results", base) is None
    assert same_origin(None, base) is None
