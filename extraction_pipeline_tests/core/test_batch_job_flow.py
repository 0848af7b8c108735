"""A batch's wait for the provider's batch API always ends, and nothing is sent or paid twice
(SQLite and PostgreSQL): a provider batch that ends before its submit run finishes; a submit
retried after a transient failure between groups; a provider that no longer knows the batch; a
cancel the provider does not take; a cancel while the prompts are being uploaded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from extraction_pipeline.core.errors import TransientError
from extraction_pipeline.core.extraction import batch_job_flow as flow
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batch_jobs import (
    entries_of,
    open_provider_batches,
    provider_batches_of,
)
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress, undispatched_items
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.ledger.schema import ProviderBatchPhase
from extraction_pipeline.core.llm import batch_api
from extraction_pipeline.core.llm.batch_model import BatchRequest, SubmittedBatch
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document, parse_documents
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_batches import FakeBatchServer
from extraction_pipeline_tests.support.fake_llm import Reply


@dataclass
class Case:
    ledger: Ledger
    batch: int
    llm: LLMConfig
    fake: FakeBatchServer

    def parse(self, item: ItemListing) -> ParsedDocument:
        return parse_document(self.ledger, sha256=item["sha256"], stored_path=item["stored_path"])

    def phase(self) -> str | None:
        batch = get_batch(self.ledger, self.batch)
        assert batch is not None
        return batch["provider_batch"]

    def waiting(self) -> bool:
        return not any(item["batch_id"] == self.batch for item in undispatched_items(self.ledger, 100))


@pytest.fixture
def case(ledger_url: str, tmp_path: Path) -> Iterator[Case]:
    ledger = Ledger.connect(ledger_url)
    pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in (1, 2, 3)]
    docs = [document.id for document in register_all(ledger, tmp_path / "documents", "p", pdfs)]
    batch = create_batch(ledger, idempotency_key="pb", project="p", user="u", document_ids=docs, provider_batch=True)
    # Parsed together into the cache, as the submit step does: each ``parse`` below reads it.
    parse_documents(ledger, [(item["sha256"], item["stored_path"]) for item in batch_item_rows(ledger, batch.id)])
    fake = FakeBatchServer().start()
    fake.answer = lambda body: answer_from_trial(body["messages"])
    llm = LLMConfig(model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test-not-a-secret")
    yield Case(ledger, batch.id, llm, fake)
    fake.stop()
    ledger.dispose()


def _finish(fake: FakeBatchServer, batch_id: str) -> None:
    while fake.advance(batch_id) not in ("completed", "failed", "expired", "cancelled"):
        pass


def test_a_provider_batch_that_ends_before_its_submit_run_does_still_releases_the_documents(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_finish = flow.finish_preparation  # type: ignore[attr-defined]

    def follower_first(ledger: Ledger, batch_id: int, **kwargs: Any) -> bool:
        # The provider refused the file at once and the follower saw it before the run finished.
        for record in open_provider_batches(case.ledger):
            _finish(case.fake, record.provider_batch_id)
            assert flow.follow(case.ledger, record, case.llm)
        assert case.phase() == ProviderBatchPhase.PREPARING  # the follower leaves the phase to the run
        return real_finish(ledger, batch_id, **kwargs)

    monkeypatch.setattr(flow, "finish_preparation", follower_first)
    done = flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    assert done.prompts == 3
    assert case.phase() == ProviderBatchPhase.ENDED and not case.waiting()  # released, never stuck
    assert progress(case.ledger, case.batch).tokens_in == 3 * 900  # each answer counted once


def test_a_submit_retried_after_a_transient_failure_sends_nothing_twice(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_api, "split_requests", lambda llm, requests: [[r] for r in requests])
    real_submit = batch_api.submit
    calls = {"n": 0}

    def flaky(llm: LLMConfig, group: list[BatchRequest], key: str | None = None) -> SubmittedBatch:
        calls["n"] += 1
        if calls["n"] == 2:
            raise TransientError("HTTP 503 the provider is down for a moment", provider=True)
        return real_submit(llm, group, key)

    monkeypatch.setattr(batch_api, "submit", flaky)
    with pytest.raises(TransientError):
        flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    first, noted = provider_batches_of(case.ledger, case.batch)
    assert case.phase() == ProviderBatchPhase.PREPARING and not first.unresolved and noted.unresolved
    again = flow.prepare(case.ledger, case.batch, case.llm, case.parse)  # the step's retry
    assert again.prompts == 2
    custom_ids = [
        e.custom_id for r in provider_batches_of(case.ledger, case.batch) for e in entries_of(case.ledger, r.id)
    ]
    assert len(custom_ids) == 3 and len(set(custom_ids)) == 3  # each prompt submitted exactly once
    assert case.phase() == ProviderBatchPhase.SUBMITTED


def test_a_batch_the_provider_no_longer_knows_is_given_up_and_its_documents_run(case: Case) -> None:
    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    case.fake.batches.clear()  # another account's key, or the provider lost it: 404 from now on
    assert flow.follow(case.ledger, record, case.llm)
    [ended] = provider_batches_of(case.ledger, case.batch)
    assert ended.status == "given up" and ended.fallen_back == 3 and "No batch found" in (ended.message or "")
    assert case.phase() == ProviderBatchPhase.ENDED and not case.waiting()


def test_a_provider_unreachable_for_a_day_is_given_up_but_not_before(case: Case) -> None:
    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    case.fake.stop()  # nobody answers on that port
    with pytest.raises(TransientError):
        flow.follow(case.ledger, record, case.llm, now=record.submitted_at + flow.GIVE_UP_AFTER / 2)
    assert case.phase() == ProviderBatchPhase.SUBMITTED
    assert flow.follow(case.ledger, record, case.llm, now=record.submitted_at + flow.GIVE_UP_AFTER)
    assert case.phase() == ProviderBatchPhase.ENDED
    case.fake = FakeBatchServer().start()  # the fixture stops a server


def test_a_cancel_the_provider_does_not_take_is_given_up_here(case: Case) -> None:
    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    case.fake.fail_next("retrieve", Reply(status=401, error_message="Incorrect API key provided: sk-***"))
    [said] = flow.cancel_provider_batches(case.ledger, case.batch, case.llm)
    assert "given up here" in said and "sk-test-not-a-secret" not in said
    assert provider_batches_of(case.ledger, case.batch)[0].status == "given up"
    assert case.phase() == ProviderBatchPhase.ENDED and not case.waiting()
    assert record.provider_batch_id in case.fake.batches


def test_a_cancel_while_the_prompts_upload_cancels_what_was_just_submitted(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_submit = batch_api.submit

    def cancelled_meanwhile(llm: LLMConfig, group: list[BatchRequest], key: str | None = None) -> SubmittedBatch:
        submitted = real_submit(llm, group, key)
        flow.cancel_provider_batches(case.ledger, case.batch, case.llm)  # the analyst, from the CLI
        return submitted

    monkeypatch.setattr(batch_api, "submit", cancelled_meanwhile)
    done = flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    assert done.prompts == 0 and "cancelled while" in done.message
    [orphan] = case.fake.batches.values()
    assert orphan.status == "cancelling"  # not left running at the provider
    # The cancel found it at the provider by its key: followed to its end, what it answered kept.
    [record] = open_provider_batches(case.ledger)
    assert record.provider_batch_id == orphan.id
    _finish(case.fake, orphan.id)
    assert flow.follow(case.ledger, record, case.llm)
    assert case.phase() == ProviderBatchPhase.ENDED and not case.waiting()


def test_a_cancel_the_provider_cannot_take_now_is_said_and_the_batch_stays_followed(case: Case) -> None:
    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    case.fake.fail_next("retrieve", Reply(status=503, error_message="The server is overloaded"))
    with pytest.raises(TransientError):
        flow.cancel_provider_batches(case.ledger, case.batch, case.llm)
    [record] = open_provider_batches(case.ledger)  # still followed: the provider may yet answer
    assert case.phase() == ProviderBatchPhase.SUBMITTED
    assert flow.cancel_provider_batches(case.ledger, case.batch, case.llm) == [
        f"provider batch {record.provider_batch_id}: cancelling"
    ]


def test_ending_a_provider_batch_is_all_or_nothing(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure half-way through storing the answers leaves nothing stored and nothing counted:
    the provider batch stays open, and the next look stores every answer once."""
    from extraction_pipeline.core.ledger import batch_jobs as records
    from extraction_pipeline.core.ledger.answers import stored_answer

    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    _finish(case.fake, record.provider_batch_id)
    real = records.usage_increments  # type: ignore[attr-defined]
    calls = {"n": 0}

    def dies_on_the_second(usage: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the process died here")
        return real(usage)

    monkeypatch.setattr(records, "usage_increments", dies_on_the_second)
    with pytest.raises(RuntimeError):
        flow.follow(case.ledger, record, case.llm)
    entries = entries_of(case.ledger, record.id)
    assert all(stored_answer(case.ledger, entry.answer_key) is None for entry in entries)
    assert progress(case.ledger, case.batch).tokens_in == 0 and open_provider_batches(case.ledger) == [record]
    monkeypatch.setattr(records, "usage_increments", real)
    assert flow.follow(case.ledger, record, case.llm)
    assert all(stored_answer(case.ledger, entry.answer_key) is not None for entry in entries)
    assert progress(case.ledger, case.batch).tokens_in == 3 * 900 and case.phase() == ProviderBatchPhase.ENDED
