"""The built-in offline extractor: real quotes from the text, through litellm's custom provider."""

from __future__ import annotations

from extraction_pipeline.core.extraction.grounded import ground_output
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, pattern_extract
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.synthetic import make_trial, report_pages
from extraction_pipeline.core.templates import RCT_TEMPLATE
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE_V1
from extraction_pipeline.core.templates.schema import output_model


def test_patterns_find_values_with_verbatim_quotes() -> None:
    text = (
        "Methods. The study (NCT04567890) enrolled adults. 1,250 participants were randomized across sites.\n"
        "Results. Mortality was lower (HR 0.81, 95% CI 0.70-0.93)."
    )
    answer = pattern_extract(text)
    metadata, [outcome] = answer["metadata"], answer["outcomes"]
    assert metadata["nct_number"] == {"value": "NCT04567890", "quote": "The study (NCT04567890) enrolled adults."}
    assert metadata["randomized_n"]["value"] == 1250
    assert (outcome["effect_measure"]["value"], outcome["effect_estimate"]["value"]) == ("HR", 0.81)
    assert (outcome["ci_lower"]["value"], outcome["ci_upper"]["value"]) == (0.70, 0.93)
    assert outcome["outcome_type"]["value"] == "survival"
    for found in [*metadata.values(), *outcome.values()]:
        assert " ".join(found["quote"].split()) in " ".join(text.split())
    output_model(RCT_TEMPLATE).model_validate(answer)  # the template's own shape


def test_absent_values_are_left_out_not_invented() -> None:
    assert pattern_extract("An observational cohort without registration or effect estimates.") == {
        "metadata": {},
        "outcomes": [],
    }


def test_offline_model_runs_through_litellm_and_is_labelled() -> None:
    trial = make_trial(7)
    pages = report_pages(trial)
    result = complete_extraction(LLMConfig(model=None), build_messages(RCT_TEMPLATE, pages), RCT_TEMPLATE)
    assert result.usage.model == OFFLINE_MODEL and result.usage.cost_usd == 0.0
    grounded = ground_output(RCT_TEMPLATE, result.output, ParsedDocument("s", pages))
    assert grounded["metadata.nct_number"].value == trial.nct_number
    assert grounded["metadata.randomized_n"].value == trial.randomized_n
    # In arms, the effect is a comparison; the patterns cannot tell its arms, so it names none.
    assert grounded["comparisons.1.effect_estimate"].value == trial.hazard_ratio
    assert (grounded["comparisons.1.ci_lower"].value, grounded["comparisons.1.ci_upper"].value) == (
        trial.ci_lower,
        trial.ci_upper,
    )
    assert grounded["comparisons.1.arm"].value is None and not any(path.startswith("outcomes.") for path in grounded)
    found = [f for f in grounded.values() if f.found]
    assert len(found) == 6 and all(f.status == "verified" and not f.flags for f in found)
    # Quotes never include the prompt's page markers.
    assert not any("[page" in (f.quote or "") for f in grounded.values())


def test_offline_model_answers_a_two_arm_template_in_its_fields() -> None:
    trial = make_trial(7)
    pages = report_pages(trial)
    result = complete_extraction(LLMConfig(model=None), build_messages(RCT_TEMPLATE_V1, pages), RCT_TEMPLATE_V1)
    grounded = ground_output(RCT_TEMPLATE_V1, result.output, ParsedDocument("s", pages))
    assert grounded["outcomes.1.effect_estimate"].value == trial.hazard_ratio
    found = [f for f in grounded.values() if f.found]
    assert len(found) == 7
    # outcome_type is a judgement: its quote is verified, the status says it is a judgement
    assert {f.field: f.status for f in found if f.status != "verified"} == {
        "outcome_type": "judgement: supported by a verified quote"
    }
    assert not any("[page" in (f.quote or "") for f in grounded.values())
