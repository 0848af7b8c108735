"""`batch create --estimate`: the real command on a home of its own prints the price of the
launch (and --json), parses what is not parsed yet with progress, and creates nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import recent_batches
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.cli import one_line_error, run_cli

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("home")
    run_cli(path, "init", check=True)
    pdfs = [write_report(make_trial(i), tmp_path_factory.mktemp("pdfs")) for i in range(1, 6)]
    run_cli(path, "documents", "add", "trials", *map(str, pdfs), check=True)
    return path


@pytest.fixture(autouse=True)
def priced_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRACTION_MODEL", MODEL)
    monkeypatch.setenv("EXTRACTION_TOKENS_PER_MINUTE", "200000")
    monkeypatch.delenv("EXTRACTION_API_KEY", raising=False)


def test_estimate_prints_the_price_and_creates_nothing(home: Path) -> None:
    result = run_cli(home, "batch", "create", "trials", "--estimate", "--second-model", "openai/gpt-4o", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    first, second = data["models"]
    assert (first["model"], second["model"]) == (MODEL, "openai/gpt-4o")
    assert data["documents"] == 5 and first["documents"] == second["documents"] == 5
    assert data["sources"] == {"parsed now": 5} and data["approximate_documents"] == 0
    assert first["prompt_tokens"] > 5 * 2000  # the template's fields and schema alone are ~3,000 a call
    assert first["answer_tokens"] == 5 * 1057 and "corpus median" in first["answer_source"]
    assert first["batch_cost_usd"] == pytest.approx(first["cost_usd"] / 2)
    assert second["cost_usd"] > 10 * first["cost_usd"]  # gpt-4o's price, not the first model's
    assert data["cost_usd"] == pytest.approx(first["cost_usd"] + second["cost_usd"])
    assert "200,000 tokens/min (configured)" in first["budget_source"]
    assert second["budget_source"] == "no budget known" and first["minutes_by_budget"] is not None
    assert data["minutes"] is None and data["duration"] == "no budget known for openai/gpt-4o"  # it may take any time
    assert "parsing 5/5" in result.stderr  # progress for more than a few documents
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    try:
        assert recent_batches(ledger) == [] and latest_version(ledger, "trials") is None
    finally:
        ledger.dispose()

    text = run_cli(home, "batch", "create", "trials", "--estimate", "--documents", "1", "2", check=True)
    assert "estimate for 2 document(s) of project trials" in text.stdout
    assert "text: 2 cached parse" in text.stdout  # parsed by the first estimate, for the batch too
    assert "with the provider's batch API: $" in text.stdout and "200,000 tokens/min (configured)" in text.stdout
    assert "expected duration: under a minute" in text.stdout  # 2 papers under 200,000 tokens/min
    assert "nothing was created" in text.stdout


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--estimate", "--documents", "999"], 2, "unknown document id(s): 999"),
        (["--quick"], 2, "--quick goes with --estimate"),
        (["--idempotency-key", "k"], 2, "--user is required to create a batch"),
        (["--user", "ann"], 2, "--idempotency-key is required to create a batch"),
        (["--estimate", "--second-model", MODEL], 2, "--second-model must name another model"),
    ],
)
def test_bad_input_gives_one_clear_line(home: Path, args: list[str], code: int, fragment: str) -> None:
    one_line_error(run_cli(home, "batch", "create", "trials", *args), code, fragment)


def test_an_empty_project_is_a_clear_error(home: Path) -> None:
    one_line_error(run_cli(home, "batch", "create", "nothing", "--estimate"), 1, "has no documents")
