"""Synthetic reports: what the demo and the tests extract is really printed, the demo's batch of
them (extracted by the offline model) has a forest plot and Risk-of-Bias lights to show, and a
right answer for a three-arm report reads as three arms, one outcome with three results and two
comparisons."""

from __future__ import annotations

import json
from pathlib import Path

from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthesis.batch import batch_synthesis
from extraction_pipeline.core.synthesis.risk_of_bias import NO_INFORMATION, batch_risk_of_bias
from extraction_pipeline.core.synthetic import (
    make_three_arm_trial,
    make_trial,
    report_pages,
    three_arm_report_pages,
    write_reports,
)
from extraction_pipeline.core.templates.arms import study_arms
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import extract_three_arm_report, parse_registered


def test_a_report_prints_its_authors_arms_events_and_methods_in_prose() -> None:
    trial = make_trial(3)
    text = " ".join(" ".join(report_pages(trial)).split())
    surname = trial.study_id.split()[0]
    assert trial.citation in text and f"{surname} {trial.authors[0][0]}," in text and str(trial.year) in text
    assert trial.arms_sentence in text and trial.events_sentence in text
    assert f"{trial.drug_events} of {trial.drug_n} patients with {trial.drug}" in text
    assert f"{trial.placebo_events} of {trial.placebo_n} with placebo" in text
    assert trial.drug_events < trial.placebo_events  # as its hazard ratio below 1 says
    # The facts the other tests quote stay printed.
    for fact in (trial.nct_number, f"A total of {trial.randomized_n} patients were randomized", "42 centres"):
        assert fact in text
    assert f"hazard ratio {trial.hazard_ratio:.2f}; 95% CI {trial.ci_lower:.2f} to {trial.ci_upper:.2f}" in text


def test_reports_differ_in_their_methods_and_so_in_their_judgements() -> None:
    trials = [make_trial(index) for index in range(1, 31)]
    assert [make_trial(index) for index in range(1, 31)] == trials  # reproducible
    assert len({trial.study_id for trial in trials[:10]}) == 10  # a demo's neighbours never share a label
    for domain in ("randomization", "deviations", "missing_data", "reporting", "overall"):
        assert {trial.risk_of_bias[domain] for trial in trials} > {"low"}, domain
    assert {trial.risk_of_bias["overall"] for trial in trials} == {"low", "some concerns", "high"}


def test_the_demos_batch_extracted_offline_pools_its_primary_outcome_and_judges_each_study(tmp_path: Path) -> None:
    """The demo's path without the daemon: synthetic reports registered, parsed and extracted by
    the offline model, then the batch page's synthesis and Risk-of-Bias lights read from the ledger."""
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    reports = write_reports(tmp_path / "pdfs", 5, start=1)
    documents = register_all(ledger, settings.documents_dir, "demo", [path for _trial, path in reports])
    batch_id = create_batch(
        ledger, idempotency_key="demo-like", project="demo", user="demo", document_ids=[d.id for d in documents]
    ).id
    parse_registered(settings, ledger, [document.sha256 for document in documents])
    items = {row["document_id"]: row["id"] for row in batch_item_rows(ledger, batch_id)}
    for document in documents:
        stored = str(settings.documents_dir / f"{document.sha256}.pdf")
        parsed = parse_document(ledger, sha256=document.sha256, stored_path=stored)
        outcome = extract_item(
            ledger, item_id=items[document.id], run_id="run-1", worker="w", parsed=parsed, llm=LLMConfig(model=None)
        )
        assert outcome.status == "completed", outcome.reason

    synthesis = batch_synthesis(ledger, batch_id)
    [pooled] = synthesis.pooled
    assert pooled.result.k == 5 and pooled.result.measure == "RR"
    assert [row.effect.study for row in pooled.rows] == [trial.study_id for trial, _path in reports]
    assert pooled.result.random_reml is not None
    assert synthesis.problems == ()  # no row left out: every one names its arm and its outcome
    rob = batch_risk_of_bias(ledger, batch_id)
    assert rob is not None
    judged = {study.study: [j.level for j in study.judgements] for study in rob.studies}
    fields = [domain.field for domain in rob.domains]
    assert judged == {trial.study_id: [trial.risk_of_bias[f] for f in fields] for trial, _path in reports}
    assert NO_INFORMATION not in {level for levels in judged.values() for level in levels}
    assert len({level for levels in judged.values() for level in levels}) > 1  # not every light alike
    ledger.dispose()


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
