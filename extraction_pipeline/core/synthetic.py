"""Synthetic trial-report PDFs for the demo and the tests, made with PyMuPDF.

Each report states, in ordinary prose, what a systematic review takes from a trial: its authors and
year (a citation line, "Okafor A, Lindqvist M, ... 2021"), its NCT number, the number randomized,
each arm's size, the primary outcome's events per arm, a hazard ratio with its 95% CI, and the
methods a Risk of Bias 2 assessment reads (sequence generation and allocation concealment,
blinding, outcome adjudication, the analysis population, missing outcome data, a prespecified
analysis plan). Methods vary from trial to trial (reproducibly, from the trial's index) the way
real double-blind trials differ, so their judgements differ too. The offline extractor (and a
fake LLM) have real, quotable sentences. A three-arm report (two doses and placebo) prints every
arm's events and size and each dose's risk ratio against placebo.
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
# (initial, surname): the first author follows the trial's index, so neighbouring trials (a demo's
# batch) never share a first author.
AUTHORS = [
    ("A", "Okafor"),
    ("M", "Lindqvist"),
    ("R", "Haddad"),
    ("T", "Brennan"),
    ("S", "Nakamura"),
    ("L", "Moreau"),
    ("J", "Kowalczyk"),
    ("P", "Santos"),
    ("H", "Achterberg"),
    ("E", "Rossi"),
    ("K", "Mensah"),
    ("D", "Fitzgerald"),
    ("Y", "Chen"),
    ("N", "Petrova"),
    ("G", "Alvarez"),
    ("F", "Lund"),
]
JOURNAL = "Clin Trials Rep"

# How each trial did what a Risk of Bias 2 assessment asks about, as its methods print it. The
# first choice is the common one; the others are what some real double-blind trials report.
CONCEALMENT = {
    "central": "allocation was concealed by a central web-based system",
    "envelopes": "allocation was concealed with sealed envelopes kept at each centre",
}
ANALYSIS = {
    "intention to treat": "Efficacy analyses were performed according to the intention-to-treat principle.",
    "per protocol": "Efficacy analyses included only the patients who completed treatment per protocol.",
}
PLAN = {
    "prespecified": (
        "The protocol and the statistical analysis plan were prespecified and published before the first "
        "patient was enrolled."
    ),
    "after": "The statistical analysis plan was finalized after the last patient had completed follow-up.",
}


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
    authors: tuple[tuple[str, str], ...]  # (initial, surname), first author first
    year: int
    drug_events: int  # the primary outcome's events in each arm
    placebo_events: int
    concealment: str  # a key of CONCEALMENT
    analysis: str  # a key of ANALYSIS
    missing: int  # patients without primary outcome data
    plan: str  # a key of PLAN

    @property
    def filename(self) -> str:
        return f"trial-{self.index:03d}.pdf"

    @property
    def drug_n(self) -> int:
        return self.randomized_n // 2

    @property
    def placebo_n(self) -> int:
        return self.randomized_n - self.drug_n

    @property
    def study_id(self) -> str:
        """How a review names the study: first author's surname and year."""
        return f"{self.authors[0][1]} {self.year}"

    @property
    def missing_percent(self) -> str:
        return f"{100 * self.missing / self.randomized_n:.1f}"

    @property
    def citation(self) -> str:
        listed = ", ".join(f"{surname} {initial}" for initial, surname in self.authors)
        first_page = 100 + self.index % 700
        return f"Cite as: {listed}. {JOURNAL} {self.year};{5 + self.index % 30}:{first_page}-{first_page + 11}."

    @property
    def byline(self) -> str:
        names = [f"{initial}. {surname}" for initial, surname in self.authors]
        return f"{', '.join(names[:-1])} and {names[-1]}"

    @property
    def arms_sentence(self) -> str:
        return (
            f"Of the {self.randomized_n} participants, {self.drug_n} were assigned to {self.drug} and "
            f"{self.placebo_n} to placebo."
        )

    @property
    def events_sentence(self) -> str:
        return (
            f"The primary outcome occurred in {self.drug_events} of {self.drug_n} patients with {self.drug} "
            f"and {self.placebo_events} of {self.placebo_n} with placebo."
        )

    @property
    def randomization_sentence(self) -> str:
        return (
            "Randomization was done with a computer-generated sequence in permuted blocks, and "
            f"{CONCEALMENT[self.concealment]}."
        )

    @property
    def missing_sentence(self) -> str:
        if self.missing == 0:
            return "Primary outcome data were available for all randomized patients."
        if 100 * self.missing / self.randomized_n < 5:
            return f"Primary outcome data were available for all but {self.missing} patients ({self.missing_percent}%)."
        return (
            f"Primary outcome data were missing for {self.missing} patients ({self.missing_percent}%), "
            "more often in the placebo group."
        )

    @property
    def risk_of_bias(self) -> dict[str, str]:
        """The RoB 2 judgement each domain earns from what the report prints (worst one overall)."""
        share = 100 * self.missing / self.randomized_n
        judged = {
            "randomization": "low" if self.concealment == "central" else "some concerns",
            "deviations": "low" if self.analysis == "intention to treat" else "some concerns",
            "missing_data": "low" if share < 5 else "some concerns" if share < 15 else "high",
            "measurement": "low",
            "reporting": "low" if self.plan == "prespecified" else "some concerns",
        }
        order = ("low", "some concerns", "high")
        return {**judged, "overall": max(judged.values(), key=order.index)}


def make_trial(index: int) -> SyntheticTrial:
    rng = random.Random(index)  # noqa: S311  (reproducible fake trials, not cryptography)
    hr = round(rng.uniform(0.55, 0.95), 2)
    nct_number = f"NCT{rng.randint(10_000_000, 99_999_999)}"
    condition = rng.choice(CONDITIONS)
    drug = rng.choice(DRUGS)
    randomized_n = rng.randint(120, 2400)
    ci_lower = round(hr - rng.uniform(0.08, 0.2), 2)
    ci_upper = round(hr + rng.uniform(0.05, 0.15), 2)
    # Drawn after the facts above, so those stay what they always were for an index.
    first = AUTHORS[index % len(AUTHORS)]
    authors = (first, *rng.sample([a for a in AUTHORS if a != first], 3))
    placebo_n = randomized_n - randomized_n // 2
    placebo_events = max(2, round(rng.uniform(0.12, 0.3) * placebo_n))
    drug_events = max(1, round(placebo_events * hr * (randomized_n // 2) / placebo_n))
    missing_share = rng.choice([0.0, 0.004, 0.01, 0.02, 0.03, 0.07, 0.09, 0.17])
    return SyntheticTrial(
        index=index,
        nct_number=nct_number,
        condition=condition,
        drug=drug,
        randomized_n=randomized_n,
        hazard_ratio=hr,
        ci_lower=ci_lower,
        ci_upper=ci_upper,
        authors=authors,
        year=rng.randint(2012, 2024),
        drug_events=drug_events,
        placebo_events=placebo_events,
        concealment=rng.choices(list(CONCEALMENT), weights=(4, 1))[0],
        analysis=rng.choices(list(ANALYSIS), weights=(3, 1))[0],
        missing=round(missing_share * randomized_n),
        plan=rng.choices(list(PLAN), weights=(5, 1))[0],
    )


def report_pages(trial: SyntheticTrial, extra_text: str = "") -> list[str]:
    page1 = (
        f"{trial.drug.capitalize()} versus placebo in adults with {trial.condition}: "
        "a randomized, double-blind, placebo-controlled trial\n"
        f"{trial.byline}\n"
        f"{trial.citation}\n\n"
        "Abstract\n"
        f"Background. Treatment options for {trial.condition} remain limited. "
        f"This trial was registered at ClinicalTrials.gov ({trial.nct_number}).\n"
        f"Methods. A total of {trial.randomized_n} patients were randomized in a 1:1 ratio to "
        f"{trial.drug} or placebo at 42 centres. The primary outcome was time to first hospitalization "
        "or death from any cause.\n"
        f"Results. The primary outcome occurred less often with {trial.drug} (hazard ratio "
        f"{trial.hazard_ratio:.2f}; 95% CI {trial.ci_lower:.2f} to {trial.ci_upper:.2f}).\n"
        f"Conclusions. {trial.drug.capitalize()} reduced the risk of the primary outcome.\n\n"
        "Methods\n"
        f"Trial oversight. {PLAN[trial.plan]}\n"
        f"Randomization and masking. {trial.randomization_sentence} Patients, investigators and site staff "
        f"were unaware of the assigned treatment; {trial.drug} and a matching placebo were identical in "
        "appearance.\n"
        "Outcomes. All deaths and hospitalizations were adjudicated by an independent committee whose "
        "members were unaware of the treatment assignments.\n"
        f"Statistical analysis. {ANALYSIS[trial.analysis]}\n"
    )
    page2 = (
        "Participants\n"
        f"{trial.arms_sentence} Baseline characteristics were balanced. {trial.missing_sentence}\n\n"
        f"Results\n{trial.events_sentence}\n\n"
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
        for number, text in enumerate(pages, start=1):
            page = doc.new_page(width=595, height=842)  # A4 in points
            left = page.insert_textbox(pymupdf.Rect(56, 56, 539, 786), text, fontsize=11, fontname="helv")
            if left < 0:  # PyMuPDF writes nothing of a text that does not fit: never a blank page
                raise ValueError(f"{path.name}: page {number}'s text does not fit on the page")
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
