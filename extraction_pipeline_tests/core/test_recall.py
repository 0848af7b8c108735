"""The recall check: what a paper reports that no extracted value covers, placed like a value.

Small papers are written here as PyMuPDF prints them (a table one cell per line, or a row per
line); the answers are grounded the way the pipeline grounds a model's answer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from extraction_pipeline.core.extraction.grounded import GroundedFields, fields_of, ground_output, stored_fields
from extraction_pipeline.core.llm.gateway import parse_answer
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE, RCT_TEMPLATE_V1
from extraction_pipeline.core.verification.recall import MissedKind, PossiblyMissed, possibly_missed
from extraction_pipeline_tests.support.pdf_samples import CORPUS

ABSTRACT = """Drug X after surgery: a randomised trial
Abstract
Results: Pain was lower with drug X; nausea and the length of stay did not differ.
1. Introduction
Pain after surgery is common.
"""
RESULTS = """3. Results
Fifty patients received drug X and 48 placebo.
Table 2. Outcomes at 12 weeks
Outcome
Drug X
(n = 50)
Placebo
(n = 48)
P
Pain score
3.1 (1.2)
4.5 (1.4)
0.002
Nausea
12 (24%)
10 (21%)
0.81
Length of stay, days
5.2 ± 2.1
6.0 ± 2.4
0.07
4. Discussion
Drug X lowered pain.
"""
BASELINE = """Table 1. Baseline characteristics of the patients
Characteristic
Drug X
Placebo
Age, years
54.1 ± 9.2
55.3 ± 8.7
Body mass index
27.4 ± 3.9
28.0 ± 4.1
"""

PAIN: Outcome = {
    "outcome_name": ("pain score", "Pain score"),
    "mean_treatment": (3.1, "Pain score 3.1 (1.2) 4.5 (1.4)"),
    "sd_treatment": (1.2, "Pain score 3.1 (1.2) 4.5 (1.4)"),
    "mean_control": (4.5, "Pain score 3.1 (1.2) 4.5 (1.4)"),
    "sd_control": (1.4, "Pain score 3.1 (1.2) 4.5 (1.4)"),
    "n_treatment": (50, "Drug X (n = 50)"),
    "n_control": (48, "Placebo (n = 48)"),
}
NAUSEA: Outcome = {
    "outcome_name": ("nausea", "Nausea"),
    "events_treatment": (12, "Nausea 12 (24%) 10 (21%)"),
    "total_treatment": (50, "Drug X (n = 50)"),
    "events_control": (10, "Nausea 12 (24%) 10 (21%)"),
    "total_control": (48, "Placebo (n = 48)"),
}


def _paper(*pages: str, tables: list[ParsedTable] | None = None) -> ParsedDocument:
    return ParsedDocument("a" * 64, list(pages), tables or [])


Outcome = dict[str, tuple[Any, str]]
ARMS = ("Drug X", "Placebo")  # as the papers above print them


def as_arms(outcomes: Iterable[Outcome], arms: Iterable[str] = ARMS) -> dict[str, Any]:
    """Two-arm outcomes written as version 1 names them (``mean_treatment``, ``sd_control``) as the
    current template answers them: the arms declared, one outcome entry per arm with numbers."""
    named = list(arms)
    entries = []
    for outcome in outcomes:
        for suffix, arm in zip(("_treatment", "_control"), named, strict=False):
            numbers = {name.removesuffix(suffix): pair for name, pair in outcome.items() if name.endswith(suffix)}
            if numbers:
                entries.append({"outcome_name": outcome["outcome_name"], "arm": (arm, arm), **numbers})
    return {"arms": [{"arm_name": (arm, arm)} for arm in named], "outcomes": entries}


def _ground(
    paper: ParsedDocument, answer: dict[str, Any], template: TemplateDefinition = RCT_TEMPLATE
) -> GroundedFields:
    """The answer ({module: [{field: (value, quote)}]}) grounded as the pipeline grounds a model's answer."""
    wrapped = {
        module: [{name: {"value": v, "quote": q} for name, (v, q) in entry.items()} for entry in entries]
        for module, entries in answer.items()
    }
    return ground_output(template, parse_answer(json.dumps(wrapped), template), paper)


def _fields(paper: ParsedDocument, *outcomes: Outcome, version: int = 2) -> GroundedFields:
    """The outcomes answered in the current template (version 2, arms ``ARMS``) or version 1."""
    if version == 1:
        return _ground(paper, {"outcomes": list(outcomes)}, RCT_TEMPLATE_V1)
    return _ground(paper, as_arms(outcomes))


def _shown(paper: ParsedDocument, item: PossiblyMissed) -> str:
    """The text the item's place highlights (page text, or the table's text)."""
    if item.source == "text":
        return paper.pages_text[item.page - 1][item.start : item.end]
    return paper.tables_on(item.page)[int(item.source.split()[-1]) - 1].text[item.start : item.end]


def test_an_outcome_of_a_results_table_that_no_value_covers_is_listed_where_the_row_is() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    [item] = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    assert item.kind == MissedKind.OUTCOME and item.label == "Length of stay, days"
    assert (item.page, item.source) == (2, "text")
    shown = _shown(paper, item)
    assert shown.startswith("Length of stay, days") and shown.endswith("6.0 ± 2.4\n0.07")
    assert item.numbers == ("5.2", "2.1", "6.0", "2.4")  # the p-value is no number to extract


def test_nothing_is_listed_when_every_reported_outcome_is_extracted() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    stay = {
        "outcome_name": ("length of hospital stay", "Length of stay, days"),
        "mean_treatment": (5.2, "Length of stay, days 5.2 ± 2.1 6.0 ± 2.4"),
        "mean_control": (6.0, "Length of stay, days 5.2 ± 2.1 6.0 ± 2.4"),
        "sd_treatment": (2.1, "Length of stay, days 5.2 ± 2.1 6.0 ± 2.4"),
        "sd_control": (2.4, "Length of stay, days 5.2 ± 2.1 6.0 ± 2.4"),
        "n_treatment": (50, "Drug X (n = 50)"),
        "n_control": (48, "Placebo (n = 48)"),
    }
    assert possibly_missed(paper, _fields(paper, PAIN, NAUSEA, stay)) == []


def test_a_statistic_read_by_half_is_listed_with_the_number_left_out() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    no_sd = {name: pair for name, pair in PAIN.items() if name != "sd_control"}
    items = possibly_missed(paper, _fields(paper, no_sd, NAUSEA))
    pain = next(i for i in items if i.label == "Pain score")
    assert pain.kind == MissedKind.TABLE_ROW and pain.numbers == ("1.4",)
    assert "4.5 (1.4)" in _shown(paper, pain)


def test_one_arm_read_and_the_other_not_lists_the_other_arm() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    one_arm = {name: pair for name, pair in NAUSEA.items() if name != "events_control"}
    items = possibly_missed(paper, _fields(paper, PAIN, one_arm))
    nausea = next(i for i in items if i.label == "Nausea")
    assert nausea.kind == MissedKind.TABLE_ROW and nausea.numbers == ("10",)  # not the percentage


@pytest.mark.parametrize(("version", "arm"), [(2, "Drug X"), (1, "treatment")])
def test_an_outcome_without_its_group_size_is_pointed_to_where_the_other_outcomes_found_it(
    version: int, arm: str
) -> None:
    paper = _paper(ABSTRACT, RESULTS)
    no_size = {name: pair for name, pair in NAUSEA.items() if name != "total_treatment"}
    items = possibly_missed(paper, _fields(paper, PAIN, no_size, version=version))
    [size] = [i for i in items if "group size" in i.label]
    assert size.label == f"nausea: group size of the {arm} arm" and size.numbers == ("50",)
    assert _shown(paper, size) == "Drug X\n(n = 50" and size.page == 2  # where grounding placed that quote


def test_a_baseline_table_is_no_results_table() -> None:
    paper = _paper(ABSTRACT, BASELINE + RESULTS)
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    assert [i.label for i in items] == ["Length of stay, days"]  # not age, not body mass index


@pytest.mark.parametrize(("version", "arms"), [(2, ("Drug X", "Placebo")), (1, ("treatment", "control"))])
def test_an_outcome_missing_one_arms_number_is_listed_where_the_other_arms_is_quoted_even_in_a_baseline_table(
    version: int, arms: tuple[str, str]
) -> None:
    paper = _paper(ABSTRACT, BASELINE + RESULTS)
    bmi = {
        "outcome_name": ("body mass index", "Body mass index"),
        "mean_treatment": (27.4, "Body mass index 27.4 ± 3.9 28.0 ± 4.1"),
        "sd_treatment": (3.9, "Body mass index 27.4 ± 3.9 28.0 ± 4.1"),
        "mean_control": (28.0, "Body mass index 27.4 ± 3.9 28.0 ± 4.1"),
    }
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA, bmi, version=version))
    [listed] = [i for i in items if i.label == "body mass index"]
    assert listed.kind == MissedKind.TABLE_ROW and listed.numbers == ("4.1",)
    treatment, control = arms
    assert listed.why.startswith(
        f"it has the {treatment} arm's SD, not the {control} arm's; the one it has is quoted here"
    )
    assert _shown(paper, listed).startswith("Body mass index") and "28.0 ± 4.1" in _shown(paper, listed)
    whole = {**bmi, "sd_control": (4.1, "Body mass index 27.4 ± 3.9 28.0 ± 4.1")}
    assert not [
        i for i in possibly_missed(paper, _fields(paper, PAIN, NAUSEA, whole, version=version)) if "4.1" in i.numbers
    ]


@pytest.mark.parametrize(
    ("sentence", "have", "missing"),
    [
        ("At 6 months the sample was: Intervention, N = 28 Control, N = 14.", 28, "14"),  # "N =" is no p-value
        ("In all, 326 patients were randomised to each group, 326 in the control group.", 326, "326"),  # equal arms
    ],
)
@pytest.mark.parametrize(
    ("version", "label"),
    [(2, "days of wheeze: no numbers for Placebo"), (1, "days of wheeze")],  # version 2: the arm it has none for
)
def test_an_outcome_with_one_arms_group_size_is_shown_the_other_arms_printed_beside_it(
    sentence: str, have: int, missing: str, version: int, label: str
) -> None:
    paper = _paper(ABSTRACT, "2. Methods\n" + sentence + "\n" + RESULTS)
    wheeze = {"outcome_name": ("days of wheeze", "Days of wheeze"), "n_treatment": (have, sentence)}
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA, wheeze, version=version))
    [listed] = [i for i in items if i.label == label]
    # Version 2: the arm's entry is missing whole (an outcome); version 1: a number of the sentence.
    assert listed.kind == (MissedKind.OUTCOME if version == 2 else MissedKind.RESULT_TEXT) and missing in listed.numbers
    assert sentence.rstrip(".") in " ".join(_shown(paper, listed).split())


THREE_ARMS = (
    "3. Results\nTable 2. Postoperative nausea and vomiting\nH1 (n = 50)\nH2 (n = 50)\nControl (n = 50)\nP\n"
    "Total PONV\n11 (22 %)\n10 (20 %)\n21 (42 %)\n0.03\n"
)
ROW = "Total PONV 11 (22 %) 10 (20 %) 21 (42 %)"
RECEIVED = {"H1": "haloperidol 1 mg", "H2": "haloperidol 2 mg", "Control": "saline"}


def _ponv(*arms: str) -> dict[str, Any]:
    """A three-arm answer (arms declared with what they received) with PONV numbers for ``arms``."""
    events = {"H1": 11, "H2": 10, "Control": 21}
    return {
        "arms": [
            {
                "arm_name": (arm, f"{arm} (n = 50)"),
                "intervention": (received, "haloperidol"),
                "randomized_n": (50, f"{arm} (n = 50)"),
            }
            for arm, received in RECEIVED.items()
        ],
        "outcomes": [
            {
                "outcome_name": ("PONV", "Total PONV"),
                "arm": (arm, f"{arm} (n = 50)"),
                "events": (events[arm], ROW),
                "total": (50, f"{arm} (n = 50)"),
            }
            for arm in arms
        ],
    }


def test_an_arm_with_no_numbers_for_an_outcome_other_arms_have_is_listed_by_its_name() -> None:
    paper = _paper(ABSTRACT, THREE_ARMS)
    [item] = possibly_missed(paper, _ground(paper, _ponv("H2", "Control")))
    # The arm's outcome entry is missing whole: an outcome item, asked for whole by the follow-up.
    assert item.kind == MissedKind.OUTCOME and item.label == "PONV: no numbers for H1 (haloperidol 1 mg)"
    assert item.numbers == ("11",) and _shown(paper, item).startswith("Total PONV")  # printed beside the others
    assert item.why == "the answer has the other arms' numbers for it; they are quoted here"
    [control] = possibly_missed(paper, _ground(paper, _ponv("H1", "H2")))
    assert control.label == "PONV: no numbers for Control (saline)" and control.numbers == ("21",)


def test_no_arm_is_listed_when_every_arm_has_numbers_for_the_outcome() -> None:
    paper = _paper(ABSTRACT, THREE_ARMS)
    assert possibly_missed(paper, _ground(paper, _ponv("H1", "H2", "Control"))) == []


def test_an_arm_without_numbers_is_listed_even_when_the_page_prints_none_beside_the_others() -> None:
    # The answer says the arm is missing: the reviewer is pointed to where the other arms' are.
    sentence = "Nausea occurred in 10 (20 %) patients given H2 and 21 (42 %) given saline."
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n4. Discussion\n" + THREE_ARMS.split("\n", 1)[1])
    answer = _ponv("H1", "H2", "Control")
    answer["outcomes"] += [
        {
            "outcome_name": ("nausea", "Nausea occurred"),
            "arm": (arm, arm),
            "events": (events, sentence),
            "total": (50, f"{arm} (n = 50)"),
        }
        for arm, events in (("H2", 10), ("Control", 21))
    ]
    [item] = possibly_missed(paper, _ground(paper, answer))
    assert item.label == "nausea: no numbers for H1 (haloperidol 1 mg)" and item.numbers == ()
    assert item.kind == MissedKind.OUTCOME and _shown(paper, item) == sentence


def test_arms_of_subgroups_are_expected_only_for_outcomes_reported_by_subgroup() -> None:
    sentence = "In men pain was 3.1 (1.2) with drug X and 4.5 (1.4) with placebo; in women 2.9 (1.1) and 4.2 (1.3)."
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n" + RESULTS.split("\n", 1)[1])
    arms = [(arm, None) for arm in ARMS] + [(arm, sex) for sex in ("men", "women") for arm in ARMS]
    by_sex = {("Drug X", "men"): (3.1, 1.2), ("Placebo", "men"): (4.5, 1.4), ("Drug X", "women"): (2.9, 1.1)}
    answer = as_arms([PAIN, NAUSEA])
    answer["arms"] = [{"arm_name": (arm, arm), "subgroup": (sex, sex)} for arm, sex in arms]
    answer["outcomes"] += [
        {
            "outcome_name": ("pain score", "pain"),
            "arm": (f"{arm} ({sex})", arm),
            "mean": (mean, sentence),
            "sd": (sd, sentence),
        }
        for (arm, sex), (mean, sd) in by_sex.items()
    ]
    arms_missed = [i for i in possibly_missed(paper, _ground(paper, answer)) if "no numbers" in i.label]
    # Not the subgroups' arms for nausea: it is reported for the whole trial only.
    assert [(i.label, i.numbers) for i in arms_missed] == [
        ("pain score: no numbers for Placebo (women)", ("4.2", "1.3"))
    ]
    answer["outcomes"] += [
        {
            "outcome_name": ("pain score", "pain"),
            "arm": ("Placebo (women)", "placebo"),
            "mean": (4.2, sentence),
            "sd": (1.3, sentence),
        }
    ]
    assert not [i for i in possibly_missed(paper, _ground(paper, answer)) if "no numbers" in i.label]


def test_arms_reported_apart_from_an_outcomes_arms_are_not_expected_for_it() -> None:
    # Treatment arms for the outcomes, patients with and without a diagnosis for one more: each
    # outcome is reported in one partition's arms.
    sentence = "Grip strength was 21.4 (6.6) with the diagnosis and 29.0 (4.4) without it."
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n" + RESULTS.split("\n", 1)[1])
    answer = as_arms([PAIN, NAUSEA])
    answer["arms"] += [{"arm_name": (arm, arm)} for arm in ("diagnosed", "not diagnosed")]
    answer["outcomes"] += [
        {
            "outcome_name": ("grip strength", "Grip strength"),
            "arm": (arm, arm),
            "mean": (m, sentence),
            "sd": (sd, sentence),
        }
        for arm, m, sd in (("diagnosed", 21.4, 6.6), ("not diagnosed", 29.0, 4.4))
    ]
    assert not [i for i in possibly_missed(paper, _ground(paper, answer)) if "no numbers" in i.label]


def test_a_two_arm_answer_reading_two_arms_of_a_three_arm_row_lists_the_third() -> None:
    # Version 1 cannot name a third arm: the row's third statistic that no value has is listed.
    paper = _paper(ABSTRACT, THREE_ARMS)
    h2 = {
        "outcome_name": ("PONV, H2 vs control", "Total PONV"),
        "events_treatment": (10, ROW),
        "total_treatment": (50, "H2 (n = 50)"),
        "events_control": (21, ROW),
        "total_control": (50, "Control (n = 50)"),
    }
    [item] = possibly_missed(paper, _fields(paper, h2, version=1))
    assert item.kind == MissedKind.TABLE_ROW and item.numbers == ("11",) and item.label == "Total PONV"
    assert "third arm" in item.why
    h1 = {**h2, "outcome_name": ("PONV, H1 vs control", "Total PONV"), "events_treatment": (11, ROW)}
    assert possibly_missed(paper, _fields(paper, h2, h1, version=1)) == []


SENTENCE_SDS = (
    "The composite z-scores were −0.25 (SD 0.71) for sham stimulation, 0.13 (SD 0.82) for left anodal "
    "stimulation, and 0.11 (SD 0.81) for right anodal stimulation."
)


def test_a_three_arm_sentence_with_sds_written_out_lists_the_third_arms_mean_and_sd() -> None:
    paper = _paper(ABSTRACT, "3. Results\n" + SENTENCE_SDS + "\n4. Discussion\n")
    arms = {"sham": -0.25, "left anodal": 0.13, "right anodal": 0.11}
    sds = {"sham": 0.71, "left anodal": 0.82, "right anodal": 0.81}
    answer = {
        "arms": [{"arm_name": (arm, arm)} for arm in arms],
        "outcomes": [
            {
                "outcome_name": ("composite z-score", "composite z-scores"),
                "arm": (arm, arm),
                "mean": (arms[arm], SENTENCE_SDS),
                "sd": (sds[arm], SENTENCE_SDS),
            }
            for arm in ("sham", "left anodal")
        ],
    }
    [item] = possibly_missed(paper, _ground(paper, answer))
    assert item.kind == MissedKind.OUTCOME and item.numbers == ("0.11", "0.81")
    assert item.label == "composite z-score: no numbers for right anodal"
    left = {
        "outcome_name": ("composite z-score, left vs sham", "composite z-scores"),
        "mean_treatment": (0.13, SENTENCE_SDS),
        "sd_treatment": (0.82, SENTENCE_SDS),
        "mean_control": (-0.25, SENTENCE_SDS),
        "sd_control": (0.71, SENTENCE_SDS),
    }
    [item] = possibly_missed(paper, _fields(paper, left, version=1))  # version 1: the sentence's third statistic
    assert item.kind == MissedKind.RESULT_TEXT and item.numbers == ("0.11", "0.81")


NOTES = (
    "Data are expressed as least squares mean (standard error) at week 8 in the efficacy sample.\n"
    "Response rate is defined as a reduction of at least a quarter from baseline in the score.\n"
    "CY-BOCS Children's Yale-Brown obsessive-compulsive scale, compulsion subscale only here.\n"
    "Differences are given between drug X and placebo with their 95% confidence intervals.\n"
)


def test_notes_between_a_tables_caption_and_its_column_heads_do_not_end_the_table() -> None:
    table = (
        "3. Results\nTable 2. Efficacy endpoints\n"
        + NOTES
        + "Drug X (n = 50)\nPlacebo (n = 48)\nGait speed\n1.2 (0.3)\n1.0 (0.4)\n"
    )
    paper = _paper(ABSTRACT, table)
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert (
        item.kind == MissedKind.OUTCOME and item.label == "Gait speed" and item.numbers == ("1.2", "0.3", "1.0", "0.4")
    )


def test_a_caption_followed_by_prose_ends_its_table_and_the_sentences_are_read() -> None:
    sentence = "The hospital stay was 5.2 ± 2.1 days with drug X and 6.0 ± 2.4 days with placebo (P = 0.07).\n"
    page = "3. Results\nTable 2. Efficacy endpoints (on the next page)\n" + NOTES + sentence + "4. Discussion\n"
    paper = _paper(ABSTRACT, page)
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert item.kind == MissedKind.OUTCOME and item.label == "hospital stay"
    assert item.numbers == ("5.2", "2.1", "6.0", "2.4") and _shown(paper, item) == sentence.strip()


def test_a_row_naming_an_extracted_outcome_by_the_evaluations_matching_is_not_a_new_outcome() -> None:
    # "HbA1c" is "glycated haemoglobin" for the evaluation: the row's numbers are what is missing.
    page = RESULTS.replace("Length of stay, days", "HbA1c, %")
    paper = _paper(ABSTRACT, page)
    hba1c = {"outcome_name": ("glycated haemoglobin", "Pain score"), "n_treatment": (50, "Drug X (n = 50)")}
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA, hba1c))
    [item] = [i for i in items if i.label == "HbA1c, %"]
    assert item.kind == MissedKind.TABLE_ROW and item.numbers == ("5.2", "2.1", "6.0", "2.4")


def test_rows_printed_one_per_line_and_markdown_rows_are_read_too() -> None:
    one_line = (
        "3. Results\nTable 3. Adverse events\nEvent Drug Placebo P\nHeadache 7 (14%) 3 (6%) 0.32\n"
        "Rash 2 (4%) 1 (2%) 0.99\n"
    )
    markdown = (
        "Table 4. Secondary outcomes\n|Outcome|Drug|Placebo|\n|---|---|---|\n|Quality of life|71.2 (9.8)|68.4 (10.1)|\n"
    )
    paper = _paper(ABSTRACT, one_line + markdown)
    items = possibly_missed(paper, _fields(paper, PAIN))
    # Table 3's two unread rows are one item (a reviewer checks the table once), naming both.
    assert [(i.label, i.numbers) for i in items] == [
        ("Headache; Rash", ("7", "14", "3", "6", "2", "4", "1")),
        ("Quality of life", ("71.2", "9.8", "68.4", "10.1")),
    ]
    assert items[0].why == "2 rows of this table that no extracted value reads"
    assert _shown(paper, items[0]) == "Headache 7 (14%) 3 (6%) 0.32\nRash 2 (4%) 1 (2%) 0.99"
    assert _shown(paper, items[1]).startswith("|Quality")
    assert all(i.text == _shown(paper, i) for i in items)  # what is shown is what is highlighted


def test_a_tables_unread_rows_are_one_item_whose_text_is_what_it_highlights() -> None:
    table = (
        "3. Results\nTable 3. Adverse events\nEvent Drug Placebo P\nHeadache 7 (14%) 3 (6%) 0.32\n"
        "Rash 2 (4%) 1 (2%) 0.99\nFever 5 (10%) 4 (8%) 0.70\nCough; night 9 (18%) 8 (16%) 0.81\n"
    )
    paper = _paper(ABSTRACT, table)
    rash = {
        "outcome_name": ("rash", "Rash"),
        "events_treatment": (2, "Rash 2 (4%) 1 (2%)"),
        "total_treatment": (50, "Drug X (n = 50)"),
        "events_control": (1, "Rash 2 (4%) 1 (2%)"),
        "total_control": (48, "Placebo (n = 48)"),
    }
    [item] = possibly_missed(paper, _fields(paper, rash))
    assert item.label == "Headache; Fever; Cough, night"  # each unread row; a row label holds no "; " of its own
    assert item.numbers == ("7", "14", "3", "6", "5", "10", "4", "8", "9", "18", "16")  # the read row's are not
    assert item.text == _shown(paper, item) and item.text.startswith("Headache") and item.text.endswith("0.81")


def test_outcomes_whose_totals_are_only_in_column_heads_are_not_listed_for_them() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    no_totals = {name: pair for name, pair in NAUSEA.items() if not name.startswith("total_")}
    items = possibly_missed(paper, _fields(paper, PAIN, no_totals))
    assert all(i.numbers for i in items)  # no item that shows nothing to read
    assert not [i for i in items if i.label == "nausea" and "its total" in i.why]


def test_a_row_whose_only_numbers_an_outcome_has_are_group_sizes_is_not_read_by_it() -> None:
    # Every outcome of an arm has its group size: holding 402 and 388 ties "Readmission" to its own
    # row, not to a row printing "42/402" and "41/388".
    rows = "Serious infection\n42/402\n41/388\n0.91\nReadmission\n60/402\n55/388\n0.76\n"
    paper = _paper(ABSTRACT, "3. Results\nTable 2. Outcomes\nOutcome\nDrug X\nPlacebo\nP\n" + rows)
    quote = "Readmission 60/402 55/388"
    readmission: Outcome = {
        "outcome_name": ("readmission", "Readmission"),
        "events_treatment": (60, quote),
        "total_treatment": (402, quote),
        "events_control": (55, quote),
        "total_control": (388, quote),
    }
    [item] = possibly_missed(paper, _fields(paper, readmission))
    assert item.kind == MissedKind.OUTCOME and item.label == "Serious infection"
    assert item.numbers == ("42", "402", "41", "388")
    # Nor when its group sizes are quoted from that row: the row's own results are still unread.
    elsewhere = "Serious infection 42/402 41/388"
    sizes_there = readmission | {"total_treatment": (402, elsewhere), "total_control": (388, elsewhere)}
    [item] = possibly_missed(paper, _fields(paper, sizes_there))
    assert item.kind == MissedKind.OUTCOME and item.label == "Serious infection"
    # A row of nothing but the group sizes the answer has reports nothing unread.
    analysed = _paper(
        ABSTRACT, "3. Results\nTable 2. Outcomes\nOutcome\nDrug X\nPlacebo\nP\nAnalysed\n402\n388\n" + rows
    )
    counted = "Analysed 402 388"
    sizes_counted = readmission | {"total_treatment": (402, counted), "total_control": (388, counted)}
    assert [i.label for i in possibly_missed(analysed, _fields(analysed, sizes_counted))] == ["Serious infection"]


@pytest.mark.parametrize(
    ("first_label", "label"),
    [("Serious infection", "Serious infection"), ("Serious infection,\nall grades", "Serious infection, all grades")],
)
def test_a_tables_first_row_is_labelled_without_the_column_head_above_it(first_label: str, label: str) -> None:
    # The arms' heads carry no "(n = ...)" here: the last of them is printed right above the first
    # row's label, and is no part of it; a label wrapped over two lines is still one.
    rows = f"{first_label}\n42/402\n41/388\nReadmission\n60/402\n55/388\n"
    paper = _paper(ABSTRACT, "3. Results\nTable 2. Outcomes\nOutcome\nDrug X\nPlacebo\n" + rows)
    items = possibly_missed(paper, {})
    assert [i.label for i in items] == [f"{label}; Readmission"]


def test_each_outcome_an_item_names_is_shown_with_what_its_own_row_prints() -> None:
    from extraction_pipeline.core.verification.recall_items import EXCERPT_CHARS, labelled_excerpts

    rows = "3-month follow-up\nWaist, cm\n97.5 (7.2)\n99.1 (6.9)\nWeight, kg\n81.2 (9.1)\n82.0 (8.8)"
    item = PossiblyMissed(MissedKind.OUTCOME, "Waist, cm; 3-month follow-up: Weight, kg", rows, 3, "text", 0, 99)
    assert labelled_excerpts(item) == [
        ("Waist, cm", "Waist, cm 97.5 (7.2) 99.1 (6.9)"),
        ("3-month follow-up: Weight, kg", "Weight, kg 81.2 (9.1) 82.0 (8.8)"),  # found without its group head
    ]
    # Ligatures the page keeps and the label spells out; a label found where it starts a word.
    printed = "Subtotal 3 4 Deﬁnite ﬁbrosis 12/600 25/600 Total 14/600 19/600"
    item = PossiblyMissed(MissedKind.OUTCOME, "Definite fibrosis; Total", printed, 3, "text", 0, 99)
    assert labelled_excerpts(item) == [
        ("Definite fibrosis", "Deﬁnite ﬁbrosis 12/600 25/600"),
        ("Total", "Total 14/600 19/600"),
    ]
    # A label the place does not print (a finding named apart from it) is shown the whole place,
    # and a long place is cut at a word.
    sentence = "Pain was lower with drug X " + "at every visit " * 40 + "(3.1 vs 4.5)."
    named = PossiblyMissed(MissedKind.TABLE_ROW, "Pain: no numbers for Placebo", sentence, 2, "text", 0, 9)
    [(label, excerpt)] = labelled_excerpts(named)
    assert label == "Pain: no numbers for Placebo" and excerpt.startswith("Pain was lower with drug X at every")
    assert excerpt.endswith(" …") and len(excerpt) <= EXCERPT_CHARS + 2 and "(3.1 vs 4.5)" not in excerpt


def test_a_tables_link_line_ends_it_and_names_no_row() -> None:
    # A journal prints a table's DOI under it, then the page's number: no result of the paper.
    footer = "a χ2-Test doi:10.1371/journal.pone.0137824.t003\n13 / 21\n"
    paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", footer + "4. Discussion"))
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    assert [i.label for i in items] == ["Length of stay, days"]


def test_a_link_in_a_tables_notes_above_its_rows_does_not_end_it() -> None:
    note = "Data from the trial registry (https://clinicaltrials.gov/ct2/show/NCT00000000)\n"
    paper = _paper(ABSTRACT, RESULTS.replace("Outcome\n", note + "Outcome\n", 1))
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    assert [i.label for i in items] == ["Length of stay, days"]


def test_a_running_footer_printed_above_the_pages_last_lines_is_no_table_row() -> None:
    # A footer block of seven lines, its citation line changing only by the page's number.
    def footer(page: int) -> str:
        return (
            f"J Med Res 2015 | vol. 17 | iss. 1 | e23 | p. {page}\nhttp://www.jmr.org/2015/1/e23/\n"
            "(page number not for citation purposes)\nSmith et al\nJOURNAL OF MEDICAL RESEARCH\nXSL•FO\nRenderX\n"
        )

    pages = [ABSTRACT + footer(1), RESULTS + footer(2), "5. Conclusions\nDrug X lowered pain.\n" + footer(3)]
    paper = _paper(*pages)
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    assert [i.label for i in items] == ["Length of stay, days"]


def test_results_sentences_are_read_and_methods_sentences_are_not() -> None:
    sentence = "The hospital stay was 5.2 ± 2.1 days with drug X and 6.0 ± 2.4 days with placebo (P = 0.07).\n"
    paper = _paper(ABSTRACT, "2. Methods\n" + sentence + "3. Results\n" + sentence + "4. Discussion\n")
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert item.kind == MissedKind.OUTCOME and item.source == "text"
    assert item.start > paper.pages_text[1].index("3. Results")  # the results one, not the methods one
    assert item.label == "hospital stay" and item.numbers == ("5.2", "2.1", "6.0", "2.4")
    assert _shown(paper, item) == sentence.strip()


@pytest.mark.parametrize(
    ("sentence", "label"),
    [
        ("Operative Findings: The mean operation time was 74.1 ± 12.2 and 78.1 ± 6.4 min.", "operation time"),
        (
            "There was no difference in the incidence of PONV between the groups (11 (22%) vs 21 (42%)).",
            "incidence of PONV",
        ),
        ("On the other hand, the matched mean venous glycemia were 0.97 ± 0.02 and 0.99 ± 0.35.", "venous glycemia"),
        ("A signiﬁcant diﬀerence was found in handgrip strength (32.1 ± 4.2 vs 28.4 ± 5.1 kg).", "handgrip strength"),
        (
            "The intervention group had a mean global HRQoL of 72.49 (SD 8.1) against 71.71 (SD 9.0) with placebo.",
            "global HRQoL",
        ),
        ("Similar between-group results were found for the MRC score (48.2 ± 6.1 vs 45.9 ± 7.3).", "MRC score"),
        (  # a time point it opens with is no statistic; a word hyphenated at a line's end is one word
            "At week 8, the drug X group showed an improvement in mean clinician-\nrated CGI-I scores greater "
            "than the placebo group [2.7 (0.1) vs 3.4 (0.1)].",
            "clinician-rated CGI-I scores",
        ),
        (
            "The readmission rate within 90 days was 25.2% (62/245) and 23.8% (59/248).",
            "readmission rate within 90 days",
        ),
    ],
)
def test_a_sentence_is_labelled_with_the_outcome_it_reports(sentence: str, label: str) -> None:
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n4. Discussion\n")
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert (item.kind, item.label) == (MissedKind.OUTCOME, label)


def test_a_sentence_whose_numbers_no_value_has_is_an_outcome_to_ask_for_even_when_named_like_one() -> None:
    sentence = "Pain score after the last dose was 2.2 ± 1.0 with drug X and 3.9 ± 1.1 with placebo.\n"
    paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", sentence + "4. Discussion"))
    items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
    [item] = [i for i in items if i.source == "text" and "last dose" in i.text]
    assert (item.kind, item.label) == (MissedKind.OUTCOME, "Pain score after the last dose")


def test_a_parsed_table_is_read_when_the_page_text_has_no_rows() -> None:
    table = ParsedTable(2, "<table></table>", "Outcome\tDrug\tPlacebo\nLength of stay, days\t5.2 ± 2.1\t6.0 ± 2.4")
    paper = _paper(ABSTRACT, "3. Results\nSee the table.\n", tables=[table])
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert (item.page, item.source, item.label) == (2, "table 1", "Length of stay, days")
    assert _shown(paper, item) == "Length of stay, days\t5.2 ± 2.1\t6.0 ± 2.4"


def test_the_list_is_capped_most_likely_first_and_returned_in_reading_order() -> None:
    # Fifteen tables of one unread row each: fifteen items (a table's unread rows are one).
    rows = "".join(
        f"Table {n + 2}. Outcome {n} at 12 weeks\nOutcome {n}\n{n}.1 ± 1.{n}\n{n}.5 ± 2.{n}\n" for n in range(1, 16)
    )
    paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", rows + "4. Discussion"))
    no_sd = {name: pair for name, pair in PAIN.items() if name != "sd_control"}
    items = possibly_missed(paper, _fields(paper, no_sd, NAUSEA), limit=5)
    assert len(items) == 5
    assert items[0].label == "Pain score" and items[0].numbers == ("1.4",)  # the half-read row is kept
    assert [i.start for i in items] == sorted(i.start for i in items)


def test_the_limit_counts_rows_so_a_tables_unread_rows_are_cut_to_the_likeliest() -> None:
    # Six unread rows of one table (the table the answer read its outcome from), and one row the
    # answer half read: the half-read row first, then the unread rows nearest the quoted one.
    rows = "".join(f"Outcome {n}\n{n}.1 ± 1.{n}\n{n}.5 ± 2.{n}\n" for n in range(1, 7))
    paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", "Table 3. Secondary outcomes\n" + rows + "4. Discussion"))
    no_sd = {name: pair for name, pair in PAIN.items() if name != "sd_control"}
    everything = possibly_missed(paper, _fields(paper, no_sd, NAUSEA), limit=100)
    assert sum(max(1, len(i.label.split("; "))) for i in everything) == 1 + 1 + 6  # half read, length of stay, six
    items = possibly_missed(paper, _fields(paper, no_sd, NAUSEA), limit=4)
    assert sum(max(1, len(i.label.split("; "))) for i in items) == 4  # a row each, however they are grouped
    assert items[0].label == "Pain score" and items[0].numbers == ("1.4",)
    [table] = [i for i in items if i.label.startswith("Outcome")]
    assert (
        table.label == "Outcome 1; Outcome 2"
        and table.why == "2 of the 6 rows of this table that no extracted value reads"
    )


def test_a_less_likely_finding_does_not_ride_in_on_a_likelier_ones_place() -> None:
    from decimal import Decimal

    from extraction_pipeline.core.verification.recall_ranking import Listed, within_rows

    def finding(label: str, rank: float, page: int, start: int) -> Listed:
        item = PossiblyMissed(MissedKind.TABLE_ROW, label, "x", page, "text", start, start + 10, ("1",))
        return Listed(item, rank, frozenset({Decimal(1)}), prose=False)

    sentence = [finding("Pain: group size of Placebo", 9.0, 2, 100), finding("Nausea", 3.0, 2, 105)]
    same_outcome = finding("Pain: no numbers for Drug X", 8.0, 2, 104)  # names Pain, already named there
    elsewhere = finding("Length of stay", 6.0, 3, 40)
    chosen = within_rows([sentence[0], same_outcome, elsewhere, sentence[1]], limit=2)
    assert [c.item.label for c in chosen] == [
        "Pain: group size of Placebo, no numbers for Drug X",
        "Length of stay",
    ]
    # With room for it, the less likely finding joins the place it shares.
    chosen = within_rows([sentence[0], same_outcome, elsewhere, sentence[1]], limit=4)
    assert [c.item.label for c in chosen][1] == "Length of stay" and "Nausea" in chosen[0].item.label


def test_an_outcomes_finding_at_the_row_it_was_read_from_names_that_row_once() -> None:
    from dataclasses import replace
    from decimal import Decimal

    from extraction_pipeline.core.verification.recall_ranking import Listed

    def finding(label: str, rank: float) -> Listed:
        item = PossiblyMissed(MissedKind.TABLE_ROW, label, "x", 2, "text", 100, 110, ("1",))
        return Listed(item, rank, frozenset({Decimal(1)}), prose=False)

    row, lacks = finding("Fruit (pieces)", 7.5), finding("Fruit intake: no numbers for Control", 6.5)
    # The row's words, its unit aside, are the outcome's: one row, named by what the outcome lacks.
    assert row.merged(lacks).item.label == lacks.merged(row).item.label == "Fruit intake: no numbers for Control"
    # Another outcome's row at that place is named beside it.
    other = finding("Saturated fat (fat points)", 7.5).merged(lacks)
    assert other.item.label == "Saturated fat (fat points); Fruit intake: no numbers for Control"
    # Two outcomes' findings are never one: each says something of its own.
    both = finding("Vegetable intake: no numbers for Control", 6.5).merged(lacks)
    assert both.item.label == "Vegetable intake: no numbers for Control; Fruit intake: no numbers for Control"
    # An arm's missing entry is an outcome item; named as one with the row it was read from, the
    # item is one; beside another thing it keeps the likelier finding's kind.
    arm_missing = replace(lacks, item=replace(lacks.item, kind=MissedKind.OUTCOME))
    assert row.merged(arm_missing).item.kind == MissedKind.OUTCOME
    vomiting = finding("Vomiting", 7.5)
    assert vomiting.merged(arm_missing).item.kind == MissedKind.TABLE_ROW
    # An extracted outcome's finding at the very row its quote is in (it has a mean, not its SD) and
    # that row's own (half read): one row, named by the outcome and by what the row prints.
    half_read = finding("IES-2 total: Preintervention", 7.5)
    lacks_sd = replace(finding("Intuitive eating total score", 6.5), outcome="Intuitive eating total score")
    fused = "Intuitive eating total score (IES-2 total: Preintervention)"
    assert half_read.merged(lacks_sd).item.label == lacks_sd.merged(half_read).item.label == fused
    # The model read the systolic row for diastolic pressure: both names stay, the row's in brackets.
    systolic = finding("Systolic blood pressure (mmHg)", 7.5)
    diastolic = replace(finding("Diastolic blood pressure", 6.5), outcome="Diastolic blood pressure")
    assert systolic.merged(diastolic).item.label == "Diastolic blood pressure (Systolic blood pressure (mmHg))"
    # What an outcome lacks stays at the end of its label.
    lacks_arm = replace(finding("Body appreciation: no numbers for Control", 6.0), outcome="Body appreciation")
    assert (
        half_read.merged(lacks_arm).item.label
        == "Body appreciation (IES-2 total: Preintervention): no numbers for Control"
    )
    change_row = finding("(Δ)", 7.5)  # a row labelled by a symbol alone: the outcome names it
    assert change_row.merged(lacks_sd).item.label == "Intuitive eating total score"
    elsewhere = replace(lacks_sd, item=replace(lacks_sd.item, start=105))  # overlapping, not the same row
    assert half_read.merged(elsewhere).item.label == "IES-2 total: Preintervention; Intuitive eating total score"


def test_a_mean_with_its_confidence_interval_written_ci95_is_one_statistic() -> None:
    sentence = (
        "For men, the intervention group had a mean quality of life of 72.49 (CI95% 69.34–75.65) compared to "
        "71.71 (95% CI 68.21–75.20) in the control group (p = 0.94).\n"
    )
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "4. Discussion\n")
    [item] = possibly_missed(paper, _fields(paper, PAIN))
    assert item.numbers == ("72.49", "69.34", "75.65", "71.71", "95", "68.21", "75.20")


@pytest.mark.parametrize(
    ("sentence", "read", "left_out"),
    [
        # A time point the sentence opens with is no third statistic beside the two arms'.
        (
            "At 12 months, the pain score was 3.1 ± 1.2 with drug X and 4.5 ± 1.4 with placebo.",
            (3.1, 1.2),
            ("4.5", "1.4"),
        ),
        # Each arm's mean printed with its interval, and no ratio or difference named: arms' numbers.
        (
            "The quality of life was 72.49 (95% CI 69.34–75.65) with drug X compared to 71.71 (95% CI "
            "68.21–75.20) with placebo.",
            (72.49, None),
            ("71.71",),
        ),
    ],
)
def test_a_sentence_read_for_one_arm_lists_the_other_arms_statistic(
    sentence: str, read: tuple[float, float | None], left_out: tuple[str, ...]
) -> None:
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n4. Discussion\n")
    mean, sd = read
    one_arm: Outcome = {"outcome_name": ("the outcome", sentence[:30]), "mean_treatment": (mean, sentence)}
    if sd is not None:
        one_arm["sd_treatment"] = (sd, sentence)
    [item] = possibly_missed(paper, _fields(paper, one_arm))
    # One finding of the sentence's half-read numbers and of the other arm's entry, missing whole.
    assert item.kind == MissedKind.OUTCOME and "one arm's numbers here and not the other arm's" in item.why
    assert item.numbers[: len(left_out)] == left_out


def test_estimates_with_intervals_in_a_sentence_naming_a_ratio_are_no_arms_numbers() -> None:
    sentence = "The odds ratio was 0.72 (95% CI 0.51–0.99) at 6 months and 0.81 (95% CI 0.60–1.08) at 12 months."
    paper = _paper(ABSTRACT, "3. Results\n" + sentence + "\n4. Discussion\n")
    one: Outcome = {"outcome_name": ("relapse", "The odds ratio"), "mean_treatment": (0.72, sentence)}
    assert not [i for i in possibly_missed(paper, _fields(paper, one)) if "one arm's numbers here" in i.why]


def test_statistics_of_a_read_row_that_no_value_has_are_listed_when_outcomes_are_columns() -> None:
    # Outcomes as columns, arms as rows: the answer read the weight and fat columns, not fruit.
    table = (
        "3. Results\nTable 2. Means (SD) at 4 months\nGroup\nWeight (kg)\nFat (g)\nFruit (pieces)\n"
        "Control\n81.2 (9.1)\n61.3 (7.2)\n2.14 (0.81)\nIntervention\n79.5 (8.4)\n58.2 (6.6)\n2.17 (0.77)\n"
        "4. Discussion\n"
    )
    paper = _paper(ABSTRACT, table)
    read = [
        {
            "outcome_name": (name, label),
            "mean_treatment": (treated[0], f"{treated[0]} ({treated[1]})"),
            "sd_treatment": (treated[1], f"{treated[0]} ({treated[1]})"),
            "mean_control": (control[0], f"{control[0]} ({control[1]})"),
            "sd_control": (control[1], f"{control[0]} ({control[1]})"),
        }
        for name, label, treated, control in (
            ("weight", "Weight (kg)", (79.5, 8.4), (81.2, 9.1)),
            ("fat", "Fat (g)", (58.2, 6.6), (61.3, 7.2)),
        )
    ]
    items = possibly_missed(paper, _fields(paper, *read))
    assert [i.numbers for i in items] == [("2.14", "0.81"), ("2.17", "0.77")]
    assert items[0].label.endswith("Control") and items[1].label == "Intervention"  # the rows, as labelled
    assert all(i.why.startswith("the answer read statistics of this row") for i in items)
    assert possibly_missed(paper, _fields(paper, *read, version=1)) == []  # version 1: a third arm's rule, not this


# A table as some PDF writers print it, right to left: the column heads in reverse, then each row's
# cells before its label; the rows repeat under each outcome.
RIGHT_TO_LEFT = (
    "3. Results\nTable 4. Changes from pre- to postintervention\nP value\n95% CI\nChange (SD)\nMean (SD)\n"
    "Characteristic\nBMI (kg/m2)\n—\n—\n—\n32.93 (4.85)\nPreintervention\n.46\n−0.48, 0.23\n−0.13 (0.88)\n"
    "32.81 (5.31)\nPostintervention\nAAQ-II\n—\n—\n—\n22.46 (8.67)\nPreintervention\n.006\n−7.11, -1.35\n"
    "−4.23 (7.13)\n18.23 (8.14)\nPostintervention\naChanges from pre- to postintervention.\n4. Discussion\n"
)


def test_a_table_printed_right_to_left_labels_each_row_with_the_line_after_its_cells() -> None:
    from extraction_pipeline.core.verification.recall_items import labelled_excerpts

    paper = _paper(ABSTRACT, RIGHT_TO_LEFT)
    items = possibly_missed(paper, {}, limit=100)
    assert [label for item in items for label in item.label.split("; ")] == [
        "BMI (kg/m2): Preintervention",
        "BMI (kg/m2): Postintervention",
        "AAQ-II: Preintervention",
        "AAQ-II: Postintervention",
    ]
    # Each outcome is asked for with its own cells, printed before its label.
    excerpts = dict(labelled_excerpts(items[0]))
    assert excerpts["BMI (kg/m2): Preintervention"] == "— — — 32.93 (4.85) Preintervention"
    assert excerpts["BMI (kg/m2): Postintervention"] == ".46 −0.48, 0.23 −0.13 (0.88) 32.81 (5.31) Postintervention"


def test_a_table_ending_with_a_short_note_is_still_read_left_to_right() -> None:
    # "Results are shown as mean ± SD" or a definition under a table is no row's label.
    for note in ("Results are shown as mean ± SD.", "¤TAU treatment as usual", "Drug X lowered pain"):
        paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", note + "\n4. Discussion"))
        items = possibly_missed(paper, _fields(paper, PAIN, NAUSEA))
        assert [i.label for i in items] == ["Length of stay, days"], note


@pytest.mark.parametrize(
    ("heads", "after"),
    [
        (
            "Outcome\nDrug X\nPlacebo\n",
            "Adverse events\nNo serious adverse event was reported in either group of the trial.\n",
        ),
        ("Outcome\nT0\nT1\n", "4. Discussion\nDrug X lowered pain and nausea in this trial of adults after surgery.\n"),
    ],
)
def test_a_heading_after_a_table_is_no_last_rows_label(heads: str, after: str) -> None:
    rows = "Adverse events\nPain score\n3.1 (1.2)\n4.5 (1.4)\nSleep score\n5.2 (2.1)\n6.0 (2.4)\n"
    paper = _paper(ABSTRACT, "3. Results\nTable 2. Outcomes\n" + heads + rows + after)
    [item] = possibly_missed(paper, {})
    assert item.label.split("; ") == ["Pain score", "Sleep score"] and item.numbers[:2] == ("3.1", "1.2")


def test_a_right_to_left_tables_next_group_head_is_not_glued_to_the_row_above() -> None:
    paper = _paper(ABSTRACT, RIGHT_TO_LEFT.replace("AAQ-II", "hsCRP (mg/L)"))
    labels = [label for item in possibly_missed(paper, {}, limit=100) for label in item.label.split("; ")]
    assert labels[1:] == [
        "BMI (kg/m2): Postintervention",
        "hsCRP (mg/L): Preintervention",
        "hsCRP (mg/L): Postintervention",
    ]


TIME_POINTS = (
    "3. Results\nTable 1. Plasma levels during supplementation\nWeeks\nTocopherol (μg/ml)\nPlacebo (n = 27)\n"
    "Palmvitee (n = 29)\n0\n11.67 ± 3.19\n11.75 ± 2.27\n12\n10.42 ± 2.17\n14.22 ± 3.61\n24\n11.52 ± 2.94\n"
    "14.56 ± 3.06\nTocotrienol (ng/ml)\n0\n62.49 ± 6.69\n63.60 ± 5.67\n12\n63.50 ± 7.87\n656.25 ± 142.50\n"
    "24\n60.65 ± 7.13\n675.16 ± 150.00\nCotinine ratio\nn = 16\nn = 19\n0\n0.052 ± 0.017\n0.046 ± 0.017\n"
    "24\n0.058 ± 0.030\n0.047 ± 0.017\nα1-antitrypsin (g/L)\n0\n1.48 ± 0.31\n1.49 ± 0.34\n24\n1.47 ± 0.20\n"
    "1.45 ± 0.24\nResults are shown as mean ± SD.\n4. Discussion\n"
)


def test_whole_numbers_repeated_under_each_outcome_are_its_time_points_not_its_results() -> None:
    paper = _paper(ABSTRACT, TIME_POINTS)
    [item] = possibly_missed(paper, {}, limit=100)
    # One row per outcome, named by the line above its time points (the arms' heads and group
    # sizes between them are column heads); "0", "12" and "24" are when, not what.
    assert item.label.split("; ") == [
        "Tocopherol (μg/ml)",
        "Tocotrienol (ng/ml)",
        "Cotinine ratio",
        "α1-antitrypsin (g/L)",
    ]
    assert item.numbers[:4] == ("11.67", "3.19", "11.75", "2.27") and not {"0", "12", "24"} & set(item.numbers)


@pytest.mark.parametrize(
    "rows",
    [
        "Stroke\n3\n12 (24%)\nDeath\n1\n10 (21%)\n",
        "Stroke\n1\n3\nDeath\n1\n3\n",  # equal rising counts in two rows
        "Stroke\n1\n3.5 (1.1)\n4\n2.0 (0.9)\nDeath\n1\n3.1 (1.2)\n4\n2.2 (0.8)\n",  # no time in the heads
    ],
)
def test_whole_numbers_alone_on_their_lines_are_cells_unless_a_table_of_time_points_repeats_them(rows: str) -> None:
    paper = _paper(ABSTRACT, "3. Results\nTable 2. Events\nOutcome\nDrug X\nPlacebo\n" + rows + "4. Discussion\n")
    [item] = possibly_missed(paper, {})
    assert item.label == "Stroke; Death" and item.numbers[0] == rows.split("\n")[1]


def test_a_footnote_letter_glued_to_an_abbreviation_is_dropped_where_the_notes_spell_it_out() -> None:
    rows = "BMIh (kg/m2)\n32.9 (4.8)\n32.8 (5.3)\nLVIDd, mm\n48.2 (5.1)\n47.9 (4.9)\nSAEs, n\n4 (8%)\n9 (19%)\n"
    notes = "hBMI: body mass index.\n"
    paper = _paper(ABSTRACT, "3. Results\nTable 2. Outcomes\nOutcome\nDrug X\nPlacebo\n" + rows + notes)
    [item] = possibly_missed(paper, {})
    # "LVIDd" (diastolic) and "SAEs" keep their letter: no note spells them out under it.
    assert item.label.split("; ") == ["BMI (kg/m2)", "LVIDd, mm", "SAEs, n"]


def test_a_value_quoted_from_one_row_is_not_read_in_another_row_printing_it_too() -> None:
    # The baseline SD (6.31) is also the change's SD in the next row: that row's change is not
    # half read by the outcome, whose quotes are all in the rows above.
    table = (
        "3. Results\nTable 3. Mental health score\nTime\nMean (SD)\nChange (SD)\n"
        "Preintervention\n45.63 (6.31)\n—\nPostintervention\n50.24 (7.41)\n5.07 (6.31)\n4. Discussion\n"
    )
    paper = _paper(ABSTRACT, table)
    mental: Outcome = {
        "outcome_name": ("mental health", "Mental health score"),
        "mean_control": (45.63, "Preintervention 45.63 (6.31)"),
        "sd_control": (6.31, "Preintervention 45.63 (6.31)"),
        "mean_treatment": (50.24, "Postintervention 50.24 (7.41)"),
        "sd_treatment": (7.41, "Postintervention 50.24 (7.41)"),
    }
    assert not [i for i in possibly_missed(paper, _fields(paper, mental)) if "one number of this statistic" in i.why]
    # One quote over both rows: each row's values are read where they are (nothing is listed as
    # unread that the answer has).
    both = "Preintervention 45.63 (6.31) — Postintervention 50.24 (7.41)"
    spanning = {
        name: (value, both) if name != "outcome_name" else pair
        for name, (value, _q) in mental.items()
        for pair in [mental[name]]
    }
    items = possibly_missed(paper, _fields(paper, spanning))
    assert not [i for i in items if "50.24" in i.numbers or "7.41" in i.numbers]


def test_an_item_is_stored_as_json_and_read_back_with_a_stable_key() -> None:
    paper = _paper(ABSTRACT, RESULTS)
    fields = fields_of({"fields": json.loads(json.dumps(stored_fields(_fields(paper, PAIN, NAUSEA))))})
    [item] = possibly_missed(paper, fields)  # the check works on a stored result as read back
    stored = json.loads(json.dumps(item.as_dict()))
    assert PossiblyMissed.from_dict(stored) == item
    assert stored["key"] == item.key == f"outcome:2:text:{item.start}"
    assert possibly_missed(paper, fields)[0].key == item.key


@pytest.mark.skipif(not (CORPUS / "pdf").is_dir(), reason=f"the corpus of real trial PDFs is absent ({CORPUS})")
@pytest.mark.parametrize("version", [2, 1])
def test_an_outcome_a_model_drops_from_a_real_paper_is_listed_with_its_page(version: int) -> None:
    from extraction_pipeline.core.pdf.engine import EngineOptions
    from extraction_pipeline.core.pdf.isolation import run_isolated
    from extraction_pipeline_tests.support import oracle

    pmcid = "4574984"  # "Any complications 238 (73%) 241 (73.9%)", Table 3 on page 13
    parsed = run_isolated(CORPUS / "pdf" / f"{pmcid}.pdf", timeout_seconds=120, limits=EngineOptions())
    paper = ParsedDocument(pmcid, parsed["pages_text"], [ParsedTable(**t) for t in parsed["tables"]])
    template = RCT_TEMPLATE if version == 2 else RCT_TEMPLATE_V1
    answer = (oracle.build_answer if version == 2 else oracle.build_answer_v1)(pmcid).answer
    # The outcome the model forgets: every entry of it (version 2 answers one entry per arm).
    holding = next(
        e for e in answer["outcomes"] if any(p["value"] == 238 for f, p in e.items() if f.startswith("events"))
    )
    name = holding.get("outcome_name", {}).get("value")
    kept = [e for e in answer["outcomes"] if e is not holding and (name is None or e["outcome_name"]["value"] != name)]
    assert len(answer["outcomes"]) - len(kept) == (2 if version == 2 else 1)  # version 2: both arms' entries
    forgetful = {**answer, "outcomes": kept}
    fields = ground_output(template, parse_answer(json.dumps(forgetful), template), paper)
    items = possibly_missed(paper, fields)
    [listed] = [i for i in items if {"238", "241"} <= set(i.numbers)]
    assert listed.kind == MissedKind.OUTCOME and listed.page == 13 and "Any complications" in listed.label
    assert "238" in _shown(paper, listed) and len(items) <= 10
    everything = ground_output(template, parse_answer(json.dumps(answer), template), paper)
    assert not [i for i in possibly_missed(paper, everything) if "238" in i.numbers]  # extracted: not listed


OUTCOME_COLUMNS = """3. Results
Table 3. Intake at baseline and follow-up
Time point
Fruit (pieces)a
Vegetables (grams)
Mean (SE)
Mean change (95% CI)b
Mean (SE)
Mean change (95% CI)b,c
Baseline
Control
1.81 (0.06)
NA
158.93 (3.31)
NA
Plus
1.94 (0.06)
NA
163.24 (3.22)
NA
1-month follow-up
Control
2.05 (0.07)
0.24
(0.12, 0.36)
164.30 (3.71)
5.37
(–1.12, 11.86)
Plus
2.25 (0.08)
0.32
(0.19, 0.44)
180.34 (3.76)
17.10
(10.44, 23.67)
4. Discussion
"""
INTAKE_ARMS = ("Control", "Plus")
FRUIT: Outcome = {
    "outcome_name": ("fruit intake", "Fruit (pieces)"),
    "mean_treatment": (2.05, "2.05 (0.07)"),
    "sd_treatment": (0.07, "2.05 (0.07)"),
    "mean_control": (2.25, "2.25 (0.08)"),
    "sd_control": (0.08, "2.25 (0.08)"),
}


def _with_arms(paper: ParsedDocument, arms: Iterable[str], *outcomes: Outcome) -> GroundedFields:
    return _ground(paper, as_arms(outcomes, arms))


def test_outcomes_printed_as_columns_are_listed_by_their_heads_with_their_own_cells() -> None:
    paper = _paper(ABSTRACT, OUTCOME_COLUMNS)
    [item] = possibly_missed(paper, _with_arms(paper, INTAKE_ARMS), limit=100)
    # Not "Control" and "Plus" with every outcome's numbers: one place per outcome head.
    assert item.kind == MissedKind.OUTCOME and item.label == "Fruit (pieces); Vegetables (grams)"
    fruit, vegetables = item.shown.split("\n")
    assert fruit.startswith("Fruit (pieces) (Mean (SE), Mean change (95% CI)): Control: 1.81 (0.06) NA; Plus:")
    assert "Plus: 2.25 (0.08) 0.32 (0.19, 0.44)" in fruit and "158.93" not in fruit
    assert "180.34 (3.76) 17.10 (10.44, 23.67)" in vegetables and "2.25" not in vegetables
    # What a reviewer may quote is the page's own text, from the heads; what the page highlights
    # is the columns' cells, and the stored item keeps them.
    assert item.text == _shown(paper, item) and item.text.startswith("Fruit (pieces)a\nVegetables (grams)")
    page = paper.pages_text[item.page - 1]
    assert [page[s:e] for s, e in item.cells[:4]] == ["Fruit (pieces)a", "1.81 (0.06)", "NA", "1.94 (0.06)"]
    assert PossiblyMissed.from_dict(item.as_dict()) == item


def test_a_value_quoted_from_an_outcome_column_reads_that_column_only() -> None:
    paper = _paper(ABSTRACT, OUTCOME_COLUMNS)
    items = possibly_missed(paper, _with_arms(paper, INTAKE_ARMS, FRUIT), limit=100)
    [vegetables] = [item for item in items if item.label == "Vegetables (grams)"]
    assert vegetables.kind == MissedKind.OUTCOME  # named apart from the fruit column the answer read
    assert {"158.93", "180.34", "17.10"} <= set(vegetables.numbers)
    assert not {"2.05", "2.25", "1.81"} & set(vegetables.numbers)
    # Of the fruit column, what no value has: its baseline means, not the quoted ones.
    assert [set(item.numbers) for item in items if item is not vegetables] == [{"1.81", "0.06", "1.94"}]


def test_a_quote_opening_with_a_rows_label_is_in_the_outcome_column_of_its_cells() -> None:
    paper = _paper(ABSTRACT, OUTCOME_COLUMNS)
    half: Outcome = {
        "outcome_name": ("fruit intake", "Fruit (pieces)"),
        "mean_treatment": (2.05, "Control\n2.05"),  # the SD beside it is not extracted
        "mean_control": (2.25, "Plus\n2.25 (0.08)"),
        "sd_control": (0.08, "Plus\n2.25 (0.08)"),
    }
    items = possibly_missed(paper, _with_arms(paper, INTAKE_ARMS, half), limit=100)
    # Before, a quote was in a column only where it started: a row's label is in none.
    [lacking] = [i for i in items if "fruit intake" in i.label]
    assert "not the Control arm's" in lacking.why and "0.07" in lacking.numbers


def test_a_missed_outcome_column_is_its_own_item_beside_a_column_read_by_half() -> None:
    paper = _paper(ABSTRACT, OUTCOME_COLUMNS)
    half = {**FRUIT, "sd_treatment": (None, "")}
    items = possibly_missed(paper, _with_arms(paper, INTAKE_ARMS, half), limit=100)
    [vegetables] = [i for i in items if "Vegetables (grams)" in i.label]
    assert vegetables.kind == MissedKind.OUTCOME and vegetables.label == "Vegetables (grams)"


ARMS_OVER_STATISTICS = {
    "outcomes repeated under time heads": (
        "Outcome\nDrug X\nPlacebo\nMean\nSD\nMean\nSD\nAt 6 weeks\nPain score\n3.1\n1.2\n4.5\n1.4\n"
        "Fatigue\n2.0\n0.5\n2.2\n0.6\nAt 12 weeks\nPain score\n2.8\n1.1\n4.4\n1.5\nFatigue\n1.9\n0.4\n2.3\n0.7\n"
    ),
    "time rows repeated under outcome heads": (
        "Outcome\nDrug X (n = 50)\nPlacebo (n = 48)\nMean\nSD\nMean\nSD\nPain score\nBaseline\n5.1\n1.2\n"
        "5.0\n1.4\nWeek 12\n3.1\n1.2\n4.5\n1.4\nFatigue\nBaseline\n2.9\n0.5\n2.8\n0.6\nWeek 12\n2.0\n0.5\n"
        "2.2\n0.6\n"
    ),
    "outcome rows split by time points": (
        "Outcome\nWeeks\nDrug X\nPlacebo\nMean\nSD\nMean\nSD\nPain score\n0\n3.1\n1.2\n4.5\n1.4\n12\n2.8\n"
        "1.1\n4.4\n1.5\nFatigue\n0\n2.0\n0.5\n2.2\n0.6\n12\n1.9\n0.4\n2.3\n0.7\n"
    ),
    "events repeated under subgroups": (
        "Event\nDrug X (n=50)\nPlacebo (n=48)\nn (%)\nn (%)\nMen\nNausea\n6 (24)\n5 (20)\nHeadache\n3 (12)\n"
        "4 (16)\nWomen\nNausea\n6 (24)\n5 (22)\nHeadache\n2 (8)\n3 (13)\n"
    ),
    "outcomes printed once": "Outcome\nDrug X\nPlacebo\nMean\nSD\nMean\nSD\nPain score\n3.1\n1.2\n4.5\n1.4\n"
    "Fatigue\n2.0\n0.5\n2.2\n0.6\n",
}


@pytest.mark.parametrize("body", ARMS_OVER_STATISTICS.values(), ids=ARMS_OVER_STATISTICS.keys())
def test_arms_over_repeated_column_heads_with_outcomes_as_rows_are_read_as_rows(body: str) -> None:
    paper = _paper(ABSTRACT, f"3. Results\nTable 2. Outcomes by visit\n{body}4. Discussion\n")
    items = possibly_missed(paper, _with_arms(paper, ARMS), limit=100)
    labels = "; ".join(item.label for item in items)
    assert "Drug X" not in labels and "Placebo" not in labels, labels  # the arms are no outcomes
    assert ("Pain score" in labels and "Fatigue" in labels) or ("Nausea" in labels and "Headache" in labels)


CELLS_OVER_TIME = """3. Results
Table 6. Cells during supplementation
Weeks
WBC
B lymphocyte
a.n.
%
a.n.
%
Placebo, n = 27
0
7.62 ± 1.89
41.96 ± 9.34
10.19 ± 4.06
0.35 ± 0.26
12
7.29 ± 2.10
42.39 ± 6.12
10.89 ± 3.56
0.33 ± 0.14
Palmvitee, n = 29
0
8.32 ± 1.55
40.52 ± 6.17
11.97 ± 4.00
0.40 ± 0.13
12
8.27 ± 2.08
40.39 ± 6.09
12.45 ± 4.67
0.41 ± 0.16
4. Discussion
"""


def test_outcome_columns_over_each_arms_time_points() -> None:
    [item] = possibly_missed(_paper(ABSTRACT, CELLS_OVER_TIME), {}, limit=100)
    assert item.label == "WBC; B lymphocyte"  # arms named by their group sizes
    wbc, cells = item.shown.split("\n")
    assert wbc == (
        "WBC (a.n., %): Placebo, n = 27: 0 7.62 ± 1.89 41.96 ± 9.34, 12 7.29 ± 2.10 42.39 ± 6.12; "
        "Palmvitee, n = 29: 0 8.32 ± 1.55 40.52 ± 6.17, 12 8.27 ± 2.08 40.39 ± 6.09"
    )
    assert cells.startswith("B lymphocyte (a.n., %): Placebo, n = 27: 0 10.19 ± 4.06 0.35 ± 0.26, 12 10.89")


UNEVEN_ROWS = (
    "Placebo, n = 27\n0\n7.62 ± 1.89\n10.19 ± 4.06\n0.35 ± 0.26\n12\n7.29 ± 2.10\n10.89 ± 3.56\n0.33 ± 0.14\n"
    "Palmvitee, n = 29\n0\n8.32 ± 1.55\n11.97 ± 4.00\n0.40 ± 0.13\n12\n8.27 ± 2.08\n12.45 ± 4.67\n0.41 ± 0.16\n"
)


@pytest.mark.parametrize(
    ("heads", "first_label"),
    [
        # One outcome with fewer columns: the first or the last? The text does not say: rows.
        ("Weeks\nWBC\nB lymphocyte\na.n.\n%\na.n.\n", None),
        # A head printed on two lines is one head.
        ("Weeks\nWhite cells and\nplatelet count\nB lymphocyte\na.n.\n%\na.n.\n%\n", "White cells and platelet count"),
        # A stub's head after the outcome heads is no outcome.
        ("Weeks\nWBC\nB lymphocyte\nGroup\na.n.\n%\na.n.\n%\n", "WBC"),
        # A head spanning others ("Adjusted") leaves it unsure which head is whose: rows.
        ("Weeks\nAdjusted\nWBC\nB lymphocyte\na.n.\n%\na.n.\n%\n", None),
    ],
)
def test_outcome_heads_are_matched_to_their_columns_or_the_table_is_read_as_rows(
    heads: str, first_label: str | None
) -> None:
    rows = UNEVEN_ROWS if heads.count("%") == 1 else CELLS_OVER_TIME.split("a.n.\n%\na.n.\n%\n", 1)[1]
    table = f"3. Results\nTable 6. Cells during supplementation\n{heads}{rows}"
    [item] = possibly_missed(_paper(ABSTRACT, table), {}, limit=100)
    if first_label is None:
        assert item.label == "Placebo, n = 27; Palmvitee, n = 29" and not item.shown  # rows, as before
    else:
        assert item.label.split("; ") == [first_label, "B lymphocyte"]


def test_a_place_of_several_arms_read_by_half_shows_the_results_beside_it_that_no_value_has() -> None:
    paper = _paper(ABSTRACT, OUTCOME_COLUMNS)
    half = {**FRUIT, "sd_treatment": (None, "")}  # the control arm's SD at one month left out
    items = possibly_missed(paper, _with_arms(paper, INTAKE_ARMS, half), limit=100)
    # The column read for "fruit intake" is one row, named by the outcome; it shows the column.
    [fruit] = [item for item in items if item.label == "fruit intake"]
    assert fruit.shown.startswith("Fruit (pieces)")
    # The SD left out, and the baseline means no value has, in one look.
    assert {"0.07", "1.81", "1.94"} <= set(fruit.numbers) and not {"2.05", "2.25"} & set(fruit.numbers)
    assert "the statistics of the same kind beside it no value has" in fruit.why


def test_a_sentence_a_page_break_cuts_from_a_quoted_one_ranks_as_beside_it() -> None:
    # A model skips what it passes by: the sentence continued on the next page is beside the quoted
    # one, however the page break falls; a sentence as unread but far from any quote ranks below it.
    filler = "The trial ran in four centres with one protocol. " * 60
    fatigue = "Fatigue was 2.1 (0.4) with drug X and 2.9 (0.5) with placebo."
    paper = _paper(
        "Drug X or placebo.\n" + ABSTRACT + filler,  # the arms' names are quoted here, far from the rest
        "3. Results\nAnxiety was 3.3 (0.7) with drug X and 3.8 (0.9) with placebo.\n" + filler + "\n"
        f"{fatigue} Women in the",
        "drug X group slept 5.5 (1.1) hours compared to 6.2 (1.3) with placebo.\n4. Discussion\n",
    )
    answer = {"outcome_name": ("fatigue", "Fatigue"), "mean_treatment": (2.1, fatigue), "mean_control": (2.9, fatigue)}
    answer |= {"sd_treatment": (0.4, fatigue), "sd_control": (0.5, fatigue)}
    items = possibly_missed(paper, _fields(paper, answer), likeliest_first=True)
    [sleep, anxiety] = [i for i in items if "5.5" in i.numbers or "3.3" in i.numbers]
    assert sleep.page == 3 and "5.5" in sleep.numbers and anxiety.page == 2


ARMS_RESULTS = [  # each arm's result one number, printed with its arm or set against the other's
    "The stone-free rate was 100% in Group I, and 80% in Group II after a single procedure (p = 0.043).",
    "Drug X gave a higher stone-free rate (100% vs 80%, p = 0.043) than placebo.",
    "During the study, adverse events were recorded in 2 patients given placebo and 4 in the drug X group.",
    # Outcomes worded like the trial's flow or baseline are results still:
    "Complete remission was 40% in the drug X group versus 20% in the placebo group.",
    "The reduction from baseline was 30% in the drug X group and 10% in the placebo group.",
    "Treatment was stopped for adverse events in 5 patients in the drug X group and 2 in the placebo group.",
]
NO_ARMS_RESULTS = [
    "Of the 98 patients, 60% were women and 12% had diabetes.",  # shares of everyone, no arm
    "Drug X was given for 12 weeks to 50 patients in 4 centres.",  # counts of the trial, not results
    "Earlier trials found response rates of 75–95% versus 39–79% for other drugs.",  # ranges set against
    "Earlier trials found response rates of 75 – 95% versus 39 to 79% for other drugs.",
    "At 6 months 40% versus 20% at 12 months were still in pain.",  # time points, not arms
    "Response was 30% at week 4 compared with 55% at week 12.",
    # The trial's flow, baseline and design, though printed per arm:
    "3 patients in the drug X group and 2 in the placebo group withdrew consent before surgery.",
    "Of the 98 randomised, 90% in the drug X arm and 85% in the placebo arm completed 12 weeks.",
    "Outcome data were available for 96% in the drug X group and 94% in the placebo group.",
    "Baseline characteristics were similar: 56% in the drug X group and 58% in the placebo group were women.",
    "The sample size of 45 per group gave 80% power to detect 30% versus 15%.",
]


@pytest.mark.parametrize(
    ("sentence", "a_result"), [(s, True) for s in ARMS_RESULTS] + [(s, False) for s in NO_ARMS_RESULTS]
)
def test_numbers_a_sentence_gives_as_arms_results_make_it_a_result_though_printed_alone(
    sentence: str, a_result: bool
) -> None:
    # No total or SD pairs such numbers; the sentence reports an outcome for two arms when it
    # gives them as the arms' results, and not when they are who took part or a design's figures.
    paper = _paper(ABSTRACT, RESULTS.replace("4. Discussion", sentence + "\n4. Discussion"))
    items = [i for i in possibly_missed(paper, _fields(paper, PAIN, NAUSEA)) if not i.label.startswith("Length")]
    if not a_result:
        assert items == []  # the table's unread row ("Length of stay") only
        return
    [item] = items
    assert item.kind == MissedKind.OUTCOME and " ".join(_shown(paper, item).split()) == sentence
    assert len(item.numbers) >= 2


@pytest.mark.parametrize(
    ("cells", "answered", "lacks", "shown"),
    [
        # Arm by arm, a baseline and a change each: the placebo arm's change SD is two cells after
        # the drug's, not the placebo baseline printed next to it.
        (
            "7.3 (0.6)\n−1.5 (0.4)\n7.6 (0.5)\n−2.2 (0.4)",
            {"mean_treatment": -1.5, "sd_treatment": 0.4, "mean_control": -2.2},
            "it has the Drug X arm's SD, not the Placebo arm's",
            {"0.4"},
        ),
        # Time by time (or arm by arm: the heads are not read): the next cell, and two cells away.
        (
            "7.3 (0.6)\n7.6 (0.5)\n−1.5 (0.4)\n−2.2 (0.9)",
            {"mean_treatment": -1.5, "sd_treatment": 0.4, "sd_control": 0.9},
            "it has the Drug X arm's mean, not the Placebo arm's",
            {"7.6", "0.5", "7.3", "0.6"},
        ),
    ],
)
def test_another_arms_statistic_is_looked_for_next_to_it_and_as_many_cells_away(
    cells: str, answered: dict[str, float], lacks: str, shown: set[str]
) -> None:
    heads = "Table 2. Scores\nOutcome\nDrug X (n = 50)\nPlacebo (n = 48)\nBaseline\nChange\nBaseline\nChange\nP\n"
    paper = _paper(ABSTRACT, "3. Results\n" + heads + "Speech score\n" + cells + "\n0.197\n4. Discussion\n")
    quote = cells[cells.index("−1.5") :].replace("\n", " ")
    speech = {"outcome_name": ("speech score", "Speech score"), **{k: (v, quote) for k, v in answered.items()}}
    [item] = [i for i in possibly_missed(paper, _fields(paper, speech)) if lacks in i.why]
    assert shown <= set(item.numbers), item
