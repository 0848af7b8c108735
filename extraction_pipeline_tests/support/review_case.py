"""A batch with one really extracted document to review: a synthetic trial PDF registered in a
real home, parsed in the isolated child process, extracted through litellm from the loopback
fake server. Its values: four verified, one forged (unverified), one reported without a quote.

Answers are in the current template's terms (the hazard ratio is comparison 1); ``version=1``
makes the batch one an earlier release created (the two-arm template, the hazard ratio in
outcome 1) with the answers of that template, as an upgraded ledger holds them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import parse_document, parse_documents
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import (
    SyntheticTrial,
    ThreeArmTrial,
    make_trial,
    write_report,
    write_three_arm_report,
)
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.templates import freeze_version_1


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


def answer_for(trial: SyntheticTrial, entry: str = "comparisons.1") -> str:
    results = results_sentence(trial)
    return extraction_json(
        {
            "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
            "metadata.randomized_n": (trial.randomized_n, f"A total of {trial.randomized_n} patients were randomized"),
            f"{entry}.effect_measure": ("HR", results),
            f"{entry}.effect_estimate": (trial.hazard_ratio, results),
            # A forged bound: the quote is real, the number in it is not -> unverified.
            f"{entry}.ci_lower": (0.11, results.replace(f"{trial.ci_lower:.2f}", "0.11")),
            f"{entry}.ci_upper": (trial.ci_upper, results),
        }
    )


def answer_for_v1(trial: SyntheticTrial) -> str:
    """``answer_for`` as the two-arm template of earlier batches has it."""
    return answer_for(trial, "outcomes.1")


# Where the synthetic report names its primary outcome (core/synthetic.py, page 1).
OUTCOME_QUOTE = "The primary outcome was time to first hospitalization or death from any cause."


def arms_sentence(trial: SyntheticTrial) -> str:
    """Where the synthetic report names its two arms and their sizes (core/synthetic.py, page 2)."""
    arm = trial.randomized_n // 2
    return (
        f"Of the {trial.randomized_n} participants, {arm} were assigned to {trial.drug} and "
        f"{trial.randomized_n - arm} to placebo."
    )


def synthesis_answer(trial: SyntheticTrial, randomization: str = "low") -> str:
    """An answer a forest plot and a risk-of-bias picture can use: the two arms declared, the
    primary outcome's hazard ratio (drug vs placebo) with the CI as printed, the NCT number as
    the study, and two RoB judgements."""
    results = results_sentence(trial)
    methods = f"A total of {trial.randomized_n} patients were randomized in a 1:1 ratio"
    arms = arms_sentence(trial)
    return extraction_json(
        {
            "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
            "arms.1.arm_name": (trial.drug, arms),
            "arms.1.randomized_n": (trial.randomized_n // 2, arms),
            "arms.2.arm_name": ("placebo", arms),
            "arms.2.randomized_n": (trial.randomized_n - trial.randomized_n // 2, arms),
            "risk_of_bias.randomization": (randomization, methods),
            "risk_of_bias.deviations": ("some concerns", "a randomized, double-blind, placebo-controlled trial"),
            "comparisons.1.outcome_name": ("hospitalization or death", OUTCOME_QUOTE),
            "comparisons.1.arm": (trial.drug, results),
            "comparisons.1.comparator_arm": ("placebo", arms),
            "comparisons.1.effect_measure": ("HR", results),
            "comparisons.1.effect_estimate": (trial.hazard_ratio, results),
            "comparisons.1.ci_lower": (trial.ci_lower, results),
            "comparisons.1.ci_upper": (trial.ci_upper, results),
        }
    )


def synthesis_answer_v1(trial: SyntheticTrial, randomization: str = "low") -> str:
    """``synthesis_answer`` as the two-arm template of earlier batches has it."""
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


def extract_answered(
    settings: Settings, ledger: Ledger, fake: FakeLLMServer, sha256: str, item_id: int, answer: str
) -> None:
    """Parse a registered document in the isolated child and extract its item through litellm,
    the fake model answering ``answer``; the item must complete."""
    parsed = parse_document(ledger, sha256=sha256, stored_path=str(settings.documents_dir / f"{sha256}.pdf"))
    fake.push(Reply(answer))
    outcome = extract_item(
        ledger,
        item_id=item_id,
        run_id="run-1",
        worker="w",
        parsed=parsed,
        llm=LLMConfig(model="openai/fake", api_base=fake.api_base, api_key="sk-test-not-a-secret"),
    )
    assert outcome.status == "completed", outcome.reason


def parse_registered(settings: Settings, ledger: Ledger, sha256s: list[str]) -> None:
    """Parse registered documents into the cache together, as a run's parse step does (one
    isolated child for them all, not one each)."""
    stored = [(sha256, str(settings.documents_dir / f"{sha256}.pdf")) for sha256 in sha256s]
    assert not [v for v in parse_documents(ledger, stored) if isinstance(v, Exception)]


def make_batch(
    settings: Settings,
    ledger: Ledger,
    fake: FakeLLMServer,
    indexes: list[int],
    answer: Callable[[SyntheticTrial], str] = answer_for,
    project: str = "p",
    extra_text: str = "",
    version: int = 2,
) -> list[ReviewCase]:
    """One batch of synthetic trials, each really parsed and extracted with ``answer(trial)``;
    ``extra_text`` is printed on each report's second page; ``version=1``: a batch frozen on the
    two-arm template of earlier releases (give it that template's answers)."""
    trials = [make_trial(index) for index in indexes]
    pdfs = [write_report(trial, settings.home_dir / "incoming", extra_text) for trial in trials]
    documents = register_all(ledger, settings.documents_dir, project, pdfs)
    batch_id = create_batch(
        ledger,
        idempotency_key=f"review-{'-'.join(map(str, indexes))}-{project}",
        project=project,
        user="ann",
        document_ids=[document.id for document in documents],
    ).id
    assert get_batch(ledger, batch_id) is not None
    if version == 1:
        freeze_version_1(ledger, batch_id)
    items = {row["document_id"]: row["id"] for row in batch_item_rows(ledger, batch_id)}
    parse_registered(settings, ledger, [document.sha256 for document in documents])
    cases = []
    for trial, pdf, document in zip(trials, pdfs, documents, strict=True):
        extract_answered(settings, ledger, fake, document.sha256, items[document.id], answer(trial))
        cases.append(ReviewCase(settings, ledger, batch_id, items[document.id], trial, pdf))
    return cases


def extract_three_arm_report(
    settings: Settings, ledger: Ledger, fake: FakeLLMServer, trial: ThreeArmTrial, project: str = "p"
) -> tuple[int, int]:
    """A batch of one three-arm report, really parsed and extracted with ``three_arm_answer``:
    (batch id, item id)."""
    pdf = write_three_arm_report(trial, settings.home_dir / "incoming")
    document = register_pdf(ledger, settings.documents_dir, project, pdf)
    batch_id = create_batch(
        ledger,
        idempotency_key=f"three-arm-{trial.index}-{project}",
        project=project,
        user="ann",
        document_ids=[document.id],
    ).id
    [item] = batch_item_rows(ledger, batch_id)
    extract_answered(settings, ledger, fake, document.sha256, item["id"], three_arm_answer(trial))
    return batch_id, item["id"]


def make_case(
    settings: Settings, ledger: Ledger, fake: FakeLLMServer, index: int = 3, project: str = "p", version: int = 2
) -> ReviewCase:
    answer = answer_for if version == 2 else answer_for_v1
    return make_batch(settings, ledger, fake, [index], answer, project=project, version=version)[0]


def three_arm_answer(trial: ThreeArmTrial) -> str:
    """A right answer for a three-arm report (core/synthetic.py): three arms declared with their
    sizes, the primary outcome's events per arm (one outcome entry per arm), and each dose's risk
    ratio against placebo as a comparison — every value quoted from the report."""
    events, ratios, arms = trial.events_sentence, trial.ratios_sentence, trial.arms_sentence
    values: dict[str, tuple[object, str | None]] = {
        "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
        "metadata.randomized_n": (trial.randomized_n, f"A total of {trial.randomized_n} patients were randomized"),
    }
    for number, arm in enumerate(trial.arms, start=1):
        values[f"arms.{number}.arm_name"] = (arm.name, arms)
        values[f"arms.{number}.randomized_n"] = (arm.randomized_n, arms)
        values[f"outcomes.{number}.outcome_name"] = (trial.outcome, f"The primary outcome was {trial.outcome}.")
        values[f"outcomes.{number}.outcome_type"] = ("dichotomous", events)
        values[f"outcomes.{number}.arm"] = (arm.name, events)
        values[f"outcomes.{number}.events"] = (arm.events, events)
        values[f"outcomes.{number}.total"] = (arm.randomized_n, events)
    for number, dose in enumerate(trial.arms[:2], start=1):
        ratio, lower, upper = trial.risk_ratio(number - 1)
        values[f"comparisons.{number}.outcome_name"] = (trial.outcome, f"The primary outcome was {trial.outcome}.")
        values[f"comparisons.{number}.arm"] = (dose.name, ratios)
        values[f"comparisons.{number}.comparator_arm"] = ("placebo", ratios)
        values[f"comparisons.{number}.effect_measure"] = ("RR", ratios)
        values[f"comparisons.{number}.effect_estimate"] = (ratio, ratios)
        values[f"comparisons.{number}.ci_lower"] = (lower, ratios)
        values[f"comparisons.{number}.ci_upper"] = (upper, ratios)
    return extraction_json(values)
