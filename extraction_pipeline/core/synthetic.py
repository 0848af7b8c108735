"""Synthetic trial-report PDFs for the demo and the tests, made with PyMuPDF.

Each report states its NCT number, the number randomized and a hazard ratio with its 95% CI in
ordinary prose, so the offline extractor (and a fake LLM) have real, quotable sentences.
"""

from __future__ import annotations

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
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()  # lazy

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / trial.filename
    with pymupdf.open() as doc:
        for text in report_pages(trial, extra_text):
            page = doc.new_page(width=595, height=842)  # A4 in points
            page.insert_textbox(pymupdf.Rect(56, 56, 539, 786), text, fontsize=11, fontname="helv")
        doc.save(path)
    return path


def write_reports(directory: Path, count: int, start: int = 1) -> list[tuple[SyntheticTrial, Path]]:
    trials = [make_trial(index) for index in range(start, start + count)]
    return [(trial, write_report(trial, directory)) for trial in trials]
