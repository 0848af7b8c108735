"""What every batch driver does alike, asserted once over both (``batch_api`` in front of
``providers/openai_batches.py`` and ``providers/anthropic_batches.py``), each against its loopback
fake over real HTTP: a cancelled job keeps what it answered, and every failure is classified and
carries no key. What only one provider does is in test_openai_batches.py and
test_anthropic_batches.py."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from extraction_pipeline.core.errors import PermanentError, RateLimitedError, TransientError
from extraction_pipeline.core.llm import batch_api as pb
from extraction_pipeline.core.llm.batch_model import (
    BatchAnswer,
    BatchFailure,
    BatchRequest,
    BatchState,
    FailureKind,
    ProviderJobStatus,
)
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline_tests.support.extraction_cases import paper_answer, paper_requests
from extraction_pipeline_tests.support.fake_anthropic_batches import FakeAnthropicBatchServer
from extraction_pipeline_tests.support.fake_batches import FakeBatchServer
from extraction_pipeline_tests.support.fake_llm import Reply


def _openai_answer(body: dict[str, Any]) -> Reply:
    n, answer = paper_answer(str(body["messages"][-1]["content"]))
    return Reply(answer, tokens_in=1000 + n)


def _anthropic_answer(params: dict[str, Any]) -> Reply:
    content = params["messages"][-1]["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return Reply(paper_answer(text)[1])


@dataclass
class Driver:
    """One provider's batch API against its fake, and what differs in what the test sees."""

    name: str
    fake: FakeBatchServer | FakeAnthropicBatchServer
    model: str
    key: str
    start: Callable[[str], None]  # from submitted to running (OpenAI validates the file first)
    cancel_path: str  # the cancel call's path, {id} the job's
    ended_by_cancel: str  # what the fake's advance says when a cancelling job ends
    results_route: str  # the fake's route the answers are read from
    results_error: Reply  # a 5xx reading them is answered with
    results_failed: str  # how it is said
    server_error: Reply  # a 5xx the create call is answered with
    server_error_said: str  # how it is said
    rate_limited: Reply  # a 429 the status call is answered with
    retry_after: float | None  # what that 429 says
    unknown_id: str
    not_found: str  # how an unknown job is said
    wrong_key: str
    key_refused: str  # how a wrong key is said

    def config(self, **overrides: object) -> LLMConfig:
        settings: dict[str, object] = {
            "model": self.model,
            "api_base": self.fake.api_base,
            "api_key": self.key,
            "output_tokens": 2000,
        }
        return LLMConfig(**(settings | overrides))  # type: ignore[arg-type]

    def run_to_end(self, config: LLMConfig, batch_id: str) -> BatchState:
        state = pb.poll(config, batch_id)
        while not state.status.ended:
            self.fake.advance(batch_id)
            state = pb.poll(config, batch_id)
        return state


def _validated(fake: FakeBatchServer, batch_id: str) -> None:
    assert fake.advance(batch_id) == "in_progress"


def _openai() -> Driver:
    fake = FakeBatchServer().start()
    fake.api_key = "sk-batch-test-0123456789abcdef"
    fake.answer = _openai_answer
    return Driver(
        name="openai",
        fake=fake,
        model="openai/gpt-4o-mini",
        key=fake.api_key,
        start=lambda batch_id: _validated(fake, batch_id),
        cancel_path="/v1/batches/{id}/cancel",
        ended_by_cancel="cancelled",
        results_route="content",
        results_error=Reply(status=503, error_message="Slow down."),
        results_failed=r"reading file .* failed: HTTP 503",
        server_error=Reply(status=500, error_message="The server had an error."),
        server_error_said=r"creating the batch failed: HTTP 500",
        rate_limited=Reply(status=429, error_message="Too many requests."),
        retry_after=None,
        unknown_id="batch_unknown",
        not_found="HTTP 404",
        wrong_key="sk-wrong-key-9876543210fedcba",
        key_refused="HTTP 401",
    )


def _anthropic() -> Driver:
    fake = FakeAnthropicBatchServer().start()
    fake.api_key = "sk-ant-batch-test-0123456789abcdef"
    fake.answer = _anthropic_answer
    return Driver(
        name="anthropic",
        fake=fake,
        model="anthropic/claude-sonnet-4-5-20250929",
        key=fake.api_key,
        start=lambda batch_id: None,  # Anthropic starts at once
        cancel_path="/v1/messages/batches/{id}/cancel",
        ended_by_cancel="ended",
        results_route="results",
        results_error=Reply(status=500),
        results_failed=r"reading the results of batch .* failed: HTTP 500",
        server_error=Reply(status=529, error="overloaded"),
        server_error_said=r"creating the batch failed: HTTP 529 .*overloaded_error",
        rate_limited=Reply(status=429, error="rate_limit"),
        retry_after=7,
        unknown_id="msgbatch_unknown",
        not_found=r"HTTP 404 .*not_found_error",
        wrong_key="sk-ant-wrong-key-0123456789",
        key_refused=r"HTTP 401 .*authentication_error",
    )


@pytest.fixture(params=[_openai, _anthropic], ids=["openai", "anthropic"])
def driver(request: pytest.FixtureRequest) -> Iterator[Driver]:
    made: Driver = request.param()
    yield made
    made.fake.stop()


def _templates(requests: list[BatchRequest]) -> dict[str, TemplateDefinition]:
    return {r.custom_id: r.template for r in requests}


def _cancels(driver: Driver) -> list[tuple[str, str]]:
    return [call for call in driver.fake.calls if call[1].endswith("/cancel")]


def test_a_cancelled_batch_keeps_what_it_answered(driver: Driver) -> None:
    config = driver.config()
    requests = paper_requests(3)
    submitted = pb.submit(config, requests)
    driver.start(submitted.batch_id)
    driver.fake.advance(submitted.batch_id, lines=1)

    assert pb.cancel(config, submitted.batch_id).status is ProviderJobStatus.CANCELLING
    assert pb.cancel(config, submitted.batch_id).status is ProviderJobStatus.CANCELLING  # asked once is enough
    assert _cancels(driver) == [("POST", driver.cancel_path.format(id=submitted.batch_id))]
    assert driver.fake.advance(submitted.batch_id) == driver.ended_by_cancel
    state = pb.poll(config, submitted.batch_id)
    assert state.status is ProviderJobStatus.CANCELLED and state.counts.failed == 2
    # Cancelling an ended batch changes nothing and sends no cancel.
    assert pb.cancel(config, submitted.batch_id).status is ProviderJobStatus.CANCELLED
    assert len(_cancels(driver)) == 1

    first, *rest = pb.collect(config, state, _templates(requests))

    assert isinstance(first, BatchAnswer) and first.custom_id == "paper-1"
    assert [o.custom_id for o in rest] == ["paper-2", "paper-3"]
    assert all(isinstance(o, BatchFailure) and o.kind is FailureKind.CANCELLED and o.transient for o in rest)


def test_errors_are_classified_and_carry_no_key(driver: Driver) -> None:
    config = driver.config()
    requests = paper_requests(2)
    driver.fake.fail_next("create", driver.server_error)
    with pytest.raises(TransientError, match=driver.server_error_said) as transient:
        pb.submit(config, requests)
    assert transient.value.provider and not isinstance(transient.value, RateLimitedError)
    with pytest.raises(PermanentError, match=driver.key_refused) as refused_submit:
        pb.submit(driver.config(api_key=driver.wrong_key), requests)
    assert not isinstance(refused_submit.value, TransientError)
    assert driver.wrong_key.rsplit("-", 1)[0] not in str(refused_submit.value)

    submitted = pb.submit(config, requests)  # the next attempt goes through
    driver.fake.fail_next("retrieve", driver.rate_limited)
    with pytest.raises(RateLimitedError, match="HTTP 429") as limited:
        pb.poll(config, submitted.batch_id)
    assert limited.value.retry_after == driver.retry_after and driver.key not in str(limited.value)
    with pytest.raises(PermanentError, match=driver.key_refused) as refused:
        pb.poll(driver.config(api_key=driver.wrong_key), submitted.batch_id)
    assert not isinstance(refused.value, TransientError)
    assert driver.wrong_key not in str(refused.value) and driver.key not in str(refused.value)
    with pytest.raises(PermanentError, match=driver.not_found) as unknown:
        pb.poll(config, driver.unknown_id)
    assert not isinstance(unknown.value, TransientError)

    state = driver.run_to_end(config, submitted.batch_id)
    driver.fake.fail_next(driver.results_route, driver.results_error)
    with pytest.raises(TransientError, match=driver.results_failed):
        pb.collect(config, state, _templates(requests))

    base = driver.fake.api_base
    driver.fake.stop()  # nobody answers on that port any more
    with pytest.raises(TransientError, match="provider unreachable") as unreachable:
        pb.poll(driver.config(api_base=base, timeout_seconds=5), submitted.batch_id)
    assert driver.key not in str(unreachable.value)
    with socket.socket() as free:  # nor on a port nobody ever answered on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(TransientError, match="provider unreachable") as never:
        pb.poll(driver.config(api_base=f"http://127.0.0.1:{port}"), submitted.batch_id)
    assert driver.key not in str(never.value)
