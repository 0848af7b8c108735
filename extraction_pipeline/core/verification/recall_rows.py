"""The rows of a paper's tables, for the recall check: a page's lines and their kinds (cells,
placeholders, text, group sizes), rows rebuilt from the text in the regions that start at a
table caption (label lines, then cell lines, or a row printed on one line), and rows of parsed
tables. A row, like a results sentence, is a ``Candidate``: a place that reports results.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from decimal import Decimal

from extraction_pipeline.core.pdf.furniture import furniture_key
from extraction_pipeline.core.pdf.model import ParsedTable
from extraction_pipeline.core.verification.recall_labels import FOOTNOTE_MARKS, LETTERS, clean_label, labelled
from extraction_pipeline.core.verification.recall_numbers import (
    NUMBER,
    P_VALUE,
    TIME_WORDS,
    PrintedNumber,
    numbers_in,
    reports_results,
)

CAPTION = re.compile(r"^\W{0,4}(?:Table|TABLE)\s*[-–.]?\s*([0-9]+|[IVX]+)\b\s*(?:[.:|\-–]|\s+[A-Z(\"“‘']|$)")
_BASELINE = re.compile(
    r"baseline|characteristic|demographic|at (?:entry|enrol|inclusion|randomi)|patient profile", re.IGNORECASE
)
_SAYS_RESULTS = re.compile(
    r"outcome|result|effect|change|complication|adverse|response|efficacy|endpoint|score|level|compar|differen|"
    r"after|follow|post",
    re.IGNORECASE,
)
# What a cell may hold besides numbers: range words, "vs", empty-cell marks, footnote marks.
_CELL_WORDS = re.compile(r"\b(?:to|vs|versus|ns|n\.s|na|nr|ne|n/a|nd|ci|and)\b\.?", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"^\s*(?:[-–—−]+|n/?a|nr|ns|n\.s\.|ne|nd|\.\.\.|…)\s*$", re.IGNORECASE)
_ARM_HEAD = re.compile(r"\(\s*[nN]\s*=\s*[\d,]+\s*\)\s*$")  # "Placebo (n=600)": an arm's column head
# A statistic's or the row labels' column head ("P value", "P-valuea", "Mean (SD)", "n (%)", "95% CI",
# "Outcome measure", "Characteristic"): never part of a row's label.
STATISTIC_HEAD = re.compile(
    r"^(?:p[- ]?values?|mean\s*(?:\(\s*sd\s*\)|±\s*sd)|n\s*\(\s*%\s*\)|(?:95\s*%\s*)?ci|effect size|"
    r"outcomes?(?: measures?)?|variables?|characteristics?|parameters?|"
    r"(?:mean )?differences?|(?:odds|risk|hazard) ratio|or|rr|hr)[a-e]?$",
    re.IGNORECASE,
)
_GROUP_SIZE_LINE = re.compile(r"^[\s(\[]*[nN]\s*[=:]\s*[\d,]+[\s)\]]*$")
MAX_LABEL_LINE = 90
PROSE_LINE = 40  # four lines in a row this long or longer: the table has ended, prose goes on

CELL, PLACEHOLDER, TEXT, GROUP_SIZE, BLANK, FOOTER = "cell", "placeholder", "text", "group size", "blank", "footer"


@dataclass(frozen=True)
class Line:
    """A line of a page's text, with its kind."""

    text: str
    start: int  # offsets in the page text
    end: int
    kind: str  # CELL, PLACEHOLDER, TEXT, GROUP_SIZE, BLANK (empty, or a running head) or FOOTER (a link)


@dataclass
class Candidate:
    """A place that reports results: a table row or a sentence."""

    page: int
    source: str
    start: int
    end: int
    label: str
    text: str
    numbers: list[PrintedNumber]
    prose: bool  # a sentence of the abstract or results text, not a table row
    results_table: bool = True  # False: a table whose caption does not say it holds results
    in_abstract: bool = False
    table: str = ""  # which table a row belongs to ("page:caption line"); "" for a sentence
    # The characters a place owns when it is not all of start..end: an outcome printed as a column
    # (recall_columns) owns its cells in every row.
    cells: tuple[tuple[int, int], ...] = ()
    shown: str = ""  # what such a place prints for its outcome, where the page prints it apart

    def holds(self, start: int, end: int) -> bool:
        """Is text from ``start`` to ``end`` (a quote) in this place?"""
        return any(overlaps((start, end), cell) for cell in self.cells or ((self.start, self.end),))


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Do two stretches of a text meet (an empty one at its start)?"""
    return a[0] < max(b[1], b[0] + 1) and b[0] < max(a[1], a[0] + 1)


_DIGIT = re.compile(r"\d")


def _line_kind(line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return BLANK
    if _GROUP_SIZE_LINE.match(stripped):
        return GROUP_SIZE
    if _PLACEHOLDER.match(stripped):
        return PLACEHOLDER
    if not _DIGIT.search(stripped):
        return TEXT
    # Footnote marks glued to a number ("2.75iii", "0.626b", "<0.001A") are not words.
    unglued = re.sub(r"(?<=\d)[a-zA-Z]{1,4}\b", " ", stripped)
    rest = FOOTNOTE_MARKS.sub(" ", _CELL_WORDS.sub(" ", NUMBER.sub(" ", unglued)))
    return TEXT if any(len(word) > 1 for word in re.findall(r"[^\W\d_]+", rest)) else CELL


# A line holding a link (a DOI, a web address) is a table's or a page's footer: the table has
# ended (once it has rows; above them, it is a note), and the line is no row's label.
_LINK = re.compile(r"\bdoi:\s*10\.|\bhttps?://|\bwww\.", re.IGNORECASE)


def page_lines(text: str, furniture_keys: set[str]) -> list[Line]:
    """A page's lines, each with its kind (a running head or footer is blank)."""
    found = []
    at = 0
    for raw in text.split("\n"):
        kind = BLANK if furniture_key(raw) in furniture_keys else FOOTER if _LINK.search(raw) else _line_kind(raw)
        found.append(Line(raw, at, at + len(raw), kind))
        at += len(raw) + 1
    return found


def _caption_is_results(caption: str) -> bool | None:
    """True for a results caption, False for a baseline one, None when it does not say."""
    if _BASELINE.search(caption) and not re.search(r"outcome|result|effect|change|after|follow", caption, re.I):
        return False
    return True if _SAYS_RESULTS.search(caption) else None


def table_rows(
    page: int, text: str, lines: list[Line], sizes: frozenset[Decimal]
) -> tuple[list[Candidate], list[Candidate], set[int]]:
    """Rows rebuilt from a page's text, in the regions that start at a table caption: the rows of
    results tables, the rows of baseline tables, and the indexes of the lines the tables took (the
    sentences leave those out)."""
    rows: list[Candidate] = []
    baseline: list[Candidate] = []
    taken: set[int] = set()
    captions = [i for i, line in enumerate(lines) if CAPTION.match(line.text)]
    for number, first in enumerate(captions):
        last = captions[number + 1] if number + 1 < len(captions) else len(lines)
        kind = _caption_is_results(" ".join(line.text.strip() for line in lines[first : first + 2]))
        region_rows, used = _region_rows(page, text, lines, first + 1, last, sizes)
        taken.update(used)
        taken.add(first)
        for row in region_rows:
            row.results_table = kind is True
            row.table = f"{page}:{first}"
        # A baseline table holds no results: its rows are kept apart.
        (baseline if kind is False else rows).extend(region_rows)
    return rows, baseline, taken


def _region_rows(
    page: int, text: str, lines: list[Line], first: int, last: int, sizes: frozenset[Decimal]
) -> tuple[list[Candidate], set[int]]:
    """The rows of one table region: label lines, then the cell lines that follow them (or, in a
    table printed right to left, the cell lines, then their label)."""
    if _labels_after_cells(lines, first, last):
        return _rows_labelled_after(page, text, lines, first, last, sizes)
    rows: list[Candidate] = []
    used: set[int] = set()
    labels: list[int] = []  # text lines since the last row: the next row's label
    group_label = ""  # the last label with no numbers of its own: it names the rows under it
    cells: list[int] = []
    prose_run = 0
    whens = time_points(lines, first, last)
    heading: int | None = None  # the last text line above a run of time points (column heads aside)

    def close() -> None:
        nonlocal cells, labels
        if cells:
            own = labels[-2:]
            if not rows and len(own) == 2 and not _continues(lines[own[0]].text, lines[own[1]].text):
                own = own[1:]  # the table's first row: the line before its label is a column's head
            row = _row(page, text, lines, own, cells, group_label, sizes, whens)
            if row is not None:
                rows.append(row)
                used.update(own)
                used.update(cells)
            labels = []
        cells = []

    for index in range(first, last):
        line = lines[index]
        if index in whens:
            # An outcome's (or arm's) time points are one row of it, named by the line above them
            # (column heads aside).
            if not cells and heading is not None and (not labels or labels[-1] != heading):
                labels = [heading]
            heading = None
            cells.append(index)
            prose_run = 0
            continue
        if line.kind in (CELL, PLACEHOLDER):
            prose_run = 0
            if not cells and len(labels) > 2:
                group_label = lines[labels[-3]].text.strip()
            cells.append(index)
            continue
        if line.kind == BLANK:
            continue
        close()
        if line.kind == FOOTER:
            if rows:
                break
            labels = []  # a link in the notes above the body (a source, a registration): no label
            continue
        if _column_head(line):
            labels = []
            continue
        prose_run = prose_run + 1 if len(line.text.strip()) >= PROSE_LINE else 0
        if prose_run >= 4:
            if rows or not _column_heads_follow(lines, index + 1, last):
                break
            # Notes printed between the caption and the body (the columns' heads follow): no label.
            prose_run, labels, group_label = 0, [], ""
            continue
        if len(line.text.strip()) > MAX_LABEL_LINE:
            labels = []
            continue
        if labels:
            group_label = lines[labels[-1]].text.strip()
        labels.append(index)
        heading = index
        inline = _inline_row(page, text, line, group_label, sizes)
        if inline is not None:
            rows.append(inline)
            used.add(index)
            labels = []
    close()
    return rows, used


_WHOLE_NUMBER = re.compile(r"^\d{1,3}$")
TIME_HEAD = re.compile(rf"\b(?:{TIME_WORDS}|visits?|time(?: points?)?)\b", re.IGNORECASE)


def time_points(lines: list[Line], first: int, last: int) -> set[int]:
    """Lines holding only a whole number that are time points ("0", "12", "24" weeks) under each
    outcome or arm of a table: an outcome's time points are one row of it, named by the line above
    them, and the numbers are no results. A whole number alone on a line is most often a cell
    (events, a count), so it is a time point only when the table's heads name a time ("Weeks"),
    each is followed by cells of its own, and the same rising sequence of them is printed under
    two group heads or more."""
    body = [i for i in range(first, last) if lines[i].kind in (CELL, PLACEHOLDER)]
    if not body or not any(TIME_HEAD.search(lines[i].text) for i in range(first, body[0]) if lines[i].kind == TEXT):
        return set()
    runs: list[list[int]] = [[]]
    own_cells = True  # the last time point has cells of its own
    for index in range(first, last):
        line = lines[index]
        if line.kind == TEXT and runs[-1]:
            runs.append([])
        elif line.kind == CELL and _WHOLE_NUMBER.match(line.text.strip()):
            if runs[-1] and not own_cells:
                return set()  # "1", "3": counts of a row, not time points
            runs[-1].append(index)
            own_cells = False
        elif line.kind in (CELL, PLACEHOLDER):
            own_cells = True
    sequences = [tuple(int(lines[i].text) for i in run) for run in runs]
    rising = [s for s in sequences if len(s) >= 2 and all(a < b for a, b in itertools.pairwise(s))]
    repeated = {s for s in rising if rising.count(s) >= 2}
    return {i for run, s in zip(runs, sequences, strict=True) if s in repeated for i in run}


# A table's notes: a marked footnote ("a Based on", "*P < .05", "¤TAU"), or a note's opening words.
_NOTE_LINE = re.compile(
    r"^\s*(?:[*†‡§¶#¤∗^]|[a-z](?=[A-Z\s])|\(?[a-z]\)\s|(?i:notes?|abbreviations?|values|data|results|figure|fig)\b)"
)
MAX_TRAILING_LABELS = 3  # a last row's label (two lines at most) and a group head for the next page
_NUMBERED_HEADING = re.compile(r"^\W{0,4}(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+[A-Z]")  # "4. Discussion"


def _labels_after_cells(lines: list[Line], first: int, last: int) -> bool:
    """Is the region a table printed right to left (some PDF writers do: each row's cells come
    before its label, the column heads in reverse)? Such a table's body ends with a label after
    its last cells, where a table read left to right ends with cells and then its notes. To tell
    the last row's label from a short note or the next section's heading, the label must be one
    the table printed before (rows repeated in each group: "Control", "Basic", "Plus"), and only
    notes, a link or the page's end may follow it (a heading is followed by prose)."""
    cells = [i for i in range(first, last) if lines[i].kind in (CELL, PLACEHOLDER)]
    if not cells:
        return False
    end = next((i for i in range(cells[0], last) if lines[i].kind == FOOTER), last)
    cells = [i for i in cells if i < end]
    trailing = [lines[i] for i in range(cells[-1] + 1, end) if lines[i].kind != BLANK]
    labels = []
    for line in trailing:
        stripped = line.text.strip()
        if (
            line.kind != TEXT
            or len(stripped) > MAX_LABEL_LINE
            or stripped.endswith(".")
            or _NOTE_LINE.match(stripped)
            or _NUMBERED_HEADING.match(stripped)
        ):
            break
        labels.append(stripped)
    if not 1 <= len(labels) <= MAX_TRAILING_LABELS:
        return False
    after = trailing[len(labels)] if len(trailing) > len(labels) else None
    if after is not None and not _NOTE_LINE.match(after.text.strip()):
        return False  # prose or a heading follows: the line was a heading or a note
    printed_before = {lines[i].text.strip() for i in range(first, cells[-1]) if lines[i].kind == TEXT}
    return labels[0] in printed_before


def _rows_labelled_after(
    page: int, text: str, lines: list[Line], first: int, last: int, sizes: frozenset[Decimal]
) -> tuple[list[Candidate], set[int]]:
    """The rows of a table printed right to left: cell lines, then their label (one line, or two
    when the first carries on); text lines between a label and the next cells are group heads."""
    rows: list[Candidate] = []
    used: set[int] = set()
    cells: list[int] = []
    group_label = ""
    index = first
    while index < last:
        line = lines[index]
        index += 1
        if line.kind in (CELL, PLACEHOLDER):
            cells.append(index - 1)
            continue
        if line.kind == BLANK:
            continue
        if line.kind == FOOTER:
            if rows:
                break
            cells = []
            continue
        if _column_head(line) or len(line.text.strip()) > MAX_LABEL_LINE:
            cells = []  # a column head: the cells before it are heads too ("95% CI")
            continue
        if not cells:
            group_label = line.text.strip()  # a label with no cells before it heads the rows below
            continue
        labels = [index - 1]
        after = lines[index].text if index < last and lines[index].kind == TEXT else ""
        # The line after a row's label may open the next group ("hsCRP (mg/L)"): it carries the
        # label on only when the label says so ("Not complying," / "n (%)").
        if after and line.text.strip()[-1] in _CARRIES_ON and not _NOTE_LINE.match(after):
            labels.append(index)
            index += 1
        row = _row(page, text, lines, labels, cells, group_label, sizes)
        if row is not None:
            rows.append(row)
            used.update(labels)
            used.update(cells)
        cells = []
    return rows, used


_CARRIES_ON = ",-–(/&"  # a label line ending so goes on on the next line


def _column_head(line: Line) -> bool:
    """A column head ("n = 50", "P", "Placebo (n=600)", "P valuea"), never part of a row's label."""
    return (
        line.kind == GROUP_SIZE
        or len(line.text.strip()) <= 2
        or bool(_ARM_HEAD.search(line.text))
        or bool(STATISTIC_HEAD.match(clean_label(line.text)))
    )


def _continues(line: str, after: str) -> bool:
    """Does ``after`` carry on the label ``line`` started ("Length of stay," / "days")?"""
    line, after = line.strip(), after.strip()
    return bool(line and after) and (line[-1] in _CARRIES_ON or after[0].islower() or after[0] in "(–-")


HEADS_AFTER_NOTES = 12  # lines after a caption's notes in which a table's column heads may start


def _column_heads_follow(lines: list[Line], first: int, last: int) -> bool:
    """Do an arm's column heads ("Placebo (n = 45)", "n = 45") follow within a few lines?"""
    return any(
        lines[i].kind == GROUP_SIZE or _ARM_HEAD.search(lines[i].text)
        for i in range(first, min(last, first + HEADS_AFTER_NOTES))
    )


def _row(
    page: int,
    text: str,
    lines: list[Line],
    labels: list[int],
    cells: list[int],
    group_label: str,
    sizes: frozenset[Decimal],
    whens: set[int] | None = None,
) -> Candidate | None:
    numbers = numbers_in(text, lines[cells[0]].start, lines[cells[-1]].end, sizes)
    # A time point is when, not a result ("24" weeks).
    at_times = [lines[i] for i in cells if i in (whens or ())]
    numbers = [n for n in numbers if not any(when.start <= n.start < when.end for when in at_times)]
    if not reports_results(numbers):
        return None
    label = _without_note_letters(
        labelled(clean_label(" ".join(lines[i].text.strip() for i in labels)), group_label), text
    )
    # The row's place: its label and cells, whichever is printed first.
    start = min(lines[i].start for i in (*labels, cells[0]))
    end = max(lines[i].end for i in (*labels, cells[-1]))
    return Candidate(page, "text", start, end, label, text[start:end], numbers, prose=False)


# A footnote letter glued to an abbreviation ("BMIh", "AAQ-IIj"): capitals (digits, hyphens), then
# one small letter.
_GLUED_LETTER = re.compile(r"\b([A-Z][A-Z0-9-]*[A-Z0-9])([a-z])\b")


def _without_note_letters(label: str, text: str) -> str:
    """A label without the footnote letters glued to its abbreviations, where the page's notes
    spell the abbreviation out under that letter ("BMIh (kg/m2)" with the note "hBMI: body mass
    index" is "BMI (kg/m2)"); "LVIDd", "A1c" or "SAEs" have no such note and keep their letter."""

    def unmarked(glued: re.Match[str]) -> str:
        note = rf"(?m)^\s*{glued[2]}\s?{re.escape(glued[1])}\b"
        return glued[1] if re.search(note, text) else glued[0]

    return _GLUED_LETTER.sub(unmarked, label)


def _inline_row(page: int, text: str, line: Line, group_label: str, sizes: frozenset[Decimal]) -> Candidate | None:
    """A row printed on one line ("Any complications 238 (73%) 241 (73.9%) 0.86", or a Markdown
    table row): a label, then nothing but numbers."""
    if line.text.count("|") >= 2:
        cells = [c for c in line.text.split("|") if c.strip()]
        if not cells:
            return None
        label_part = cells[0]
        numbers_from = line.start + line.text.index(label_part) + len(label_part)
    else:
        # The label ends at the last word after which only cells follow.
        for word in reversed(list(re.finditer(r"[^\W\d_]{2,}", line.text))):
            if _line_kind(line.text[word.end() :]) == CELL:
                label_part = line.text[: word.end()]
                numbers_from = line.start + word.end()
                break
        else:
            return None
    numbers = numbers_in(text, numbers_from, line.end, sizes)
    if len([n for n in numbers if n.role != P_VALUE]) < 2 or not reports_results(numbers):
        return None
    label = labelled(clean_label(label_part), group_label)
    return Candidate(page, "text", line.start, line.end, label, line.text, numbers, prose=False)


def parsed_table_rows(page: int, tables: list[ParsedTable], sizes: frozenset[Decimal]) -> list[Candidate]:
    """Rows of the page's parsed tables (cells by tabs, rows by lines), in that table's text."""
    rows: list[Candidate] = []
    for number, table in enumerate(tables, start=1):
        if _caption_is_results(table.text.split("\n", 1)[0]) is False:
            continue
        at = 0
        for line in table.text.split("\n"):
            first_cell = line.split("\t", 1)[0]
            label = clean_label(first_cell) if LETTERS.search(first_cell) else ""
            numbers = numbers_in(table.text, at + (len(first_cell) if label else 0), at + len(line), sizes)
            if label and reports_results(numbers):
                row = Candidate(page, f"table {number}", at, at + len(line), label, line, numbers, prose=False)
                row.table = f"{page}:table {number}"
                rows.append(row)
            at += len(line) + 1
    return rows
