"""Half-price calls through OpenAI's Batch API (``providers/openai_batches.py``, called through
``batch_api``): submit, poll, collect and cancel through the real litellm client over real HTTP,
against a loopback fake of OpenAI's Files and Batch endpoints (support/fake_batches.py), whose
lifecycle the tests drive step by step. What both drivers do alike is in test_batch_api.py.

The model string is a priced one (``openai/gpt-4o-mini``) pointed at the fake, so the cost of an
answer is litellm's batch price for it, which the model map sets at half the ordinary price.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import litellm as litellm_module
import pytest

from extraction_pipeline.core.errors import (
    AnswerCutError,
    ConfigError,
    OutputParseError,
    PermanentError,
    TransientError,
)
from extraction_pipeline.core.llm import batch_api as pb
from extraction_pipeline.core.llm.batch_model import (
    BatchAnswer,
    BatchFailure,
    BatchOutcome,
    BatchRequest,
    BatchState,
    FailureKind,
    ProviderJobStatus,
    RequestCounts,
)
from extraction_pipeline.core.llm.classify import classify
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction, parse_answer
from extraction_pipeline.core.llm.providers.openai_batches import OpenAIBatchDriver
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.extraction_cases import paper_answer, paper_requests
from extraction_pipeline_tests.support.fake_batches import FakeBatchServer
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json

MODEL = "openai/gpt-4o-mini"
KEY = "sk-batch-test-0123456789abcdef"
PRICES = litellm_module.model_cost["gpt-4o-mini"]


@pytest.fixture
def fake() -> Iterator[FakeBatchServer]:
    server = FakeBatchServer().start()
    server.api_key = KEY
    yield server
    server.stop()


def _config(fake: FakeBatchServer, **overrides: object) -> LLMConfig:
    settings: dict[str, object] = {"model": MODEL, "api_base": fake.api_base, "api_key": KEY, "output_tokens": 2000}
    return LLMConfig(**(settings | overrides))  # type: ignore[arg-type]


def _answer(body: dict[str, object]) -> Reply:
    """The trial's registration and size, quoted from the paper in the prompt."""
    n, answer = paper_answer(str(body["messages"][-1]["content"]))  # type: ignore[index]
    return Reply(answer, tokens_in=1000 + n)


def _templates(requests: list[BatchRequest]) -> dict[str, TemplateDefinition]:
    return {r.custom_id: r.template for r in requests}


def _run_to_end(fake: FakeBatchServer, config: LLMConfig, batch_id: str) -> BatchState:
    state = pb.poll(config, batch_id)
    while not state.status.ended:
        fake.advance(batch_id)
        state = pb.poll(config, batch_id)
    return state


def _driver(config: LLMConfig) -> OpenAIBatchDriver:
    driver = pb.driver_for(config)
    assert isinstance(driver, OpenAIBatchDriver)
    return driver


def _by_id(outcomes: list[BatchOutcome]) -> dict[str, BatchOutcome]:
    return {o.custom_id: o for o in outcomes}


def test_a_batch_line_carries_the_body_of_an_ordinary_call() -> None:
    chat = FakeLLMServer().start()
    try:
        config = LLMConfig(model=MODEL, api_base=chat.api_base, api_key=KEY, output_tokens=2000)
        request = paper_requests(1)[0]
        complete_extraction(config, request.messages, RCT_TEMPLATE)
        line = json.loads(_driver(config).batch_line(config, request))
    finally:
        chat.stop()
    assert line == {"custom_id": "paper-1", "method": "POST", "url": "/v1/chat/completions", "body": chat.requests[0]}
    assert line["body"]["model"] == "gpt-4o-mini"  # the provider's name, as the ordinary call sends it
    assert line["body"]["max_tokens"] == 2000
    assert line["body"]["response_format"]["type"] == "json_schema"


def test_submit_poll_and_collect_answers_at_the_batch_price(fake: FakeBatchServer) -> None:
    fake.answer = _answer
    config = _config(fake)
    requests = paper_requests(4)

    submitted = pb.submit(config, requests)

    assert (submitted.count, submitted.model, submitted.custom_ids) == (4, MODEL, tuple(r.custom_id for r in requests))
    assert submitted.input_file_id is not None
    uploaded = fake.files[submitted.input_file_id]
    assert uploaded.purpose == "batch"
    assert [json.loads(line)["custom_id"] for line in uploaded.data.splitlines()] == list(submitted.custom_ids)
    seen = [pb.poll(config, submitted.batch_id).status]
    while not seen[-1].ended:
        fake.advance(submitted.batch_id)
        seen.append(pb.poll(config, submitted.batch_id).status)
    assert seen == [
        ProviderJobStatus.VALIDATING,
        ProviderJobStatus.IN_PROGRESS,
        ProviderJobStatus.FINALIZING,
        ProviderJobStatus.COMPLETED,
    ]
    state = pb.poll(config, submitted.batch_id)
    assert state.counts == RequestCounts(total=4, completed=4, failed=0)
    assert state.output_file_id and state.error_file_id is None
    assert state.input_file_id == submitted.input_file_id

    outcomes = pb.collect(config, state, _templates(requests))

    assert [o.custom_id for o in outcomes] == list(submitted.custom_ids)
    for n, outcome in enumerate(outcomes, start=1):
        assert isinstance(outcome, BatchAnswer)
        assert outcome.output == parse_answer(outcome.content, RCT_TEMPLATE)
        assert outcome.output.metadata.nct_number.value == f"NCT0000000{n}"  # type: ignore[attr-defined]
        assert outcome.output.metadata.randomized_n.value == 100 + n  # type: ignore[attr-defined]
        usage = outcome.usage
        assert (usage.model, usage.tokens_in) == (MODEL, 1000 + n)
        assert usage.tokens_out > 0
        batch_price = usage.tokens_in * PRICES["input_cost_per_token_batches"] + (
            usage.tokens_out * PRICES["output_cost_per_token_batches"]
        )
        ordinary_price = usage.tokens_in * PRICES["input_cost_per_token"] + (
            usage.tokens_out * PRICES["output_cost_per_token"]
        )
        assert usage.cost_usd == pytest.approx(batch_price, rel=1e-9)
        assert usage.cost_usd == pytest.approx(ordinary_price / 2, rel=1e-9)  # half price, as the map says
        assert usage.saved_usd == pytest.approx(ordinary_price - batch_price, rel=1e-9)
    # Every line was run with its own prompt, exactly once.
    assert [body["messages"] for body in fake.answered] == [r.messages for r in requests]


def test_cached_prompt_tokens_are_counted(fake: FakeBatchServer) -> None:
    fake.answer = lambda body: Reply(json.dumps({}), tokens_in=1000, tokens_out=10)
    fake.cached_tokens = 400
    config = _config(fake, output_tokens=None)
    requests = paper_requests(1)
    state = _run_to_end(fake, config, pb.submit(config, requests).batch_id)

    (answer,) = pb.collect(config, state, _templates(requests))

    assert isinstance(answer, BatchAnswer)
    assert (answer.usage.tokens_in, answer.usage.cached_tokens) == (1000, 400)
    uncached = 1000 * PRICES["input_cost_per_token"] + answer.usage.tokens_out * PRICES["output_cost_per_token"]
    assert 0 < answer.usage.cost_usd < uncached
    assert answer.usage.saved_usd == pytest.approx(uncached - answer.usage.cost_usd, rel=1e-9)


def test_lines_the_provider_refused_fall_back_with_their_reason(fake: FakeBatchServer) -> None:
    def answer(body: dict[str, object]) -> Reply:
        text = str(body["messages"][-1]["content"])  # type: ignore[index]
        if "NCT00000002" in text:
            return Reply(status=500, error_message="The server had an error while processing your request.")
        if "NCT00000003" in text:
            return Reply(status=400, error_message="Invalid schema for response_format 'trial_extraction'.")
        return _answer(body)

    fake.answer = answer
    config = _config(fake)
    requests = paper_requests(4)
    state = _run_to_end(fake, config, pb.submit(config, requests).batch_id)
    assert state.status is ProviderJobStatus.COMPLETED
    assert state.counts == RequestCounts(total=4, completed=2, failed=2)
    assert state.output_file_id and state.error_file_id

    outcomes = _by_id(pb.collect(config, state, _templates(requests)))

    assert isinstance(outcomes["paper-1"], BatchAnswer) and isinstance(outcomes["paper-4"], BatchAnswer)
    server, bad = outcomes["paper-2"], outcomes["paper-3"]
    assert isinstance(server, BatchFailure) and isinstance(bad, BatchFailure)
    assert (server.kind, server.status_code, server.transient) == (FailureKind.REQUEST_FAILED, 500, True)
    assert "server had an error" in server.message
    assert isinstance(server.error(), TransientError)
    assert (bad.kind, bad.status_code, bad.transient) == (FailureKind.REQUEST_FAILED, 400, False)
    assert "Invalid schema" in bad.message
    error = bad.error()
    assert isinstance(error, PermanentError) and not isinstance(error, TransientError)


@pytest.mark.parametrize("reported", [True, False], ids=["written-as-batch_expired", "in-neither-file"])
def test_an_expired_batch_keeps_what_it_ran_and_the_rest_falls_back(fake: FakeBatchServer, reported: bool) -> None:
    fake.answer = _answer
    fake.report_unrun = reported
    config = _config(fake)
    requests = paper_requests(5)
    submitted = pb.submit(config, requests)
    fake.advance(submitted.batch_id)  # in progress
    fake.advance(submitted.batch_id, lines=2)
    assert pb.poll(config, submitted.batch_id).status is ProviderJobStatus.IN_PROGRESS
    fake.expire(submitted.batch_id)

    state = pb.poll(config, submitted.batch_id)
    outcomes = pb.collect(config, state, _templates(requests))

    assert state.status is ProviderJobStatus.EXPIRED
    assert state.counts.completed == 2
    assert [type(o).__name__ for o in outcomes] == ["BatchAnswer"] * 2 + ["BatchFailure"] * 3
    for failure in outcomes[2:]:
        assert isinstance(failure, BatchFailure)
        assert failure.kind is FailureKind.EXPIRED and failure.transient
        assert failure.usage is None  # never run, never paid
        assert isinstance(failure.error(), TransientError)
    assert (state.error_file_id is not None) is reported


def test_an_answer_cut_at_the_output_limit_is_a_failure_not_an_answer(fake: FakeBatchServer) -> None:
    long_answer = extraction_json({"metadata.study_id": ("x" * 400, "y" * 400)})
    fake.answer = lambda body: Reply(long_answer)
    config = _config(fake, output_tokens=50)
    requests = paper_requests(1)
    state = _run_to_end(fake, config, pb.submit(config, requests).batch_id)
    assert fake.answered[0]["max_tokens"] == 50

    (cut,) = pb.collect(config, state, _templates(requests))

    assert isinstance(cut, BatchFailure)
    assert (cut.kind, cut.transient) == (FailureKind.ANSWER_CUT, False)
    assert "answer cut at 50 output tokens" in cut.message
    assert cut.usage is not None and cut.usage.tokens_out == 50 and cut.usage.cost_usd > 0  # paid for
    error = cut.error()
    assert isinstance(error, AnswerCutError) and error.output_tokens == 50 and error.usage == cut.usage


def test_an_answer_that_is_not_the_template_json_keeps_its_text(fake: FakeBatchServer) -> None:
    fake.answer = lambda body: Reply("I could not find a trial in this text.")
    config = _config(fake)
    requests = paper_requests(1)
    state = _run_to_end(fake, config, pb.submit(config, requests).batch_id)

    (invalid,) = pb.collect(config, state, _templates(requests))

    assert isinstance(invalid, BatchFailure) and invalid.kind is FailureKind.INVALID_ANSWER
    assert invalid.content == "I could not find a trial in this text."
    assert isinstance(invalid.error(), OutputParseError)


def test_a_line_asking_more_than_the_model_writes_is_refused_like_a_chat_call(fake: FakeBatchServer) -> None:
    fake.answer = _answer
    fake.output_limit = 1000
    config = _config(fake, output_tokens=4000)
    requests = paper_requests(2)
    state = _run_to_end(fake, config, pb.submit(config, requests).batch_id)

    outcomes = pb.collect(config, state, _templates(requests))

    assert state.counts == RequestCounts(total=2, completed=0, failed=2)
    for failure in outcomes:
        assert isinstance(failure, BatchFailure)
        assert (failure.kind, failure.status_code, failure.transient) == (FailureKind.REQUEST_FAILED, 400, False)
        assert "max_tokens is too large: 4000" in failure.message


def test_a_batch_that_fails_validation_sends_every_request_back(fake: FakeBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(2)
    data = b"".join(_driver(config).batch_line(config, r) for r in requests)
    credentials = {"custom_llm_provider": "openai", "api_base": fake.api_base, "api_key": KEY, "max_retries": 0}
    uploaded = litellm_module.create_file(file=("in.jsonl", data), purpose="batch", **credentials)
    # The lines are chat calls, the batch is created for another endpoint: OpenAI fails it.
    batch = litellm_module.create_batch(
        completion_window="24h", endpoint="/v1/completions", input_file_id=uploaded.id, **credentials
    )
    fake.advance(batch.id)
    state = pb.poll(config, batch.id)
    assert state.status is ProviderJobStatus.FAILED
    assert state.errors and "invalid_url (line 1)" in state.errors[0]

    outcomes = pb.collect(config, state, _templates(requests))

    assert all(isinstance(o, BatchFailure) and o.kind is FailureKind.BATCH_FAILED for o in outcomes)
    assert "does not match the batch endpoint" in outcomes[0].message  # type: ignore[union-attr]


def test_a_malformed_upload_is_refused_with_the_line_named(fake: FakeBatchServer) -> None:
    config = _config(fake)
    good = [json.loads(_driver(config).batch_line(config, r)) for r in paper_requests(3)]
    credentials = {"custom_llm_provider": "openai", "api_base": fake.api_base, "api_key": KEY, "max_retries": 0}
    repeated = [good[0], good[1], {**good[2], "custom_id": good[0]["custom_id"]}]
    two_models = [good[0], {**good[1], "body": {**good[1]["body"], "model": "gpt-4o"}}]
    cases = {
        "the custom_id 'paper-1' is not unique": repeated,
        "same model": two_models,
        "Line 2: method must be 'POST'": [good[0], {**good[1], "method": "GET"}],
    }
    for expected, lines in cases.items():
        data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        with pytest.raises(Exception) as raised:  # noqa: PT011 - classified below, as the core does
            litellm_module.create_file(file=("in.jsonl", data), purpose="batch", **credentials)
        classified = classify(raised.value)
        assert isinstance(classified, PermanentError) and not isinstance(classified, TransientError)
        assert "HTTP 400" in str(classified) and expected in str(classified)
    not_json = b'{"custom_id": "a", "method": "POST"\n'
    with pytest.raises(Exception) as raised:  # noqa: PT011
        litellm_module.create_file(file=("in.jsonl", not_json), purpose="batch", **credentials)
    assert "Line 1 of the batch input file is not valid JSON" in str(classify(raised.value))
    assert not fake.batches


def test_submit_refuses_what_no_batch_takes(fake: FakeBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(3)
    with pytest.raises(PermanentError, match="no requests"):
        pb.submit(config, [])
    with pytest.raises(PermanentError, match=r"unique.*paper-1"):
        pb.submit(config, [requests[0], requests[1], requests[0]])
    assert fake.calls == []  # refused before anything was sent
    # A provider that takes fewer requests than OpenAI's 50,000: its refusal, classified, names the limit.
    fake.max_requests = 2
    with pytest.raises(PermanentError, match=r"uploading the input file failed: HTTP 400.*at most 2") as raised:
        pb.submit(config, requests)
    assert not isinstance(raised.value, TransientError)
    assert not fake.batches


def test_split_requests_cuts_at_the_request_and_byte_limits() -> None:
    config = LLMConfig(model=MODEL, output_tokens=2000)
    requests = paper_requests(5)
    assert [len(g) for g in pb.split_requests(config, requests, max_requests=2)] == [2, 2, 1]
    one_line = len(_driver(config).batch_line(config, requests[0]))
    groups = pb.split_requests(config, requests, max_bytes=one_line * 3 + 10)
    assert [len(g) for g in groups] == [3, 2]
    assert [r.custom_id for g in groups for r in g] == [r.custom_id for r in requests]  # order kept
    assert [len(g) for g in pb.split_requests(config, requests)] == [5]


def test_collect_waits_for_the_batch_to_end(fake: FakeBatchServer) -> None:
    config = _config(fake)
    requests = paper_requests(1)
    submitted = pb.submit(config, requests)
    with pytest.raises(PermanentError, match="is validating: collect it once it has ended"):
        pb.collect(config, pb.poll(config, submitted.batch_id), _templates(requests))


def test_only_openai_and_anthropic_models_are_sent_as_provider_batches(fake: FakeBatchServer) -> None:
    assert pb.supports_provider_batches("openai/gpt-4o-mini")
    assert pb.supports_provider_batches("gpt-4o-mini")
    # Anthropic's Message Batches are driven by anthropic_batches (test_anthropic_batches.py);
    # Azure's batches need deployment names and API versions this module does not drive.
    assert pb.supports_provider_batches("anthropic/claude-sonnet-4-5")
    for model in ("gemini/gemini-2.5-flash", "azure/gpt-4o-mini", "ollama/llama3", "offline/echo", None):
        assert not pb.supports_provider_batches(model)
    with pytest.raises(ConfigError, match="no provider batch API"):
        pb.submit(_config(fake, model="gemini/gemini-2.5-flash"), paper_requests(1))
    with pytest.raises(ConfigError, match="no provider batch API"):
        pb.poll(LLMConfig(), "batch_x")  # the offline model
    assert fake.calls == []


def test_a_result_line_that_cannot_be_read_fails_only_its_request(fake: FakeBatchServer) -> None:
    fake.answer = _answer
    config = _config(fake)
    requests = paper_requests(3)
    submitted = pb.submit(config, requests)
    state = _run_to_end(fake, config, submitted.batch_id)
    assert state.output_file_id
    output = fake.files[state.output_file_id]
    lines = output.data.splitlines()
    output.data = b"\n".join([lines[0], lines[1][: len(lines[1]) // 2], lines[2]]) + b"\n"  # cut mid-line

    outcomes = _by_id(pb.collect(config, state, _templates(requests)))

    broken = json.loads(lines[1])["custom_id"]
    failure = outcomes[broken]
    assert isinstance(failure, BatchFailure) and failure.transient  # asked again as an ordinary call
    assert "could not be read (1 unreadable line" in failure.message
    assert [isinstance(o, BatchAnswer) for i, o in outcomes.items() if i != broken] == [True, True]


def test_a_batch_over_the_enqueued_token_limit_fails_whole_and_says_so(fake: FakeBatchServer) -> None:
    fake.answer = _answer
    config = _config(fake)
    requests = paper_requests(2)
    first = pb.submit(config, requests[:1])
    fake.advance(first.batch_id)  # in progress: its tokens are enqueued
    enqueued = sum(len(json.dumps(line["body"]["messages"])) // 4 + 1 for line in fake.batches[first.batch_id].lines)
    fake.enqueued_token_limit = enqueued + 10  # room for the first, not for a second as large

    second = pb.submit(config, requests[1:])
    state = _run_to_end(fake, config, second.batch_id)

    assert state.status is ProviderJobStatus.FAILED
    assert state.errors and state.errors[0].startswith("token_limit_exceeded: Enqueued token limit reached")
    [failure] = pb.collect(config, state, _templates(requests[1:]))
    assert isinstance(failure, BatchFailure) and failure.kind is FailureKind.BATCH_FAILED and failure.transient
    assert "token_limit_exceeded" in failure.message  # asked as an ordinary call, the reason kept
    assert fake.advance(first.batch_id) == "finalizing"  # the first runs on
