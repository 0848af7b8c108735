"""A two-page paper and a good answer for it, shared by the extraction tests; and numbered
one-line papers with their answers, shared by the provider-batch tests."""

from __future__ import annotations

from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.llm.batch_model import BatchRequest
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.fake_llm import extraction_json

PAGES = [
    "Trial registered as NCT01234567. A total of 412 patients were randomized to drug or placebo.",
    "Death occurred less often with drug (hazard ratio 0.72; 95% CI 0.60 to 0.86).",
]
PARSED = ParsedDocument("sha", PAGES)
DEATHS = "Death occurred less often with drug (hazard ratio 0.72; 95% CI 0.60 to 0.86)."
RANDOMIZED = "A total of 412 patients were randomized to drug or placebo."
# The answer in the RCT template's arms (version 2): the two arms declared, the hazard ratio as a
# comparison naming them; its lower bound misread (0.61: not in the quote).
GOOD = extraction_json(
    {
        "metadata.nct_number": ("NCT01234567", "Trial registered as NCT01234567."),
        "metadata.randomized_n": (412, RANDOMIZED),
        "arms.1.arm_name": ("drug", RANDOMIZED),
        "arms.2.arm_name": ("placebo", RANDOMIZED),
        "comparisons.1.outcome_name": ("Death", DEATHS),
        "comparisons.1.arm": ("drug", DEATHS),
        "comparisons.1.comparator_arm": ("placebo", RANDOMIZED),
        "comparisons.1.effect_estimate": (0.72, DEATHS),
        "comparisons.1.ci_lower": (0.61, DEATHS),
    }
)
# The same answer in the two-arm template (version 1): the effect in the outcome entry.
GOOD_V1 = extraction_json(
    {
        "metadata.nct_number": ("NCT01234567", "Trial registered as NCT01234567."),
        "metadata.randomized_n": (412, RANDOMIZED),
        "baseline.treatment_name": ("drug", RANDOMIZED),
        "baseline.control_name": ("placebo", RANDOMIZED),
        "outcomes.1.outcome_name": ("Death", DEATHS),
        "outcomes.1.effect_estimate": (0.72, DEATHS),
        "outcomes.1.ci_lower": (0.61, DEATHS),
    }
)


def paper(n: int) -> str:
    """Paper ``n`` (1 to 9): its registration and size in one sentence."""
    return f"Trial {n}: registered as NCT0000000{n}; {100 + n} participants were randomized."


def paper_requests(count: int) -> list[BatchRequest]:
    """Papers 1 to ``count`` as batch requests, custom ids ``paper-1``..."""
    return [
        BatchRequest(f"paper-{n}", build_messages(RCT_TEMPLATE, [paper(n)]), RCT_TEMPLATE) for n in range(1, count + 1)
    ]


def paper_answer(prompt: str) -> tuple[int, str]:
    """(n, the right answer) for the paper whose text ends ``prompt``: its registration and size,
    quoted from it."""
    n = int(prompt.split("NCT0000000", 1)[1][0])
    return n, extraction_json(
        {"metadata.nct_number": (f"NCT0000000{n}", paper(n)), "metadata.randomized_n": (100 + n, paper(n))}
    )
