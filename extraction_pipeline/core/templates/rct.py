"""The built-in base template for randomized controlled trials: study identity, baseline per
arm, Risk of Bias 2.0, outcomes.

Bump ``RCT_VERSION`` whenever a field or an instruction changes: each project's next batch saves
a new template version on the new base (keeping its custom fields and rules), while batches
already created keep the definition they froze.
"""

from __future__ import annotations

from extraction_pipeline.core.templates.definition import FieldDef, FieldType, ModuleDef, TemplateDefinition

RCT_BASE = "rct"
RCT_VERSION = 1

TEXT, INTEGER, NUMBER, CHOICE = FieldType.TEXT, FieldType.INTEGER, FieldType.NUMBER, FieldType.CHOICE
ROB_JUDGEMENTS = ("low", "some concerns", "high")
EFFECT_MEASURES = ("HR", "OR", "RR", "RD", "MD", "SMD")
OUTCOME_TYPES = ("survival", "dichotomous", "continuous")


def _rob(name: str, domain: str) -> FieldDef:
    return FieldDef(
        name,
        CHOICE,
        f"Risk of Bias 2.0 judgement for {domain}; the quote is the passage that supports it",
        ROB_JUDGEMENTS,
        judgement=True,
    )


METADATA = ModuleDef(
    "metadata",
    "Study",
    (
        FieldDef("study_id", TEXT, "first author's surname and publication year, as 'Surname Year'", judgement=True),
        FieldDef("nct_number", TEXT, "ClinicalTrials.gov registration number (NCT followed by 8 digits)"),
        FieldDef("study_design", TEXT, "trial design as printed, e.g. 'double-blind, parallel-group'"),
        FieldDef("funding_source", TEXT, "who funded the trial, as printed"),
        FieldDef("randomized_n", INTEGER, "total number of participants randomized"),
    ),
)

BASELINE = ModuleDef(
    "baseline",
    "Baseline characteristics per arm",
    (
        FieldDef("treatment_name", TEXT, "name of the experimental (treatment) arm"),
        FieldDef("control_name", TEXT, "name of the control arm"),
        FieldDef("n_treatment", INTEGER, "participants randomized to the treatment arm"),
        FieldDef("n_control", INTEGER, "participants randomized to the control arm"),
        FieldDef("age_treatment", NUMBER, "mean (or median) age in years in the treatment arm"),
        FieldDef("age_control", NUMBER, "mean (or median) age in years in the control arm"),
        FieldDef("male_percent_treatment", NUMBER, "percentage of male participants in the treatment arm"),
        FieldDef("male_percent_control", NUMBER, "percentage of male participants in the control arm"),
    ),
)

RISK_OF_BIAS = ModuleDef(
    "risk_of_bias",
    "Risk of Bias 2.0",
    (
        _rob("randomization", "domain 1, bias arising from the randomization process (incl. allocation concealment)"),
        _rob("deviations", "domain 2, bias due to deviations from intended interventions (incl. blinding)"),
        _rob("missing_data", "domain 3, bias due to missing outcome data (attrition)"),
        _rob("measurement", "domain 4, bias in measurement of the outcome"),
        _rob("reporting", "domain 5, bias in selection of the reported result"),
        _rob("overall", "the overall risk of bias"),
    ),
)

OUTCOMES = ModuleDef(
    "outcomes",
    "Outcomes",
    (
        FieldDef("outcome_name", TEXT, "the outcome (endpoint) as named in the paper"),
        FieldDef(
            "outcome_type",
            CHOICE,
            "survival (time-to-event, HR), dichotomous (events per arm) or continuous (mean/SD per arm)",
            OUTCOME_TYPES,
            judgement=True,
        ),
        FieldDef("timepoint", TEXT, "when the outcome was measured, as printed"),
        FieldDef("effect_measure", CHOICE, "the between-arm effect measure reported", EFFECT_MEASURES),
        FieldDef("effect_estimate", NUMBER, "point estimate of that effect measure"),
        FieldDef("ci_lower", NUMBER, "lower bound of its 95% confidence interval"),
        FieldDef("ci_upper", NUMBER, "upper bound of its 95% confidence interval"),
        FieldDef("p_value", NUMBER, "p-value of the comparison (a number; for 'p<0.001' give 0.001)"),
        FieldDef("events_treatment", INTEGER, "dichotomous: participants with the event in the treatment arm"),
        FieldDef("total_treatment", INTEGER, "dichotomous: participants analysed in the treatment arm"),
        FieldDef("events_control", INTEGER, "dichotomous: participants with the event in the control arm"),
        FieldDef("total_control", INTEGER, "dichotomous: participants analysed in the control arm"),
        FieldDef("mean_treatment", NUMBER, "continuous: mean in the treatment arm"),
        FieldDef("sd_treatment", NUMBER, "continuous: standard deviation in the treatment arm"),
        FieldDef("n_treatment", INTEGER, "continuous: participants analysed in the treatment arm"),
        FieldDef("mean_control", NUMBER, "continuous: mean in the control arm"),
        FieldDef("sd_control", NUMBER, "continuous: standard deviation in the control arm"),
        FieldDef("n_control", INTEGER, "continuous: participants analysed in the control arm"),
    ),
    repeated=True,
    instruction="one entry per outcome the paper reports results for; fill the fields its type uses",
)

RCT_TEMPLATE = TemplateDefinition(RCT_BASE, RCT_VERSION, (METADATA, BASELINE, RISK_OF_BIAS, OUTCOMES))
BASE_TEMPLATES = {RCT_BASE: RCT_TEMPLATE}
