"""A two-page paper and a good answer for it, shared by the extraction tests."""

from __future__ import annotations

from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline_tests.support.fake_llm import extraction_json

PAGES = [
    "Trial registered as NCT01234567. A total of 412 patients were randomized to drug or placebo.",
    "Death occurred less often with drug (hazard ratio 0.72; 95% CI 0.60 to 0.86).",
]
PARSED = ParsedDocument("sha", PAGES)
DEATHS = "Death occurred less often with drug (hazard ratio 0.72; 95% CI 0.60 to 0.86)."
GOOD = extraction_json(
    {
        "metadata.nct_number": ("NCT01234567", "Trial registered as NCT01234567."),
        "metadata.randomized_n": (412, "A total of 412 patients were randomized to drug or placebo."),
        "outcomes.1.effect_estimate": (0.72, DEATHS),
        "outcomes.1.ci_lower": (0.61, DEATHS),
    }
)
