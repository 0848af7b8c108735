"""Paid once: the same prompt to the same model is answered once; later batches reuse the answer
(no call, no cost, visibly), a different template or model asks again, and --fresh forces a call.
Calls are counted on the loopback fake server (real HTTP through litellm)."""

from __future__ import annotations

from pathlib import Path

import openpyxl

from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.answers import answer_key, stored_answer
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.templates import definition_from_project_file, save_version
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline_tests.support.extraction_cases import GOOD, PARSED
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.ledgers import add_documents


def _config(fake: FakeLLMServer, model: str = "openai/gpt-4o-mini") -> LLMConfig:
    return LLMConfig(model=model, api_base=fake.api_base, api_key="sk-test-not-a-secret", timeout_seconds=10)


def _extract(ledger: Ledger, batch: int, fake: FakeLLMServer, model: str = "openai/gpt-4o-mini") -> dict[str, object]:
    [item] = batch_item_rows(ledger, batch)
    fake.answer = lambda messages: Reply(GOOD, tokens_in=12_000, tokens_out=800)
    outcome = extract_item(
        ledger, item_id=item["id"], run_id=f"run-{batch}", worker="w", parsed=PARSED, llm=_config(fake, model)
    )
    assert outcome.status == "completed", outcome.reason
    row = states.get_item(ledger, item["id"])
    assert row is not None
    return {"outcome": outcome, "item": row}


def test_a_second_batch_over_the_same_paper_reuses_the_paid_answer(
    ledger: Ledger, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    [doc] = add_documents(ledger, 1)
    first = create_batch(ledger, idempotency_key="a", project="p", user="u", document_ids=[doc]).id
    paid = _extract(ledger, first, fake_llm)
    assert len(fake_llm.requests) == 1 and paid["item"]["cost_usd"] > 0  # type: ignore[index]
    second = create_batch(ledger, idempotency_key="b", project="p", user="u", document_ids=[doc]).id
    reused = _extract(ledger, second, fake_llm)
    assert len(fake_llm.requests) == 1  # no new call
    item = reused["item"]
    assert (item["tokens_in"], item["tokens_out"], item["cost_usd"]) == (0, 0, 0.0)  # type: ignore[index]
    outcome = reused["outcome"]
    assert outcome.reused is not None and outcome.reused["item"] == paid["item"]["id"]  # type: ignore[attr-defined,index]
    assert outcome.reused["tokens_in"] == 12_000  # type: ignore[attr-defined]
    assert outcome.result["fields"] == paid["outcome"].result["fields"]  # type: ignore[attr-defined]  # grounded alike
    sheet = openpyxl.load_workbook(write_workbook(ledger, second, tmp_path / "b.xlsx"))["Documents"]
    header = [c.value for c in sheet[1]]
    answer = sheet.cell(row=2, column=header.index("answer") + 1).value
    assert answer.startswith(f"reused: same prompt answered for item {paid['item']['id']}") and "no cost now" in answer  # type: ignore[index]


def test_another_project_with_an_identical_template_reuses_it_too(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    [doc_p] = add_documents(ledger, 1, project="p")
    [doc_q] = add_documents(ledger, 1, project="q")  # other rows; the parsed text is the same content
    _extract(
        ledger, create_batch(ledger, idempotency_key="p", project="p", user="u", document_ids=[doc_p]).id, fake_llm
    )
    _extract(
        ledger, create_batch(ledger, idempotency_key="q", project="q", user="u", document_ids=[doc_q]).id, fake_llm
    )
    assert len(fake_llm.requests) == 1


def test_a_changed_template_another_model_or_fresh_asks_again(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    [doc] = add_documents(ledger, 1)
    _extract(ledger, create_batch(ledger, idempotency_key="1", project="p", user="u", document_ids=[doc]).id, fake_llm)
    _extract(
        ledger,
        create_batch(ledger, idempotency_key="2", project="p", user="u", document_ids=[doc]).id,
        fake_llm,
        "openai/gpt-4o",
    )
    assert len(fake_llm.requests) == 2  # another model: another question
    field = {"name": "blinding", "type": "text", "instruction": "who was blinded"}
    save_version(ledger, "p", definition_from_project_file({"custom_fields": [field]}))
    _extract(ledger, create_batch(ledger, idempotency_key="3", project="p", user="u", document_ids=[doc]).id, fake_llm)
    assert len(fake_llm.requests) == 3  # another template: another question
    fresh = create_batch(ledger, idempotency_key="4", project="p", user="u", document_ids=[doc], fresh=True).id
    before = stored_answer(ledger, answer_key("openai/gpt-4o-mini", fake_llm.requests[-1]["messages"]))
    again = _extract(ledger, fresh, fake_llm)
    assert len(fake_llm.requests) == 4 and again["outcome"].reused is None  # type: ignore[attr-defined]
    after = stored_answer(ledger, answer_key("openai/gpt-4o-mini", fake_llm.requests[-1]["messages"]))
    assert before is not None and after is not None and after.item_id == again["item"]["id"]  # type: ignore[index]
    assert after.item_id != before.item_id  # the fresh answer replaced the stored one
