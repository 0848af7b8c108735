"""The built-in offline extractor: real quotes from the text, through litellm's custom provider."""

from __future__ import annotations

from extraction_pipeline.core.extract import ground_output
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, pattern_extract
from extraction_pipeline.core.parsing import ParsedDocument
from extraction_pipeline.core.prompts import build_messages
from extraction_pipeline.core.synthetic import make_trial, report_pages


def test_patterns_find_values_with_verbatim_quotes() -> None:
    text = (
        "Methods. The study (NCT04567890) enrolled adults. 1,250 participants were randomized across sites.\n"
        "Results. Mortality was lower (HR 0.81, 95% CI 0.70-0.93)."
    )
    fields = pattern_extract(text)["fields"]
    assert fields["nct_number"] == {"value": "NCT04567890", "quote": "The study (NCT04567890) enrolled adults."}
    assert fields["randomized_n"]["value"] == 1250
    assert (fields["effect_measure"]["value"], fields["effect_estimate"]["value"]) == ("HR", 0.81)
    assert (fields["ci_lower"]["value"], fields["ci_upper"]["value"]) == (0.70, 0.93)
    for found in fields.values():
        assert " ".join(found["quote"].split()) in " ".join(text.split())


def test_absent_values_are_null_not_invented() -> None:
    fields = pattern_extract("An observational cohort without registration or effect estimates.")["fields"]
    assert all(found == {"value": None, "quote": None} for found in fields.values())


def test_offline_model_runs_through_litellm_and_is_labelled() -> None:
    trial = make_trial(7)
    pages = report_pages(trial)
    result = complete_extraction(LLMConfig(model=None), build_messages(pages))
    assert result.usage.model == OFFLINE_MODEL and result.usage.cost_usd == 0.0
    grounded = ground_output(result.output.fields, ParsedDocument("s", pages))
    assert grounded["nct_number"]["value"] == trial.nct_number
    assert grounded["randomized_n"]["value"] == trial.randomized_n
    assert grounded["effect_estimate"]["value"] == trial.hazard_ratio
    assert {f["status"] for f in grounded.values()} == {"verified"}
    # Quotes never include the prompt's page markers.
    assert not any("[page" in (f["quote"] or "") for f in grounded.values())
