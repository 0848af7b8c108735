"""`extraction-pipeline ground PDF --claims FILE.jsonl`: anyone's numbers, with their context,
checked as a batch checks a model's; `--quotes` beside it unchanged. Real processes, a real PDF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_pipeline.core.synthetic import ThreeArmTrial, make_three_arm_trial, write_three_arm_report
from extraction_pipeline_tests.support.cli import one_line_error, run_cli

OUTCOME = "primary outcome"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("home")
    run_cli(path, "init", check=True)
    return path


@pytest.fixture(scope="module")
def trial() -> ThreeArmTrial:
    return make_three_arm_trial(2)


@pytest.fixture(scope="module")
def pdf(trial: ThreeArmTrial, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_three_arm_report(trial, tmp_path_factory.mktemp("pdf"))


def _claims_file(directory: Path, records: list[dict[str, object]], name: str = "claims.jsonl") -> Path:
    path = directory / name
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _sheet(trial: ThreeArmTrial) -> list[dict[str, object]]:
    """A colleague's sheet: the low dose against placebo, right except the placebo total (one
    more than printed) and the low dose's page (the events sentence is on page 1)."""
    low, _, placebo = trial.arms
    low_quote = f"{low.events} of {low.randomized_n} patients with {low.name}"
    placebo_quote = f"{placebo.events} of {placebo.randomized_n} with {placebo.name}"
    low_side = {"quote": low_quote, "arm": low.name, "versus": "placebo", "outcome": OUTCOME, "entry": "A"}
    placebo_side = {"quote": placebo_quote, "arm": "placebo", "versus": low.name, "outcome": OUTCOME, "entry": "A"}
    return [
        {"value": low.events, "kind": "events", **low_side},
        {"value": placebo.events, "kind": "events", **placebo_side},
        {"value": low.randomized_n, "kind": "total", "page": 2, **low_side},
        {"value": placebo.randomized_n + 1, "kind": "total", **placebo_side},
    ]


def test_claims_json_one_verdict_per_claim_in_order(
    home: Path, pdf: Path, trial: ThreeArmTrial, tmp_path: Path
) -> None:
    claims = _claims_file(tmp_path, _sheet(trial))
    out = run_cli(home, "ground", str(pdf), "--claims", str(claims), "--json", check=True)
    verdicts = [json.loads(line) for line in out.stdout.splitlines()]
    assert [v["line"] for v in verdicts] == [1, 2, 3, 4]
    assert all({"status", "flags", "page", "reason"} <= set(v) for v in verdicts)
    assert [(v["status"], v["flags"], v["page"]) for v in verdicts[:2]] == [("verified", [], 1)] * 2, verdicts
    assert verdicts[2]["status"] == "verified"
    assert verdicts[2]["flags"] == ["the claim says page 2, but the quote is on page 1"]
    assert (verdicts[3]["status"], verdicts[3]["reason"]) == ("unverified", "value not in quote")
    assert [v["field"] for v in verdicts] == [
        "outcomes.1.events",
        "outcomes.2.events",
        "outcomes.1.total",
        "outcomes.2.total",
    ]


def test_claims_text_one_line_per_claim(home: Path, pdf: Path, trial: ThreeArmTrial, tmp_path: Path) -> None:
    claims = _claims_file(tmp_path, _sheet(trial))
    lines = run_cli(home, "ground", str(pdf), "--claims", str(claims), check=True).stdout.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("line 1") and " verified " in lines[0] and "p.1" in lines[0] and "flag" not in lines[0]
    assert "[1 flag(s): the claim says page 2, but the quote is on page 1]" in lines[2]
    assert " unverified " in lines[3] and lines[3].rstrip().endswith("value not in quote")


def test_bad_claims_lines_are_each_named_and_nothing_is_checked(home: Path, pdf: Path, tmp_path: Path) -> None:
    good = {"quote": "q 1", "value": 1, "kind": "events", "outcome": "Death", "arm": "A", "versus": "B"}
    claims = tmp_path / "bad.jsonl"
    claims.write_text(
        "\n".join(
            [
                json.dumps(good),
                "{not json",
                json.dumps({**good, "kind": "hr"}),
                json.dumps({k: v for k, v in good.items() if k != "versus"}),
                json.dumps({**good, "value": "one"}),
            ]
        )
    )
    result = run_cli(home, "ground", str(pdf), "--claims", str(claims), "--json")
    assert result.returncode == 2 and result.stdout == ""
    errors = result.stderr.strip().splitlines()
    assert [line.split(": ", 2)[1] for line in errors] == [f"{claims}:{n}" for n in (2, 3, 4, 5)], errors
    assert all(line.startswith("error: ") for line in errors)
    assert "not a JSON line" in errors[0] and 'unknown kind "hr"' in errors[1]
    assert "missing required field(s) 'versus'" in errors[2] and "'value' must be a number" in errors[3]
    one_line_error(run_cli(home, "ground", str(pdf), "--claims", str(tmp_path / "none.jsonl")), 2, "no such file")


def test_quotes_still_work_and_the_two_exclude_each_other(
    home: Path, pdf: Path, trial: ThreeArmTrial, tmp_path: Path
) -> None:
    low = trial.arms[0]
    quote = f"{low.events} of {low.randomized_n} patients with {low.name}"
    quotes = tmp_path / "quotes.jsonl"
    quotes.write_text(json.dumps({"quote": quote, "value": low.events}) + "\n")
    out = run_cli(home, "ground", str(pdf), "--quotes", str(quotes), "--json", check=True)
    [verdict] = [json.loads(line) for line in out.stdout.splitlines()]
    assert verdict["status"] == "verified" and verdict["page"] == 1 and verdict["quote"] == quote
    claims = _claims_file(tmp_path, _sheet(trial))
    both = run_cli(home, "ground", str(pdf), "--quotes", str(quotes), "--claims", str(claims))
    one_line_error(both, 2, "not allowed with argument")
    one_line_error(run_cli(home, "ground", str(pdf)), 2, "one of the arguments --quotes --claims is required")
