"""A number's place checked against its claim (outcome, arm, time point) and the percentage printed
beside a count: on a PDF written with PyMuPDF — an unruled results table and a results sentence —
parsed by the real engine, grounded and checked by ``ground_output`` as a batch does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extraction_pipeline.core.extraction.grounded import GroundedFields, ground_output
from extraction_pipeline.core.llm.answer_parsing import parse_answer
from extraction_pipeline.core.pdf.engine import EngineOptions, parse_pdf
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.verification.arithmetic import percent_flag
from extraction_pipeline.core.verification.context import FURNITURE_FLAG
from extraction_pipeline.core.verification.places import SENTENCE, TABLE, places_of

DRUG, PLACEBO = "Haloperidol 2 mg", "Placebo"
INTRO = (
    "Postoperative nausea and vomiting (PONV) is common after gynecologic laparoscopy. Patients were "
    "randomized to haloperidol 2 mg or placebo."
)
# (x of the cell, text) per row; the label column at x=60, the arms at 260 and 360.
TABLE_ROWS = [
    [(60, "Table 2  PONV outcomes")],
    [(260, "Placebo"), (360, "Haloperidol 2 mg")],
    [(260, "(n = 50)"), (360, "(n = 49)")],
    [(60, "Early time (0-2 h)")],
    [(70, "Nausea"), (260, "15 (30 %)"), (360, "5 (10 %)")],
    [(70, "Total PONV"), (260, "17 (34 %)"), (360, "8 (16 %)")],
    [(60, "Late time (2-24 h)")],
    [(70, "Total PONV"), (260, "21 (42 %)"), (360, "11 (22 %)")],
    [(60, "Surgical type")],
    [(70, "Lap. hysterectomy"), (260, "23 (46 %)"), (360, "26 (53 %)")],
]
SENTENCE_TEXT = "Headache was reported by 4 patients in the haloperidol group versus 9 in the placebo group."


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    return _one_page(tmp_path_factory.mktemp("context") / "ponv.pdf", INTRO, TABLE_ROWS, SENTENCE_TEXT)


def _one_page(path: Path, intro: str, rows: list[list[tuple[int, str]]], text: str) -> ParsedDocument:
    """A page of an introduction, a table written cell by cell, and sentences below it, parsed."""
    import pymupdf

    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 56, 539, 120), intro, fontsize=10, fontname="helv")
        y = _write_rows(page, rows, 150.0)
        page.insert_textbox(pymupdf.Rect(56, y + 20, 539, y + 200), text, fontsize=10, fontname="helv")
        doc.save(path)
    return _parsed(path)


def _write_rows(page: Any, rows: list[list[tuple[int, str]]], y: float) -> float:
    """Each row's cells at their x, a row every 14 points from ``y``; the y after the last row."""
    for row in rows:
        for x, text in row:
            page.insert_text((x, y), text, fontsize=9, fontname="helv")
        y += 14
    return y


def _parsed(path: Path) -> ParsedDocument:
    result = parse_pdf(path, EngineOptions(table_detection="off"))
    return ParsedDocument(path.stem, result["pages_text"], layout=result["layout"])


def _grounded(
    paper: ParsedDocument, entries: list[dict[str, Any]], arms: tuple[str, ...] = (DRUG, PLACEBO)
) -> GroundedFields:
    answer = {
        "arms": [{"arm_name": {"value": arm, "quote": "randomized to"}} for arm in arms],
        "outcomes": entries,
    }
    return ground_output(RCT_TEMPLATE, parse_answer(json.dumps(answer), RCT_TEMPLATE), paper)


def _entry(outcome: str, arm: str, timepoint: str = "", **numbers: tuple[float, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "outcome_name": {"value": outcome, "quote": "PONV outcomes"},
        "outcome_type": {"value": "dichotomous", "quote": "PONV outcomes"},
        "arm": {"value": arm, "quote": "PONV outcomes"},
    }
    if timepoint:
        entry["timepoint"] = {"value": timepoint, "quote": "Late time (2-24 h)"}
    for name, (value, quote) in numbers.items():
        entry[name] = {"value": value, "quote": quote}
    return entry


def test_the_layout_gives_each_cell_its_row_label_column_headers_and_heading(paper: ParsedDocument) -> None:
    text = paper.pages_text[0]
    at = text.index("11 (22 %)")
    [place] = places_of(paper, 1, at, at + 9, 11)
    assert place.kind == TABLE
    assert place.row_label == "Total PONV"
    assert place.headings[0] == "Late time (2-24 h)"
    assert "Haloperidol 2 mg" in " ".join(place.columns) and "Placebo" not in " ".join(place.columns)
    assert place.caption.startswith("Table 2")
    at = text.index("9 in the placebo")
    [place] = places_of(paper, 1, at, at + 1, 9)
    assert place.kind == SENTENCE and place.clause.startswith("versus 9")


def test_numbers_quoted_from_their_own_row_column_and_time_pass(paper: ParsedDocument) -> None:
    fields = _grounded(
        paper,
        [
            _entry(
                "postoperative nausea and vomiting",
                DRUG,
                "2-24 h",
                events=(11, "Total PONV 21 (42 %) 11 (22 %)"),
                total=(49, "Haloperidol 2 mg (n = 49)"),
            ),
            _entry(
                "postoperative nausea and vomiting",
                PLACEBO,
                "2-24 h",
                events=(21, "Total PONV 21 (42 %) 11 (22 %)"),
                total=(50, "Placebo (n = 50)"),
            ),
            _entry("headache", PLACEBO, events=(9, SENTENCE_TEXT)),
        ],
    )
    for path in ("outcomes.1.events", "outcomes.2.events", "outcomes.3.events"):
        assert str(fields[path].status) == "verified", (path, fields[path].reason)
        assert fields[path].flags == (), (path, fields[path].flags)


def test_a_number_from_another_row_column_time_or_clause_is_flagged_in_words(paper: ParsedDocument) -> None:
    fields = _grounded(
        paper,
        [
            # the other arm's column
            _entry("postoperative nausea and vomiting", DRUG, "2-24 h", events=(21, "Total PONV 21 (42 %) 11 (22 %)")),
            # a baseline row with the right arm and the wrong outcome
            _entry("vomiting", PLACEBO, events=(23, "Lap. hysterectomy 23 (46 %) 26 (53 %)")),
            # the early time point where the claim is late
            _entry(
                "postoperative nausea and vomiting", PLACEBO, "2-24 h", events=(17, "Total PONV 17 (34 %) 8 (16 %)")
            ),
            # the sentence gives 4 for the haloperidol group
            _entry("headache", PLACEBO, events=(4, SENTENCE_TEXT)),
        ],
    )
    flags = {path: " ".join(fields[path].flags) for path in fields if path.endswith(".events")}
    assert all(str(fields[path].status) == "verified" for path in flags)  # grounding alone passes them all
    assert "the quoted column is 'Placebo', not the arm 'Haloperidol 2 mg'" in flags["outcomes.1.events"]
    assert "the quoted row is 'Lap. hysterectomy', not the outcome 'vomiting'" in flags["outcomes.2.events"]
    assert "printed for 0\u20132 h; the claim is at 2-24 h" in flags["outcomes.3.events"]
    assert "gives this number for 'Haloperidol 2 mg', not for 'Placebo'" in flags["outcomes.4.events"]


def test_abbreviations_are_resolved_from_the_paper(paper: ParsedDocument) -> None:
    """ "Total PONV" names "postoperative nausea and vomiting" because the paper defines PONV."""
    right = _grounded(
        paper, [_entry("postoperative nausea and vomiting", DRUG, events=(11, "Total PONV 21 (42 %) 11 (22 %)"))]
    )
    assert right["outcomes.1.events"].flags == ()
    other = _grounded(paper, [_entry("postoperative pain", DRUG, events=(11, "Total PONV 21 (42 %) 11 (22 %)"))])
    assert other["outcomes.1.events"].flags


def test_the_percentage_beside_a_count_must_be_the_count_of_the_total(paper: ParsedDocument) -> None:
    fields = _grounded(
        paper,
        [
            _entry(
                "postoperative nausea and vomiting",
                DRUG,
                "2-24 h",
                events=(11, "Total PONV 21 (42 %) 11 (22 %)"),
                total=(60, "60"),
            )
        ],
    )
    assert any("11 of 60 is 18.3%" in flag for flag in fields["outcomes.1.events"].flags)
    assert percent_flag("23 (46 %)", 23, 50) is None
    assert percent_flag("1 (33.3%)", 1, 3) is None
    assert percent_flag("23 (46%)", 23, 49) is not None  # 46.9%: beyond the printed rounding
    assert percent_flag("23", 23, 49) is None  # no percentage printed: nothing to check


def test_a_parse_without_line_boxes_still_reads_sentences(paper: ParsedDocument) -> None:
    """A parse cached before boxes were kept: no table places, no crash, sentences still checked."""
    bare = ParsedDocument("bare", paper.pages_text)
    fields = _grounded(bare, [_entry("headache", PLACEBO, events=(4, SENTENCE_TEXT))])
    assert any("not for 'Placebo'" in flag for flag in fields["outcomes.1.events"].flags)


def test_the_arms_of_one_outcome_from_different_rows_of_one_table_are_both_flagged(paper: ParsedDocument) -> None:
    """Each number alone fits (both rows name the outcome, a time each); together they are two rows."""
    outcome = "postoperative nausea and vomiting"
    fields = _grounded(
        paper,
        [
            _entry(outcome, DRUG, events=(8, "Total PONV 17 (34 %) 8 (16 %)")),
            _entry(outcome, PLACEBO, events=(21, "Total PONV 21 (42 %) 11 (22 %)")),
        ],
    )
    for path in ("outcomes.1.events", "outcomes.2.events"):
        assert any("different rows of one table" in flag for flag in fields[path].flags), fields[path].flags
    same_row = _grounded(
        paper,
        [
            _entry(outcome, DRUG, events=(8, "Total PONV 17 (34 %) 8 (16 %)")),
            _entry(outcome, PLACEBO, events=(17, "Total PONV 17 (34 %) 8 (16 %)")),
        ],
    )
    assert same_row["outcomes.1.events"].flags == () and same_row["outcomes.2.events"].flags == ()


def test_a_count_printed_only_as_a_percentage_is_flagged(paper: ParsedDocument) -> None:
    fields = _grounded(
        paper, [_entry("postoperative nausea and vomiting", PLACEBO, events=(34, "Total PONV 17 (34 %) 8 (16 %)"))]
    )
    assert "the quote prints 34 as a percentage (34%), not as a count" in fields["outcomes.1.events"].flags


# A second paper: two active arms (no placebo declared), a table of means with standard errors
# whose rows are printed under group lines (a third, placebo group among them), a table of
# responders, and a reference list.
ARM_A, ARM_B = "Drug A", "Drug B"
SECOND_INTRO = "Patients were randomized to drug A or drug B; an open placebo group was observed alongside."
MARKERS = [
    [(60, "Table 3  Serum markers")],
    [(60, "Data are expressed as mean (standard error).")],
    [(60, "Marker"), (260, "Week 12")],
    [(200, "Drug A group (n = 40)")],
    [(70, "TNF-alpha"), (260, "12.1 (1.2)")],
    [(70, "BMIh"), (260, "27.4 (0.6)")],
    [(200, "Placebo group (n = 20)")],
    [(70, "TNF-alpha"), (260, "15.3 (1.9)")],
    [(70, "BMIh"), (260, "28.8 (0.9)")],
    [(60, "Table 4  Response")],
    [(260, "Drug A"), (360, "Drug B")],
    [(70, "Responders, n (%)"), (260, "30 (75.0)"), (360, "20 (48.8)")],
    [(70, "Remission"), (260, "12/40 (30.0)"), (360, "9/41 (22.0)")],
    [(60, "Table 5  Adherence to treatment")],
    [(260, "Drug A (N = 18)"), (360, "Drug B (N = 19)")],
    [(70, "Adherent, n (%)"), (260, "15 (83.3)"), (360, "14 (73.7)")],
    [(60, "Table 6  Transit time (h)")],
    [(260, "Week 3")],
    [(60, "Left colon"), (150, "Drug A"), (260, "10.2 ± 8.6")],
    [(150, "Drug B"), (260, "12.1 ± 9.5")],
]
SECOND_SENTENCE = (
    "Body weight fell to 81.2 ± 9.7 kg with drug A versus 84.0 ± 10.1 kg with drug B. "
    "In all, 44 patients on drug A and 45 on drug B were interviewed."
)
ROW_A = "TNF-alpha 12.1 (1.2)"
# Page 2: a table of levels and changes under an instrument's abbreviation, a cytokine named
# "IL-6", a summary score defined in a footnote, and deaths in words.
SCORES = [
    [(60, "Table 7  Scores")],
    [(200, "Mean (SD)"), (300, "Change (SD)")],
    [(60, "SAIb")],
    [(70, "Pre-treatment"), (200, "15.0 (2.2)"), (300, "-")],
    [(70, "Post"), (200, "12.0 (2.0)"), (300, "-3.0 (1.5)")],
    [(60, "IL-6"), (200, "3.1 (0.4)"), (300, "-0.2 (0.3)")],
    [(60, "MCSc"), (200, "47.5 (6.1)"), (300, "1.4 (5.0)")],
    [(60, "cMCS: Short Form Health Survey Mental Component Summary.")],
    [(60, "Table 8  Baseline characteristics of the participants")],
    [(200, "Drug A"), (300, "Drug B")],
    [(60, "Body weight, kg"), (200, "82.5 (9.9)"), (300, "80.1 (10.4)")],
    [(60, "Analysed, n (%)"), (200, "36 (90.0)"), (300, "37 (92.5)")],
    [(60, "Table 9  Haemoglobin (g/dL)")],
    [(60, "Weeks"), (200, "Drug A"), (300, "Drug B")],
    [(60, "0"), (200, "11.0 ± 1.0"), (300, "11.2 ± 1.1")],
    [(60, "12"), (200, "12.0 ± 1.2"), (300, "11.5 ± 1.0")],
    [(60, "24"), (200, "12.8 ± 1.1"), (300, "11.6 ± 1.2")],
]
SCORES_TEXT = (
    "Anxiety was measured using the State Anxiety Inventory (SAI). "
    "Overall, 5 patients on drug A and 7 on drug B died during follow-up. "
    "Good glycaemic control was reached by 33 patients in the first month."
)
REFERENCES = ["References", "1. Smith J, Jones K. A trial of drug C. Lancet. 2019;33(4):45-52."]


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    import pymupdf

    path: Path = tmp_path_factory.mktemp("context") / "markers.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 56, 539, 100), SECOND_INTRO, fontsize=10, fontname="helv")
        y = _write_rows(page, MARKERS, 130.0)
        page.insert_textbox(pymupdf.Rect(56, y + 20, 539, y + 60), SECOND_SENTENCE, fontsize=10, fontname="helv")
        _write_rows(page, [[(56, line)] for line in REFERENCES], y + 80)
        page = doc.new_page(width=595, height=842)  # tables after the references, as journals print them
        y = _write_rows(page, SCORES, 60.0)
        page.insert_textbox(pymupdf.Rect(56, y + 20, 539, y + 90), SCORES_TEXT, fontsize=10, fontname="helv")
        doc.save(path)
    return _parsed(path)


def _flags(paper: ParsedDocument, entries: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return _flags_of(paper, entries, arms=(ARM_A, ARM_B))


def _flags_of(paper: ParsedDocument, entries: list[dict[str, Any]], arms: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Each number's flags, in the entries' order (every number verified: the flags are the test)."""
    fields = _grounded(paper, entries, arms=arms)
    found = []
    for index, entry in enumerate(entries, start=1):
        for name in ("events", "total", "mean", "sd", "n"):
            if name in entry:
                path = f"outcomes.{index}.{name}"
                assert str(fields[path].status) == "verified", (path, fields[path].reason)
                found.append(fields[path].flags)
    return found


def test_an_sd_where_the_table_gives_standard_errors_is_flagged_and_one_printed_as_sd_is_not(
    second: ParsedDocument,
) -> None:
    [mean, sd] = _flags(
        second,
        [_entry("tumor necrosis factor alpha", ARM_A, mean=(12.1, ROW_A), sd=(1.2, ROW_A))],
    )
    assert mean == ()
    assert len(sd) == 1 and "standard error, not a standard deviation" in sd[0], sd
    [mean, sd] = _flags(second, [_entry("body weight", ARM_A, mean=(81.2, "81.2 ± 9.7 kg"), sd=(9.7, "81.2 ± 9.7 kg"))])
    assert mean == () and sd == ()


def test_initials_and_footnote_marks_name_their_outcome(second: ParsedDocument) -> None:
    """ "TNF-alpha" names tumor necrosis factor alpha (the paper never spells it out) and "BMIh" (note h)
    names BMI; neither names another outcome."""
    [tnf] = _flags(second, [_entry("tumor necrosis factor alpha", ARM_A, mean=(12.1, "TNF-alpha 12.1 (1.2)"))])
    [bmi] = _flags(second, [_entry("BMI", ARM_A, mean=(27.4, "BMIh 27.4 (0.6)"))])
    assert tnf == () and bmi == ()
    [other] = _flags(second, [_entry("interleukin 6", ARM_A, mean=(12.1, "TNF-alpha 12.1 (1.2)"))])
    assert other and "the quoted row is 'TNF-alpha'" in other[0], other


def test_a_number_under_a_group_line_of_an_undeclared_arm_is_flagged(second: ParsedDocument) -> None:
    """Rows printed under "Placebo group (n = 20)" belong to the placebo group, which the answer did
    not declare: claimed for drug A, flagged; the same row under "Drug A group" passes."""
    [placebo] = _flags(second, [_entry("tumor necrosis factor alpha", ARM_A, mean=(15.3, "TNF-alpha 15.3 (1.9)"))])
    assert placebo and "'Placebo group (n = 20)': a placebo arm, which is not among the declared arms" in placebo[0]
    [own] = _flags(second, [_entry("tumor necrosis factor alpha", ARM_A, mean=(12.1, "TNF-alpha 12.1 (1.2)"))])
    assert own == ()
    # Declared, the placebo group is no stranger: the group line names it.
    fields = _grounded(
        second,
        [_entry("tumor necrosis factor alpha", "Placebo", mean=(15.3, "TNF-alpha 15.3 (1.9)"))],
        arms=(ARM_A, "Placebo"),
    )
    assert fields["outcomes.1.mean"].flags == ()


def test_a_count_with_its_percentage_is_no_group_size_and_a_bare_percentage_is_checked(
    second: ParsedDocument,
) -> None:
    [size] = _flags(second, [_entry("response", ARM_A, total=(30, "Responders, n (%) 30 (75.0)"))])
    assert size and "a count with its percentage (75.0%), a part of a group, not the group's size" in size[0]
    [denominator] = _flags(second, [_entry("remission", ARM_A, total=(40, "Remission 12/40 (30.0)"))])
    assert denominator == ()
    # "30 (75.0)" under "n (%)": 30 of 40 is 75%, 30 of 41 is not.
    [events, _total] = _flags(
        second,
        [_entry("response", ARM_A, events=(30, "Responders, n (%) 30 (75.0)"), total=(40, "Remission 12/40 (30.0)"))],
    )
    assert events == ()
    [events, _total] = _flags(
        second, [_entry("response", ARM_A, events=(30, "Responders, n (%) 30 (75.0)"), total=(41, "9/41 (22.0)"))]
    )
    assert any("but 30 of 41 is 73.2%" in flag for flag in events), events


def test_a_number_quoted_from_the_reference_list_is_flagged(second: ParsedDocument) -> None:
    [cited] = _flags(second, [_entry("response", ARM_A, events=(33, "Lancet. 2019;33(4):45-52."))])
    assert cited == ("the quote is in the reference list, not in the paper's text or tables",)


def test_an_arm_size_from_outside_the_outcomes_own_table_is_flagged_when_that_table_says_otherwise(
    second: ParsedDocument,
) -> None:
    """Table 5 is about adherence and heads drug A's column "N = 18": the 44 interviewed is another
    count; 18 from the header passes. For an outcome no table is about, any table header's size
    for the arm will do, and a size none prints is flagged."""
    [interviewed] = _flags(second, [_entry("adherence to treatment", ARM_A, n=(44, "44 patients on drug A"))])
    assert interviewed and "gives this arm N = 18 ('Drug A'); the quote gives 44" in interviewed[0], interviewed
    [header] = _flags(second, [_entry("adherence to treatment", ARM_A, n=(18, "Drug A (N = 18)"))])
    assert header == ()
    # No table is about body weight: the tables' headers give drug A 40 (Table 3) and 18 (Table 5).
    [elsewhere] = _flags(second, [_entry("body weight", ARM_A, n=(44, "44 patients on drug A"))])
    assert elsewhere == (
        "the paper's tables give this arm N = 40 ('Drug A group', Table 3 Serum markers); the quote gives 44",
    )
    [printed] = _flags(second, [_entry("body weight", ARM_A, n=(40, "Drug A group (n = 40)"))])
    assert printed == ()


def test_a_row_printed_under_a_label_in_the_column_to_its_left_is_named_by_it(second: ParsedDocument) -> None:
    """ "Drug B" under "Left colon": the row is about the left colon, not about stool volume."""
    [left] = _flags(second, [_entry("left colon transit time", ARM_B, mean=(12.1, "Drug B 12.1 ± 9.5"))])
    assert left == ()
    [other] = _flags(second, [_entry("stool volume", ARM_B, mean=(12.1, "Drug B 12.1 ± 9.5"))])
    assert other == ("the quoted row ('Drug B') does not name the outcome 'stool volume'",), other


def test_an_instruments_abbreviation_names_what_the_paper_measures_with_it(second: ParsedDocument) -> None:
    """ "Anxiety was measured using the State Anxiety Inventory (SAI)": rows under "SAIb" are about
    anxiety, not depression."""
    [anxiety] = _flags(second, [_entry("anxiety", ARM_A, mean=(12.0, "Post 12.0 (2.0)"))])
    assert anxiety == ()
    [depression] = _flags(second, [_entry("depression", ARM_A, mean=(12.0, "Post 12.0 (2.0)"))])
    assert depression == ("the quoted row ('Post') does not name the outcome 'depression'",)


def test_a_footnotes_definition_a_numbered_name_and_a_synonym_name_their_outcome(second: ParsedDocument) -> None:
    [mental] = _flags(second, [_entry("general mental health", ARM_A, mean=(47.5, "MCSc 47.5 (6.1)"))])
    [cytokine] = _flags(second, [_entry("interleukin 6", ARM_A, mean=(3.1, "IL-6 3.1 (0.4)"))])
    [deaths] = _flags(second, [_entry("mortality", ARM_A, events=(5, "5 patients on drug A and 7 on drug B died"))])
    assert (mental, cytokine, deaths) == ((), (), ())
    [other] = _flags(second, [_entry("interleukin 2", ARM_A, mean=(3.1, "IL-6 3.1 (0.4)"))])
    assert other == ("the quoted row is 'IL-6', not the outcome 'interleukin 2'",)


def test_a_change_quoted_where_the_row_also_prints_the_level_is_flagged(second: ParsedDocument) -> None:
    """The "Post" row prints the mean (12.0) and its change (−3.0); "anxiety" does not say which,
    so the change is flagged. The "-" of the row above is an empty cell, not the column's header."""
    [mean, sd] = _flags(
        second, [_entry("anxiety", ARM_A, mean=(-3.0, "Post 12.0 (2.0) -3.0 (1.5)"), sd=(1.5, "-3.0 (1.5)"))]
    )
    sentence = (
        "the quoted column gives a change ('Change (SD)'); its row also prints the level ('Mean (SD)'),"
        " and the outcome 'anxiety' does not say change"
    )
    assert mean == (sentence,) and sd == (sentence,)
    [change] = _flags(second, [_entry("change in anxiety", ARM_A, mean=(-3.0, "Post 12.0 (2.0) -3.0 (1.5)"))])
    assert change == ()


def test_a_result_quoted_from_baseline_is_flagged_unless_the_claim_is_about_baseline(second: ParsedDocument) -> None:
    """A table of baseline characteristics and a row of the time before treatment print no
    results; a claim for the arm "baseline" (a before–after comparison) or about baseline may
    quote them."""
    [table] = _flags(second, [_entry("body weight", ARM_A, mean=(82.5, "Body weight, kg 82.5 (9.9)"))])
    assert table == (
        "the quoted table gives baseline characteristics ('Table 8 Baseline characteristics of the participants'),"
        " not results",
    )
    [row] = _flags(second, [_entry("anxiety", ARM_A, mean=(15.0, "Pre-treatment 15.0 (2.2)"))])
    assert row == ("the quoted number is printed for 'Pre-treatment', before treatment; the claim is a result",)
    [about] = _flags(second, [_entry("baseline body weight", ARM_A, mean=(82.5, "Body weight, kg 82.5 (9.9)"))])
    assert about == ()
    fields = _grounded(
        second, [_entry("anxiety", "baseline", mean=(15.0, "Pre-treatment 15.0 (2.2)"))], arms=(ARM_A, "baseline")
    )
    assert fields["outcomes.1.mean"].flags == ()


def test_a_result_from_an_earlier_time_of_a_table_that_prints_a_later_one_is_flagged(second: ParsedDocument) -> None:
    """Table 9's rows are weeks 0, 12 and 24: week 12 quoted for a claim that names no time point
    is flagged; week 24, or week 12 claimed at week 12, is not."""
    week_12, week_24 = "12.0 ± 1.2 11.5 ± 1.0", "12.8 ± 1.1 11.6 ± 1.2"
    [early] = _flags(second, [_entry("haemoglobin", ARM_A, mean=(12.0, week_12))])
    assert early == (
        "the quoted number is printed for 'Weeks 12'; the table also prints 'Weeks 24',"
        " and the claim names no time point",
    )
    [last] = _flags(second, [_entry("haemoglobin", ARM_A, mean=(12.8, week_24))])
    [named] = _flags(second, [_entry("haemoglobin", ARM_A, "week 12", mean=(12.0, week_12))])
    assert (last, named) == ((), ())


def test_an_outcome_named_control_and_an_analysed_group_raise_nothing(second: ParsedDocument) -> None:
    """ "Glycaemic control" is an outcome, not a control arm; "Analysed, n (%) 36 (90.0)" is the
    analysed group's size with its share of those randomized."""
    [outcome] = _flags(second, [_entry("glycaemic control", ARM_A, events=(33, "control was reached by 33 patients"))])
    [analysed] = _flags(second, [_entry("body weight", ARM_A, n=(36, "Analysed, n (%) 36 (90.0)"))])
    assert (outcome, analysed) == ((), ())


# A third paper: a table of levels before and after with a p-value column, a table with
# "Nonsmokers | Smokers" centred over each pair of arm columns, a table of body measures, and
# sentences with a median, a paper-wide "reported as median", subgroups, a "respectively" list
# and two time points.
THIRD_INTRO = (
    "Patients were randomized to drug A or drug B. Strength scores are reported as median "
    "(interquartile range). All other variables are presented as mean and SD."
)
LEVELS = [
    [(60, "Table 10  Pain before and after treatment")],
    [(200, "Pre: Mean (SE)"), (300, "Post: Mean (SE)"), (400, "P value")],
    [(60, "Pain score"), (200, "6.1 (0.4)"), (300, "3.2 (0.3)"), (400, "0.41")],
    [(60, "Table 11  Plasma vitamin E (ug/ml)")],
    [(215, "Nonsmokers"), (440, "Smokers")],
    [(150, "Drug A, n = 29"), (260, "Drug B, n = 27"), (380, "Drug A, n = 30"), (490, "Drug B, n = 28")],
    [(60, "Vitamin E"), (150, "14.56 ± 3.06"), (260, "11.52 ± 2.94"), (380, "14.11 ± 3.89"), (490, "11.53 ± 2.78")],
    [(60, "Table 12  Body measures after 12 weeks")],
    [(200, "Drug A"), (300, "Drug B")],
    [(60, "Body mass index (kg/m2)"), (200, "42.8 (4.6)"), (300, "42.5 (6.3)")],
    [(60, "Body weight (kg)"), (200, "128.9 (19.4)"), (300, "127.1 (21.6)")],
    [(60, "Table 13  Plasma levels")],
    [(200, "Drug A, n = 40"), (300, "Drug B, n = 41")],
    [(310, "Tocopherol (ug/ml)")],
    [(60, "Week 12"), (200, "11.1 ± 2.0"), (300, "10.2 ± 2.1")],
    [(310, "Tocotrienol (ng/ml)")],
    [(60, "Week 12"), (200, "61.5 ± 7.0"), (300, "60.5 ± 3.0")],
    [(60, "Table 14  Virologic response")],
    [(200, "SD48W, n/N (%)"), (300, "SD24W, n/N (%)")],
    [(60, "SVR"), (200, "66/94 (70.2)"), (300, "43/93 (46.2)")],
    [(60, "Table 15  Changes in body fat")],
    [(200, "Drug A"), (300, "Between-group difference,")],
    [(300, "mean (95% CI)")],
    [(60, "Body fat (kg)"), (200, "-17.5 (6.1)"), (300, "-17.0 (-18.7, -15.3)")],
    [(60, "Table 16  Knee function")],
    [(200, "Haloperidol 2 mg"), (300, "Placebo")],
    [(200, "After 2 weeks"), (300, "After 2 weeks")],
    [(60, "Range of motion (degrees)"), (200, "110.2 (8.1)"), (300, "108.9 (7.7)")],
]
THIRD_TEXT = (
    "In all, 42 of 82 selected shops were randomized to drug A. "
    "Hospital stay ranged from 2 to 30 days, with a median of 9 days. "
    "Grip strength was 25 (20-28) with drug A. "
    "In women, quality of life was 61.5 with drug A. "
    "Mean glucose was 0.83 ± 0.05, 0.92 ± 0.07 and 0.74 ± 0.06 g/l on drug A, drug B and placebo, respectively. "
    "Pain 6 hours after surgery was 6.4 ± 1.3 with drug A versus 5.1 ± 1.6 with drug B, and on the first "
    "postoperative day 4.3 ± 1.0 versus 3.6 ± 1.2."
)


@pytest.fixture(scope="module")
def third(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    return _one_page(tmp_path_factory.mktemp("context") / "levels.pdf", THIRD_INTRO, LEVELS, THIRD_TEXT)


def test_a_value_before_treatment_or_from_a_column_comparing_the_arms_is_flagged(third: ParsedDocument) -> None:
    """ "Pre:" is the time before treatment and "P value" compares the arms; "Post:" is the result."""
    row = "Pain score 6.1 (0.4) 3.2 (0.3) 0.41"
    [pre, post, p] = _flags(
        third,
        [
            _entry("pain", ARM_A, mean=(6.1, row)),
            _entry("pain", ARM_A, mean=(3.2, row)),
            _entry("pain", ARM_A, sd=(0.41, row)),
        ],
    )
    assert pre == ("the quoted number is printed for 'Pre: Mean (SE)', before treatment; the claim is a result",)
    assert post == ()
    assert p == ("the quoted column is 'P value', which compares the arms: not the sd of one arm",)


def test_a_median_or_range_is_no_mean_also_where_the_paper_says_so_once(third: ParsedDocument) -> None:
    [stay] = _flags(third, [_entry("hospital stay", ARM_A, mean=(9, "with a median of 9 days"))])
    assert len(stay) == 1 and "median or range, not a mean or SD" in stay[0], stay
    [grip] = _flags(third, [_entry("grip strength", ARM_A, mean=(25, "Grip strength was 25 (20-28)"))])
    assert grip == ("the paper says it reports these numbers ('stren') as medians, not means",)
    [weight] = _flags(third, [_entry("body weight", ARM_A, mean=(128.9, "Body weight (kg) 128.9 (19.4)"))])
    assert weight == ()  # "all other variables ... mean": only strength is given as medians


def test_a_subgroups_number_needs_a_place_that_names_the_subgroup(third: ParsedDocument) -> None:
    quote = "In women, quality of life was 61.5 with drug A"
    [men, women] = _flags(
        third,
        [
            _entry("quality of life - males", ARM_A, mean=(61.5, quote)),
            _entry("quality of life - females", ARM_A, mean=(61.5, quote)),
        ],
    )
    assert men == ("the claim is for male participants; the quoted place does not name them",)
    assert women == ()
    [bmi] = _flags(third, [_entry("pain score when the patients had BMI > 30", ARM_A, mean=(3.2, "3.2 (0.3)"))])
    assert bmi == ("the claim is for patients who had BMI > 30; the quoted place does not name them",)


def test_a_header_centred_over_a_pair_of_columns_names_both(third: ParsedDocument) -> None:
    """ "Nonsmokers" is centred over its two arm columns and reaches over neither."""
    text = third.pages_text[0]
    at = text.index("14.56")
    [place] = places_of(third, 1, at, at + 5, 14.56)
    assert place.columns[-2:] == ("Nonsmokers", "Drug A, n = 29")
    row = "Vitamin E 14.56 ± 3.06 11.52 ± 2.94 14.11 ± 3.89 11.53 ± 2.78"
    [nonsmokers, smokers] = _flags(
        third,
        [
            _entry("vitamin E", "Drug A smokers", mean=(14.56, row)),
            _entry("vitamin E", "Drug A smokers", mean=(14.11, row)),
        ],
    )
    assert nonsmokers == ("the claim is for 'smokers'; the quoted place is for 'Nonsmokers'",)
    assert smokers == ()


def test_a_respectively_list_gives_each_number_to_its_positions_group(third: ParsedDocument) -> None:
    quote = "0.83 ± 0.05, 0.92 ± 0.07 and 0.74 ± 0.06 g/l on drug A, drug B and placebo"
    [placebo, own] = _flags(
        third, [_entry("glucose", ARM_B, mean=(0.74, quote)), _entry("glucose", ARM_B, mean=(0.92, quote))]
    )
    assert placebo == (
        "the sentence gives its numbers respectively: this one is for 'placebo', and the arm 'Drug B' is 'drug B'",
    )
    assert own == ()


def test_a_row_naming_the_outcome_in_part_is_flagged_beside_one_naming_more(third: ParsedDocument) -> None:
    [bmi, weight] = _flags(
        third,
        [
            _entry("body weight", ARM_A, mean=(42.8, "Body mass index (kg/m2) 42.8 (4.6)")),
            _entry("body weight", ARM_A, mean=(128.9, "Body weight (kg) 128.9 (19.4)")),
        ],
    )
    assert bmi == (
        "the quoted row is 'Body mass index (kg/m2)'; the table's row 'Body weight (kg)'"
        " names the outcome 'body weight'",
    )
    assert weight == ()


def test_a_sentence_that_goes_on_to_a_later_time_flags_the_earlier_number(third: ParsedDocument) -> None:
    quote = "Pain 6 hours after surgery was 6.4 ± 1.3 with drug A"
    later = "postoperative day 4.3 ± 1.0 versus 3.6 ± 1.2"
    [early, last, named] = _flags(
        third,
        [
            _entry("pain", ARM_A, mean=(6.4, quote)),
            _entry("pain", ARM_A, mean=(4.3, later)),
            _entry("pain", ARM_A, "6 hours", mean=(6.4, quote)),
        ],
    )
    assert early == (
        "the quoted number is for '6 hours'; the sentence goes on to 'first postoperative day',"
        " and the claim names no time point",
    )
    assert (last, named) == ((), ())


def test_a_sectioned_tables_arm_header_names_every_section(third: ParsedDocument) -> None:
    """ "Tocotrienol (ng/ml)" heads its section over Drug B's column; the arms are named once, at the top."""
    # Each claim on its own; together, one printed number given to both arms flags both.
    [other] = _flags(third, [_entry("tocotrienol", ARM_A, mean=(60.5, "Week 12 61.5 ± 7.0 60.5 ± 3.0"))])
    [own] = _flags(third, [_entry("tocotrienol", ARM_B, mean=(60.5, "Week 12 61.5 ± 7.0 60.5 ± 3.0"))])
    both = _flags(
        third,
        [
            _entry("tocotrienol", ARM_A, mean=(60.5, "Week 12 61.5 ± 7.0 60.5 ± 3.0")),
            _entry("tocotrienol", ARM_B, mean=(60.5, "Week 12 61.5 ± 7.0 60.5 ± 3.0")),
        ],
    )
    assert all(any("from one printed number" in flag for flag in flags) for flags in both)
    assert other == ("the quoted column is 'Drug B, n = 41', not the arm 'Drug A'",)
    assert own == ()


def test_an_arm_code_with_its_number_names_the_arm_of_that_duration(third: ParsedDocument) -> None:
    long, short = "Drug A for 48 weeks", "Drug A for 24 weeks"
    row = "SVR 66/94 (70.2) 43/93 (46.2)"
    [other] = _flags_of(third, [_entry("SVR", long, events=(43, row))], arms=(long, short))
    [own] = _flags_of(third, [_entry("SVR", short, events=(43, row))], arms=(long, short))
    assert other == (f"the quoted column is 'SD24W, n/N (%)', not the arm '{long}'",)
    assert own == ()


def test_a_between_group_column_and_a_count_of_clusters_are_no_arms_numbers(third: ParsedDocument) -> None:
    row = "Body fat (kg) -17.5 (6.1) -17.0 (-18.7, -15.3)"
    [difference, own, shops] = _flags(
        third,
        [
            _entry("body fat", ARM_A, mean=(-17.0, row)),
            _entry("body fat", ARM_A, mean=(-17.5, row)),
            _entry("body fat", ARM_A, n=(82, "42 of 82 selected shops")),
        ],
    )
    assert difference == (
        "the quoted column is 'Between-group difference,', which compares the arms: not the mean of one arm",
    )
    assert own == ()
    # "42 of 82": 82 is the denominator of a count of shops, so it is that count's total, and the
    # count is not the outcome either.
    assert shops == (
        "the quoted sentence does not name the outcome 'body fat'",
        "the quoted number counts shops, not the arm's participants",
    )


def test_an_outcome_named_range_and_a_time_header_beside_a_dose_raise_nothing(third: ParsedDocument) -> None:
    """ "Range of motion" is an outcome, not a range; "After 2 weeks" is a time, not the "2 mg" arm."""
    row = "Range of motion (degrees) 110.2 (8.1) 108.9 (7.7)"
    fields = _grounded(
        third,
        [_entry("range of motion", DRUG, mean=(110.2, row)), _entry("range of motion", PLACEBO, mean=(108.9, row))],
    )
    assert fields["outcomes.1.mean"].flags == () and fields["outcomes.2.mean"].flags == ()


# A fourth paper, three pages under a running head: a table whose title wraps onto a second line
# naming both groups, "Nonsmokers | Smokers" centred over pairs of columns whose headers print their
# sizes, and a section heading alone over one column; sentences with one size for every group, a
# size of the whole sample, and a dose.
RUNNING_HEAD = "Doe et al. Trials (2019) 20:415"
FOURTH_INTRO = "Smokers and nonsmokers were randomized to placebo or drug A for 24 weeks."
VITAMINS = [
    [(60, "Table 20  The effects of drug A on plasma tocopherol and tocotrienol in")],
    [(60, "nonsmokers and smokers")],
    [(300, "Tocopherol (ug/ml)")],
    [(205, "Nonsmokers"), (440, "Smokers")],
    [(150, "Placebo, n = 27"), (260, "Drug A, n = 29"), (380, "Placebo, n = 28"), (490, "Drug A, n = 30")],
    [(60, "Week 24"), (150, "11.52 ± 2.94"), (260, "14.56 ± 3.06"), (380, "11.53 ± 2.78"), (490, "14.11 ± 3.89")],
    [(310, "Tocotrienol (ng/ml)")],
    [(60, "Week 24"), (150, "60.65 ± 7.13"), (260, "675.16 ± 150.00"), (380, "60.47 ± 3.00"), (490, "587.68 ± 87.50")],
]
FOURTH_TEXT = (
    "Thirty patients were enrolled, 15 in each group. "
    "Vomiting was recorded in 3 of the 40 patients screened. "
    "Anesthesia was induced with ketamine 10 mg/kg. "
    "Pain was scored in 24 patients per treatment arm. "
    "Of the 44 MM patients, 12 relapsed."
)
SMOKERS, NONSMOKERS = "Drug A smokers", "Drug A nonsmokers"


@pytest.fixture(scope="module")
def fourth(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    import pymupdf

    path = tmp_path_factory.mktemp("context") / "vitamins.pdf"
    with pymupdf.open() as doc:
        for number in (1, 2, 3):
            page = doc.new_page(width=595, height=842)
            page.insert_text((56, 36), f"{RUNNING_HEAD}    Page {number} of 3", fontsize=8, fontname="helv")
            if number == 1:
                page.insert_textbox(pymupdf.Rect(56, 56, 539, 120), FOURTH_INTRO, fontsize=10, fontname="helv")
                y = _write_rows(page, VITAMINS, 150.0)
                page.insert_textbox(pymupdf.Rect(56, y + 20, 539, y + 200), FOURTH_TEXT, fontsize=10, fontname="helv")
            else:
                page.insert_textbox(pymupdf.Rect(56, 56, 539, 120), "Discussion follows.", fontsize=10)
        doc.save(path)
    return _parsed(path)


def test_a_title_wrapped_onto_its_own_line_is_no_group_and_a_section_heading_no_columns_header(
    fourth: ParsedDocument,
) -> None:
    """The caption's second line names both groups: it is the title, not a group the rows are under.
    "Tocotrienol (ng/ml)" heads a section over one column: the pair header over the arms' own
    headers still says whose column it is."""
    text = fourth.pages_text[0]
    at = text.index("675.16")
    [place] = places_of(fourth, 1, at, at + 6, 675.16)
    assert "nonsmokers and smokers" not in place.groups
    assert "Nonsmokers" in place.columns and "Drug A, n = 29" in place.columns
    row = "Week 24 60.65 ± 7.13 675.16 ± 150.00 60.47 ± 3.00 587.68 ± 87.50"
    [nonsmokers, smokers] = _flags_of(
        fourth,
        [_entry("tocotrienol", SMOKERS, mean=(675.16, row)), _entry("tocotrienol", SMOKERS, mean=(587.68, row))],
        arms=(SMOKERS, NONSMOKERS),
    )
    assert "the claim is for 'smokers'; the quoted place is for 'Nonsmokers'" in nonsmokers
    assert smokers == ()


def test_a_size_in_a_columns_header_is_read_under_the_header_over_its_pair_of_columns(
    fourth: ParsedDocument,
) -> None:
    """ "Drug A, n = 30" is the smokers' column's header; a baseline compared with its own arm is
    that arm's people."""
    text = fourth.pages_text[0]
    at = text.index("n = 30") + 4
    [place] = places_of(fourth, 1, at, at + 2, 30)
    assert place.kind == TABLE and place.columns[0] == "Smokers" and place.columns[-1] == "Drug A, n = 30"
    header = "Placebo, n = 28 Drug A, n = 30"
    [other, own] = _flags_of(
        fourth,
        [
            _entry("tocopherol", "baseline", n=(30, header)),
            _entry("tocopherol", NONSMOKERS, n=(29, "Drug A, n = 29")),
        ],
        arms=(NONSMOKERS, "baseline"),
    )
    assert other == ("the claim is for 'nonsmokers'; the quoted place is for 'Smokers'",)
    assert own == ()


def test_one_printed_number_given_to_two_arms_is_flagged_on_both_unless_it_is_each_groups(
    fourth: ParsedDocument,
) -> None:
    screened = "Vomiting was recorded in 3 of the 40 patients screened"
    [drug, placebo] = _flags_of(
        fourth,
        [_entry("vomiting", ARM_A, total=(40, screened)), _entry("vomiting", PLACEBO, total=(40, screened))],
        arms=(ARM_A, PLACEBO),
    )
    said = (
        "'Drug A' and 'Placebo' are both given the total 40 from one printed number "
        "('Vomiting was recorded in 3 of the 40 patients screened.'), which is one group's, not each arm's"
    )
    assert said in drug and said in placebo
    each = "Thirty patients were enrolled, 15 in each group"
    assert _flags_of(
        fourth,
        [_entry("vomiting", ARM_A, total=(15, each)), _entry("vomiting", PLACEBO, total=(15, each))],
        arms=(ARM_A, PLACEBO),
    ) == [(), ()]
    per_arm = "Pain was scored in 24 patients per treatment arm"
    assert _flags_of(
        fourth,
        [_entry("pain", ARM_A, n=(24, per_arm)), _entry("pain", PLACEBO, n=(24, per_arm))],
        arms=(ARM_A, PLACEBO),
    ) == [(), ()]
    # An arm against its own baseline: one group, one size.
    assert _flags_of(
        fourth,
        [_entry("vomiting", ARM_A, total=(15, each)), _entry("vomiting", "baseline", total=(15, each))],
        arms=(ARM_A, "baseline"),
    ) == [(), ()]


def test_a_count_printed_with_a_unit_or_on_the_running_head_is_flagged(fourth: ParsedDocument) -> None:
    [dose, head] = _flags_of(
        fourth,
        [
            _entry("vomiting", ARM_A, events=(10, "induced with ketamine 10 mg/kg")),
            _entry("vomiting", PLACEBO, total=(20, RUNNING_HEAD)),
        ],
        arms=(ARM_A, PLACEBO),
    )
    assert dose == ("the quote prints '10 mg/kg': an amount in mg, not a number of participants",)
    [myeloma] = _flags_of(
        fourth, [_entry("relapse", ARM_A, total=(44, "Of the 44 MM patients"))], arms=(ARM_A, PLACEBO)
    )
    assert not any("an amount" in flag for flag in myeloma)  # "MM" is a disease's initials, no unit
    assert head == (FURNITURE_FLAG,)


NOTATION_INTRO = (
    "Serum 25-hydroxyvitamin D [25(OH)D] and calcium were measured at baseline and at week 12. "
    "Patients were randomized to cholecalciferol or placebo."
)
NOTATION_ROWS = [
    [(60, "Table 2  Serum levels at week 12")],
    [(260, "Cholecalciferol"), (360, "Placebo")],
    [(70, "25(OH)D*"), (260, "45.9 (2.4)"), (360, "21.9 (0.8)")],
    [(70, "Calcium"), (260, "9.41 (0.31)"), (360, "9.38 (0.29)")],
]


def test_a_chemical_notation_defined_in_brackets_names_its_outcome_and_no_other(tmp_path: Path) -> None:
    """ "25-hydroxyvitamin D [25(OH)D]": a row labelled "25(OH)D*" is the vitamin D row (its name's
    compound word holds "vitamin", its last letter is the outcome's), never vitamin K's nor calcium's."""
    notation = _one_page(tmp_path / "notation.pdf", NOTATION_INTRO, NOTATION_ROWS, "Results are shown in Table 2.")
    arms = ("Cholecalciferol", "Placebo")
    [vitamin_d] = _flags_of(notation, [_entry("Vitamin D levels", "Placebo", mean=(21.9, "21.9 (0.8)"))], arms)
    assert vitamin_d == ()
    [vitamin_k] = _flags_of(notation, [_entry("Vitamin K levels", "Placebo", mean=(21.9, "21.9 (0.8)"))], arms)
    [calcium] = _flags_of(notation, [_entry("Calcium", "Placebo", mean=(21.9, "21.9 (0.8)"))], arms)
    for flags in (vitamin_k, calcium):
        assert flags and "the quoted row is '25(OH)D" in flags[0], flags
    [from_calcium] = _flags_of(notation, [_entry("Vitamin D levels", "Placebo", mean=(9.38, "9.38 (0.29)"))], arms)
    assert from_calcium and "the quoted row is 'Calcium'" in from_calcium[0], from_calcium


PROSE_INTRO = (
    "Patients undergoing stone removal were randomized to flexible ureteroscopy (F-URS) or laparoscopic "
    "ureterolithotomy (LU). Reminder systems lowered readmissions in earlier trials [7-10]."
)
PROSE_TEXT = (
    "In all, 22 patients were treated with LU, and 20 patients were treated with F-URS. "
    "Two patients in the F-URS group had fever on the first day. "
    "By the third week, 40 patients had been in the LU group for a month. "
    "Five out of 24 women rated the booklet useful. "
    "Stone-free status was reached in 11 of 22 patients. "
    "Of the 62 patients screened, 50, 49, and 50 patients in groups H0, H1, and H2, respectively, completed the study."
)
STONES = ("Flexible ureteroscopy", "Laparoscopic ureterolithotomy")
DOSES = ("H2 (haloperidol 2 mg)", "H1 (haloperidol 1 mg)")


@pytest.fixture(scope="module")
def prose(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    return _one_page(tmp_path_factory.mktemp("prose") / "stones.pdf", PROSE_INTRO, [], PROSE_TEXT)


def test_a_size_from_a_citation_from_people_who_had_something_or_from_another_count_is_flagged(
    prose: ParsedDocument,
) -> None:
    """Where a group's size is printed decides what it is: a citation's "[7-10]" is another paper's,
    "Two patients ... had fever" counts a part of a group, "Five out of 24 women rated the booklet"
    is the total of that count (about another outcome); "40 patients had been in the LU group" is
    still a group."""
    fu, lu = STONES
    [cited, fever, been, rated, own] = _flags_of(
        prose,
        [
            _entry("stone-free status", lu, n=(10, "lowered readmissions in earlier trials [7-10]")),
            _entry("stone-free status", fu, n=(2, "Two patients in the F-URS group had fever")),
            _entry("stone-free status", lu, n=(40, "40 patients had been in the LU group")),
            _entry("stone-free status", fu, total=(24, "Five out of 24 women rated the booklet useful")),
            _entry("stone-free status", lu, total=(22, "Stone-free status was reached in 11 of 22 patients")),
        ],
        arms=STONES,
    )
    assert cited == ("the number is a citation ('[7-10]'): another paper's, not a finding",)
    assert fever == (
        "the quoted sentence counts the people who had something ('Two patients in the F-URS group had'), "
        "not the group's size",
    )
    assert been == ()
    assert rated == ("the quoted sentence does not name the outcome 'stone-free status'",)
    assert own == ()


def test_a_hyphenated_abbreviation_and_a_respectively_list_name_their_arms(prose: ParsedDocument) -> None:
    """ "F-URS" names flexible ureteroscopy whole (its part "URS" would name both arms' "uretero-"),
    so "20 patients were treated with F-URS" is not the LU arm's; in "50, 49, and 50 patients in
    groups H0, H1, and H2, respectively" the position decides, not the nearest group's name."""
    fu, lu = STONES
    quote = "22 patients were treated with LU, and 20 patients were treated with F-URS"
    [wrong] = _flags_of(prose, [_entry("stone-free status", lu, n=(20, quote))], arms=STONES)
    [right] = _flags_of(prose, [_entry("stone-free status", fu, n=(20, quote))], arms=STONES)
    assert wrong == (f"the quoted sentence gives this number for '{fu}', not for '{lu}'",)
    assert right == ()
    listed = "50, 49, and 50 patients in groups H0, H1, and H2, respectively"
    h2, h1 = DOSES
    [third, second] = _flags_of(
        prose,
        [_entry("completion", h2, total=(50, listed)), _entry("completion", h1, total=(49, listed))],
        arms=DOSES,
    )
    assert third == () and second == ()
    [not_first] = _flags_of(prose, [_entry("completion", h1, total=(50, listed))], arms=DOSES)
    assert not_first and "respectively" in not_first[0], not_first


def test_a_size_printed_in_words_is_one_group_for_every_arm_only_where_the_order_was_randomized(
    tmp_path: Path,
) -> None:
    """ "Ten healthy volunteers" grounds an n of 10 (a count in words). Given to both arms, it is one
    group's size, unless each volunteer received every arm: a crossover, here said by "the order of
    the four sessions was randomly assigned" (not by "messages were sent in random order")."""
    arms = ("Quinine infusion", "Saline infusion")
    sentence = "Ten healthy volunteers were enrolled and glycemia was measured every 30 minutes."
    intro = "We compared quinine infusion with saline infusion."
    crossover = _one_page(
        tmp_path / "crossover.pdf",
        f"{intro} The order of the four sessions was randomly assigned.",
        [],
        sentence,
    )
    parallel = _one_page(tmp_path / "parallel.pdf", f"{intro} Messages were sent in random order.", [], sentence)
    entries = [_entry("glycemia", arm, n=(10, "Ten healthy volunteers were enrolled")) for arm in arms]
    assert _flags_of(crossover, entries, arms) == [(), ()]
    for flags in _flags_of(parallel, entries, arms):
        assert flags and "from one printed number" in flags[0], flags
    eleven = _grounded(crossover, [_entry("glycemia", arms[0], n=(11, "Ten healthy volunteers were enrolled"))], arms)
    assert eleven["outcomes.1.n"].reason == "value not in quote"
