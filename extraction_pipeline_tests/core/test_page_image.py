"""The page image's highlight covers exactly the quoted characters, on PDFs made with PyMuPDF: a
table set with letter spacing (each character its own PyMuPDF "word"), a cell whose one "word"
holds more than the quote, and a quote whose grounded span stops short of its closing bracket.
Each rectangle is compared with the characters' own boxes as PyMuPDF places them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from extraction_pipeline.core.review.page_image import HIGHLIGHT_FILL, Span, draw, highlight_lines

FONT_SIZE = 8
LETTER_SPACING = 2.5  # points after every character, as some journals set their tables
SPACED_Y, PLAIN_Y, ROW_Y = 100.0, 130.0, 160.0
ROW = ("Pain at rest (VAS)", "25.78±3.30 (19)", "31.02±4.12 (20)", "0.012")
COLUMNS = (56, 200, 300, 420)


def _write(path: Path) -> Path:
    """Line 1 letter-spaced ("Pain 25.78±3.30 (19)", one character at a time); line 2 set
    normally; line 3 a table row, one cell per column."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        x = 56.0
        for char in "Pain 25.78±3.30 (19)":
            page.insert_text((x, SPACED_Y), char, fontsize=FONT_SIZE, fontname="helv")
            x += pymupdf.get_text_length(char, "helv", FONT_SIZE) + LETTER_SPACING
        page.insert_text((56, PLAIN_Y), "Sleep 62.30±12.40 (18) and more", fontsize=FONT_SIZE, fontname="helv")
        for x, cell in zip(COLUMNS, ROW, strict=True):
            page.insert_text((x, ROW_Y), cell, fontsize=FONT_SIZE, fontname="helv")
        doc.save(path)
    return path


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("page-image") / "letter-spaced.pdf")


@pytest.fixture
def page(pdf: Path) -> Iterator[Any]:
    with pymupdf.open(pdf) as doc:
        yield doc[0]


def _chars_at(page: Any, baseline: float) -> list[tuple[str, float, float]]:
    """(character, x0, x1) of the line on ``baseline``, spaces left out, as PyMuPDF places them."""
    found = []
    for block in page.get_text("rawdict")["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                for char in span["chars"]:
                    if abs(char["origin"][1] - baseline) < 0.5 and char["c"].strip():
                        found.append((char["c"], char["bbox"][0], char["bbox"][2]))
    return sorted(found, key=lambda c: c[1])


def _extent(chars: list[tuple[str, float, float]], quoted: str) -> tuple[float, float]:
    """The x-range of ``quoted``'s first occurrence among ``chars`` (spaces ignored)."""
    text = "".join(c for c, _x0, _x1 in chars)
    at = text.index(quoted.replace(" ", ""))
    covered = chars[at : at + len(quoted.replace(" ", ""))]
    return covered[0][1], covered[-1][2]


def _text_span(page: Any, quoted: str) -> Span:
    start = page.get_text("text").index(quoted)
    return Span("text", start, start + len(quoted), quoted)


def test_a_letter_spaced_table_is_highlighted_over_its_quoted_characters_only(page: Any) -> None:
    words = [word[4] for word in page.get_text("words")]
    assert words[:6] == ["P", "a", "i", "n", "2", "5"]  # one "word" per character
    chars = _chars_at(page, SPACED_Y)
    [(box, text)] = highlight_lines(page, Span("table 1", 0, 10, "25.78±3.30"))
    assert (box[0], box[2]) == pytest.approx(_extent(chars, "25.78±3.30"))
    assert box[2] < _extent(chars, "(")[0]  # nothing of what follows: "(19)" is not covered
    assert text.replace(" ", "") == "25.78±3.30"
    # A quote that starts mid-line and stops mid-value: its characters, none before or after.
    [(part, _text)] = highlight_lines(page, Span("table 1", 0, 7, "n 25.78"))
    assert (part[0], part[2]) == pytest.approx(_extent(chars, "n25.78"))


def test_a_quote_inside_one_word_covers_the_quote_not_the_word(page: Any) -> None:
    chars = _chars_at(page, PLAIN_Y)
    assert "62.30±12.40" in [word[4] for word in page.get_text("words")]  # one word holds more
    for span in (Span("table 1", 0, 5, "62.30"), _text_span(page, "62.30")):
        [(box, text)] = highlight_lines(page, span)
        assert (box[0], box[2]) == pytest.approx(_extent(chars, "62.30")), span
        assert box[2] < _extent(chars, "±")[0] + 0.01 and text == "62.30"


def test_the_drawn_highlight_stops_where_the_quote_stops(pdf: Path, page: Any) -> None:
    zoom = 4.0
    drawn = draw(pdf, 1, _text_span(page, "62.30"), zoom)
    pixmap = pymupdf.Pixmap(drawn.png)
    chars = _chars_at(page, PLAIN_Y)
    fill = [round(255 * (1 - 0.45 * (1 - c))) for c in HIGHLIGHT_FILL]  # the fill over white paper

    def highlighted(x0: float, x1: float) -> int:
        """Pixels of the fill's colour across [x0, x1] points, at the line's middle height."""
        y = round((PLAIN_Y - FONT_SIZE / 3) * zoom)
        return sum(
            1
            for x in range(round(x0 * zoom), round(x1 * zoom))
            if all(abs(a - b) <= 12 for a, b in zip(pixmap.pixel(x, y), fill, strict=False))
        )

    quoted, after = _extent(chars, "62.30"), _extent(chars, "12.40")
    assert highlighted(*quoted) > 10 and highlighted(*after) == 0


def test_an_opened_bracket_is_closed_and_each_cell_of_a_row_is_a_part_with_its_text(page: Any) -> None:
    # Grounding stops a span at its last letter or digit: "(18" of "(18)". The ")" is the quote's.
    chars = _chars_at(page, PLAIN_Y)
    [(box, text)] = highlight_lines(page, _text_span(page, "62.30±12.40 (18"))
    assert (box[0], box[2]) == pytest.approx(_extent(chars, "62.30±12.40 (18)")) and text == "62.30±12.40 (18)"
    spaced = _chars_at(page, SPACED_Y)
    [(box, _text)] = highlight_lines(page, Span("table 1", 0, 3, "(19"))
    assert (box[0], box[2]) == pytest.approx(_extent(spaced, "(19)"))
    # A table row quoted whole: one part per cell (a viewer finds the value's part by its text).
    row = "\t".join(ROW)
    parts = highlight_lines(page, Span("table 1", 0, len(row), row))
    assert [text for _box, text in parts] == list(ROW)
    cells = _chars_at(page, ROW_Y)
    assert [(box[0], box[2]) for box, _text in parts] == [pytest.approx(_extent(cells, cell)) for cell in ROW]


def test_a_place_of_several_cells_highlights_those_cells_only(page: Any) -> None:
    """An outcome printed as a column is its cells in every row, not the text between them."""
    text = page.get_text("text")
    first, second = (text.index(cell) for cell in ("62.30±12.40", "31.02±4.12"))
    place = Span(
        "text", first, second + len("31.02±4.12"), text[first:second], ((first, first + 5), (second, second + 5))
    )
    parts = highlight_lines(page, place)
    assert [covered for _box, covered in parts] == ["62.30", "31.02"]  # not "and more", not row 3's label
