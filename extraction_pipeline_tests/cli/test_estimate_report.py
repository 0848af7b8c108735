"""`batch create --estimate`'s text and ``--json`` (cli/estimate_report.py) on a real estimate:
double extraction on a model with a batch API and one without, no budget known, a document that
cannot be parsed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_pipeline.cli.estimate_report import as_json, describe
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.estimates import MODEL, PROJECT, Home, estimate_home
from extraction_pipeline_tests.support.ledgers import add_documents

SECOND = "mistral/mistral-small-latest"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    with estimate_home(tmp_path) as home:
        yield home


def test_the_lines_say_what_was_assumed_and_what_cannot_be_sent(home: Home, tmp_path: Path) -> None:
    ids = [home.register(write_report(make_trial(i), tmp_path / "pdf")) for i in (1, 2, 3)]
    [missing] = add_documents(home.ledger, 1, project=PROJECT)  # its stored copy does not exist
    llm = LLMConfig(MODEL, api_key="sk-test-not-a-secret")
    estimate = home.estimate([*ids, missing], llm, second_model=SECOND)
    text = "\n".join(describe(estimate))
    assert text.startswith(f"estimate for 4 document(s) of project {PROJECT}, template {PROJECT} v1 (rct base v2")
    assert "text: 3 parsed now" in text
    assert f"first model {MODEL}:" in text and f"second model {SECOND}:" in text
    assert "default 1,057 tokens per call (the corpus median answer" in text
    assert "with the provider's batch API: no batch API" in text and "expected duration: no budget known" in text
    assert "with the provider's batch API: no batch API (a second model is asked by ordinary calls)" in text
    assert "total cost: $" in text and "budget: no budget known; duration by budget: no budget known" in text
    assert f"cannot be parsed: document {missing}" in text
    assert text.endswith("note: prices from litellm's model map; the provider's invoice decides")

    data = json.loads(json.dumps(as_json(estimate), default=str))  # the --json form is serializable
    first, second = data["models"]
    assert (first["role"], second["role"]) == ("first model", "second model")
    assert "corpus median" in first["answer_source"] and second["price_note"] == "no batch API"
    assert first["budget_source"] == "no budget known" and data["duration"] == "no budget known"
    assert data["sources"] == {"parsed now": 3} and [u["document_id"] for u in data["unreadable"]] == [missing]
    assert data["cost_usd"] == pytest.approx(first["cost_usd"] + second["cost_usd"])
    assert first["tokens"] == first["prompt_tokens"] + first["answer_tokens"]
    assert data["template"] == f"{PROJECT} v1 (rct base v2; saved when the batch starts)"
