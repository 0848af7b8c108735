"""The built-in base template for randomized controlled trials: study identity, the arms, Risk of
Bias 2.0, each outcome's numbers per arm, and the between-arm comparisons as printed.

Version 2 speaks in arms, as a meta-analysis does: a trial declares its arms once (any number of
them; when results are reported by subgroup, each subgroup's arms are arms too, with the subgroup
named), an outcome entry holds one arm's numbers at one time point, and a comparison names two
declared arms with the effect printed between them. Version 1 knew two arms (``*_treatment`` /
``*_control`` in every outcome entry); batches that froze it keep it, and ``core.templates.arms``
reads both into the same arms-and-comparisons view.

Bump ``RCT_VERSION`` whenever a field or an instruction changes: each project's next batch saves
a new template version on the new base (keeping its custom fields and rules), while batches
already created keep the definition they froze.
"""

from __future__ import annotations

from extraction_pipeline.core.templates.definition import FieldDef, FieldType, ModuleDef, TemplateDefinition

RCT_BASE = "rct"
RCT_VERSION = 2

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

# Fields both versions ask in the same words (an outcome's description; a between-arm effect).
OUTCOME_DESCRIPTION = (
    FieldDef("outcome_name", TEXT, "the outcome (endpoint) as named in the paper"),
    FieldDef(
        "outcome_type",
        CHOICE,
        "survival (time-to-event, HR), dichotomous (events per arm) or continuous (mean/SD per arm)",
        OUTCOME_TYPES,
        judgement=True,
    ),
    FieldDef("timepoint", TEXT, "when the outcome was measured, as printed"),
)
EFFECT = (
    FieldDef("effect_measure", CHOICE, "the between-arm effect measure reported", EFFECT_MEASURES),
    FieldDef("effect_estimate", NUMBER, "point estimate of that effect measure"),
    FieldDef("ci_lower", NUMBER, "lower bound of its 95% confidence interval"),
    FieldDef("ci_upper", NUMBER, "upper bound of its 95% confidence interval"),
    FieldDef("p_value", NUMBER, "p-value of the comparison (a number; for 'p<0.001' give 0.001)"),
)

OUTCOMES_V1 = ModuleDef(
    "outcomes",
    "Outcomes",
    (
        *OUTCOME_DESCRIPTION,
        *EFFECT,
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

# Version 1, two arms: kept so its batches' stored definitions have a reference in code and tests.
RCT_TEMPLATE_V1 = TemplateDefinition(RCT_BASE, 1, (METADATA, BASELINE, RISK_OF_BIAS, OUTCOMES_V1))

ARM_INSTRUCTION = "the arm_name of the arm these numbers belong to, exactly as declared in arms"

ARMS = ModuleDef(
    "arms",
    "Arms",
    (
        FieldDef("arm_name", TEXT, "the arm's name as printed, e.g. 'Haloperidol 1 mg' or 'Placebo'"),
        FieldDef("intervention", TEXT, "what the arm received (drug, dose, schedule or procedure), as printed"),
        FieldDef(
            "subgroup",
            TEXT,
            "when results are reported by subgroup (by sex, by smoking status): the subgroup of this arm; "
            "otherwise null",
        ),
        FieldDef("randomized_n", INTEGER, "participants randomized to this arm"),
        FieldDef("analysed_n", INTEGER, "participants analysed in this arm, where printed"),
        FieldDef("age", NUMBER, "mean (or median) age in years in this arm"),
        FieldDef("male_percent", NUMBER, "percentage of male participants in this arm"),
    ),
    repeated=True,
    instruction=(
        "one entry per arm as randomized (any number of arms); when results are reported by subgroup, "
        "one entry per arm of each subgroup, with the subgroup named"
    ),
)

OUTCOMES = ModuleDef(
    "outcomes",
    "Outcome results per arm",
    (
        *OUTCOME_DESCRIPTION,
        FieldDef("population", TEXT, "the analysis population as printed (e.g. intention-to-treat, per protocol)"),
        FieldDef("arm", TEXT, ARM_INSTRUCTION, judgement=True),
        FieldDef("events", INTEGER, "dichotomous: participants with the event in this arm"),
        FieldDef("total", INTEGER, "dichotomous: participants analysed in this arm"),
        FieldDef("mean", NUMBER, "continuous: mean in this arm"),
        FieldDef("sd", NUMBER, "continuous: standard deviation in this arm"),
        FieldDef("n", INTEGER, "continuous: participants analysed in this arm"),
    ),
    repeated=True,
    instruction=(
        "one entry per outcome, arm and time point the paper reports results for; "
        "fill the fields the outcome's type uses"
    ),
)

COMPARISONS = ModuleDef(
    "comparisons",
    "Comparisons between arms",
    (
        FieldDef("outcome_name", TEXT, "the outcome compared, named as in its outcome entries"),
        FieldDef("timepoint", TEXT, "when, as in its outcome entries"),
        FieldDef("arm", TEXT, "the arm_name of the intervention side, exactly as declared in arms", judgement=True),
        FieldDef(
            "comparator_arm", TEXT, "the arm_name of the comparator side, exactly as declared in arms", judgement=True
        ),
        *EFFECT,
    ),
    repeated=True,
    instruction="one entry per between-arm effect the paper prints (estimate, CI or p-value)",
)

RCT_TEMPLATE = TemplateDefinition(RCT_BASE, RCT_VERSION, (METADATA, ARMS, RISK_OF_BIAS, OUTCOMES, COMPARISONS))
BASE_TEMPLATES = {RCT_BASE: RCT_TEMPLATE}
