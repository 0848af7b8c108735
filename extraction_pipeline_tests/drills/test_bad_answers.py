"""Every kind of bad answer a provider gives, through the daemon: three documents per kind, in
runs of several documents (so each bad answer meets a multi-document run), served by the strict
OpenAI fake (support/providers/openai.py). No timing rule is at stake, so it is scheduled with
the other end-to-end tests, not in the drills' own lane."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.breakers import failing_providers
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.drills import Drill, wait_for
from extraction_pipeline_tests.support.fake_llm import Reply, extraction_json
from extraction_pipeline_tests.support.invariant import batch_runs

pytestmark = pytest.mark.e2e


LLM_TIMEOUT_SECONDS = 2


@dataclass(frozen=True)
class BadAnswer:
    """One kind of bad answer: what the provider sends for a document's first call, and the
    words `history`, `batch status`, the batch page and the run's log say it in."""

    reply: Reply
    words: str
    transient: bool  # retried until the document completes; else the document fails, named


BAD_ANSWERS = {
    "no choices": BadAnswer(Reply("{}", finish="no_choices"), "answered with no choices", True),
    "refusal": BadAnswer(
        Reply("I can't help with that", finish="refused"), "openai/gpt-4o-mini refused: I can't help with that", False
    ),
    "not JSON": BadAnswer(
        Reply("{}", finish="not_json"), "provider answered HTTP 200 with a body that is not JSON: '<html>", True
    ),
    "HTML error page": BadAnswer(
        Reply(status=502, error="html_page"), "HTTP 502 BadGatewayError: an HTML error page (502 Bad Gateway)", True
    ),
    "too slow": BadAnswer(
        Reply("{}", delay=LLM_TIMEOUT_SECONDS + 2),
        f"provider did not answer within {LLM_TIMEOUT_SECONDS} s "
        "(the call was abandoned; the provider may still bill it)",
        True,
    ),
}
DOCUMENTS_PER_KIND = 3


def test_every_kind_of_bad_answer_is_named_and_loses_nothing(make_drill: Callable[..., Drill]) -> None:
    """Two batches at once through the daemon: the four transient kinds of bad answer in one (three
    documents each, in runs of several documents), the refusal in the other; every document's first
    call gets its kind's bad answer. Transient kinds are retried until every document completes; a
    refusal fails its documents, named, and a retry once the model answers completes them: 0 of 15
    lost, and each kind said in the provider's terms everywhere an analyst or an operator looks."""
    from extraction_pipeline_tests.support.providers import OpenAIFake

    trials = {
        kind: [make_trial(i * DOCUMENTS_PER_KIND + n) for n in range(1, DOCUMENTS_PER_KIND + 1)]
        for i, kind in enumerate(BAD_ANSWERS)
    }
    kind_of = {trial.nct_number: kind for kind, batch in trials.items() for trial in batch}
    asked: set[str] = set()
    refusing = threading.Event()
    refusing.set()
    lock = threading.Lock()

    def answer(messages: list[dict[str, str]]) -> Reply:
        from extraction_pipeline.core.extraction.prompts import document_from_messages

        text = document_from_messages(messages)
        nct = next(nct for nct in kind_of if nct in text)
        sentence = f"This trial was registered at ClinicalTrials.gov ({nct})."
        good = Reply(extraction_json({"metadata.nct_number": (nct, sentence)}), tokens_in=900, tokens_out=40)
        bad = BAD_ANSWERS[kind_of[nct]]
        with lock:
            first = nct not in asked
            asked.add(nct)
        if bad.transient and not first:
            return good
        if not bad.transient and not refusing.is_set():
            return good
        return Reply(**{**bad.reply.__dict__, "content": bad.reply.content if bad.reply.delay == 0 else good.content})

    transient_kinds = [kind for kind, bad in BAD_ANSWERS.items() if bad.transient]
    with OpenAIFake() as fake:
        fake.answer = answer
        drill = make_drill(
            model="openai/gpt-4o-mini",
            api_base=fake.api_base,
            llm_timeout_seconds=str(LLM_TIMEOUT_SECONDS),
            documents_per_run=str(2 * DOCUMENTS_PER_KIND),  # runs of several documents, several kinds in each
            breaker_failures="1000",  # each kind met as it comes, not as a paused provider
            retry_base_seconds="1",  # nothing to wait out: each kind is bad once
            retry_max_delay_seconds="2",
        )
        document_of: dict[str, int] = {}
        for batch_trials in trials.values():
            for trial in batch_trials:
                path = write_report(trial, drill.home / "in")
                document_of[trial.nct_number] = register_pdf(drill.ledger, drill.home / "documents", "drill", path).id
        kind_of_document = {document_of[nct]: kind for nct, kind in kind_of.items()}

        def batch_of(kinds: list[str], name: str, user: str) -> int:
            documents = [document_of[t.nct_number] for kind in kinds for t in trials[kind]]
            return create_batch(
                drill.ledger, idempotency_key=f"bad-{name}", project="drill", user=user, document_ids=documents
            ).id

        transient, refused = (
            batch_of(transient_kinds, "transient", "drill-0"),
            batch_of(["refusal"], "refusal", "drill-1"),
        )
        drill.start_daemon()  # the batch page is read by Drill.told, beside `history`
        started = time.monotonic()
        for name, batch in (("transient kinds", transient), ("refusal", refused)):
            drill.wait_closed(batch)
            print(f"{name}: closed after {time.monotonic() - started:.0f} s")
        told_refused = drill.told(refused)
        assert set(told_refused.values()) == {f"error: {BAD_ANSWERS['refusal'].words}"}, told_refused
        status = drill.cli("batch", "status", str(refused))
        assert f"{DOCUMENTS_PER_KIND} document(s) in error: {BAD_ANSWERS['refusal'].words}" in status.stdout
        refusing.clear()  # the model answers again: a retry finishes what the refusal stopped
        retried = drill.cli("batch", "retry", str(refused), "--user", "drill")
        assert retried.returncode == 0, retried.stderr
        wait_for(lambda: get_batch(drill.ledger, refused)["status"] == "open", 60, "the batch to reopen")  # type: ignore[index]
        drill.wait_closed(refused)
        print(f"refusal retried: closed after {time.monotonic() - started:.0f} s")
        with drill.instance() as instance:
            for batch in (transient, refused):
                drill.assert_nothing_lost(batch)
                told = drill.told(batch)
                assert len(told) == DOCUMENTS_PER_KIND * (len(transient_kinds) if batch == transient else 1), told
                for document, words in told.items():  # each document's own kind, in its own words
                    assert BAD_ANSWERS[kind_of_document[document]].words in words, (document, words)
                logged = [
                    str(record.event_log_entry.user_message)
                    for run in batch_runs(instance, get_batch(drill.ledger, batch))  # type: ignore[arg-type]
                    for record in instance.get_records_for_run(run.run_id).records
                ]
                for kind in transient_kinds if batch == transient else ["refusal"]:
                    assert any(BAD_ANSWERS[kind].words in message for message in logged), (kind, logged[-20:])
        slow = [item for item in drill.items(transient) if kind_of_document[item["document_id"]] == "too slow"]
        assert len(slow) == DOCUMENTS_PER_KIND and all(item["abandoned_calls"] >= 1 for item in slow), slow
        abandoned = drill.cli("batch", "status", str(transient))
        told_abandoned = sum(item["abandoned_calls"] for item in drill.items(transient))
        assert f"{told_abandoned} calls abandoned after the timeout" in abandoned.stdout, abandoned.stdout
        assert failing_providers(drill.ledger) == []  # every kind was told to the breaker, and answers closed it
        assert fake.violations == []  # every request was one the service takes
        assert drill.tracebacks() == []
