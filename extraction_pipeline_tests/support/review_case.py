"""A batch with one really extracted document to review: a synthetic trial PDF registered in a
real home, parsed in the isolated child process, extracted through litellm from the loopback
fake server. Its values: four verified, one forged (unverified), one reported without a quote."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import SyntheticTrial, make_trial, write_report
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json


@dataclass(frozen=True)
class ReviewCase:
    settings: Settings
    ledger: Ledger
    batch_id: int
    item_id: int
    trial: SyntheticTrial
    pdf: Path


def results_sentence(trial: SyntheticTrial) -> str:
    return (
        f"The primary outcome occurred less often with {trial.drug} (hazard ratio "
        f"{trial.hazard_ratio:.2f}; 95% CI {trial.ci_lower:.2f} to {trial.ci_upper:.2f})."
    )


def answer_for(trial: SyntheticTrial) -> str:
    results = results_sentence(trial)
    return extraction_json(
        {
            "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
            "metadata.randomized_n": (trial.randomized_n, f"A total of {trial.randomized_n} patients were randomized"),
            "outcomes.1.effect_measure": ("HR", results),
            "outcomes.1.effect_estimate": (trial.hazard_ratio, results),
            # A forged bound: the quote is real, the number in it is not -> unverified.
            "outcomes.1.ci_lower": (0.11, results.replace(f"{trial.ci_lower:.2f}", "0.11")),
            "outcomes.1.ci_upper": (trial.ci_upper, results),
        }
    )


# Where the synthetic report names its primary outcome (core/synthetic.py, page 1).
OUTCOME_QUOTE = "The primary outcome was time to first hospitalization or death from any cause."


def synthesis_answer(trial: SyntheticTrial, randomization: str = "low") -> str:
    """An answer a forest plot and a risk-of-bias picture can use: the primary outcome named, its
    hazard ratio with the CI as printed, the NCT number as the study, and two RoB judgements."""
    results = results_sentence(trial)
    methods = f"A total of {trial.randomized_n} patients were randomized in a 1:1 ratio"
    return extraction_json(
        {
            "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
            "risk_of_bias.randomization": (randomization, methods),
            "risk_of_bias.deviations": ("some concerns", "a randomized, double-blind, placebo-controlled trial"),
            "outcomes.1.outcome_name": ("hospitalization or death", OUTCOME_QUOTE),
            "outcomes.1.effect_measure": ("HR", results),
            "outcomes.1.effect_estimate": (trial.hazard_ratio, results),
            "outcomes.1.ci_lower": (trial.ci_lower, results),
            "outcomes.1.ci_upper": (trial.ci_upper, results),
        }
    )


def make_batch(
    settings: Settings,
    ledger: Ledger,
    fake: FakeLLMServer,
    indexes: list[int],
    answer: Callable[[SyntheticTrial], str] = answer_for,
    project: str = "p",
    extra_text: str = "",
) -> list[ReviewCase]:
    """One batch of synthetic trials, each really parsed and extracted with ``answer(trial)``;
    ``extra_text`` is printed on each report's second page."""
    trials = [make_trial(index) for index in indexes]
    pdfs = [write_report(trial, settings.home_dir / "incoming", extra_text) for trial in trials]
    documents = [register_pdf(ledger, settings.documents_dir, project, pdf) for pdf in pdfs]
    batch_id = create_batch(
        ledger,
        idempotency_key=f"review-{'-'.join(map(str, indexes))}-{project}",
        project=project,
        user="ann",
        document_ids=[document.id for document in documents],
    ).id
    assert get_batch(ledger, batch_id) is not None
    items = {row["document_id"]: row["id"] for row in batch_item_rows(ledger, batch_id)}
    cases = []
    for trial, pdf, document in zip(trials, pdfs, documents, strict=True):
        parsed = parse_document(
            ledger, sha256=document.sha256, stored_path=str(settings.documents_dir / f"{document.sha256}.pdf")
        )
        fake.push(Reply(answer(trial)))
        outcome = extract_item(
            ledger,
            item_id=items[document.id],
            run_id="run-1",
            worker="w",
            parsed=parsed,
            llm=LLMConfig(model="openai/fake", api_base=fake.api_base, api_key="sk-test-not-a-secret"),
        )
        assert outcome.status == "completed", outcome.reason
        cases.append(ReviewCase(settings, ledger, batch_id, items[document.id], trial, pdf))
    return cases


def make_case(
    settings: Settings, ledger: Ledger, fake: FakeLLMServer, index: int = 3, project: str = "p"
) -> ReviewCase:
    return make_batch(settings, ledger, fake, [index], project=project)[0]
