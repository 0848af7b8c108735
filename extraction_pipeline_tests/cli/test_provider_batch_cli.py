"""`batch create --provider-batch`, `batch status` and `batch cancel-provider` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support.cli import one_line_error, run_cli


def test_a_provider_batch_is_the_batchs_choice_shown_while_it_waits_and_cancelled_by_the_analyst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in (1, 2)]
    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    create = ("batch", "create", "trials", "--user", "ann", "--provider-batch")

    monkeypatch.delenv("EXTRACTION_MODEL", raising=False)
    one_line_error(run_cli(home, *create, "--idempotency-key", "k0"), 2, "has no provider batch API here")
    monkeypatch.setenv("EXTRACTION_MODEL", "gemini/gemini-2.5-flash")  # still no batch API driven here
    one_line_error(run_cli(home, *create, "--idempotency-key", "k1"), 2, "anthropic/... models only")

    monkeypatch.setenv("EXTRACTION_MODEL", "openai/gpt-4o-mini")
    created = run_cli(home, *create, "--idempotency-key", "k2", check=True)
    assert "provider's batch API (half price" in created.stdout
    batch = json.loads(run_cli(home, "batch", "status", "1", "--json", check=True).stdout)
    assert batch["batch"]["provider_batch"] == "preparing"
    assert batch["provider_batches"][0].startswith("waiting for the provider's batch API")
    assert "waiting for the provider's batch API" in run_cli(home, "batch", "status", "1", check=True).stdout

    cancelled = run_cli(home, "batch", "cancel-provider", "1", "--user", "ann", check=True)
    assert "cancelled before it was submitted" in cancelled.stdout and "by ann" in cancelled.stdout
    after = json.loads(run_cli(home, "batch", "status", "1", "--json", check=True).stdout)
    assert after["batch"]["provider_batch"] == "ended" and after["provider_batches"] == [
        "cancelled before it was submitted"
    ]
    again = run_cli(home, "batch", "cancel-provider", "1", "--user", "ann", check=True)
    assert "nothing to cancel" in again.stdout

    plain = run_cli(home, "batch", "create", "trials", "--user", "ann", "--idempotency-key", "k3", "--json", check=True)
    plain_id = str(json.loads(plain.stdout)["batch_id"])
    one_line_error(
        run_cli(home, "batch", "cancel-provider", plain_id, "--user", "ann"), 2, "was not sent to a provider"
    )
    one_line_error(run_cli(home, "batch", "cancel-provider", "99", "--user", "ann"), 2, "unknown batch 99")
