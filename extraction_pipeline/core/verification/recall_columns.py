"""Tables that print outcomes as columns, for the recall check.

Most results tables print an outcome per row and an arm per column. Some turn this around: a
column (or a few, "Mean (SE)" and "Mean change (95% CI)") per outcome under a head naming it, and a
row per arm, repeated at each time point ("Control", "Basic", "Plus" under "Baseline", "1-month
follow-up"), or an arm's rows at its time points ("0", "12", "24" weeks). Read as rows, such a
table says nothing a reviewer can use ("Control: 17.96, 3.21, 158.93 ..."), and an outcome's
numbers are spread over every row, so no row tells which outcome an extraction left out. Read
here, each outcome head becomes one place: its label is the head, its numbers those of its columns
in every row, its cells the characters they are printed in.

How the columns are told from the page text, which prints a table's heads one per line: the heads
end with the columns' own heads (statistics), the same few repeated under each outcome ("Mean
change (95% CI)", "Mean (SE)"; "%", "a.n. x 10^9/L", where the first outcome may have fewer of
them), as many as every row (or time point of a row) has cells; before them, as many outcome heads
as the repetitions (a stub's head, "Time point", "Weeks", aside). And the rows must be arms or
times, not outcomes: their labels repeat in the table, or they are split by time points. A table
whose column heads name arms ("Placebo", "Drug" over "Mean", "SD") has outcomes as rows, with
labels printed once each: it is read as rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from extraction_pipeline.core.verification.recall_labels import clean_label
from extraction_pipeline.core.verification.recall_numbers import PrintedNumber, numbers_in, reports_results
from extraction_pipeline.core.verification.recall_rows import (
    BLANK,
    CAPTION,
    CELL,
    FOOTER,
    MAX_LABEL_LINE,
    PLACEHOLDER,
    STATISTIC_HEAD,
    TEXT,
    TIME_HEAD,
    Candidate,
    Line,
    time_points,
)

MAX_PERIOD = 4  # columns under one outcome head at most ("Mean", "SD", "Change", "95% CI")
# A head's footnote marks ("(95% CI)b", "(95% CI)b,c", "Mean (SE)*"): not part of what it says.
_HEAD_MARKS = re.compile(r"(?<=[)\]%])\s*(?:[a-z](?:\s*,\s*[a-z])*|[*†‡§¶#]+)$")


@dataclass(frozen=True)
class _Unit:
    """A head or a cell: one line, or two when the second opens a parenthesis ("Mean change",
    "(95% CI)"; "–0.33", "(–0.80, 0.14)")."""

    start: int
    end: int
    text: str


def outcome_columns(
    page: int, text: str, lines: list[Line], rows: list[Candidate], sizes: frozenset[Decimal]
) -> list[Candidate]:
    """``rows`` (``table_rows``' rows of one page), with each table that prints outcomes as
    columns read as one place per outcome instead."""
    by_table: dict[str, list[Candidate]] = {}
    for row in rows:
        by_table.setdefault(row.table, []).append(row)
    read: list[Candidate] = []
    for table, members in by_table.items():
        columns = _columns(page, text, lines, table, members, sizes) if table else None
        read.extend(columns or members)
    return read


def _columns(
    page: int, text: str, lines: list[Line], table: str, rows: list[Candidate], sizes: frozenset[Decimal]
) -> list[Candidate] | None:
    if len(rows) < 2:
        return None
    first = int(table.split(":")[1]) + 1  # the line after the caption
    last = next((i for i in range(first, len(lines)) if CAPTION.match(lines[i].text)), len(lines))
    body = next(i for i in range(first, last) if lines[i].end > rows[0].start)
    whens = time_points(lines, first, last)
    row_cells = [_row_cells(lines, row, whens) for row in rows]
    widths = {len(cells) for split in row_cells for cells in split}
    if len(widths) != 1 or (width := widths.pop()) < 2:
        return None
    if not (whens or _labels_repeat(lines, rows, row_cells)):
        return None  # rows that are outcomes, each printed once: the heads are arms
    heads = _heads(lines, first, body)
    found = _outcome_spans(heads, width)
    if found is None:
        return None
    spans, leaves = found
    columns = []
    for head, (lo, hi) in spans:
        numbers: list[PrintedNumber] = []
        cells: list[tuple[int, int]] = []
        shown: list[str] = []  # what the place shows: each row's label and its cells under the head
        for row, split in zip(rows, row_cells, strict=True):
            said = []
            for unit_cells, when in zip(split, _times(lines, row, whens, len(split)), strict=True):
                for cell in unit_cells[lo:hi]:
                    offset = numbers[-1].group + 1 if numbers else 0
                    numbers += [_regrouped(n, offset) for n in numbers_in(text, cell.start, cell.end, sizes)]
                    cells.append((cell.start, cell.end))
                said.append(" ".join([*when, *(cell.text for cell in unit_cells[lo:hi])]))
            shown.append(f"{row.label}: {', '.join(said)}" if row.label else ", ".join(said))
        if not reports_results(numbers):
            continue
        label = clean_label(head.text)
        under = ", ".join(dict.fromkeys(" ".join(leaf.text.split()) for leaf in leaves[lo:hi]))
        excerpt = f"{label} ({under}): {'; '.join(shown)}"
        # Its place runs from its head to the table's last row (the highlight shows the table); what
        # it shows is its own cells, row by row (no stretch of the page prints them together).
        column = Candidate(page, "text", head.start, rows[-1].end, label, excerpt, numbers, prose=False)
        column.table, column.results_table, column.cells = table, rows[0].results_table, tuple(cells)
        columns.append(column)
    return columns if len(columns) >= 2 else None


def _regrouped(number: PrintedNumber, offset: int) -> PrintedNumber:
    return PrintedNumber(number.printed, number.value, number.start, number.end, number.group + offset, number.role)


def _times(lines: list[Line], row: Candidate, whens: set[int], count: int) -> list[list[str]]:
    """The time point of each part of a row split by time points (none for a row without)."""
    printed = [[lines[i].text.strip()] for i in sorted(whens) if row.start <= lines[i].start < row.end]
    return printed if len(printed) == count else [[]] * count


def _row_cells(lines: list[Line], row: Candidate, whens: set[int]) -> list[list[_Unit]]:
    """A row's cells, one list per time point of it (one list for a row without time points)."""
    split: list[list[_Unit]] = [[]]
    for index, line in enumerate(lines):
        if line.end <= row.start or line.start >= row.end:
            continue
        if index in whens:
            if split[-1]:
                split.append([])
            continue
        if line.kind not in (CELL, PLACEHOLDER):
            continue
        cells = split[-1]
        if cells and line.text.lstrip().startswith(("(", "[")):
            cells[-1] = _Unit(cells[-1].start, line.end, f"{cells[-1].text} {line.text.strip()}")
        else:
            cells.append(_Unit(line.start, line.end, line.text.strip()))
    return [cells for cells in split if cells]


def _labels_repeat(lines: list[Line], rows: list[Candidate], row_cells: list[list[list[_Unit]]]) -> bool:
    """Are the rows' own labels (the last line of a row that is not a cell) printed more than once
    each, as arms repeated under each time point are?"""
    labels = []
    for row, split in zip(rows, row_cells, strict=True):
        taken = {(cell.start, cell.end) for cells in split for cell in cells}
        own = [
            line.text.strip()
            for line in lines
            if row.start <= line.start < row.end
            and line.kind == TEXT
            and not any(s <= line.start < e for s, e in taken)
        ]
        labels.append(own[-1] if own else "")  # its own line: a group's head may be printed with the first
    return all(label and labels.count(label) >= 2 for label in labels)


def _heads(lines: list[Line], first: int, body: int) -> list[_Unit]:
    """The column heads above the body, a head that opens a parenthesis joined to the one before."""
    heads: list[_Unit] = []
    for line in lines[first:body]:
        if line.kind in (BLANK, FOOTER):
            continue
        stripped = line.text.strip()
        if heads and stripped.startswith(("(", "[")):
            heads[-1] = _Unit(heads[-1].start, line.end, f"{heads[-1].text} {stripped}")
        else:
            heads.append(_Unit(line.start, line.end, stripped))
    return heads


def _said(head: _Unit) -> str:
    return _HEAD_MARKS.sub("", " ".join(head.text.split())).lower()


def _outcome_spans(
    heads: Sequence[_Unit], width: int
) -> tuple[list[tuple[_Unit, tuple[int, int]]], Sequence[_Unit]] | None:
    """Each outcome head with the cells (from, to) under it: the last heads before the body are
    ``width`` column heads repeating a pattern under each outcome head (the first outcome's may
    lack its first ones), returned too; the outcome heads come before them. A line or two between the column
    heads and the body (the first group's head, "Baseline") may be skipped."""
    for skipped in range(3):
        end = len(heads) - skipped
        leaves = [_said(h) for h in heads[max(0, end - width) : end]]
        if len(leaves) < width:
            return None
        for period in range(1, MAX_PERIOD + 1):
            count = -(-width // period)  # outcome heads
            if count < 2 or not _repeats(leaves, period):
                continue
            outcomes = [h for h in heads[: end - width] if not _stub(h)][-count:]
            if len(outcomes) < count or len({_said(h) for h in outcomes}) < count:
                continue
            short = width - (count - 1) * period  # the first outcome's columns
            bounds = [0, short, *(short + period * i for i in range(1, count))]
            spans = [(head, (bounds[i], bounds[i + 1])) for i, head in enumerate(outcomes)]
            return spans, heads[end - width : end]
    return None


def _repeats(leaves: list[str], period: int) -> bool:
    """The same ``period`` column heads under each outcome, the first outcome's perhaps fewer (the
    pattern's last ones); at least one of them a statistic's head, not a word that might be an
    outcome's name (two heads repeated are "Mean", "SD", "%": a single one must be one)."""
    pattern = leaves[-period:]
    short = len(leaves) % period or period
    whole = leaves[short:] if short < period else leaves
    if any(whole[i] != pattern[i % period] for i in range(len(whole))) or leaves[:short] != pattern[-short:]:
        return False
    if any(not re.search(r"[^\W\d_]|%", leaf) for leaf in pattern):
        return False
    return period >= 2 or bool(STATISTIC_HEAD.match(clean_label(pattern[0])))


def _stub(head: _Unit) -> bool:
    """The head of the rows' labels ("Time point", "Weeks", "Variable"), or a line no head is."""
    said = clean_label(head.text)
    return (
        bool(TIME_HEAD.search(said) and len(said.split()) <= 3)
        or bool(STATISTIC_HEAD.match(said))
        or len(said) > MAX_LABEL_LINE
        or not re.search(r"[^\W\d_]{2}", said)
    )
