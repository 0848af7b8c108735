"""Where a number sits in the paper: its table cell's row label, column headers and headings, or
its sentence and clause.

Read from the page's line boxes (``ParsedDocument.layout``): trial tables rarely have ruling
lines, but every cell is a line of its own on the page, so a row is the lines level with the
number, its label the nearest words to its left, and its column headers the words above it in
its column. A page without boxes (a parse cached before they were kept) or a number in running
text gives its sentence instead. Pure geometry and text: no claim is judged here (see
``context``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Any

from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.number_words import number_words

TABLE = "table"
SENTENCE = "sentence"

NUMBER = re.compile(r"(?<![\w.])[-−–]?\d+(?:,\d{3})*(?:\.\d+)?(?![\d])")
LETTER = re.compile(r"[A-Za-zα-ωΑ-Ω]")
CAPTION = re.compile(r"^\s*(?:Table|TABLE)\s+[0-9IVX]+\b")
# A line is running text (not a cell) when it is this long and mostly words.
PROSE_CHARS = 70
# Sentence ends: a full stop, question or exclamation mark before a space and a capital, or a
# blank line; never the point of "vs." or "e.g." (checked by the word before it).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])|\n\s*\n")
# A line this short that ends without a hyphen or comma ends its text: a heading, a table cell, a
# caption (running text wraps at the column's width).
SHORT_LINE = 40
NOT_AN_END = re.compile(r"(?:\b(?:vs|e\.g|i\.e|al|Fig|Figs|Ref|No|approx|ca)\.)$", re.IGNORECASE)
GROUP_LINE_WORDS = 8  # a group's title is a few words; a longer line is running text
TIME_GAP = 8  # line heights between two time rows of one table (a block of rows between them is usual)
BARE_NUMBER = re.compile(r"^\s*\d{1,3}\s*$")
TIME_HEADER = re.compile(r"^\s*(?:time(?: point)?|hours?|days?|weeks?|months?|years?|visits?)\b", re.IGNORECASE)
# An empty cell's mark: "—", "-", "NA", "N/A", "NR", "n.s."
PLACEHOLDER = re.compile(r"^\s*(?:[-–—]+|N/?A|NR|NE|n\.?s\.?|ND)\s*$", re.IGNORECASE)
# A line starting this far left of a cell and alone on its row is a heading reaching over it.
SPANNING = 20
# How far right of the first row label an indented row's label may start.
ROW_INDENT = 25
# A table's legend says how its values are given ("Data are expressed as mean (standard error)").
LEGEND = re.compile(
    r"\b(?:data|values|results|figures|numbers)\s+(?:are|were)\s+(?:expressed|shown|presented|given|reported|displayed)"
    r"\s+as\b(?:[^.]|\.(?!\s|$))*",  # to the sentence's end: "mean ± S.E.M." keeps its abbreviation
    re.IGNORECASE,
)
CLAUSE_BREAK = re.compile(
    r";|,\s+(?:but|whereas|while)\s|\s(?:and|versus|vs\.?|compared (?:with|to)|whereas|while)\s", re.I
)


@dataclass(frozen=True)
class Place:
    """The context a reader sees around one printed number."""

    kind: str  # TABLE or SENTENCE
    row_label: str = ""  # the words left of the number in its row ("Vomiting")
    headings: tuple[str, ...] = ()  # label-only rows above it, nearest first ("Late time (2–24 h)")
    columns: tuple[str, ...] = ()  # the header lines above it in its column, top first ("Group H0", "(n = 50)")
    caption: str = ""  # the table's "Table N ..." line
    legend: str = ""  # the page's "values are shown as ..." sentences (how the table's values are given)
    sentence: str = ""  # running text: the sentence holding the number
    clause: str = ""  # the part of the sentence between breaks ("versus", ";", ...)
    before: str = ""  # running text: the sentence before
    offset: int = 0  # running text: where the number starts in ``sentence``
    clause_start: int = 0  # where ``clause`` starts in ``sentence``
    printed: str = ""  # the number as printed with what follows it on its line ("23 (46 %)")
    printed_before: str = ""  # what precedes the number on its line ("11/" of "11/49")
    groups: tuple[str, ...] = ()  # table rows that span it alone, nearest first ("Smokers (placebo, n = 28)")
    beside: tuple[str, ...] = ()  # the column headers of the row's other cells ("Mean (SD)", "P value")
    row_time: str = ""  # a row labelled by a bare number under a time header: "Weeks 12"
    column_times: tuple[str, ...] = ()  # every time that header's column prints: ("Weeks 0", "Weeks 12", ...)
    table_rows: tuple[str, ...] = ()  # the labels of the table's other rows with numbers ("Body weight (kg)")
    at: int = -1  # where the number starts in its page's text: one printed number, however often quoted


@dataclass(frozen=True)
class _Line:
    x0: float
    y0: float
    x1: float
    y1: float
    start: int
    end: int
    text: str

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 1.0)

    def level_with(self, other: _Line) -> bool:
        overlap = min(self.y1, other.y1) - max(self.y0, other.y0)
        return overlap >= 0.5 * min(self.height, other.height)

    def spans_x_of(self, other: _Line) -> bool:
        return min(self.x1, other.x1) - max(self.x0, other.x0) > 0


class _Lines:
    """A page's lines, in the page's order, with each line's row (the lines level with it) worked
    out once: every reading of a cell asks for rows, and a page is read for many numbers."""

    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        self._rows: dict[int, list[_Line]] = {}

    def __iter__(self) -> Iterator[_Line]:
        return iter(self.lines)

    def level(self, line: _Line) -> list[_Line]:
        """The lines level with ``line``, itself included, in the page's order."""
        row = self._rows.get(id(line))
        if row is None:
            row = self._rows[id(line)] = [other for other in self.lines if other.level_with(line)]
        return row

    def level_others(self, line: _Line) -> list[_Line]:
        return [other for other in self.level(line) if other is not line]

    def above(self, line: _Line, other: _Line) -> bool:
        """``line`` ends above ``other`` (by half a line at most) and is not on its row."""
        return line.y1 <= other.y0 + 0.5 * min(line.height, other.height) and not any(
            row is line for row in self.level(other)
        )

    @cached_property
    def legend(self) -> str:
        """The page's sentences saying how values are given ("Results are shown as mean ± SD"),
        read across line breaks."""
        flat = " ".join(" ".join(line.text.split()) for line in self.lines)
        return " ".join(dict.fromkeys(match.group() for match in LEGEND.finditer(flat)))  # each sentence once

    def above_from(self, line: _Line, top: float) -> list[_Line]:
        """The lines above ``line`` that start at ``top`` or below it, nearest first."""
        return sorted(
            (other for other in self.lines if other.y0 >= top and self.above(other, line)), key=lambda o: -o.y0
        )


def as_number(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace("−", "-").replace("–", "-").replace(",", ""))
    except InvalidOperation:
        return None


# A label that is a name with digits in it: "IP-10", "IL-2", "CD4" (a cell of numbers starts with one).
NAMED = re.compile(r"^\s*[A-Za-zα-ωΑ-Ω]{2}")


def numeric(text: str) -> bool:
    """A cell of numbers ("15 (30 %)", "0.04"; "(n = 50)" is a header and "IL-2" a label, not numeric)."""
    letters = len(LETTER.findall(text))
    return bool(NUMBER.search(text)) and letters <= 2 and "n =" not in text.replace(" ", " ") and not NAMED.match(text)


def places_of(parsed: ParsedDocument, page: int, start: int, end: int, value: object) -> list[Place]:
    """The places of ``value`` printed within ``start``–``end`` of ``page``'s text (a quote can print
    it twice: two arms with the same n); empty when it is not printed there as a number."""
    if not 1 <= page <= len(parsed.pages_text):
        return []
    text = parsed.pages_text[page - 1]
    return [_place_at(parsed, page, at) for at in _numbers_at(text, start, end, value)]


def _place_at(parsed: ParsedDocument, page: int, at: int) -> Place:
    """The place of the number printed at ``at`` of ``page``'s text, read once per document."""
    text = parsed.pages_text[page - 1]
    return parsed.derived(("place", page, at), lambda: _read_place(_page_lines(parsed, page), text, at))


def _read_place(lines: _Lines, text: str, at: int) -> Place:
    place = _read_context(lines, text, at)
    line_end = text.find("\n", at)
    line_start = text.rfind("\n", 0, at) + 1
    return replace(
        place,
        at=at,
        printed=text[at : line_end if 0 <= line_end < at + 40 else at + 40],
        printed_before=text[max(line_start, at - 20) : at],
    )


def _page_lines(parsed: ParsedDocument, page: int) -> _Lines:
    def build() -> _Lines:
        text = parsed.pages_text[page - 1]
        boxes = parsed.layout[page - 1] if page - 1 < len(parsed.layout) else []
        return _Lines(
            [
                _Line(box[0], box[1], box[2], box[3], int(box[4]), int(box[5]), text[int(box[4]) : int(box[5])])
                for box in boxes
            ]
        )

    return parsed.derived(("lines", page), build)


def _read_context(lines: _Lines, text: str, at: int) -> Place:
    line = next((line for line in lines if line.start <= at < line.end), None)
    if line is not None and _cell_like(line, at):
        table = _table_place(lines, line, at)
        if table is not None:
            return table
    if line is not None and _size_header(line, lines):
        header = _size_header_place(lines, line)
        if header is not None:
            return header
    return _sentence_place(text, at)


def _size_header(line: _Line, lines: _Lines) -> bool:
    """A table's column header printing a group's size ("Palmvitee, n = 30", "(n = 50)"): short,
    beside other columns' short headers (not a line of the page's other text column), with cells
    of numbers under it."""
    if len(line.text.strip()) > GROUP_HEADER_CHARS or not GROUP_SIZE.search(line.text):
        return False
    level = lines.level_others(line)
    if not level or any(len(other.text.strip()) > GROUP_HEADER_CHARS for other in level):
        return False
    return any(
        numeric(other.text) and other.spans_x_of(line) and 0 < other.y0 - line.y1 < 6 * line.height for other in lines
    )


def _size_header_place(lines: _Lines, header: _Line) -> Place | None:
    """A size printed in a column's header: the column's headers are it and the lines above it,
    with a header row centred over pairs of columns ("Nonsmokers | Smokers")."""
    caption_line = _caption_above(lines, header)
    if caption_line is None:
        return None
    top = caption_line.y1
    headers = [*_column_headers(lines, header, top)]
    spanning = _spanning_header(lines, header, [header], top)
    if spanning is not None and " ".join(spanning.text.split()) not in headers:
        headers.insert(0, " ".join(spanning.text.split()))
    return Place(
        TABLE,
        columns=(*headers, " ".join(header.text.split())),
        caption=_caption_text(lines, caption_line),
        legend=lines.legend,
    )


def _numbers_at(text: str, start: int, end: int, value: object) -> list[int]:
    wanted = as_number(str(value))
    if wanted is None:
        return []
    found = []
    for match in NUMBER.finditer(text, max(start - 1, 0), min(end + 1, len(text))):
        number = as_number(match.group())
        if number is not None and abs(number) == abs(wanted):
            found.append(match.start())
    # A count printed in words ("Twelve adults"), where the digits are not printed.
    region = text[max(start - 1, 0) : min(end + 1, len(text))]
    found += [max(start - 1, 0) + at for at, _end, number in number_words(region) if number == wanted]
    return sorted(found)


def _cell_like(line: _Line, at: int) -> bool:
    """A table cell: a line of numbers, or a short label followed by numbers only ("Vomiting 7
    (14 %) 3 (6 %)"). A line with words after its number is running text."""
    if numeric(line.text):
        return True
    after = line.text[at - line.start :]
    label = _leading_words(line.text[: at - line.start])
    return bool(label) and len(label) < 60 and numeric(after) and len(NUMBER.findall(after)) >= 2


def _prose(line: _Line) -> bool:
    return len(line.text) >= PROSE_CHARS and len(LETTER.findall(line.text)) > len(line.text) / 2


def _table_place(lines: _Lines, cell: _Line, at: int) -> Place | None:
    row = [line for line in lines.level(cell) if not _prose(line)]
    left = sorted((line for line in row if line.x1 <= cell.x0 + 1), key=lambda line: -line.x1)
    label = _leading_words(cell.text[: at - cell.start])
    if not label:
        label = next((line.text.strip() for line in left if not numeric(line.text)), "")
    others = [line for line in row if line is not cell and numeric(line.text)]
    if not others and not label:
        return None  # a number alone on its line, with no row: not read as a table
    if not others and not left and not numeric(cell.text):
        return None  # a short line of words with a number in it: running text
    caption_line = _caption_above(lines, cell)
    top = caption_line.y1 if caption_line is not None else cell.y0 - 400
    columns = _column_headers(lines, cell, top)
    label_x = min((line.x0 for line in left), default=cell.x0)
    caption = _caption_lines(lines, caption_line) if caption_line is not None else []
    headings = _headings(lines, cell, label_x, top, caption)
    stub = _row_group(lines, cell, left, top)
    return Place(
        TABLE,
        row_label=label,
        headings=(stub, *headings) if stub else headings,
        groups=_groups(lines, cell, top, caption),
        beside=tuple(" ".join(_column_headers(lines, other, top)) for other in others),
        **_row_times(lines, others, top),
        columns=columns,
        caption=_caption_text(lines, caption_line) if caption_line is not None else "",
        legend=lines.legend,
        table_rows=_row_labels(lines, cell, label_x, top, _indented(cell, left)),
    )


def _indented(cell: _Line, left: list[_Line]) -> bool:
    """Is the number's row label printed indented (a leading space: a category under a row)?"""
    label_line = next((line for line in left if not numeric(line.text)), cell)
    return label_line.text[:1].isspace()


def _row_labels(lines: _Lines, cell: _Line, label_x: float, top: float, indented: bool) -> tuple[str, ...]:
    """The labels of the rows with numbers in the number's table (down to the next caption), its
    own row's left out: "Body mass index" beside "Body weight"."""
    below = [
        line.y0 for line in lines if CAPTION.match(line.text) and line.y0 > cell.y1 and _same_page_column(line, cell)
    ]
    bottom = min(below, default=float("inf"))
    on_its_row = {id(line) for line in lines.level(cell)}
    found = []
    for line in lines:
        if not top <= line.y0 < bottom or id(line) in on_its_row or abs(line.x0 - label_x) > ROW_INDENT:
            continue
        if numeric(line.text) or _prose(line):
            continue
        if lines.above(line, cell) and (line.x0 < label_x - 3 or (indented and not line.text[:1].isspace())):
            continue  # a row the number's indented row may belong to ("BMI" over "  > 30 kg/m2")
        label = _leading_words(line.text)
        with_numbers = NUMBER.search(line.text[len(label) :]) if label else None
        if not label or not (with_numbers or any(o.x0 > line.x1 and numeric(o.text) for o in lines.level(line))):
            continue
        found.append(label)
    return tuple(found)


def _row_times(lines: _Lines, others: list[_Line], top: float) -> dict[str, Any]:
    """A row labelled by a bare number in a column headed by a time unit ("Weeks": 0, 12, 24):
    its time, and every time that column prints."""
    for other in others:
        if not BARE_NUMBER.match(other.text):
            continue
        header = " ".join(_column_headers(lines, other, top))
        if not TIME_HEADER.search(header):
            continue
        printed = sorted({int(line.text.strip()) for line in _time_column(lines, other, top)})
        return {
            "row_time": f"{header} {other.text.strip()}",
            "column_times": tuple(f"{header} {number}" for number in printed),
        }
    return {}


def _time_column(lines: _Lines, cell: _Line, top: float) -> list[_Line]:
    """The bare numbers of ``cell``'s column, down from the header while they follow each other
    (a gap of a few rows ends the table: a page number at the foot is no time)."""
    column = sorted(
        (line for line in lines if line.y0 >= top and line.spans_x_of(cell) and BARE_NUMBER.match(line.text)),
        key=lambda line: line.y0,
    )
    start = column.index(cell) if cell in column else 0
    kept = [column[start]] if column else []
    for line in column[start + 1 :]:  # below the row
        if line.y0 - kept[-1].y1 > TIME_GAP * line.height:
            break
        kept.append(line)
    for line in reversed(column[:start]):  # above it
        if kept[0].y0 - line.y1 > TIME_GAP * line.height:
            break
        kept.insert(0, line)
    return kept


def _caption_text(lines: _Lines, caption: _Line) -> str:
    """The caption with the lines it wraps onto."""
    return " ".join(" ".join(part.text.split()) for part in _caption_lines(lines, caption))


def _caption_lines(lines: _Lines, caption: _Line) -> list[_Line]:
    """The caption's line and the lines it wraps onto (directly below, starting where it starts)."""
    parts, last = [caption], caption
    for line in sorted((line for line in lines if line.y0 > caption.y0), key=lambda line: line.y0):
        if abs(line.x0 - caption.x0) <= 2 and 0 <= line.y0 - last.y1 <= 0.8 * last.height and not numeric(line.text):
            parts.append(line)
            last = line
        elif line.y0 - last.y1 > 0.8 * last.height:
            break
    return parts


def _row_group(lines: _Lines, cell: _Line, left: list[_Line], top: float) -> str:
    """A two-level row header: the label in a column left of the row's own label that the row is
    printed under ("Upper limb" over the rows "Drug A" and "Placebo")."""
    labels = [line for line in left if not numeric(line.text)]
    if not labels:
        return ""
    own = labels[0]
    above = [
        line
        for line in lines
        if line.y0 >= top
        and line.x1 <= own.x0 + 1
        and line.y0 <= cell.y0 + 1
        and not numeric(line.text)
        and not _prose(line)
        and line is not own
        # a row's label (numbers level with it), not a caption's wrapped line beside the table
        and any(numeric(other.text) and other.x0 > own.x0 for other in lines.level(line))
    ]
    return " ".join(max(above, key=lambda line: line.y0).text.split()) if above else ""


def _leading_words(text: str) -> str:
    """The row label printed on the number's own line, before its first number ("Vomiting 7 (14 %)")."""
    first = NUMBER.search(text)
    head = text[: first.start()] if first else text
    return " ".join(head.split()) if LETTER.search(head) else ""


def _caption_above(lines: _Lines, cell: _Line) -> _Line | None:
    captions = [
        line for line in lines if CAPTION.match(line.text) and line.y1 <= cell.y0 and _same_page_column(line, cell)
    ]
    # The lowest caption above; of two side by side (a two-column page), the one starting nearest
    # left of the number.
    return max(captions, key=lambda line: (round(line.y0 / 4), line.x0 <= cell.x0 + 1, line.x0), default=None)


def _same_page_column(line: _Line, cell: _Line) -> bool:
    """A caption belongs to the table below it in the same column of a two-column page."""
    return line.x0 <= cell.x1


def _column_headers(lines: _Lines, cell: _Line, top: float) -> tuple[str, ...]:
    """The lines of words above the number in its column, below the caption (top first)."""
    above = sorted(
        (line for line in lines if line.y0 >= top and lines.above(line, cell) and line.spans_x_of(cell)),
        key=lambda line: -line.y0,
    )
    headers: list[_Line] = []
    for line in above:
        if _prose(line) or len(line.text.split()) > 6:
            break  # running text above the table
        if not headers and line.x0 < cell.x0 - SPANNING and not lines.level_others(line):
            continue  # a heading row alone on its line ("4-month follow-up"), reaching into this column
        if headers and headers[-1].y0 - line.y1 > 4.5 * line.height:
            break  # a gap: the header ended above
        if numeric(line.text) or PLACEHOLDER.match(line.text):
            if headers:
                # The cells of an earlier section (or another table) above this section's heading:
                # the arms are named once, at the top, by headers that print their sizes.
                headers += _arm_headers(lines, cell, line, top)
                break
            continue  # a cell of an earlier row in the same column (or its "—", "NA")
        headers.append(line)
    spanning = _spanning_header(lines, cell, headers, top)
    if spanning is not None:
        headers = sorted([*headers, spanning], key=lambda line: -line.y0)
    return tuple(" ".join(line.text.split()) for line in reversed(headers))


GROUP_SIZE = re.compile(r"\b[nN]\s*=\s*\d+")
GROUP_HEADER_CHARS = 40  # a column's header with a group's size, not a sentence


def _arm_headers(lines: _Lines, cell: _Line, below: _Line, top: float) -> list[_Line]:
    """The header over ``cell``'s column at the top of its table, above ``below``, when it prints a
    group's size ("Palmvitee, n = 29"): the arm of every section under it. Empty when none."""
    sized = [
        line
        for line in lines
        if line.y0 >= top and lines.above(line, below) and line.spans_x_of(cell) and GROUP_SIZE.search(line.text)
    ]
    return [min(sized, key=lambda line: line.y0)] if sized else []


def _spanning_header(lines: _Lines, cell: _Line, headers: list[_Line], top: float) -> _Line | None:
    """A header row of fewer cells than the table has columns ("Nonsmokers | Smokers" over
    "Placebo | Active | Placebo | Active"), each centred over its columns so that a narrow word
    need not reach over this one: the cell whose centre is nearest the column's."""
    if not headers:
        return None
    # The column's own header: the nearest one in a row of column headers (a section's heading
    # alone on its line, "Tocotrienol (ng/ml)", is no column's).
    own = next((h for h in headers if lines.level_others(h)), headers[0])
    columns = lines.level(own)
    left, right = min(line.x0 for line in columns), max(line.x1 for line in columns)
    centre = (cell.x0 + cell.x1) / 2
    for line in lines.above_from(own, top):
        if own.y0 - line.y1 > 4.5 * line.height:
            return None  # past the header
        row = [o for o in lines.level(line) if LETTER.search(o.text) and not numeric(o.text)]
        if line in headers or any(o.spans_x_of(cell) for o in row) or not 2 <= len(row) < len(columns):
            continue
        if any(o.x0 < left - SPANNING or o.x1 > right + SPANNING for o in row):
            continue  # wider than this table's header: the table beside it
        if any(_prose(o) or len(o.text.split()) > 6 for o in row):
            return None
        return min(row, key=lambda o: abs((o.x0 + o.x1) / 2 - centre))
    return None


def _headings(lines: _Lines, cell: _Line, label_x: float, top: float, caption: list[_Line]) -> tuple[str, ...]:
    """Rows above with a label and no numbers ("Late time (2–24 h)", "Surgical type"), nearest
    first; the caption's title wrapped onto its own line is none."""
    found = []
    for line in lines.above_from(cell, top):
        if line in caption:
            continue
        if line.x0 > cell.x0 - 1 or abs(line.x0 - label_x) > 40 or numeric(line.text) or _prose(line):
            continue
        level = lines.level_others(line)
        if any(numeric(other.text) and other.x0 > line.x1 and other.x0 < cell.x1 + 200 for other in level):
            continue  # a row with numbers of its own: an earlier row, not a heading
        found.append(" ".join(line.text.split()))
    return tuple(found)


def _groups(lines: _Lines, cell: _Line, top: float, caption: list[_Line]) -> tuple[str, ...]:
    """Lines above the number alone on their row, across the table ("Non-smokers (active, n = 29)"
    centred over its rows): the groups a table's rows are printed under, nearest first. Only short
    lines over the row's own width count: the other column of a two-column page is no group, nor
    is the caption's title wrapped onto a line of its own."""
    row = lines.level(cell)
    left, right = min(line.x0 for line in row), max(line.x1 for line in row)
    found = []
    for line in lines.above_from(cell, top):
        if line in caption:
            continue
        if numeric(line.text) or _prose(line) or not LETTER.search(line.text) or line.x0 > cell.x1:
            continue
        if line.x1 < left or line.x0 > right or len(line.text.split()) > GROUP_LINE_WORDS:
            continue
        if lines.level_others(line):
            continue
        found.append(" ".join(line.text.split()))
    return tuple(found)


def _short_line_ends(text: str) -> list[int]:
    """Where a short line ends: the next line starts a new sentence."""
    ends, offset = [], 0
    for line in text.split("\n"):
        offset += len(line) + 1
        stripped = line.strip()
        if stripped and len(stripped) < SHORT_LINE and not stripped.endswith(("-", ",", "–")):
            ends.append(offset)
    return ends


def _sentence_place(text: str, at: int) -> Place:
    starts = [0] + [m.end() for m in SENTENCE_END.finditer(text) if not NOT_AN_END.search(text[: m.start()][-8:])]
    starts += _short_line_ends(text)
    starts = sorted(set(starts))
    begin = max(s for s in starts if s <= at)
    later = [s for s in starts if s > at]
    finish = later[0] if later else len(text)
    # The sentence before: skipping lines of numbers only (the cells above in a column of cells).
    earlier = [s for s in starts if s < begin]
    previous = earlier[-1] if earlier else begin
    while earlier and not LETTER.search(text[previous:begin]):
        earlier.pop()
        previous = earlier[-1] if earlier else 0
    if earlier and len(LETTER.findall(text[previous:begin])) < 3 and len(earlier) > 1:
        previous = earlier[-2]
    sentence = " ".join(text[begin:at].split())
    sentence += " " if sentence and text[at - 1 : at].isspace() else ""
    number_at = len(sentence)
    sentence += " ".join(text[at:finish].split())
    # The clause: between the breaks ("versus", "and", ";", ...) around the number.
    cuts = [0] + [m.start() for m in CLAUSE_BREAK.finditer(sentence)] + [len(sentence)]
    low = max(c for c in cuts if c <= number_at)
    high = min((c for c in cuts if c > number_at), default=len(sentence))
    return Place(
        SENTENCE,
        sentence=sentence,
        clause=sentence[low:high].strip(),
        clause_start=low,
        before=" ".join(text[previous:begin].split()),
        offset=number_at,
    )
