"""Answers longer than the model writes: every call states its output limit, an answer cut there
(``finish_reason: length``) is named as cut (never repaired, never "invalid JSON"), and the paper
is asked again in smaller questions until every value arrives grounded.

The fake model follows OpenAI's output rules (``FakeLLMServer.output_limit``): it cuts an answer
at ``max_tokens`` and refuses a request asking for more than the model writes.
"""

from __future__ import annotations

import json
import re

import pytest

from extraction_pipeline.core.errors import AnswerCutError, PermanentError
from extraction_pipeline.core.export.workbook import answer_label
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.extraction.narrowing import with_arms
from extraction_pipeline.core.extraction.prompts import asked_schema, build_messages, document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.llm.config import ANSWER_TOKENS, THINKING_TOKENS
from extraction_pipeline.core.llm.gateway import LLMConfig, answer_limit, complete_extraction, output_limit
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE
from extraction_pipeline.core.verification.grounding import JUDGEMENT_SUPPORTED, VERIFIED
from extraction_pipeline_tests.support.extraction_cases import GOOD, PARSED
from extraction_pipeline_tests.support.fake_llm import CHARS_PER_TOKEN, FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.ledgers import add_documents

TEMPLATE = BASE_TEMPLATES[RCT_BASE]
OUTCOMES = with_arms(TEMPLATE, ("outcomes",))  # how a cut answer's outcomes are asked again
NCT = "The trial was registered at ClinicalTrials.gov (NCT04412345) and enrolled 480 participants."
OUTCOMES_PER_PAGE = 4


def _sentence(page: int, k: int) -> str:
    events, total = 10 + 7 * page + k, 120 + page
    return f"Outcome {page}-{k} (symptom score {page}.{k}) occurred in {events} of {total} patients given drug."


def _document(pages: int) -> ParsedDocument:
    texts = []
    for page in range(1, pages + 1):
        sentences = [_sentence(page, k) for k in range(1, OUTCOMES_PER_PAGE + 1)]
        texts.append(" ".join([NCT] * (page == 1) + sentences))
    return ParsedDocument("long-answers", texts)


def _asked_modules(messages: list[dict[str, str]]) -> set[str]:
    """The modules the schema this call asks for holds."""
    return set(json.loads(asked_schema(messages))["properties"])


def _answer(messages: list[dict[str, str]]) -> Reply:
    """A model that answers exactly what it is asked: the asked modules, from the pages it is shown."""
    text = document_from_messages(messages)
    modules = _asked_modules(messages)
    values: dict[str, tuple[object, str | None]] = {}
    if "metadata" in modules and NCT in text:
        values["metadata.nct_number"] = ("NCT04412345", NCT)
        values["metadata.randomized_n"] = (480, NCT)
    number = 0
    for page in map(int, re.findall(r"\[page (\d+)\]", text)):
        for k in range(1, OUTCOMES_PER_PAGE + 1):
            sentence = _sentence(page, k)
            if sentence not in text:
                continue
            if "arms" in modules and "arms.1.arm_name" not in values:  # the arm it names, declared
                values["arms.1.arm_name"] = ("drug", sentence)
            if "outcomes" not in modules:
                continue
            number += 1
            values[f"outcomes.{number}.outcome_name"] = (f"Outcome {page}-{k}", sentence)
            values[f"outcomes.{number}.arm"] = ("drug", sentence)
            values[f"outcomes.{number}.events"] = (10 + 7 * page + k, sentence)
            values[f"outcomes.{number}.total"] = (120 + page, sentence)
    return Reply(extraction_json(values), tokens_in=2000)


def _tokens(messages: list[dict[str, str]]) -> int:
    """What the fake counts for the answer to these messages."""
    return -(-len(_answer(messages).content or "") // CHARS_PER_TOKEN)


def _config(fake: FakeLLMServer, output_tokens: int | None) -> LLMConfig:
    return LLMConfig(model="openai/fake-model", api_base=fake.api_base, api_key="sk-test", output_tokens=output_tokens)


def _item(ledger: Ledger) -> int:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc])
    return 1


def test_a_cut_answer_is_named_as_cut_and_not_repaired(fake_llm: FakeLLMServer) -> None:
    fake_llm.output_limit = 4096
    fake_llm.push(Reply(GOOD))
    with pytest.raises(AnswerCutError, match=r"^answer cut at 50 output tokens") as cut:
        complete_extraction(_config(fake_llm, 50), build_messages(TEMPLATE, PARSED.pages_text), TEMPLATE)
    assert len(fake_llm.requests) == 1  # no repair call asking for the same long answer again
    assert fake_llm.requests[0]["max_tokens"] == 50
    assert cut.value.usage is not None and cut.value.usage.tokens_out == 50  # paid for, counted
    assert "invalid" not in str(cut.value).lower()

    fake_llm.push(Reply(GOOD))  # within the limit: the same answer is accepted whole
    whole = complete_extraction(_config(fake_llm, 4096), build_messages(TEMPLATE, PARSED.pages_text), TEMPLATE)
    assert whole.usage.tokens_out == -(-len(GOOD) // CHARS_PER_TOKEN) and not whole.repaired


def test_the_limit_is_what_an_answer_needs_within_litellms_figure_for_a_known_model(fake_llm: FakeLLMServer) -> None:
    known = LLMConfig(model="openai/gpt-4o-mini", api_base=fake_llm.api_base, api_key="sk-test")
    assert output_limit(known) == ANSWER_TOKENS < 16384  # an answer's need, not the model's 16,384
    fake_llm.output_limit = 16384
    fake_llm.push(Reply(GOOD))
    complete_extraction(known, build_messages(TEMPLATE, PARSED.pages_text), TEMPLATE)
    assert fake_llm.requests[-1]["max_tokens"] == ANSWER_TOKENS
    # A model that thinks unasked gets room to think beside the answer; one asked to think only
    # when asked (Claude) does not; and the model's own maximum bounds both.
    assert answer_limit(LLMConfig(model="openai/o4-mini")) == ANSWER_TOKENS + THINKING_TOKENS
    assert answer_limit(LLMConfig(model="gemini/gemini-2.5-pro")) == ANSWER_TOKENS + THINKING_TOKENS
    assert answer_limit(LLMConfig(model="anthropic/claude-sonnet-4-5-20250929")) == ANSWER_TOKENS
    assert answer_limit(LLMConfig(model="openai/gpt-3.5-turbo")) == 4096  # its own maximum
    assert output_limit(LLMConfig(model="openai/a-model-nobody-knows")) is None  # then nothing is sent


def test_asking_for_more_than_the_model_writes_is_refused_by_the_provider(fake_llm: FakeLLMServer) -> None:
    fake_llm.output_limit = 4096
    fake_llm.push(Reply(GOOD))
    with pytest.raises(PermanentError, match="max_tokens is too large: 9000"):
        complete_extraction(_config(fake_llm, 9000), build_messages(TEMPLATE, PARSED.pages_text), TEMPLATE)


def test_a_paper_whose_answer_is_too_long_completes_in_smaller_questions(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    parsed = _document(pages=4)
    whole = _tokens(build_messages(TEMPLATE, parsed.pages_text))
    outcomes_only = _tokens(build_messages(OUTCOMES, parsed.pages_text))
    half = max(
        _tokens(build_messages(OUTCOMES, parsed.pages_text[:2])),
        _tokens(build_messages(OUTCOMES, parsed.pages_text[2:], first_page=3)),
    )
    limit = (half + outcomes_only) // 2
    assert half < limit < outcomes_only < whole  # the whole answer and the outcomes alone are cut
    fake_llm.output_limit = limit
    fake_llm.answer = _answer
    item = _item(ledger)
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=parsed, llm=_config(fake_llm, limit))
    fields = outcome.result["fields"]
    expected = 4 * OUTCOMES_PER_PAGE
    assert outcome.outcomes == expected  # every outcome of every page, none twice
    assert fields["metadata.nct_number"]["value"] == "NCT04412345"
    # the NCT and the total, each outcome's name, arm and two numbers, and the one arm (declared by
    # each of the four answers that name it: merged by name)
    assert outcome.fields_found == 2 + 4 * expected + 1
    assert outcome.values_verified == outcome.fields_found - expected  # an entry's arm is a judgement
    assert {fields[f"outcomes.{n}.outcome_name"]["value"] for n in range(1, expected + 1)} == {
        f"Outcome {page}-{k}" for page in range(1, 5) for k in range(1, OUTCOMES_PER_PAGE + 1)
    }
    assert fields["arms.1.arm_name"]["value"] == "drug" and "arms.2.arm_name" not in fields
    assert {fields[f"outcomes.{n}.arm"]["value"] for n in range(1, expected + 1)} == {"drug"}
    assert all(
        entry["status"] == (JUDGEMENT_SUPPORTED if entry["field"] == "arm" else VERIFIED)
        for entry in fields.values()
        if entry["value"] is not None
    )
    assert not any(entry["flags"] for entry in fields.values())  # every entry's arm is declared
    # whole paper (cut); metadata, Risk of Bias, and the modules naming arms each with the arms
    # (outcomes cut); outcomes with the arms of pages 1-2 and of 3-4
    assert len(fake_llm.requests) == 1 + 4 + 2
    cuts = [note["cut"] for note in outcome.result["parts"] if "cut" in note]
    assert cuts == [
        f"answer cut at {limit} output tokens (openai/fake-model stopped at its output limit) for the whole "
        "paper: asked again in 4 smaller questions",
        f"answer cut at {limit} output tokens (openai/fake-model stopped at its output limit) for outcomes with "
        "arms on the whole paper: asked again in 2 smaller questions",
    ]
    asked = [(note.get("module"), note["pages"]) for note in outcome.result["parts"] if "cut" not in note]
    assert asked == [
        ("metadata", "all"),
        ("risk_of_bias", "all"),
        ("outcomes with arms", "1-2"),
        ("outcomes with arms", "3-4"),
        ("comparisons with arms", "all"),
    ]
    asked_modules = [_asked_modules(r["messages"]) for r in fake_llm.requests[1:]]
    assert asked_modules == [
        {"metadata"},
        {"risk_of_bias"},
        *[{"arms", "outcomes"}] * 3,  # the cut one, then its halves
        {"arms", "comparisons"},
    ]
    assert answer_label(outcome.result) == f"new call; asked in 5 smaller calls after the {cuts[0]}"  # Documents sheet
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "completed"
    assert row["message"] == f"completed after: {cuts[0]}; {cuts[1]}"  # what `history` shows
    assert all(r["max_tokens"] == limit for r in fake_llm.requests)
    assert fake_llm.completion_tokens.count(limit) == 2  # the two cut answers ...
    assert row["tokens_out"] == sum(fake_llm.completion_tokens)  # ... are counted in the cost with the rest
    # Paid once: another batch over the paper reuses the five answers, each parsed with the modules
    # it asked (the arms with the outcomes); only the cut questions, of which nothing was usable,
    # are asked again.
    create_batch(ledger, idempotency_key="again", project="p", user="u", document_ids=[1])
    again = extract_item(ledger, item_id=2, run_id="r2", worker="w", parsed=parsed, llm=_config(fake_llm, limit))
    assert len(fake_llm.requests) == 7 + 2
    assert [note["reused"] for note in again.result["parts"] if "cut" not in note] == [True] * 5
    assert again.result["fields"] == fields


def test_one_page_whose_outcomes_alone_are_too_long_fails_with_that_reason(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    parsed = _document(pages=1)
    limit = _tokens(build_messages(OUTCOMES, parsed.pages_text)) - 5
    fake_llm.output_limit = limit
    fake_llm.answer = _answer
    item = _item(ledger)
    with pytest.raises(PermanentError, match=f"answer cut at {limit} output tokens .* even when asked for outcomes"):
        extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=parsed, llm=_config(fake_llm, limit))
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "error"
    assert f"answer cut at {limit} output tokens" in (row["message"] or "") and "EXTRACTION_OUTPUT_TOKENS" in (
        row["message"] or ""
    )
    assert "invalid JSON" not in (row["message"] or "")
    # the whole answer (cut), then module by module (metadata, Risk of Bias): the outcomes with the
    # arms cut again, with nothing smaller to ask
    assert len(fake_llm.requests) == 1 + 3 and fake_llm.completion_tokens.count(limit) == 2
    assert row["tokens_out"] == sum(fake_llm.completion_tokens)  # every answer paid for is counted


def test_a_two_arm_template_is_asked_module_by_module_as_before() -> None:
    from extraction_pipeline.core.extraction.narrowing import module_questions
    from extraction_pipeline.core.templates.rct import RCT_TEMPLATE_V1

    v1 = [(q.label, [m.name for m in q.template.modules]) for q in module_questions(RCT_TEMPLATE_V1)]
    assert v1 == [(name, [name]) for name in ("metadata", "baseline", "risk_of_bias", "outcomes")]
    v2 = [(q.label, [m.name for m in q.template.modules]) for q in module_questions(TEMPLATE)]
    assert v2 == [
        ("metadata", ["metadata"]),
        ("risk_of_bias", ["risk_of_bias"]),
        ("outcomes with arms", ["arms", "outcomes"]),
        ("comparisons with arms", ["arms", "comparisons"]),
    ]
