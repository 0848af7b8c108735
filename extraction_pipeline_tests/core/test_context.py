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
    import pymupdf

    path: Path = tmp_path_factory.mktemp("context") / "ponv.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 56, 539, 120), INTRO, fontsize=10, fontname="helv")
        y = 150.0
        for row in TABLE_ROWS:
            for x, text in row:
                page.insert_text((x, y), text, fontsize=9, fontname="helv")
            y += 14
        page.insert_textbox(pymupdf.Rect(56, y + 20, 539, y + 80), SENTENCE_TEXT, fontsize=10, fontname="helv")
        doc.save(path)
    result = parse_pdf(path, EngineOptions(table_detection="off"))
    return ParsedDocument("ponv", result["pages_text"], layout=result["layout"])


def _grounded(paper: ParsedDocument, entries: list[dict[str, Any]]) -> GroundedFields:
    answer = {
        "arms": [
            {"arm_name": {"value": arm, "quote": "randomized to haloperidol 2 mg or placebo"}}
            for arm in (DRUG, PLACEBO)
        ],
        "outcomes": entries,
    }
    return ground_output(RCT_TEMPLATE, parse_answer(json.dumps(answer), RCT_TEMPLATE), paper)


def _entry(outcome: str, arm: str, timepoint: str = "", **numbers: tuple[int, str]) -> dict[str, Any]:
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
    """Each number alone fits (both rows name the outcome); together they are two rows."""
    outcome = "postoperative nausea and vomiting"
    fields = _grounded(
        paper,
        [
            _entry(outcome, DRUG, events=(5, "Nausea 15 (30 %) 5 (10 %)")),
            _entry(outcome, PLACEBO, events=(17, "Total PONV 17 (34 %) 8 (16 %)")),
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
