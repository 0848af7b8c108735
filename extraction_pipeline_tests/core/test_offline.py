"""The built-in offline extractor: real quotes from the text, through litellm's custom provider."""

from __future__ import annotations

import re

import pytest

from extraction_pipeline.core.extraction.grounded import ground_output
from extraction_pipeline.core.extraction.prompts import build_messages, document_from_messages
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, pattern_extract
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.synthetic import make_three_arm_trial, make_trial, report_pages, three_arm_report_pages
from extraction_pipeline.core.templates import RCT_TEMPLATE
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE_V1, RISK_OF_BIAS
from extraction_pipeline.core.templates.schema import output_model
from extraction_pipeline.core.verification.grounding import JUDGEMENT_SUPPORTED, VERIFIED

RISK_OF_BIAS_FIELDS = tuple(field.name for field in RISK_OF_BIAS.fields)


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
    assert grounded["metadata.study_id"].value == trial.study_id
    # In arms, the effect is a comparison: its sentence names the drug, so placebo is the other side.
    assert grounded["comparisons.1.effect_estimate"].value == trial.hazard_ratio
    assert (grounded["comparisons.1.ci_lower"].value, grounded["comparisons.1.ci_upper"].value) == (
        trial.ci_lower,
        trial.ci_upper,
    )
    assert (grounded["comparisons.1.arm"].value, grounded["comparisons.1.comparator_arm"].value) == (
        trial.drug,
        "placebo",
    )
    # Each arm's events are an outcome entry of the primary outcome, the effect's outcome too.
    assert [(grounded[f"outcomes.{n}.arm"].value, grounded[f"outcomes.{n}.events"].value) for n in (1, 2)] == [
        (trial.drug, trial.drug_events),
        ("placebo", trial.placebo_events),
    ]
    assert grounded["comparisons.1.outcome_name"].value == grounded["outcomes.1.outcome_name"].value
    found = [f for f in grounded.values() if f.found]
    assert len(found) == 3 + 2 * 2 + 6 + 2 * 5 + 7  # metadata, arms, RoB, two outcome entries, comparison
    assert all(f.status in (VERIFIED, JUDGEMENT_SUPPORTED) and not f.flags for f in found)
    # Quotes never include the prompt's page markers.
    assert not any("[page" in (f.quote or "") for f in grounded.values())


def test_offline_model_answers_a_two_arm_template_in_its_fields() -> None:
    trial = make_trial(7)
    pages = report_pages(trial)
    result = complete_extraction(LLMConfig(model=None), build_messages(RCT_TEMPLATE_V1, pages), RCT_TEMPLATE_V1)
    grounded = ground_output(RCT_TEMPLATE_V1, result.output, ParsedDocument("s", pages))
    assert grounded["outcomes.1.effect_estimate"].value == trial.hazard_ratio
    assert (grounded["baseline.treatment_name"].value, grounded["baseline.control_name"].value) == (
        trial.drug,
        "placebo",
    )
    assert (grounded["outcomes.1.events_treatment"].value, grounded["outcomes.1.total_control"].value) == (
        trial.drug_events,
        trial.placebo_n,
    )
    found = [f for f in grounded.values() if f.found]
    assert len(found) == 3 + 4 + 6 + 2 + 4 + 4  # metadata, baseline, RoB, outcome name and type, effect, events
    assert all(not f.flags for f in found)
    # Judgements (the study label, RoB, outcome_type): their quotes verified, the status says what they are.
    assert {f.field for f in found if f.status != VERIFIED} == {
        "study_id",
        *RISK_OF_BIAS_FIELDS,
        "outcome_type",
    }
    assert {f.status for f in found if f.status != VERIFIED} == {JUDGEMENT_SUPPORTED}
    assert not any("[page" in (f.quote or "") for f in grounded.values())


def _offline_document(pages: list[str]) -> str:
    """The paper as the offline model is given it: the prompt's text, page markers and all."""
    return document_from_messages(build_messages(RCT_TEMPLATE, pages))


def _quotes(answer: object) -> list[str]:
    if isinstance(answer, dict):
        if set(answer) == {"value", "quote"}:
            return [answer["quote"]]
        return [quote for value in answer.values() for quote in _quotes(value)]
    if isinstance(answer, list):
        return [quote for value in answer for quote in _quotes(value)]
    return []


def _on_one_page(quote: str, pages: list[str]) -> bool:
    """The quote is a passage of one page, as printed (line breaks are spaces; a word hyphenated
    at a line end is one word)."""
    return any(" ".join(quote.split()) in " ".join(re.sub(r"(?<=-)\n", "", page).split()) for page in pages)


@pytest.mark.parametrize("index", [4, 3, 8])  # RoB overall low, some concerns, high
def test_patterns_read_the_study_arms_events_and_risk_of_bias_of_a_report(index: int) -> None:
    trial = make_trial(index)
    pages = report_pages(trial)
    answer = pattern_extract(_offline_document(pages), comparisons=True)
    assert answer["metadata"]["study_id"]["value"] == trial.study_id
    assert [(arm["arm_name"]["value"], arm["randomized_n"]["value"]) for arm in answer["arms"]] == [
        (trial.drug, trial.drug_n),
        ("placebo", trial.placebo_n),
    ]
    assert [(o["arm"]["value"], o["events"]["value"], o["total"]["value"]) for o in answer["outcomes"]] == [
        (trial.drug, trial.drug_events, trial.drug_n),
        ("placebo", trial.placebo_events, trial.placebo_n),
    ]
    assert {o["outcome_name"]["value"] for o in answer["outcomes"]} == {
        "time to first hospitalization or death from any cause"
    }
    assert {name: pair["value"] for name, pair in answer["risk_of_bias"].items()} == trial.risk_of_bias
    # Blinding is read from what the methods say was done, not from the title's "double-blind".
    deviations = answer["risk_of_bias"]["deviations"]["quote"]
    assert deviations.startswith("Patients, investigators and site staff were unaware of the assigned treatment")
    quotes = _quotes(answer)
    assert len(quotes) == 3 + 4 + 6 + 2 * 5 + 7
    for quote in quotes:
        assert _on_one_page(quote, pages) and "[page" not in quote, quote


def test_the_study_id_is_the_first_authors_surname_and_the_year_printed_after_the_authors() -> None:
    page = "Cite as: van der Berg JH, Okafor A, et al. Lancet Respir Med 2019;7:33-41.\nAbstract\n"
    assert pattern_extract(page)["metadata"]["study_id"] == {
        "value": "van der Berg 2019",
        "quote": "van der Berg JH, Okafor A, et al. Lancet Respir Med 2019",
    }
    # A byline of full names, and a year no author list precedes, name no study.
    assert pattern_extract("Amara Okafor, Mikael Lindqvist and Rana Haddad\nReceived 3 May 2019.")["metadata"] == {}


def test_each_risk_of_bias_domain_follows_what_the_methods_say() -> None:
    concerned = (
        "Patients were allocated by alternation according to their hospital record numbers. "
        "This was an open-label trial: patients and investigators were aware of the assigned treatment. "
        "Efficacy analyses included only the patients who completed treatment per protocol. "
        "Outcome data were missing for 61 patients (18.3%). "
        "Outcomes were assessed by the site investigators, who were aware of the assigned treatment. "
        "The statistical analysis plan was amended after unblinding."
    )
    rob = pattern_extract(concerned)["risk_of_bias"]
    assert {name: pair["value"] for name, pair in rob.items()} == {
        "randomization": "high",
        "deviations": "high",
        "missing_data": "high",
        "measurement": "some concerns",
        "reporting": "some concerns",
        "overall": "high",
    }
    assert rob["missing_data"]["quote"] == "Outcome data were missing for 61 patients (18.3%)."
    assert all(_on_one_page(pair["quote"], [concerned]) for pair in rob.values())
    # Allocation by a central system but no word on the sequence: concerns, not low.
    central = pattern_extract("Allocation was concealed by a central telephone service.")["risk_of_bias"]
    assert central == {
        "randomization": {
            "value": "some concerns",
            "quote": "Allocation was concealed by a central telephone service.",
        }
    }


PLAIN = (
    "Chronic kidney disease affects one adult in ten. In 2019, 412 patients of our clinic were followed for a "
    "year; their blood pressure was recorded at each visit by the nurses, and the data were kept in the "
    "hospital's records. Smith and colleagues described a similar group of patients."
)


def test_a_plain_paragraph_yields_no_study_arms_events_or_judgements() -> None:
    for comparisons in (False, True):
        answer = pattern_extract(PLAIN, comparisons=comparisons)
        assert answer == {"metadata": {}, "outcomes": [], **({"comparisons": []} if comparisons else {})}


def test_a_three_arm_report_declares_three_arms_and_names_each_dose_against_placebo() -> None:
    trial = make_three_arm_trial(1)
    pages = three_arm_report_pages(trial)
    answer = pattern_extract(_offline_document(pages), comparisons=True)
    assert [(arm["arm_name"]["value"], arm["randomized_n"]["value"]) for arm in answer["arms"]] == [
        (arm.name, arm.randomized_n) for arm in trial.arms
    ]
    assert [(o["arm"]["value"], o["events"]["value"], o["total"]["value"]) for o in answer["outcomes"]] == [
        (arm.name, arm.events, arm.randomized_n) for arm in trial.arms
    ]
    assert {o["outcome_name"]["value"] for o in answer["outcomes"]} == {trial.outcome}
    # The first ratio printed is the low dose's ("... with <low dose>"), against placebo.
    [comparison] = answer["comparisons"]
    assert (comparison["arm"]["value"], comparison["comparator_arm"]["value"]) == (trial.arms[0].name, "placebo")
    assert comparison["effect_estimate"]["value"] == trial.risk_ratio(0)[0]
    assert all(_on_one_page(quote, pages) for quote in _quotes(answer))
