"""Synthetic trial-report PDFs for the demo and the tests, made with PyMuPDF.

Each report states its NCT number, the number randomized and a hazard ratio with its 95% CI in
ordinary prose, so the offline extractor (and a fake LLM) have real, quotable sentences. A
three-arm report (two doses and placebo) prints every arm's events and size and each dose's risk
ratio against placebo.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

CONDITIONS = [
    "heart failure",
    "type 2 diabetes",
    "COPD",
    "atrial fibrillation",
    "chronic kidney disease",
    "major depression",
    "rheumatoid arthritis",
    "hypertension",
]
DRUGS = ["verunatide", "lomacitinib", "dapravastin", "sorelumab", "fentrazole", "bexicardin"]


@dataclass(frozen=True)
class SyntheticTrial:
    index: int
    nct_number: str
    condition: str
    drug: str
    randomized_n: int
    hazard_ratio: float
    ci_lower: float
    ci_upper: float

    @property
    def filename(self) -> str:
        return f"trial-{self.index:03d}.pdf"


def make_trial(index: int) -> SyntheticTrial:
    rng = random.Random(index)  # noqa: S311  (reproducible fake trials, not cryptography)
    hr = round(rng.uniform(0.55, 0.95), 2)
    return SyntheticTrial(
        index=index,
        nct_number=f"NCT{rng.randint(10_000_000, 99_999_999)}",
        condition=rng.choice(CONDITIONS),
        drug=rng.choice(DRUGS),
        randomized_n=rng.randint(120, 2400),
        hazard_ratio=hr,
        ci_lower=round(hr - rng.uniform(0.08, 0.2), 2),
        ci_upper=round(hr + rng.uniform(0.05, 0.15), 2),
    )


def report_pages(trial: SyntheticTrial, extra_text: str = "") -> list[str]:
    arm = trial.randomized_n // 2
    page1 = (
        f"{trial.drug.capitalize()} versus placebo in adults with {trial.condition}: "
        "a randomized, double-blind, placebo-controlled trial\n\n"
        "Abstract\n"
        f"Background. Treatment options for {trial.condition} remain limited. "
        f"This trial was registered at ClinicalTrials.gov ({trial.nct_number}).\n"
        f"Methods. A total of {trial.randomized_n} patients were randomized in a 1:1 ratio to "
        f"{trial.drug} or placebo at 42 centres. The primary outcome was time to first hospitalization "
        "or death from any cause.\n"
        f"Results. The primary outcome occurred less often with {trial.drug} (hazard ratio "
        f"{trial.hazard_ratio:.2f}; 95% CI {trial.ci_lower:.2f} to {trial.ci_upper:.2f}).\n"
        f"Conclusions. {trial.drug.capitalize()} reduced the risk of the primary outcome.\n"
    )
    page2 = (
        "Participants\n"
        f"Of the {trial.randomized_n} participants, {arm} were assigned to {trial.drug} and "
        f"{trial.randomized_n - arm} to placebo. Baseline characteristics were balanced.\n\n"
        "Funding\nThe trial was funded by a public research council.\n" + (f"\n{extra_text}\n" if extra_text else "")
    )
    return [page1, page2]


def write_report(trial: SyntheticTrial, directory: Path, extra_text: str = "") -> Path:
    return _write_pdf(report_pages(trial, extra_text), directory / trial.filename)


def _write_pdf(pages: list[str], path: Path) -> Path:
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()  # lazy

    path.parent.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as doc:
        for text in pages:
            page = doc.new_page(width=595, height=842)  # A4 in points
            page.insert_textbox(pymupdf.Rect(56, 56, 539, 786), text, fontsize=11, fontname="helv")
        doc.save(path)
    return path


def write_reports(directory: Path, count: int, start: int = 1) -> list[tuple[SyntheticTrial, Path]]:
    trials = [make_trial(index) for index in range(start, start + count)]
    return [(trial, write_report(trial, directory)) for trial in trials]


@dataclass(frozen=True)
class SyntheticArm:
    name: str
    randomized_n: int
    events: int


@dataclass(frozen=True)
class ThreeArmTrial:
    """Two doses of a drug and placebo: every arm's events and size printed in one sentence, each
    dose's risk ratio against placebo in another, as three-arm reports print them."""

    index: int
    nct_number: str
    condition: str
    drug: str
    arms: tuple[SyntheticArm, SyntheticArm, SyntheticArm]  # low dose, high dose, placebo
    outcome: str = "nausea or vomiting within 24 hours"

    @property
    def filename(self) -> str:
        return f"three-arm-{self.index:03d}.pdf"

    @property
    def randomized_n(self) -> int:
        return sum(arm.randomized_n for arm in self.arms)

    def risk_ratio(self, arm: int) -> tuple[float, float, float]:
        """The dose's risk ratio against placebo with its 95% CI (log method), as printed."""
        dose, placebo = self.arms[arm], self.arms[2]
        ratio = (dose.events / dose.randomized_n) / (placebo.events / placebo.randomized_n)
        se = math.sqrt(1 / dose.events - 1 / dose.randomized_n + 1 / placebo.events - 1 / placebo.randomized_n)
        return (
            round(ratio, 2),
            round(math.exp(math.log(ratio) - 1.96 * se), 2),
            round(math.exp(math.log(ratio) + 1.96 * se), 2),
        )

    @property
    def events_sentence(self) -> str:
        low, high, placebo = self.arms
        return (
            f"The primary outcome occurred in {low.events} of {low.randomized_n} patients with {low.name}, "
            f"{high.events} of {high.randomized_n} with {high.name} and {placebo.events} of "
            f"{placebo.randomized_n} with {placebo.name}."
        )

    @property
    def ratios_sentence(self) -> str:
        low, high = (self.risk_ratio(arm) for arm in (0, 1))
        return (
            f"Compared with placebo, the risk ratio was {low[0]:.2f} (95% CI {low[1]:.2f} to {low[2]:.2f}) "
            f"with {self.arms[0].name} and {high[0]:.2f} (95% CI {high[1]:.2f} to {high[2]:.2f}) with "
            f"{self.arms[1].name}."
        )

    @property
    def arms_sentence(self) -> str:
        low, high, placebo = self.arms
        return (
            f"Of the {self.randomized_n} participants, {low.randomized_n} were assigned to {low.name}, "
            f"{high.randomized_n} to {high.name} and {placebo.randomized_n} to {placebo.name}."
        )


def make_three_arm_trial(index: int) -> ThreeArmTrial:
    rng = random.Random(10_000 + index)  # noqa: S311  (reproducible fake trials, not cryptography)
    drug = rng.choice(DRUGS)
    sizes = [rng.randint(60, 160) for _ in range(3)]
    placebo_events = rng.randint(sizes[2] // 4, sizes[2] // 3)
    low_events = rng.randint(sizes[0] // 8, sizes[0] // 5)
    high_events = rng.randint(sizes[1] // 12, sizes[1] // 7)
    return ThreeArmTrial(
        index=index,
        nct_number=f"NCT{rng.randint(10_000_000, 99_999_999)}",
        condition=rng.choice(CONDITIONS),
        drug=drug,
        arms=(
            SyntheticArm(f"{drug} 10 mg", sizes[0], low_events),
            SyntheticArm(f"{drug} 20 mg", sizes[1], high_events),
            SyntheticArm("placebo", sizes[2], placebo_events),
        ),
    )


def three_arm_report_pages(trial: ThreeArmTrial) -> list[str]:
    page1 = (
        f"Two doses of {trial.drug} versus placebo in adults with {trial.condition}: "
        "a randomized, double-blind, three-arm trial\n\n"
        "Abstract\n"
        f"This trial was registered at ClinicalTrials.gov ({trial.nct_number}).\n"
        f"Methods. A total of {trial.randomized_n} patients were randomized to "
        f"{trial.arms[0].name}, {trial.arms[1].name} or placebo. The primary outcome was {trial.outcome}.\n"
        f"Results. {trial.events_sentence} {trial.ratios_sentence}\n"
    )
    page2 = (
        f"Participants\n{trial.arms_sentence} Baseline characteristics were balanced.\n\n"
        "Funding\nThe trial was funded by a public research council.\n"
    )
    return [page1, page2]


def write_three_arm_report(trial: ThreeArmTrial, directory: Path) -> Path:
    return _write_pdf(three_arm_report_pages(trial), directory / trial.filename)
