"""Synthetic reports: what the demo and the tests extract is really printed, and a right answer
for a three-arm report reads as three arms, one outcome with three results and two comparisons."""

from __future__ import annotations

import json
from pathlib import Path

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_three_arm_trial, three_arm_report_pages
from extraction_pipeline.core.templates.arms import study_arms
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import extract_three_arm_report


def test_a_three_arm_report_prints_each_arms_numbers_and_each_doses_ratio() -> None:
    trial = make_three_arm_trial(1)
    text = " ".join(three_arm_report_pages(trial))
    assert len({arm.name for arm in trial.arms}) == 3 and trial.arms[2].name == "placebo"
    for arm in trial.arms:
        assert f"{arm.events} of {arm.randomized_n}" in text
    for dose in (0, 1):
        ratio, lower, upper = trial.risk_ratio(dose)
        assert lower < ratio < upper and f"{ratio:.2f} (95% CI {lower:.2f} to {upper:.2f})" in text


def test_a_right_answer_for_a_three_arm_report_is_verified_and_reads_as_arms(
    tmp_path: Path, ledger_url: str, ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    trial = make_three_arm_trial(2)
    settings = Settings(home=tmp_path / "home", database_url=ledger_url)
    batch_id, _item = extract_three_arm_report(settings, ledger, fake_llm, trial)
    [row] = batch_item_rows(ledger, batch_id)
    fields = json.loads(row["result_json"] or "{}")["fields"]
    answered = {path: entry for path, entry in fields.items() if entry["value"] is not None}
    assert len(answered) == 2 + 3 * 2 + 3 * 5 + 2 * 7
    judged = {path: entry["status"] for path, entry in answered.items() if path.endswith(("arm", "outcome_type"))}
    assert len(judged) == 3 * 2 + 2 * 2 and set(judged.values()) == {"judgement: supported by a verified quote"}
    assert {entry["status"] for path, entry in answered.items() if path not in judged} == {"verified"}
    assert all(not entry.get("flags") for entry in answered.values()), {p: e["flags"] for p, e in answered.items()}
    view = study_arms(fields, lambda path: fields[path]["value"])
    assert [arm.name for arm in view.arms] == [arm.name for arm in trial.arms]
    [outcome] = view.outcomes
    assert [result.arm for result in outcome.results] == ["arms.1", "arms.2", "arms.3"]
    assert [(c.arm, c.comparator) for c in outcome.comparisons] == [("arms.1", "arms.3"), ("arms.2", "arms.3")]
