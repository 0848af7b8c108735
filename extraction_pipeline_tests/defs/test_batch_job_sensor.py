"""Half price through the provider's batch API, through Dagster: a batch created with
``provider_batch`` is not dispatched; the follower sensor launches the run that submits its prompts
(the provider's batch id kept in the ledger), follows the provider's batch, stores what it answered
at the batch price, and only then are the documents dispatched: their runs ground the stored
answers without calling, and ask what the provider failed as ordinary calls. A cancel cancels the
provider's batch; a submit run that failed sends the documents to ordinary calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.export.workbook import answer_label
from extraction_pipeline.core.extraction.batch_job_flow import cancel_provider_batches
from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batch_jobs import provider_batches_of
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress
from extraction_pipeline.core.ledger.schema import ProviderBatchPhase
from extraction_pipeline.core.synthetic import make_trial
from extraction_pipeline.defs.assets import extracted_document, parsed_document
from extraction_pipeline.defs.batch_job_sensor import (
    PROVIDER_BATCH_TAG,
    collect_provider_batch_job,
    provider_batch_follower,
    submit_provider_batch_job,
)
from extraction_pipeline.defs.partitions import DOCUMENTS_PARTITIONS
from extraction_pipeline.defs.resources import LLMResource
from extraction_pipeline.defs.sensors import batch_aggregator, batch_dispatcher
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial, batch_tags, register_trials, resources_for
from extraction_pipeline_tests.support.fake_batches import FakeBatchServer
from extraction_pipeline_tests.support.fake_llm import Reply
from extraction_pipeline_tests.support.ledgers import key_of

MODEL = "openai/gpt-4o-mini"  # priced by litellm, with a batch price of half


@pytest.fixture(autouse=True)
def ask_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The follower asks the provider every few minutes; here, every tick."""
    monkeypatch.setattr("extraction_pipeline.defs.batch_job_sensor.POLL_EVERY_SECONDS", 0.0)


@pytest.fixture
def provider() -> Iterator[FakeBatchServer]:
    server = FakeBatchServer().start()
    server.answer = lambda body: answer_from_trial(body["messages"])
    yield server
    server.stop()


def _resources(ledger: Ledger, home: Path, provider: FakeBatchServer) -> dict[str, Any]:
    resources = resources_for(ledger, home)
    resources["llm"] = LLMResource(model=MODEL, api_base=provider.api_base, api_key="sk-test-not-a-secret")
    return resources


def _provider_batch(ledger: Ledger, home: Path, papers: int) -> tuple[list[int], int]:
    """``papers`` trials registered and a batch of them for the provider's Batch API: (their ids, the batch)."""
    doc_ids = register_trials(ledger, home, papers)
    batch = create_batch(
        ledger, idempotency_key="pb", project="p", user="ann", document_ids=doc_ids, provider_batch=True
    ).id
    return doc_ids, batch


def _tick(sensor: Any, instance: dg.DagsterInstance, resources: dict[str, Any]) -> dg.SensorResult:
    result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SensorResult)
    return result


def _submit(instance: dg.DagsterInstance, resources: dict[str, Any], request: dg.RunRequest) -> None:
    """Run the submit job as the daemon would launch it from the sensor's request."""
    result = submit_provider_batch_job.execute_in_process(
        run_config=request.run_config, resources=resources, instance=instance, tags=request.tags
    )
    assert result.success


def _follow(instance: dg.DagsterInstance, resources: dict[str, Any]) -> int:
    """A follower tick, then the collect runs it launched, as the daemon would run them: how many."""
    requests = _tick(provider_batch_follower, instance, resources).run_requests or []
    collects = [r for r in requests if r.job_name == collect_provider_batch_job.name]
    for request in collects:
        result = collect_provider_batch_job.execute_in_process(
            run_config=request.run_config, resources=resources, instance=instance, tags=request.tags
        )
        assert result.success
    return len(collects)


def test_a_provider_batch_is_answered_at_half_price_and_grounded_by_the_documents_runs(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    home: Path,
    provider: FakeBatchServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing = make_trial(2).nct_number  # the provider fails this paper's line: an ordinary call asks it

    refused: list[str] = []

    def answer(body: dict[str, Any]) -> Reply:
        if failing in document_from_messages(body["messages"]) and not refused:  # its batch line only
            refused.append(failing)
            return Reply(status=500, error_message="The server had an error processing your request.")
        return answer_from_trial(body["messages"])

    provider.answer = answer
    doc_ids, batch = _provider_batch(home_ledger, home, 3)
    resources = _resources(home_ledger, home, provider)
    waiting = _tick(batch_dispatcher, instance, resources)
    assert not waiting.run_requests  # its documents wait for the provider batch

    first = _tick(provider_batch_follower, instance, resources)
    [request] = first.run_requests or []
    uid = batch_tags(home_ledger, batch)["extraction/batch_uid"]
    assert request.run_key == f"{uid}-provider-batch" and request.tags[PROVIDER_BATCH_TAG] == str(batch)
    _submit(instance, resources, request)
    [record] = provider_batches_of(home_ledger, batch)
    assert record.provider_batch_id in provider.batches and record.requests == 3  # the provider's id, kept
    assert get_batch(home_ledger, batch)["provider_batch"] == ProviderBatchPhase.SUBMITTED  # type: ignore[index]
    assert not _tick(provider_batch_follower, instance, resources).run_requests  # submitted once (run key)

    # A restarted daemon follows the same provider batch: everything it needs is in the ledger.
    provider.advance(record.provider_batch_id)  # in progress
    restarted = Ledger.connect(str(home_ledger.engine.url))
    _tick(provider_batch_follower, instance, _resources(restarted, home, provider))
    assert provider_batches_of(home_ledger, batch)[0].status == "in_progress"
    asked = len(provider.calls)
    monkeypatch.setattr("extraction_pipeline.defs.batch_job_sensor.POLL_EVERY_SECONDS", 300.0)
    _tick(provider_batch_follower, instance, resources)
    assert len(provider.calls) == asked  # asked a moment ago: not again before a few minutes pass
    monkeypatch.setattr("extraction_pipeline.defs.batch_job_sensor.POLL_EVERY_SECONDS", 0.0)
    assert not _tick(batch_dispatcher, instance, resources).run_requests  # still waiting
    provider.advance(record.provider_batch_id)  # every line run: finalizing
    provider.advance(record.provider_batch_id)  # completed
    assert _follow(instance, resources) == 1  # the tick asks; a run downloads and stores the answers
    assert not _tick(provider_batch_follower, instance, resources).run_requests  # collected once
    [ended] = provider_batches_of(home_ledger, batch)
    assert (ended.status, ended.answered, ended.fallen_back) == ("completed", 2, 1)
    assert get_batch(home_ledger, batch)["provider_batch"] == ProviderBatchPhase.ENDED  # type: ignore[index]
    paid = progress(home_ledger, batch)
    assert paid.tokens_in == 1800 and paid.cost_usd > 0 and paid.saved_usd == pytest.approx(paid.cost_usd)  # half

    dispatched = _tick(batch_dispatcher, instance, resources)
    assert len(dispatched.run_requests or []) >= 1  # now the documents run
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, [key_of(home_ledger, d) for d in doc_ids])
    for doc in doc_ids:
        result = dg.materialize(
            [parsed_document, extracted_document],
            partition_key=key_of(home_ledger, doc),
            instance=instance,
            resources=resources,
            tags={**batch_tags(home_ledger, batch), "extraction/user": "ann"},
        )
        assert result.success
    assert len(provider.chat_requests) == 1 and failing in document_from_messages(provider.chat_requests[0]["messages"])
    rows = batch_item_rows(home_ledger, batch)
    assert [row["status"] for row in rows] == ["completed"] * 3
    for row in rows:
        fields = json.loads(row["result_json"] or "{}")["fields"]
        assert fields["metadata.nct_number"]["status"] == "verified"
    labels = sorted(answer_label(json.loads(row["result_json"] or "{}")) for row in rows)
    assert labels[-1] == "new call" and all("its provider batch" in label for label in labels[:2])
    done = progress(home_ledger, batch)
    # Two answers at the batch price, one ordinary call at the full price: the ordinary call costs
    # twice what each batch answer did, and saved nothing.
    assert done.tokens_in == 2700 and done.cost_usd == pytest.approx(paid.cost_usd * 2)
    assert done.saved_usd == pytest.approx(paid.saved_usd)


def test_a_cancel_cancels_the_provider_batch_and_its_unanswered_documents_are_asked_by_ordinary_calls(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, provider: FakeBatchServer
) -> None:
    _, batch = _provider_batch(home_ledger, home, 2)
    resources = _resources(home_ledger, home, provider)
    [request] = _tick(provider_batch_follower, instance, resources).run_requests or []
    _submit(instance, resources, request)
    [record] = provider_batches_of(home_ledger, batch)
    provider.advance(record.provider_batch_id)
    provider.advance(record.provider_batch_id, lines=1)  # one answered, then the analyst cancels
    llm = resources["llm"].config()
    assert cancel_provider_batches(home_ledger, batch, llm) == [
        f"provider batch {record.provider_batch_id}: cancelling"
    ]
    assert provider.batches[record.provider_batch_id].status == "cancelling"
    provider.advance(record.provider_batch_id)  # cancelled, keeping what it ran
    assert _follow(instance, resources) == 1
    [ended] = provider_batches_of(home_ledger, batch)
    assert (ended.status, ended.answered, ended.fallen_back) == ("cancelled", 1, 1)
    assert len(_tick(batch_dispatcher, instance, resources).run_requests or []) >= 1


def test_a_submit_run_that_failed_sends_the_documents_to_ordinary_calls(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, provider: FakeBatchServer
) -> None:
    doc_ids, batch = _provider_batch(home_ledger, home, 1)
    resources = _resources(home_ledger, home, provider)
    [request] = _tick(provider_batch_follower, instance, resources).run_requests or []
    provider.fail_next("upload", Reply(status=401, error_message="Incorrect API key provided: sk-***"))
    result = submit_provider_batch_job.execute_in_process(
        run_config=request.run_config, resources=resources, instance=instance, tags=request.tags
    )
    assert result.success  # a refusal is an answer: ordinary calls, said on the batch
    [note] = provider_batches_of(home_ledger, batch)
    assert note.status == "not submitted" and "refused" in (note.message or "")
    assert get_batch(home_ledger, batch)["provider_batch"] == ProviderBatchPhase.ENDED  # type: ignore[index]
    assert len(_tick(batch_dispatcher, instance, resources).run_requests or []) == 1

    # A run that failed outright (the provider down past its retries, a crash) ends the waiting too.
    other = create_batch(
        home_ledger, idempotency_key="pb2", project="p", user="ann", document_ids=doc_ids, provider_batch=True
    ).id
    [again] = _tick(provider_batch_follower, instance, resources).run_requests or []

    @dg.op
    def crash() -> None:
        raise RuntimeError("worker died")

    @dg.job(name=submit_provider_batch_job.name)
    def crashed() -> None:
        crash()

    assert not crashed.execute_in_process(instance=instance, tags=again.tags, raise_on_error=False).success
    _tick(provider_batch_follower, instance, resources)
    assert get_batch(home_ledger, other)["provider_batch"] == ProviderBatchPhase.ENDED  # type: ignore[index]
    assert "submitting failed" in (provider_batches_of(home_ledger, other)[0].message or "")


def test_a_ui_launch_tagged_for_the_providers_batch_api_hands_its_documents_over_and_they_complete_after(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, provider: FakeBatchServer
) -> None:
    """A materialization launched from the Dagster UI with the tag `extraction/provider_batch=true`:
    its run parses the document and hands it to the dispatcher (a new round) instead of calling;
    the follower submits it, and once the provider has answered the dispatcher's run grounds the
    answer without a call."""
    from extraction_pipeline.defs.assets import PROVIDER_BATCH_HANDOVER
    from extraction_pipeline.defs.binding import PROVIDER_BATCH_TAG as UI_TAG

    [doc] = register_trials(home_ledger, home, 1)
    key = key_of(home_ledger, doc)
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, [key])
    resources = _resources(home_ledger, home, provider)
    launched = dg.materialize(
        [parsed_document, extracted_document],
        partition_key=key,
        instance=instance,
        resources=resources,
        tags={UI_TAG: "true", "extraction/user": "ann"},
    )
    assert launched.success
    meta = launched.asset_materializations_for_node("extracted_document")[0].metadata
    assert meta["status"].value == PROVIDER_BATCH_HANDOVER
    run = instance.get_run_by_id(launched.run_id)
    assert run is not None
    batch = int(run.tags["extraction/batch"])
    [item] = batch_item_rows(home_ledger, batch)
    assert (item["status"], item["dispatch_round"]) == ("pending", 1) and item["tokens_in"] == 0  # no call
    assert not _tick(batch_dispatcher, instance, resources).run_requests  # waits for the provider
    _tick(batch_aggregator, instance, resources)  # the launching run has ended: the item is not its
    [item] = batch_item_rows(home_ledger, batch)
    assert item["status"] == "pending" and get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]

    [request] = _tick(provider_batch_follower, instance, resources).run_requests or []
    _submit(instance, resources, request)
    [record] = provider_batches_of(home_ledger, batch)
    for _ in range(3):
        provider.advance(record.provider_batch_id)
    assert _follow(instance, resources) == 1
    [dispatched] = _tick(batch_dispatcher, instance, resources).run_requests or []
    assert dispatched.partition_key == key and dispatched.tags["extraction/round"] == "1"
    done = dg.materialize(
        [parsed_document, extracted_document],
        partition_key=key,
        instance=instance,
        resources=resources,
        tags=dispatched.tags,
    )
    assert done.success and provider.chat_requests == []  # the provider batch's answer, no ordinary call
    [item] = batch_item_rows(home_ledger, batch)
    assert item["status"] == "completed" and item["tokens_in"] == 900 and item["saved_usd"] > 0


def test_a_provider_batch_whose_results_cannot_be_collected_is_given_up_after_a_few_runs(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    home: Path,
    provider: FakeBatchServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from extraction_pipeline.defs import batch_job_sensor

    monkeypatch.setattr(batch_job_sensor, "COLLECT_RETRIES", 0)  # each run gives up at once: no minute-long waits
    monkeypatch.setattr(batch_job_sensor, "COLLECT_PAUSE", timedelta(0))  # and the next follows at once
    monkeypatch.setattr(batch_job_sensor, "COLLECT_GIVE_UP_AFTER", timedelta(0))  # the day is not waited out
    _, batch = _provider_batch(home_ledger, home, 1)
    resources = _resources(home_ledger, home, provider)
    [request] = _tick(provider_batch_follower, instance, resources).run_requests or []
    _submit(instance, resources, request)
    [record] = provider_batches_of(home_ledger, batch)
    for _ in range(3):
        provider.advance(record.provider_batch_id)
    for attempt in range(1, batch_job_sensor.COLLECT_ATTEMPTS + 1):
        provider.fail_next("content", Reply(status=503, error_message="The server is overloaded"))
        [collect] = _tick(provider_batch_follower, instance, resources).run_requests or []
        assert (collect.run_key or "").endswith(f"-provider-batch-{record.id}-collect-{attempt}")
        result = collect_provider_batch_job.execute_in_process(
            run_config=collect.run_config,
            resources=resources,
            instance=instance,
            tags=collect.tags,
            raise_on_error=False,
        )
        assert not result.success
        assert provider_batches_of(home_ledger, batch)[0].status == "completed"  # still waiting to be collected
    assert not _tick(provider_batch_follower, instance, resources).run_requests
    [given_up] = provider_batches_of(home_ledger, batch)
    assert given_up.status == "given up" and given_up.fallen_back == 1
    assert f"could not be collected in {batch_job_sensor.COLLECT_ATTEMPTS} runs over" in (given_up.message or "")
    assert get_batch(home_ledger, batch)["provider_batch"] == ProviderBatchPhase.ENDED  # type: ignore[index]
    assert len(_tick(batch_dispatcher, instance, resources).run_requests or []) == 1  # asked by an ordinary call


def test_a_failed_collect_is_launched_again_after_a_pause_not_given_up(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    home: Path,
    provider: FakeBatchServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answers are paid for: an outage while downloading them costs a pause, not the batch."""
    from extraction_pipeline.defs import batch_job_sensor

    monkeypatch.setattr(batch_job_sensor, "COLLECT_RETRIES", 0)
    _, batch = _provider_batch(home_ledger, home, 1)
    resources = _resources(home_ledger, home, provider)
    [request] = _tick(provider_batch_follower, instance, resources).run_requests or []
    _submit(instance, resources, request)
    [record] = provider_batches_of(home_ledger, batch)
    for _ in range(3):
        provider.advance(record.provider_batch_id)
    for _ in range(batch_job_sensor.COLLECT_ATTEMPTS):
        provider.fail_next("content", Reply(status=503, error_message="The server is overloaded"))
        monkeypatch.setattr(batch_job_sensor, "COLLECT_PAUSE", timedelta(0))
        [collect] = _tick(provider_batch_follower, instance, resources).run_requests or []
        collect_provider_batch_job.execute_in_process(
            run_config=collect.run_config,
            resources=resources,
            instance=instance,
            tags=collect.tags,
            raise_on_error=False,
        )
        monkeypatch.setattr(batch_job_sensor, "COLLECT_PAUSE", timedelta(minutes=10))
        assert not _tick(provider_batch_follower, instance, resources).run_requests  # a pause after a failure
    [waiting] = provider_batches_of(home_ledger, batch)
    assert waiting.status == "completed" and not waiting.ended  # three failures within the day: not given up
    monkeypatch.setattr(batch_job_sensor, "COLLECT_PAUSE", timedelta(0))
    assert _follow(instance, resources) == 1  # the provider is back: collected
    [ended] = provider_batches_of(home_ledger, batch)
    assert ended.ended and ended.answered == 1
