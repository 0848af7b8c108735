"""A provider batch is never paid for twice (SQLite and PostgreSQL ledgers, loopback OpenAI and
Anthropic batch APIs): whatever stops a submit after the provider took the batch and before the
ledger kept its id (the create call's answer never coming, the process killed, the database
gone), the next attempt finds the batch at the provider and follows it; exactly one batch exists
there, and each answer is paid for once. Also: a refused create leaves no uploaded file behind, and
a provider batch's answer never replaces another document's stored answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from extraction_pipeline.core.errors import TransientError
from extraction_pipeline.core.extraction import batch_job_flow as flow
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import StoredAnswer, answer_for, store_answer, stored_answer
from extraction_pipeline.core.ledger.batch_jobs import (
    describe_provider_batches,
    entries_of,
    open_provider_batches,
    provider_batches_of,
)
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.ledger.schema import ProviderBatchPhase, provider_batches
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document, parse_documents
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support.dagster_runs import answer_from_trial
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_anthropic_batches import FakeAnthropicBatchServer, FakeMessageBatch
from extraction_pipeline_tests.support.fake_batches import FakeBatchServer
from extraction_pipeline_tests.support.fake_llm import Reply
from extraction_pipeline_tests.support.ledgers import PG_ADMIN_URL
from extraction_pipeline_tests.support.processes import warm_context

DOCUMENTS = 3
ANSWER_TOKENS_IN = 900  # what the fake's answer_from_trial reports per prompt


@dataclass
class Case:
    url: str
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


def _documents(ledger: Ledger, tmp_path: Path, *, key: str = "pb", fresh: bool = False) -> int:
    pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in range(1, DOCUMENTS + 1)]
    docs = [document.id for document in register_all(ledger, tmp_path / "documents", "p", pdfs)]
    batch = create_batch(
        ledger, idempotency_key=key, project="p", user="u", document_ids=docs, provider_batch=True, fresh=fresh
    )
    # Parsed together into the cache, as the submit step does: each ``parse`` below reads it.
    parse_documents(ledger, [(item["sha256"], item["stored_path"]) for item in batch_item_rows(ledger, batch.id)])
    return batch.id


@pytest.fixture
def case(ledger_url: str, tmp_path: Path) -> Iterator[Case]:
    ledger = Ledger.connect(ledger_url)
    batch = _documents(ledger, tmp_path)
    fake = FakeBatchServer().start()
    fake.answer = lambda body: answer_from_trial(body["messages"])
    # A short call timeout: the create whose answer never comes is abandoned after 2 s.
    llm = LLMConfig(
        model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test-not-a-secret", timeout_seconds=2
    )
    yield Case(ledger_url, ledger, batch, llm, fake)
    fake.after_create = None
    fake.stop()
    ledger.dispose()


def _finish_and_follow(case: Case) -> None:
    """The provider runs the one batch to its end; the follower stores its answers."""
    [record] = open_provider_batches(case.ledger)
    while case.fake.advance(record.provider_batch_id) != "completed":
        pass
    assert flow.follow(case.ledger, record, case.llm)


def _paid_once(case: Case) -> None:
    """Exactly one batch at the provider, every prompt run once there, each answer counted once."""
    assert len(case.fake.batches) == 1
    assert len(case.fake.answered) == DOCUMENTS
    assert progress(case.ledger, case.batch).tokens_in == DOCUMENTS * ANSWER_TOKENS_IN
    assert case.phase() == ProviderBatchPhase.ENDED


def test_a_create_whose_answer_never_came_is_found_at_the_provider_and_not_sent_again(case: Case) -> None:
    def slow_once(batch: Any) -> None:
        case.fake.after_create = None
        time.sleep(case.llm.timeout_seconds + 1.5)  # the provider has the batch; the caller gives up first

    case.fake.after_create = slow_once
    with pytest.raises(TransientError, match="did not answer"):
        flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [noted] = provider_batches_of(case.ledger, case.batch)
    assert noted.unresolved and noted.submission_key and len(entries_of(case.ledger, noted.id)) == DOCUMENTS
    [taken] = case.fake.batches.values()
    assert taken.metadata == {"extraction_pipeline_submission": noted.submission_key}

    again = flow.prepare(case.ledger, case.batch, case.llm, case.parse)  # the step's retry
    assert again.provider_batch_ids == (taken.id,)
    [record] = provider_batches_of(case.ledger, case.batch)
    assert record.provider_batch_id == taken.id and not record.unresolved
    _finish_and_follow(case)
    _paid_once(case)


def _prepare_in_child(url: str, batch_id: int, api_base: str) -> None:
    ledger = Ledger.connect(url)
    llm = LLMConfig(model="openai/gpt-4o-mini", api_base=api_base, api_key="sk-test-not-a-secret")

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])

    flow.prepare(ledger, batch_id, llm, parse)


def test_a_submit_killed_after_the_provider_took_the_batch_is_followed_by_the_next_attempt(case: Case) -> None:
    taken = threading.Event()
    release = threading.Event()

    def hold(batch: Any) -> None:  # the provider has it; its answer waits until the asker is dead
        taken.set()
        release.wait(60)

    case.fake.after_create = hold
    child = warm_context().Process(target=_prepare_in_child, args=(case.url, case.batch, case.fake.api_base))
    child.start()
    try:
        assert taken.wait(120), "the child never created the batch"
        child.kill()
        child.join(30)
    finally:
        release.set()
    assert child.exitcode == -9
    case.fake.after_create = None
    [noted] = provider_batches_of(case.ledger, case.batch)
    assert noted.unresolved  # the ledger never heard the provider's id

    flow.prepare(case.ledger, case.batch, case.llm, case.parse)  # the run's retry, in a new process
    _finish_and_follow(case)
    _paid_once(case)


@pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)
def test_a_database_lost_after_the_provider_took_the_batch_is_followed_once_it_is_back(case: Case) -> None:
    name = make_url(case.url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")

    def database_goes(batch: Any) -> None:
        case.fake.after_create = None
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))  # a test database's name
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"), {"name": name}
            )

    case.fake.after_create = database_goes
    try:
        with pytest.raises(OperationalError):
            flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()
    case.ledger.engine.dispose()  # the pool's connections were cut
    assert [r.unresolved for r in provider_batches_of(case.ledger, case.batch)] == [True]

    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    _finish_and_follow(case)
    _paid_once(case)


def test_a_noted_submission_whose_run_gave_up_is_settled_by_the_follower(case: Case) -> None:
    case.fake.fail_next("create", Reply(status=503, error_message="The server is overloaded"))
    with pytest.raises(TransientError):
        flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    # The run's retries ran out: the sensor ends the preparation; the note is the follower's now.
    flow.finish_preparation(case.ledger, case.batch, message="submitting failed")  # type: ignore[attr-defined]
    [noted] = open_provider_batches(case.ledger)
    assert noted.unresolved
    assert flow.follow(case.ledger, noted, case.llm)  # the provider has no batch of it
    [ended] = [r for r in provider_batches_of(case.ledger, case.batch) if r.id == noted.id]
    assert ended.ended and ended.fallen_back == DOCUMENTS and "never reached the provider" in (ended.message or "")
    assert case.phase() == ProviderBatchPhase.ENDED and not case.fake.batches


def test_a_create_the_provider_refused_deletes_the_uploaded_file(case: Case) -> None:
    case.fake.fail_next("create", Reply(status=400, error_message="Invalid 'metadata'"))
    done = flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    assert "refused" in done.message and not case.fake.batches
    assert case.fake.files == {}  # uploaded, then deleted when the create was refused
    assert [method for method, _ in case.fake.calls].count("DELETE") == 1
    assert provider_batches_of(case.ledger, case.batch)[-1].provider_batch_id == "(none)"  # the note, no batch
    assert case.phase() == ProviderBatchPhase.ENDED


def test_a_provider_batch_answer_never_replaces_another_documents_stored_answer(
    ledger_url: str, tmp_path: Path
) -> None:
    ledger = Ledger.connect(ledger_url)
    fake = FakeBatchServer().start()
    fake.answer = lambda body: answer_from_trial(body["messages"])
    llm = LLMConfig(model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test-not-a-secret")
    try:
        first = _documents(ledger, tmp_path / "a", key="first")
        # A --fresh batch of the same papers asks the same prompts again.
        again = _documents(ledger, tmp_path / "b", key="again", fresh=True)
        first_items = batch_item_rows(ledger, first)
        parse = lambda item: parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])  # noqa: E731
        flow.prepare(ledger, again, llm, parse)
        [record] = open_provider_batches(ledger)
        entries = entries_of(ledger, record.id)
        # Meanwhile the first batch's documents were answered by ordinary calls and their results cite them.
        for entry, item in zip(entries, first_items, strict=True):
            store_answer(ledger, StoredAnswer.paid(entry.answer_key, '{"earlier": 1}', Usage("m"), item["id"]))
        while fake.advance(record.provider_batch_id) != "completed":
            pass
        assert flow.follow(ledger, record, llm)
        for entry, item in zip(entries, first_items, strict=True):
            kept = stored_answer(ledger, entry.answer_key)
            assert kept is not None and kept.item_id == item["id"] and kept.content == '{"earlier": 1}'
            own = answer_for(ledger, entry.answer_key, entry.item_id)
            assert own is not None and own.item_id == entry.item_id and own.content != '{"earlier": 1}'
            assert own.key == entry.answer_key
    finally:
        fake.stop()
        ledger.dispose()


@pytest.fixture
def anthropic_case(
    ledger_url: str, tmp_path: Path
) -> Iterator[tuple[Ledger, int, LLMConfig, FakeAnthropicBatchServer]]:
    ledger = Ledger.connect(ledger_url)
    batch = _documents(ledger, tmp_path)
    fake = FakeAnthropicBatchServer().start()
    fake.answer = lambda params: answer_from_trial(fake.messages_of(params))
    llm = LLMConfig(
        model="anthropic/claude-sonnet-4-5-20250929", api_base=fake.api_base, api_key="sk-ant-test", timeout_seconds=2
    )
    yield ledger, batch, llm, fake
    fake.after_create = None
    fake.stop()
    ledger.dispose()


def test_an_anthropic_create_whose_connection_dropped_is_found_by_its_time_and_size(
    anthropic_case: tuple[Ledger, int, LLMConfig, FakeAnthropicBatchServer],
) -> None:
    ledger, batch_id, llm, fake = anthropic_case

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])

    def dropped_once(batch: Any) -> bool:
        fake.after_create = None
        return False  # the connection closes unanswered: the provider has the batch, the caller never hears

    fake.after_create = dropped_once
    with pytest.raises(TransientError):
        flow.prepare(ledger, batch_id, llm, parse)
    [taken] = fake.batches.values()
    # A batch of another size created since on the same account is not taken for ours.
    other = FakeMessageBatch("msgbatch_other", [{"custom_id": "x", "params": {}}], {}, datetime.now(UTC))
    fake.batches[other.id] = other
    again = flow.prepare(ledger, batch_id, llm, parse)
    assert again.provider_batch_ids == (taken.id,) and len(fake.batches) == 2
    [record] = open_provider_batches(ledger)
    fake.advance(record.provider_batch_id)
    assert flow.follow(ledger, record, llm)
    assert len(fake.answered) == DOCUMENTS
    assert progress(ledger, batch_id).tokens_in > 0
    [ended] = provider_batches_of(ledger, batch_id)
    assert ended.answered == DOCUMENTS


def test_a_batch_the_provider_failed_for_its_enqueued_token_limit_says_so_on_the_batch(case: Case) -> None:
    case.fake.enqueued_token_limit = 100  # smaller than one paper's prompt
    flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    assert case.fake.advance(record.provider_batch_id) == "failed"
    assert flow.follow(case.ledger, record, case.llm)
    batch = get_batch(case.ledger, case.batch)
    assert batch is not None
    [line] = [line for line in describe_provider_batches(case.ledger, batch) if record.provider_batch_id in line]
    assert f"0 of {DOCUMENTS} answered at the batch price, {DOCUMENTS} asked as ordinary calls" in line
    assert "(the provider said: token_limit_exceeded: Enqueued token limit reached" in line
    assert case.phase() == ProviderBatchPhase.ENDED  # the documents are asked by ordinary calls, and told why


def test_a_provider_batch_is_followed_with_its_own_providers_key_after_the_instance_switched(case: Case) -> None:
    case.fake.api_key = "sk-openai-batches-key"
    llm = replace(case.llm, api_key="sk-openai-batches-key")
    flow.prepare(case.ledger, case.batch, llm, case.parse)
    [record] = open_provider_batches(case.ledger)
    while case.fake.advance(record.provider_batch_id) != "completed":
        pass
    # The instance now extracts with Anthropic; OpenAI's key and endpoint are kept per provider.
    switched = LLMConfig(
        model="anthropic/claude-sonnet-4-5-20250929",
        api_base="http://127.0.0.1:9",
        api_key="sk-ant-must-not-reach-openai",
        keys=(("openai", "sk-openai-batches-key"),),
        bases=(("openai", case.fake.api_base),),
    )
    calls_before = len(case.fake.calls)
    assert flow.follow(case.ledger, record, switched)
    assert len(case.fake.calls) > calls_before  # OpenAI was asked, with OpenAI's key (the fake refuses others)
    _paid_once(case)


def test_a_provider_that_cannot_say_whether_it_has_a_noted_batch_is_not_sent_it_again(case: Case) -> None:
    def slow_once(batch: Any) -> None:
        case.fake.after_create = None
        time.sleep(case.llm.timeout_seconds + 1.5)

    case.fake.after_create = slow_once
    with pytest.raises(TransientError):
        flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    case.fake.fail_next("list", Reply(status=403, error_message="You are not allowed to list batches"))
    done = flow.prepare(case.ledger, case.batch, case.llm, case.parse)
    assert "not sent again" in done.message and len(case.fake.batches) == 1  # never paid twice
    noted = provider_batches_of(case.ledger, case.batch)[0]
    assert noted.ended and "cannot say whether it has them" in (noted.message or "")
    assert "not known to have reached the provider" in noted.describe()
    assert case.phase() == ProviderBatchPhase.ENDED  # its documents are asked by ordinary calls


def test_two_notes_never_follow_the_same_provider_batch(case: Case) -> None:
    from extraction_pipeline.core.ledger.batch_jobs import Entry, record_intent, record_submitted

    items = batch_item_rows(case.ledger, case.batch)
    first, second = (
        record_intent(
            case.ledger, batch_id=case.batch, model="m", key=f"k{n}", entries=[Entry(item["id"], f"c{n}", "a" * 64)]
        )
        for n, item in enumerate(items[:2])
    )
    assert first is not None and second is not None
    assert record_submitted(case.ledger, first, provider_batch_id="batch_x", input_file_id=None)
    assert not record_submitted(case.ledger, second, provider_batch_id="batch_x", input_file_id=None)
    # A second attempt noting prompts already noted sends nothing.
    again = record_intent(
        case.ledger, batch_id=case.batch, model="m", key="k9", entries=[Entry(items[0]["id"], "c0", "a" * 64)]
    )
    assert again is None


def test_an_anthropic_batch_sent_again_later_is_looked_for_from_its_last_sending(
    anthropic_case: tuple[Ledger, int, LLMConfig, FakeAnthropicBatchServer],
) -> None:
    ledger, batch_id, llm, fake = anthropic_case

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])

    fake.fail_next("create", Reply(status=529, error="overloaded"))  # nothing made
    with pytest.raises(TransientError):
        flow.prepare(ledger, batch_id, llm, parse)
    [noted] = provider_batches_of(ledger, batch_id)
    with ledger.engine.begin() as conn:  # the step's retries took twenty minutes
        conn.execute(
            update(provider_batches)
            .where(provider_batches.c.id == noted.id)
            .values(submitted_at=noted.submitted_at - timedelta(minutes=20))
        )
    fake.after_create = lambda batch: False  # made, and the connection dropped
    with pytest.raises(TransientError):
        flow.prepare(ledger, batch_id, llm, parse)
    fake.after_create = None
    again = flow.prepare(ledger, batch_id, llm, parse)
    [made] = fake.batches.values()  # found, not made a second time
    assert again.provider_batch_ids == (made.id,)


def test_a_batch_of_another_ledger_taken_by_mistake_gives_no_document_its_answers(
    anthropic_case: tuple[Ledger, int, LLMConfig, FakeAnthropicBatchServer],
) -> None:
    ledger, batch_id, llm, fake = anthropic_case

    def parse(item: ItemListing) -> ParsedDocument:
        return parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])

    fake.fail_next("create", Reply(status=529, error="overloaded"))
    with pytest.raises(TransientError):
        flow.prepare(ledger, batch_id, llm, parse)
    [noted] = provider_batches_of(ledger, batch_id)
    ours = [entry.custom_id for entry in entries_of(ledger, noted.id)]
    uid = get_batch(ledger, batch_id)["uid"]  # type: ignore[index]
    assert all(custom_id.startswith(f"b{uid[:12]}-item-") for custom_id in ours)
    # A staging instance on the same account sends a batch of the same size meanwhile: its items
    # are numbered as ours are.
    foreign = [{"custom_id": "bstaging0000-" + c.split("-", 1)[1], "params": {}} for c in ours]
    other = FakeMessageBatch("msgbatch_staging", foreign, {}, datetime.now(UTC))
    other.processing_status, other.ended_at = "ended", datetime.now(UTC)
    other.results = [
        {"custom_id": r["custom_id"], "result": {"type": "succeeded", "message": {"content": []}}} for r in foreign
    ]
    other.run = len(foreign)
    fake.batches[other.id] = other
    taken = flow.prepare(ledger, batch_id, llm, parse)
    assert taken.provider_batch_ids == ("msgbatch_staging",)  # Anthropic keeps no key: taken for ours
    [record] = open_provider_batches(ledger)
    assert flow.follow(ledger, record, llm)
    [ended] = provider_batches_of(ledger, batch_id)
    assert ended.answered == 0 and ended.fallen_back == DOCUMENTS  # no answer of theirs stored as ours
