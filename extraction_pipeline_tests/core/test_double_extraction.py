"""Double extraction: two fake models (real HTTP through litellm) that disagree on known fields.
Each document is extracted by both independently; agreement per value, per document and per
field; disagreements first in the review queue with both answers; the reviewer's pick recorded
like any decision; cost per model; both answers paid once."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.values import in_review_order, reviewable_values
from extraction_pipeline_tests.support.extraction_cases import DEATHS, PARSED
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.ledgers import add_documents
from extraction_pipeline_tests.support.templates import freeze_version_1

FIRST, SECOND = "openai/model-a", "openai/model-b"
REGISTERED = "Trial registered as NCT01234567."
RANDOMIZED = "A total of 412 patients were randomized to drug or placebo."


DECLARED = {"arms.1.arm_name": ("drug", RANDOMIZED), "arms.2.arm_name": ("placebo", RANDOMIZED)}
NAMED = {"comparisons.1.arm": ("drug", DEATHS), "comparisons.1.comparator_arm": ("placebo", RANDOMIZED)}


def _answers(model: str, messages: list[dict[str, str]]) -> Reply:
    common = {
        "metadata.nct_number": ("NCT01234567", REGISTERED),
        **DECLARED,
        **NAMED,
        "comparisons.1.effect_estimate": (0.72, DEATHS),
    }
    if model.endswith("model-a"):
        values = {**common, "metadata.randomized_n": (412, RANDOMIZED), "comparisons.1.ci_lower": (0.66, DEATHS)}
        return Reply(extraction_json(values), tokens_in=1000, tokens_out=100)
    values = {**common, "comparisons.1.ci_lower": (0.60, DEATHS), "comparisons.1.ci_upper": (0.86, DEATHS)}
    return Reply(extraction_json(values), tokens_in=2000, tokens_out=200)


def _cache_parse(ledger: Ledger, document_id: int) -> None:
    """The document's parse, as the parse step would have cached it (these test rows have no PDF)."""
    import json

    from sqlalchemy import insert

    from extraction_pipeline.core.ledger import utcnow
    from extraction_pipeline.core.ledger.documents import get_document
    from extraction_pipeline.core.ledger.schema import parsed_documents
    from extraction_pipeline.core.pdf.engine import EngineOptions

    document = get_document(ledger, document_id)
    assert document is not None
    with ledger.engine.begin() as conn:
        conn.execute(
            insert(parsed_documents).values(
                sha256=document["sha256"],
                parser_version=EngineOptions().parser_version,
                engine="test",
                engine_version="test",
                pages=len(PARSED.pages_text),
                seconds=0.0,
                pages_json=json.dumps(PARSED.pages_text),
                tables_json="[]",
                created_at=utcnow(),
            )
        )


@pytest.fixture
def extracted(ledger: Ledger, fake_llm: FakeLLMServer) -> dict[str, object]:
    [doc] = add_documents(ledger, 1)
    _cache_parse(ledger, doc)
    batch = create_batch(ledger, idempotency_key="d", project="p", user="u", document_ids=[doc], second_model=SECOND).id
    fake_llm.answer_by_model = _answers
    llm = LLMConfig(model=FIRST, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    outcome = extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=PARSED, llm=llm)
    assert outcome.status == "completed", outcome.reason
    return {"batch": batch, "outcome": outcome, "llm": llm}


def test_both_models_answer_independently_and_each_value_is_compared(
    ledger: Ledger, fake_llm: FakeLLMServer, extracted: dict[str, object]
) -> None:
    models = [request["model"] for request in fake_llm.requests]
    assert sorted(models) == ["model-a", "model-b"]  # one call each (litellm strips the provider)
    assert fake_llm.requests[0]["messages"] == fake_llm.requests[1]["messages"]  # same prompt, no first answer in it
    result = extracted["outcome"].result  # type: ignore[attr-defined]
    assert result["agreement"] == {
        "metadata.nct_number": "agree",
        "metadata.randomized_n": "first only",
        "arms.1.arm_name": "agree",
        "arms.2.arm_name": "agree",
        "comparisons.1.arm": "agree",
        "comparisons.1.comparator_arm": "agree",
        "comparisons.1.effect_estimate": "agree",
        "comparisons.1.ci_lower": "disagree",
        "comparisons.1.ci_upper": "second only",
    }
    assert result["agreement_rate"] == 0.667 and extracted["outcome"].agreement == 0.667  # type: ignore[attr-defined]
    assert result["second"]["fields"]["comparisons.1.ci_lower"]["status"] == "verified"  # grounded too
    assert result["usage_by_model"] == {
        FIRST: {"tokens_in": 1000, "tokens_out": 100, "cost_usd": 0.0},
        SECOND: {"tokens_in": 2000, "tokens_out": 200, "cost_usd": 0.0},
    }
    item = states.get_item(ledger, 1)
    assert item is not None and (item["tokens_in"], item["tokens_out"]) == (3000, 300)
    assert item["model"] == FIRST  # the first model's values are the machine values


def test_disagreements_lead_the_review_queue_and_the_pick_is_a_decision(
    ledger: Ledger, extracted: dict[str, object]
) -> None:
    item = states.get_item(ledger, 1)
    assert item is not None
    values = reviewable_values(item["result_json"])
    ordered = [value.path for value in in_review_order(values)]
    assert set(ordered[:3]) == {"comparisons.1.ci_lower", "comparisons.1.ci_upper", "metadata.randomized_n"}
    upper, lower = values["comparisons.1.ci_upper"], values["comparisons.1.ci_lower"]
    assert upper.machine.value is None and upper.second is not None and upper.second.value == 0.86
    assert lower.second is not None
    picked = corrections.correct(
        ledger,
        item_id=1,
        path="comparisons.1.ci_lower",
        reviewer="rita",
        seen_seq=0,
        value_text=str(lower.second.value),
        quote=lower.second.quote,
        comment=f"picked the answer of {SECOND}",
    )
    assert picked.kind == decisions.RECORDED and picked.current is not None
    assert picked.current.value == pytest.approx(0.60) and picked.current.grounding["status"] == "verified"  # type: ignore[index]
    [row] = [r for r in decisions.audit_trail(ledger, 1, "comparisons.1.ci_lower") if r["seq"]]
    assert row["comment"] == f"picked the answer of {SECOND}" and row["machine_value_json"] == "0.66"


def test_the_workbook_shows_both_answers_agreement_and_cost_per_model(
    ledger: Ledger, extracted: dict[str, object], tmp_path: Path
) -> None:
    book = openpyxl.load_workbook(write_workbook(ledger, extracted["batch"], tmp_path / "d.xlsx"))  # type: ignore[arg-type]
    values = book["Values"]
    header = [c.value for c in values[1]]
    rows = {
        r[header.index("field")]: dict(zip(header, r, strict=True))
        for r in values.iter_rows(min_row=2, values_only=True)
    }
    assert rows["ci_lower"]["value"] == pytest.approx(0.66) and rows["ci_lower"]["second model value"] == pytest.approx(
        0.60
    )
    assert rows["ci_lower"]["agreement"] == "disagree" and rows["ci_upper"]["agreement"] == "second only"
    documents = book["Documents"]
    doc_header = [c.value for c in documents[1]]
    assert documents.cell(row=2, column=doc_header.index("agreement") + 1).value == f"67% with {SECOND}"
    batch = {r[0]: r[1] for r in book["Batch"].iter_rows(values_only=True) if r and r[0]}
    assert batch[f"cost {FIRST}"].endswith("(1000+100 tokens)") and batch[f"cost {SECOND}"].endswith(
        "(2000+200 tokens)"
    )
    assert (
        batch["agreement comparisons.ci_lower"] == "0/1 (0%)" and batch["agreement metadata.nct_number"] == "1/1 (100%)"
    )


def test_both_answers_are_paid_once(ledger: Ledger, fake_llm: FakeLLMServer, extracted: dict[str, object]) -> None:
    [doc] = add_documents(ledger, 1, start=5)
    del doc
    again = create_batch(ledger, idempotency_key="d2", project="p", user="u", document_ids=[1], second_model=SECOND).id
    del again
    outcome = extract_item(ledger, item_id=2, run_id="r2", worker="w", parsed=PARSED, llm=extracted["llm"])  # type: ignore[arg-type]
    assert outcome.status == "completed" and len(fake_llm.requests) == 2  # no new call for either model
    assert outcome.result["second"]["reused"] is not None and outcome.reused is not None


# A three-arm trial: two doses and placebo, an outcome per arm and two comparisons.
THREE_ARMS = ParsedDocument(
    "three-arms",
    [
        "Participants were randomized to haloperidol 1 mg (n=40), haloperidol 2 mg (n=41) or placebo (n=39).",
        "Nausea occurred in 5 of 40 with haloperidol 1 mg, 9 of 41 with haloperidol 2 mg and 4 of 39 with "
        "placebo. Versus placebo, the odds ratio of nausea was 1.3 (95% CI 0.3 to 5.2) with 1 mg and 2.4 "
        "(95% CI 0.7 to 8.5) with 2 mg.",
    ],
)
ARMS_SENTENCE, RESULTS = THREE_ARMS.pages_text
ARM_N = {"haloperidol 1 mg": 40, "haloperidol 2 mg": 41, "placebo": 39}
EVENTS = {"haloperidol 1 mg": 5, "haloperidol 2 mg": 9, "placebo": 4}
EFFECTS = {"haloperidol 1 mg": (1.3, 0.3, 5.2), "haloperidol 2 mg": (2.4, 0.7, 8.5)}


def _three_arm_answer(arms: list[str], events: dict[str, int], compared: list[str]) -> str:
    """The answer listing the arms, their outcome entries and the comparisons in the given orders."""
    values: dict[str, tuple[object, str | None]] = {}
    for n, arm in enumerate(arms, start=1):
        values[f"arms.{n}.arm_name"] = (arm, ARMS_SENTENCE)
        values[f"arms.{n}.randomized_n"] = (ARM_N[arm], ARMS_SENTENCE)
        values[f"outcomes.{n}.outcome_name"] = ("Nausea", RESULTS)
        values[f"outcomes.{n}.arm"] = (arm, RESULTS)
        values[f"outcomes.{n}.events"] = (events[arm], RESULTS)
        values[f"outcomes.{n}.total"] = (ARM_N[arm], RESULTS)
    for n, arm in enumerate(compared, start=1):
        estimate, lower, upper = EFFECTS[arm]
        values[f"comparisons.{n}.outcome_name"] = ("Nausea", RESULTS)
        values[f"comparisons.{n}.arm"] = (arm, RESULTS)
        values[f"comparisons.{n}.comparator_arm"] = ("placebo", RESULTS)
        values[f"comparisons.{n}.effect_measure"] = ("OR", RESULTS)
        values[f"comparisons.{n}.effect_estimate"] = (estimate, RESULTS)
        values[f"comparisons.{n}.ci_lower"] = (lower, RESULTS)
        values[f"comparisons.{n}.ci_upper"] = (upper, RESULTS)
    return extraction_json(values)


def _double_extract(ledger: Ledger, fake: FakeLLMServer, second_answer: str) -> dict[str, object]:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="three", project="p", user="u", document_ids=[doc], second_model=SECOND)
    first_answer = _three_arm_answer(
        ["haloperidol 1 mg", "haloperidol 2 mg", "placebo"], EVENTS, ["haloperidol 1 mg", "haloperidol 2 mg"]
    )
    fake.answer_by_model = lambda model, messages: Reply(first_answer if model.endswith("model-a") else second_answer)
    llm = LLMConfig(model=FIRST, api_base=fake.api_base, api_key="sk-test-not-a-secret")
    outcome = extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=THREE_ARMS, llm=llm)
    assert outcome.status == "completed", outcome.reason
    return outcome.result


def test_the_same_answer_in_another_order_agrees_on_every_value(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    # The second model lists the arms, the outcome entries and the comparisons in other orders.
    reordered = _three_arm_answer(
        ["placebo", "haloperidol 2 mg", "haloperidol 1 mg"], EVENTS, ["haloperidol 2 mg", "haloperidol 1 mg"]
    )
    result = _double_extract(ledger, fake_llm, reordered)
    agreement = result["agreement"]
    assert isinstance(agreement, dict) and len(agreement) == 3 * 2 + 3 * 4 + 2 * 7
    assert set(agreement.values()) == {"agree"} and result["agreement_rate"] == 1.0
    # The second answer is stored aligned: a path names the same arm's entry in both answers.
    second = result["second"]["fields"]  # type: ignore[index]
    assert [second[f"outcomes.{n}.arm"]["value"] for n in (1, 2, 3)] == [
        "haloperidol 1 mg",
        "haloperidol 2 mg",
        "placebo",
    ]
    assert [second[f"comparisons.{n}.effect_estimate"]["value"] for n in (1, 2)] == [1.3, 2.4]
    assert second["arms.3.arm_name"]["value"] == "placebo" and second["arms.3.randomized_n"]["value"] == 39


def test_a_number_given_under_another_arm_is_a_disagreement_on_that_arm(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    # The second model gives the two doses' events the other way round (and lists arms reordered).
    swapped = {**EVENTS, "haloperidol 1 mg": 9, "haloperidol 2 mg": 5}
    answer = _three_arm_answer(
        ["haloperidol 2 mg", "placebo", "haloperidol 1 mg"], swapped, ["haloperidol 1 mg", "haloperidol 2 mg"]
    )
    result = _double_extract(ledger, fake_llm, answer)
    agreement = result["agreement"]
    assert isinstance(agreement, dict)
    assert {path for path, verdict in agreement.items() if verdict != "agree"} == {
        "outcomes.1.events",
        "outcomes.2.events",
    }
    assert agreement["outcomes.1.events"] == "disagree" and agreement["outcomes.3.events"] == "agree"
    item = states.get_item(ledger, 1)
    assert item is not None
    values = reviewable_values(item["result_json"])
    first_dose = values["outcomes.1.events"]
    assert first_dose.machine.value == 5 and first_dose.second is not None and first_dose.second.value == 9


def test_a_two_arm_batchs_outcomes_are_aligned_by_name_and_time_point(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="v1", project="p", user="u", document_ids=[doc], second_model=SECOND)
    freeze_version_1(ledger, batch.id)
    outcomes = {
        "Nausea": {"events_treatment": 5, "total_treatment": 40, "events_control": 4, "total_control": 39},
        "Sedation": {"events_treatment": 9, "total_treatment": 41},
    }

    def answer(order: list[str]) -> str:
        values: dict[str, tuple[object, str | None]] = {}
        for n, name in enumerate(order, start=1):
            values[f"outcomes.{n}.outcome_name"] = (name, RESULTS)
            values.update({f"outcomes.{n}.{field}": (v, RESULTS) for field, v in outcomes[name].items()})
        return extraction_json(values)

    first, second = answer(["Nausea", "Sedation"]), answer(["Sedation", "Nausea"])
    fake_llm.answer_by_model = lambda model, messages: Reply(first if model.endswith("model-a") else second)
    llm = LLMConfig(model=FIRST, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    outcome = extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=THREE_ARMS, llm=llm)
    assert outcome.status == "completed", outcome.reason
    assert set(outcome.result["agreement"].values()) == {"agree"} and len(outcome.result["agreement"]) == 8
    assert outcome.result["second"]["fields"]["outcomes.2.outcome_name"]["value"] == "Sedation"


def test_the_review_page_shows_both_answers_and_records_the_pick(
    ledger_url: str, tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    import html
    import re
    import threading
    import time

    import httpx
    import uvicorn
    from starlette.applications import Starlette

    from extraction_pipeline.core.ledger.users import add_user
    from extraction_pipeline.core.settings import Settings
    from extraction_pipeline.web.server import build_app
    from extraction_pipeline_tests.support.web import free_port

    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(ledger_url)
    [doc] = add_documents(ledger, 1)
    _cache_parse(ledger, doc)
    batch = create_batch(ledger, idempotency_key="w", project="p", user="u", document_ids=[doc], second_model=SECOND).id
    fake_llm.answer_by_model = _answers
    llm = LLMConfig(model=FIRST, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    assert extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=PARSED, llm=llm).status == "completed"
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(settings, Starlette(), token=None), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        _, personal = add_user(ledger, "Rita")
        headers = {"Origin": base, "Authorization": f"Bearer {personal}"}  # Rita's personal token
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            page = html.unescape(client.get(f"/extraction/batches/{batch}/documents/1").text)
            # The two models' disagreements are what most needs a human: the first shown is one.
            current = re.search(r'<a class="cell [^"]*current[^"]*"[^>]*data-path="([^"]+)"', page)
            assert current is not None
            assert current.group(1) in {"comparisons.1.ci_lower", "comparisons.1.ci_upper", "metadata.randomized_n"}
            assert '<code class="second-value">0.6</code>' in page and f"Pick {SECOND}'s answer" in page
            detail = page[page.index('<div class="detail" data-path="comparisons.1.ci_lower"') :]
            form = detail[detail.index('class="inline pick-second"') :]
            fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form[: form.index("</form>")]))
            picked = client.post("/extraction/items/1/decisions", data=fields)
            assert picked.status_code == 303
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    decision = decisions.current_decisions(ledger, batch)[(1, "comparisons.1.ci_lower")]
    assert (decision.action, decision.value, decision.reviewer) == ("correct", 0.6, "Rita")
    assert decision.comment == f"picked the answer of {SECOND}"


def test_a_third_model_suggests_but_never_overwrites(ledger: Ledger, fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    import json

    [doc] = add_documents(ledger, 1)
    _cache_parse(ledger, doc)
    batch = create_batch(
        ledger,
        idempotency_key="adj",
        project="p",
        user="u",
        document_ids=[doc],
        second_model=SECOND,
        adjudicator_model="openai/judge",
    ).id
    seen: list[str] = []

    def answers(model: str, messages: list[dict[str, str]]) -> Reply:
        if model.endswith("judge"):
            disputed = messages[-1]["content"].split("Disagreements:", 1)[1]
            seen.extend(item["path"] for item in json.loads(disputed))
            choice = {"path": "comparisons.1.ci_lower", "choice": "second", "reason": "the text prints 0.60"}
            return Reply(json.dumps({"decisions": [choice, {"path": "metadata.title", "choice": "first"}]}))
        return _answers(model, messages)

    fake_llm.answer_by_model = answers
    llm = LLMConfig(model=FIRST, api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    outcome = extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=PARSED, llm=llm)
    assert outcome.status == "completed"
    assert sorted(seen) == [
        "comparisons.1.ci_lower",
        "comparisons.1.ci_upper",
        "metadata.randomized_n",
    ]  # disputes only
    adjudication = outcome.result["adjudication"]
    assert adjudication["suggestions"] == {
        "comparisons.1.ci_lower": {"choice": "second", "reason": "the text prints 0.60"}
    }
    assert outcome.result["fields"]["comparisons.1.ci_lower"]["value"] == 0.66  # a suggestion, not an overwrite
    assert "openai/judge" in outcome.result["usage_by_model"]
    book = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "adj.xlsx"))["Values"]
    header = [c.value for c in book[1]]
    row = next(r for r in book.iter_rows(min_row=2, values_only=True) if r[header.index("field")] == "ci_lower")
    assert row[header.index("adjudicator suggests")] == "second (openai/judge): the text prints 0.60"
    item = states.get_item(ledger, 1)
    assert item is not None
    values = reviewable_values(item["result_json"])
    assert values["comparisons.1.ci_lower"].suggestion == "second (openai/judge): the text prints 0.60"
    with pytest.raises(ConfigError, match="needs a second model"):
        create_batch(ledger, idempotency_key="x", project="p", user="u", document_ids=[doc], adjudicator_model="m")
