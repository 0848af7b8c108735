"""One item's extraction through litellm against the loopback fake server (real HTTP)."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from extraction_pipeline.core.errors import OutputParseError, PermanentError, TransientError
from extraction_pipeline.core.extraction.claiming import INTERRUPTED_MESSAGE
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.rows import ItemRow
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline_tests.support.extraction_cases import DEATHS, GOOD, GOOD_V1, PAGES, PARSED
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.ledgers import add_documents
from extraction_pipeline_tests.support.processes import warm_context
from extraction_pipeline_tests.support.templates import freeze_version_1


def _item(ledger: Ledger) -> int:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc])
    return 1


def _config(fake: FakeLLMServer, timeout: float = 10) -> LLMConfig:
    return LLMConfig(
        model="openai/fake-model", api_base=fake.api_base, api_key="sk-test-not-a-secret", timeout_seconds=timeout
    )


def test_success_records_grounded_result_and_usage(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(Reply(GOOD, tokens_in=1200, tokens_out=80))
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed" and outcome.outcomes == 1
    fields = outcome.result["fields"]
    assert (fields["metadata.nct_number"]["status"], fields["metadata.nct_number"]["page"]) == ("verified", 1)
    assert [fields[f"arms.{n}.arm_name"]["value"] for n in (1, 2)] == ["drug", "placebo"]
    assert fields["arms.1.arm_name"]["status"] == "verified"
    assert (fields["comparisons.1.effect_estimate"]["status"], fields["comparisons.1.effect_estimate"]["page"]) == (
        "verified",
        2,
    )
    assert (fields["comparisons.1.ci_lower"]["status"], fields["comparisons.1.ci_lower"]["reason"]) == (
        "unverified",
        "value not in quote",
    )
    assert fields["comparisons.1.ci_upper"]["status"] == "not reported"
    assert not any(entry["flags"] for entry in fields.values())  # the comparison names declared arms
    row = states.get_item(ledger, item)
    assert row is not None
    assert (row["status"], row["tokens_in"], row["tokens_out"], row["model"]) == (
        "completed",
        1200,
        80,
        "openai/fake-model",
    )
    assert json.loads(row["result_json"] or "")["fields"]["metadata.randomized_n"]["value"] == 412
    # The document went to the model inside <FULL_TEXT>, and the request was JSON mode.
    [request] = fake_llm.requests
    assert request["response_format"] == {"type": "json_object"}
    assert "NCT01234567" in fake_llm.documents_requested()[0]
    assert "arms (a list" in request["messages"][0]["content"]  # asked in arms (the template: the system prompt)


def test_a_batch_frozen_on_the_two_arm_template_is_extracted_in_its_fields(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    item = _item(ledger)
    freeze_version_1(ledger, 1)
    fake_llm.push(Reply(GOOD_V1))
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed" and outcome.outcomes == 1
    fields = outcome.result["fields"]
    assert (fields["outcomes.1.effect_estimate"]["status"], fields["outcomes.1.effect_estimate"]["page"]) == (
        "verified",
        2,
    )
    assert fields["outcomes.1.ci_lower"]["reason"] == "value not in quote"
    assert fields["baseline.control_name"]["value"] == "placebo" and "outcomes.1.events_treatment" in fields
    assert not any(path.startswith(("arms.", "comparisons.")) for path in fields)
    prompt = fake_llm.requests[0]["messages"][0]["content"]  # the template: the system prompt
    assert "events_treatment" in prompt and "arms (a list" not in prompt


def test_duplicate_execution_makes_no_llm_call(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(Reply(GOOD))
    extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    late = extract_item(ledger, item_id=item, run_id="r2", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert late.status == "skipped" and "completed" in late.reason
    assert len(fake_llm.requests) == 1


def test_item_held_by_another_run_is_not_executed(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    assert states.claim(ledger, item, run_id="holder", worker="w")
    outcome = extract_item(ledger, item_id=item, run_id="dup", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "skipped" and "extracting by run holder" in outcome.reason
    assert fake_llm.requests == []


def _run_extraction(url: str, api_base: str, run_id: str, barrier: object, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    ledger = Ledger.connect(url, create_schema=False)
    config = LLMConfig(model="openai/fake-model", api_base=api_base, api_key="sk-test", timeout_seconds=30)
    barrier.wait()  # type: ignore[attr-defined]
    outcome = extract_item(ledger, item_id=1, run_id=run_id, worker=run_id, parsed=PARSED, llm=config)
    out.put(outcome.status)


def test_concurrent_executions_from_two_processes_call_the_llm_once(
    ledger: Ledger, ledger_url: str, fake_llm: FakeLLMServer
) -> None:
    _item(ledger)
    fake_llm.answer = lambda messages: Reply(GOOD, delay=0.5)
    ctx = warm_context()
    barrier, out = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_run_extraction, args=(ledger_url, fake_llm.api_base, f"run{i}", barrier, out))
        for i in range(3)
    ]
    for proc in procs:
        proc.start()
    statuses = sorted(out.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
    assert statuses == ["completed", "skipped", "skipped"]
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [Reply(status=429), Reply(status=500), Reply(status=503), Reply(GOOD, delay=3)],
    ids=["429", "500", "503", "timeout"],
)
def test_transient_errors_release_the_item_then_raise(ledger: Ledger, fake_llm: FakeLLMServer, reply: Reply) -> None:
    item = _item(ledger)
    fake_llm.push(reply)
    with pytest.raises(TransientError):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm, timeout=1))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "pending" and (row["message"] or "").startswith("transient, will retry")
    # The retry (same run, next attempt) claims it again and succeeds.
    fake_llm.push(Reply(GOOD))
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed"
    assert states.get_item(ledger, item)["attempts"] == 2  # type: ignore[index]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=401, error_message="Incorrect API key provided"),
        Reply(status=400, error_message="Invalid parameter: temperature"),
        Reply(status=400, error_message="This model's maximum context length is 8192 tokens; context_length_exceeded"),
    ],
    ids=["auth", "bad-request", "context-window"],
)
def test_permanent_errors_mark_the_item_error(ledger: Ledger, fake_llm: FakeLLMServer, reply: Reply) -> None:
    item = _item(ledger)
    fake_llm.push(reply)
    with pytest.raises(PermanentError):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "error" and str(reply.status) in (row["message"] or "")
    assert "sk-test-not-a-secret" not in (row["message"] or "")
    assert len(fake_llm.requests) == 1  # permanent: never retried


def test_malformed_json_is_repaired_once(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(
        Reply("{not json", tokens_in=50, tokens_out=5), Reply(f"```json\n{GOOD}\n```", tokens_in=60, tokens_out=7)
    )
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed" and outcome.result["repaired"] is True
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1]["messages"][-1]["content"].startswith("Your answer was not valid")
    assert states.get_item(ledger, item)["tokens_in"] == 110  # type: ignore[index]


def test_output_still_invalid_after_repair_is_permanent(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(Reply("{not json", tokens_in=50), Reply('["an array, not the object"]', tokens_in=60))
    with pytest.raises(OutputParseError):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "error" and "after one repair" in (row["message"] or "")
    assert row["tokens_in"] == 110  # tokens spent on failed output are still counted


def test_ledger_failure_after_the_claim_releases_the_item_for_the_retry(
    ledger: Ledger, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import OperationalError

    item = _item(ledger)
    real_complete = states.complete
    calls = []

    def complete_fails_once(*args: object, **kwargs: object) -> bool:
        calls.append(1)
        if len(calls) == 1:  # injected fault: the database drops the write
            raise OperationalError("UPDATE batch_items", {}, Exception("database is locked"))
        return real_complete(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(states, "complete", complete_fails_once)
    fake_llm.answer = lambda messages: Reply(GOOD)
    with pytest.raises(TransientError, match="ledger database connection lost: database is locked") as raised:
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert not raised.value.provider  # the database failed, not the model: the breaker stays closed
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "pending" and row["failing_since"] is not None
    assert row["tokens_in"] == 100  # the answer was paid for before the write failed
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed"
    assert states.get_item(ledger, item)["failing_since"] is None  # type: ignore[index]


def test_a_database_error_that_is_not_an_outage_fails_the_item_permanently(
    ledger: Ledger, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import IntegrityError

    item = _item(ledger)

    def complete_violates(*args: object, **kwargs: object) -> bool:
        raise IntegrityError("UPDATE batch_items", {}, Exception("NOT NULL constraint failed: batch_items.status"))

    monkeypatch.setattr(states, "complete", complete_violates)
    fake_llm.answer = lambda messages: Reply(GOOD)
    with pytest.raises(PermanentError, match="internal error"):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "error" and "IntegrityError" in (row["message"] or "")


def test_same_run_resumes_an_item_it_left_extracting(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    assert states.claim(ledger, item, run_id="r1", worker="w")  # then the step died before releasing
    fake_llm.push(Reply(GOOD))
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w2", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed" and len(fake_llm.requests) == 1
    other = extract_item(ledger, item_id=item, run_id="r9", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert other.status == "skipped" and len(fake_llm.requests) == 1


def test_transient_error_during_repair_keeps_the_first_answers_tokens(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(Reply("{broken", tokens_in=70, tokens_out=3), Reply(status=503))
    with pytest.raises(TransientError):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    row = states.get_item(ledger, item)
    assert row is not None and (row["status"], row["tokens_in"]) == ("pending", 70)


def test_implausible_values_are_flagged_on_their_field(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    sentence = "Death occurred less often with drug (hazard ratio 0.72; 95% CI 0.60 to 0.86)."
    fake_llm.push(
        Reply(
            extraction_json(
                {
                    "comparisons.1.effect_measure": ("HR", sentence),
                    "comparisons.1.effect_estimate": (0.72, sentence),
                    "comparisons.1.ci_lower": (0.86, sentence),  # bounds swapped by the model
                    "comparisons.1.ci_upper": (0.60, sentence),
                }
            )
        )
    )
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    fields = outcome.result["fields"]
    assert fields["comparisons.1.ci_lower"]["flags"] == ["lower bound 0.86 is above the upper bound 0.6"]
    assert fields["comparisons.1.ci_lower"]["status"] == "verified"  # verbatim, yet implausible: the flag says so
    assert fields["comparisons.1.effect_estimate"]["flags"] == []


def test_known_schema_capable_model_gets_json_schema_output(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    fake_llm.push(Reply(GOOD))
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=fake_llm.api_base, api_key="sk-x", timeout_seconds=10)
    assert extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=config).status == "completed"
    response_format = fake_llm.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert "nct_number" in json.dumps(response_format["json_schema"]["schema"])


def test_a_page_longer_than_the_context_window_is_an_explicit_error(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    huge = ParsedDocument("sha", ["word " * 150_000])  # one page of ~150k tokens; gpt-4o-mini takes 128k
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=fake_llm.api_base, api_key="sk-x", timeout_seconds=10)
    with pytest.raises(
        PermanentError,
        match=r"page 1 alone needs about 15[0-9]{4} prompt tokens but .* accepts 119808 prompt tokens "
        r"\(its 128000-token window less 8192 kept for the answer\)",
    ):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=huge, llm=config)
    assert fake_llm.requests == []  # nothing was sent, nothing silently cut
    assert states.get_item(ledger, item)["status"] == "error"  # type: ignore[index]


def test_every_prompt_is_kept_for_audit_without_secrets(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    from extraction_pipeline.core.ledger.audit import prompts_for_item

    item = _item(ledger)
    fake_llm.push(Reply(status=429), Reply(GOOD))
    with pytest.raises(TransientError):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    audit = prompts_for_item(ledger, item)
    assert len(audit) == 2 and {row["model"] for row in audit} == {"openai/fake-model"}
    messages = json.loads(audit[0]["messages_json"])
    assert messages == fake_llm.requests[0]["messages"]  # exactly what was sent
    assert "sk-test-not-a-secret" not in audit[0]["messages_json"]


def test_unusable_values_are_unverified_with_the_reason_and_the_paper_completes(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    item = _item(ledger)
    methods = "A total of 412 patients were randomized to drug or placebo."
    answer = json.loads(
        extraction_json(
            {
                "metadata.randomized_n": ("NR", methods),
                "metadata.nct_number": (None, "Trial registered as NCT01234567."),  # a quote, no value
                "risk_of_bias.randomization": ("low", methods),
                "comparisons.1.p_value": ("NaN", DEATHS),
            }
        )
    )
    fake_llm.push(Reply(json.dumps(answer)))
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    assert outcome.status == "completed" and len(fake_llm.requests) == 1  # no repair needed
    fields = outcome.result["fields"]
    randomized = fields["metadata.randomized_n"]
    assert (randomized["status"], randomized["value"], randomized["page"]) == ("unverified", None, 1)
    assert randomized["reason"] == "the model's value 'NR' is not a valid integer; left empty"
    assert fields["comparisons.1.p_value"]["reason"] == "the model's value 'NaN' is not a valid number; left empty"
    assert (fields["metadata.nct_number"]["status"], fields["metadata.nct_number"]["reason"]) == (
        "not reported",
        "no value given",
    )
    judgement = fields["risk_of_bias.randomization"]  # never the green "verified" of a checked number
    assert judgement["status"] == "judgement: supported by a verified quote" and judgement["reason"].endswith(
        "the judgement itself is the model's: review it"
    )


def test_an_internal_error_after_the_answer_still_records_the_tokens(
    ledger: Ledger, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from extraction_pipeline.core.extraction import assembly

    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise RuntimeError("bug in grounding")  # injected fault after the paid call

    monkeypatch.setattr(assembly, "ground_entries", broken)
    item = _item(ledger)
    fake_llm.push(Reply(GOOD, tokens_in=1200, tokens_out=80))
    with pytest.raises(PermanentError, match="internal error"):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm))
    row = states.get_item(ledger, item)
    assert row is not None and (row["status"], row["tokens_in"], row["tokens_out"]) == ("error", 1200, 80)


def test_cost_comes_from_litellms_price_table_and_sums_per_batch(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    import litellm

    from extraction_pipeline.core.ledger.queries import progress

    docs = add_documents(ledger, 2)
    batch = create_batch(ledger, idempotency_key="priced", project="p", user="u", document_ids=docs).id
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=fake_llm.api_base, api_key="sk-x", timeout_seconds=10)
    fake_llm.push(Reply(GOOD, tokens_in=10_000, tokens_out=1_000), Reply(GOOD, tokens_in=20_000, tokens_out=500))
    other_paper = ParsedDocument("sha2", [*PAGES, "Appendix."])  # another prompt: paid for, not reused
    for item, run, parsed in ((1, "r1", PARSED), (2, "r2", other_paper)):
        assert (
            extract_item(ledger, item_id=item, run_id=run, worker="w", parsed=parsed, llm=config).status == "completed"
        )
    price = litellm.model_cost["gpt-4o-mini"]
    expected = [
        10_000 * price["input_cost_per_token"] + 1_000 * price["output_cost_per_token"],
        20_000 * price["input_cost_per_token"] + 500 * price["output_cost_per_token"],
    ]
    costs = [states.get_item(ledger, item)["cost_usd"] for item in (1, 2)]  # type: ignore[index]
    assert costs == pytest.approx(expected) and min(costs) > 0
    counts = progress(ledger, batch)
    assert (counts.tokens_in, counts.tokens_out) == (30_000, 1_500)
    assert counts.cost_usd == pytest.approx(sum(expected), abs=1e-6)


def test_a_flipped_sign_or_a_label_digit_is_flagged(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    item = _item(ledger)
    sentence = "Pain fell more with drug in group H2 (mean difference \u22120.52; 95% CI \u22120.80 to \u22120.24)."
    parsed = ParsedDocument("sha", [sentence])
    answer = {
        "comparisons.1.effect_estimate": (0.52, sentence),  # the direction lost
        "comparisons.1.ci_lower": (-0.8, sentence),
        "outcomes.1.arm": ("H2", sentence),
        "outcomes.1.n": (2, sentence),  # the "2" of "H2"
    }
    fake_llm.push(Reply(extraction_json(answer)))
    fields = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=parsed, llm=_config(fake_llm)).result[
        "fields"
    ]
    assert fields["comparisons.1.effect_estimate"]["flags"] == ["the quote prints -0.52: the value's sign differs"]
    assert fields["comparisons.1.ci_lower"]["flags"] == []
    assert fields["outcomes.1.n"]["flags"] == [
        "the value appears in the quote only inside a word or label (such as H2)"
    ]


def test_a_run_that_is_stopping_claims_nothing_and_hands_back_what_it_claimed_meanwhile(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    """Another lane of an interrupted run reaches its claim after the run handed back what it had
    in flight: the document must go back to the queue, not stay with (or fail in) a run that ends."""
    item = _item(ledger)
    fake_llm.push(Reply(GOOD))
    outcome = extract_item(
        ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm), stopping=lambda: True
    )
    assert outcome.status == "skipped" and _row(ledger, item)["status"] == "pending" and not fake_llm.requests

    answers = iter([False, True])  # not stopping before the claim, stopping once it is won
    outcome = extract_item(
        ledger,
        item_id=item,
        run_id="r1",
        worker="w",
        parsed=PARSED,
        llm=_config(fake_llm),
        stopping=lambda: next(answers),
    )
    row = _row(ledger, item)
    assert outcome.status == "skipped" and not fake_llm.requests  # no call paid for a run that ends
    assert (row["status"], row["message"]) == ("pending", INTERRUPTED_MESSAGE)


def _row(ledger: Ledger, item: int) -> ItemRow:
    row = states.get_item(ledger, item)
    assert row is not None
    return row


def test_a_call_abandoned_after_the_timeout_is_counted_as_possibly_billed(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    from extraction_pipeline.core.ledger.queries import progress

    item = _item(ledger)
    fake_llm.answer = lambda messages: Reply(GOOD, delay=2.0)  # the provider answers, after the call gave up
    with pytest.raises(TransientError, match="did not answer within 1 s"):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=PARSED, llm=_config(fake_llm, timeout=1))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "pending" and row["abandoned_calls"] == 1
    assert row["tokens_in"] == 0  # nothing came back to count: the call is counted, not priced
    assert progress(ledger, 1).abandoned_calls == 1
