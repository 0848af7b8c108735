"""Batches of multi-arm trials for the exports and the pooling by comparison: each synthetic trial
report carries, on its second page, a results table of its own arms (names, sizes, events), and
the model's answer (base template version 2) declares those arms, gives each arm's numbers per
outcome and the printed comparisons, every value quoted from the table."""

from __future__ import annotations

from dataclasses import dataclass

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import SyntheticTrial, make_trial, write_report
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, extraction_json
from extraction_pipeline_tests.support.review_case import ReviewCase, extract_answered, parse_registered

OUTCOME = "delirium"


@dataclass(frozen=True)
class TrialArm:
    name: str
    received: str
    n: int
    events: int
    subgroup: str | None = None

    @property
    def header(self) -> str:
        return f"{self.name} (n={self.n})"


@dataclass(frozen=True)
class PrintedComparison:
    arm: str
    comparator: str
    measure: str
    estimate: float
    lower: float
    upper: float

    @property
    def sentence(self) -> str:
        return (
            f"{self.arm} versus {self.comparator}: {self.measure} {self.estimate:.2f} "
            f"(95% CI {self.lower:.2f} to {self.upper:.2f})."
        )


@dataclass(frozen=True)
class ArmsTrial:
    index: int  # the synthetic trial's (its NCT number, its PDF)
    arms: tuple[TrialArm, ...]
    comparisons: tuple[PrintedComparison, ...] = ()
    study_id: str | None = None

    def table(self) -> str:
        lines = ["Table 3. Delirium by day 7", "Outcome", *(arm.header for arm in self.arms), "Delirium"]
        lines += [f"{arm.events}/{arm.n}" for arm in self.arms]
        lines += [comparison.sentence for comparison in self.comparisons]
        return "\n".join(lines) + "\n"

    def answer(self, trial: SyntheticTrial) -> str:
        values: dict[str, tuple[object, str | None]] = {
            "metadata.nct_number": (trial.nct_number, f"registered at ClinicalTrials.gov ({trial.nct_number})"),
        }
        for number, arm in enumerate(self.arms, start=1):
            values[f"arms.{number}.arm_name"] = (arm.name, arm.header)
            values[f"arms.{number}.intervention"] = (arm.received, arm.header)
            values[f"arms.{number}.randomized_n"] = (arm.n, arm.header)
            if arm.subgroup:
                values[f"arms.{number}.subgroup"] = (arm.subgroup, arm.header)
            values[f"outcomes.{number}.outcome_name"] = (OUTCOME, "Delirium")
            values[f"outcomes.{number}.outcome_type"] = ("dichotomous", "Delirium")
            values[f"outcomes.{number}.timepoint"] = ("day 7", "Table 3. Delirium by day 7")
            values[f"outcomes.{number}.arm"] = (arm.name, arm.header)
            values[f"outcomes.{number}.events"] = (arm.events, f"{arm.events}/{arm.n}")
            values[f"outcomes.{number}.total"] = (arm.n, f"{arm.events}/{arm.n}")
        for number, comparison in enumerate(self.comparisons, start=1):
            quote = comparison.sentence
            values[f"comparisons.{number}.outcome_name"] = (OUTCOME, "Delirium")
            values[f"comparisons.{number}.timepoint"] = ("day 7", "Table 3. Delirium by day 7")
            values[f"comparisons.{number}.arm"] = (comparison.arm, quote)
            values[f"comparisons.{number}.comparator_arm"] = (comparison.comparator, quote)
            values[f"comparisons.{number}.effect_measure"] = (comparison.measure, quote)
            values[f"comparisons.{number}.effect_estimate"] = (comparison.estimate, quote)
            values[f"comparisons.{number}.ci_lower"] = (comparison.lower, quote)
            values[f"comparisons.{number}.ci_upper"] = (comparison.upper, quote)
        return extraction_json(values)


def three_arm_trial(index: int = 3) -> ArmsTrial:
    """Two doses against saline, and the printed comparison of each dose with saline."""
    return ArmsTrial(
        index,
        (
            TrialArm("Haloperidol 1 mg", "haloperidol 1 mg iv", 50, 10),
            TrialArm("Haloperidol 2 mg", "haloperidol 2 mg iv", 48, 8),
            TrialArm("Saline", "saline iv", 52, 20),
        ),
        (
            PrintedComparison("Haloperidol 1 mg", "Saline", "RR", 0.52, 0.27, 0.99),
            PrintedComparison("Haloperidol 2 mg", "Saline", "RR", 0.43, 0.21, 0.89),
        ),
    )


def two_arm_trial(index: int, drug: tuple[int, int], placebo: tuple[int, int]) -> ArmsTrial:
    return ArmsTrial(
        index,
        (
            TrialArm("Haloperidol", "haloperidol 1 mg iv", drug[1], drug[0]),
            TrialArm("Placebo", "placebo iv", placebo[1], placebo[0]),
        ),
    )


def make_arms_batch(
    settings: Settings, ledger: Ledger, fake: FakeLLMServer, trials: list[ArmsTrial]
) -> list[ReviewCase]:
    """One batch (frozen on the current base template) of the trials, each really parsed and
    extracted with its own answer."""
    synthetic = [make_trial(trial.index) for trial in trials]
    pdfs = [
        write_report(made, settings.home_dir / "incoming", trial.table())
        for made, trial in zip(synthetic, trials, strict=True)
    ]
    documents = register_all(ledger, settings.documents_dir, "arms", pdfs)
    batch_id = create_batch(
        ledger,
        idempotency_key=f"arms-{'-'.join(str(t.index) for t in trials)}",
        project="arms",
        user="ann",
        document_ids=[document.id for document in documents],
    ).id
    items = {row["document_id"]: row["id"] for row in batch_item_rows(ledger, batch_id)}
    parse_registered(settings, ledger, [document.sha256 for document in documents])
    cases = []
    for made, trial, pdf, document in zip(synthetic, trials, pdfs, documents, strict=True):
        extract_answered(settings, ledger, fake, document.sha256, items[document.id], trial.answer(made))
        cases.append(ReviewCase(settings, ledger, batch_id, items[document.id], made, pdf))
    return cases
