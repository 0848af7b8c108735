"""Tables that print outcomes as columns, for the recall check.

Most results tables print an outcome per row and an arm per column. Some turn this around: a
column (or a few, "Mean (SE)" and "Mean change (95% CI)") per outcome under a head naming it, and a
row per arm, repeated at each time point ("Control", "Basic", "Plus" under "Baseline", "1-month
follow-up"), or an arm's rows at its time points ("0", "12", "24" weeks). Read as rows, such a
table says nothing a reviewer can use ("Control: 17.96, 3.21, 158.93 ..."), and an outcome's
numbers are spread over every row, so no row tells which outcome an extraction left out. Read
here, each outcome head becomes one place: its label is the head, its numbers those of its columns
in every row, its cells the characters its head and they are printed in (what the page
highlights, and where a quote must be to be in it).

How the columns are told from the page text, which prints a table's heads one per line: the heads
end with the columns' own heads (statistics), the same few repeated under each outcome ("Mean
change (95% CI)", "Mean (SE)"; "%", "a.n. x 10^9/L"), as many as every row (or time point of a
row) has cells; before them come as many outcome heads as repetitions and nothing else (a stub's
head such as "Time point" or "Weeks" aside). The rows must be arms or times, not outcomes: their
labels repeat in the table, or they are split by time points; a row's label (or its group's)
names one of the answer's arms or a group size ("n = 27"); and no outcome head names an arm. A
table whose column heads name arms ("Drug X (n = 50)", "Placebo" over "Mean", "SD"), with
outcomes repeated under time or subgroup heads, is read as rows. So is a table where one outcome
has fewer columns than the others: the page text does not say which one ("Mean", "SD", "Mean",
"SD", "Mean" fits the first short as well as the last), and a number shown under the wrong
outcome is worse than a row that names none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from extraction_pipeline.core.verification.recall_labels import clean_label
from extraction_pipeline.core.verification.recall_numbers import TIME_WORDS, PrintedNumber, numbers_in, reports_results
from extraction_pipeline.core.verification.recall_rows import (
    BLANK,
    CAPTION,
    CELL,
    FOOTER,
    MAX_LABEL_LINE,
    PLACEHOLDER,
    STATISTIC_HEAD,
    TEXT,
    Candidate,
    Line,
    time_points,
)

MAX_PERIOD = 4  # columns under one outcome head at most ("Mean", "SD", "Change", "95% CI")
# A head's footnote marks ("(95% CI)b", "(95% CI)b,c", "Fruit (pieces)a", "Mean (SE)*").
_HEAD_MARKS = re.compile(r"(?<=[)\]%])\s*(?:[a-z](?:\s*,\s*[a-z])*|[*†‡§¶#]+)$")
# The head of the rows' labels: what they are (arms, times), never an outcome.
_STUB = re.compile(
    rf"^(?:{TIME_WORDS}|time(?: points?)?|visits?|groups?|arms?|treatments?|interventions?|conditions?|"
    r"allocation|randomi[sz]ed to|subgroups?|period|assessment)$",
    re.IGNORECASE,
)
_GROUP_SIZE = re.compile(r"\b[nN]\s*=\s*\d")
_ARM_WORDS_IGNORED = frozenset({"group", "groups", "arm", "arms", "the", "and", "with", "mg", "day"})


@dataclass(frozen=True)
class _Unit:
    """A head or a cell: one line, or two when the second opens a parenthesis ("Mean change",
    "(95% CI)"; "–0.33", "(–0.80, 0.14)") or carries a head on ("Fruit and", "vegetable score")."""

    start: int
    end: int
    text: str


def outcome_columns(
    page: int,
    text: str,
    lines: list[Line],
    rows: list[Candidate],
    sizes: frozenset[Decimal],
    arms: tuple[str, ...] = (),
) -> list[Candidate]:
    """``rows`` (``table_rows``' rows of one page), with each table that prints outcomes as
    columns read as one place per outcome instead; ``arms`` are the names of the answer's arms."""
    by_table: dict[str, list[Candidate]] = {}
    for row in rows:
        by_table.setdefault(row.table, []).append(row)
    read: list[Candidate] = []
    for table, members in by_table.items():
        columns = _columns(page, text, lines, table, members, sizes, arms) if table else None
        read.extend(columns or members)
    return read


def _columns(
    page: int,
    text: str,
    lines: list[Line],
    table: str,
    rows: list[Candidate],
    sizes: frozenset[Decimal],
    arms: tuple[str, ...],
) -> list[Candidate] | None:
    if len(rows) < 2:
        return None
    caption = int(table.split(":")[1])
    last = next((i for i in range(caption + 1, len(lines)) if CAPTION.match(lines[i].text)), len(lines))
    body = next((i for i in range(caption + 1, last) if lines[i].end > rows[0].start), last)
    whens = time_points(lines, caption + 1, last)
    row_cells = [_row_cells(lines, row, whens) for row in rows]
    widths = {len(cells) for split in row_cells for cells in split}
    if len(widths) != 1 or (width := widths.pop()) < 2:
        return None
    own_labels = [_own_label(lines, row, split) for row, split in zip(rows, row_cells, strict=True)]
    if not (whens or all(label and own_labels.count(label) >= 2 for label in own_labels)):
        return None  # rows that are outcomes, each printed once
    found = _outcome_spans(_heads(lines, caption, body), width)
    if found is None:
        return None
    spans, leaves = found
    row_words = [" ".join(line.text for line in lines if row.start <= line.start < row.end) for row in rows]
    rows_are_arms = any(_GROUP_SIZE.search(words) or _names_an_arm(words, arms) for words in row_words)
    if not rows_are_arms or any(_names_an_arm(head.text, arms) for head, _cells in spans):
        return None  # the heads may be arms, the rows outcomes
    columns = []
    for head, (lo, hi) in spans:
        numbers: list[PrintedNumber] = []
        cells: list[tuple[int, int]] = [(head.start, head.end)]  # its head, then its cells in every row
        shown: list[str] = []  # each row's label and its cells under the head
        for label, split, row in zip(own_labels, row_cells, rows, strict=True):
            said = []
            for unit_cells, when in zip(split, _times(lines, row, whens, len(split)), strict=True):
                for cell in unit_cells[lo:hi]:
                    offset = numbers[-1].group + 1 if numbers else 0
                    numbers += [_regrouped(n, offset) for n in numbers_in(text, cell.start, cell.end, sizes)]
                    cells.append((cell.start, cell.end))
                said.append(" ".join([*when, *(cell.text for cell in unit_cells[lo:hi])]))
            shown.append(f"{label}: {', '.join(said)}" if label else ", ".join(said))
        if not reports_results(numbers):
            continue
        name = clean_label(_HEAD_MARKS.sub("", head.text))
        under = ", ".join(dict.fromkeys(_HEAD_MARKS.sub("", leaf.text) for leaf in leaves[lo:hi]))
        # Its place runs from its head to the table's last row (what the page highlights, and a
        # quote a reviewer may take); what it shows is its own cells, row by row.
        end = rows[-1].end
        column = Candidate(page, "text", head.start, end, name, text[head.start : end], numbers, prose=False)
        column.table, column.results_table, column.cells = table, rows[0].results_table, tuple(cells)
        column.shown = f"{name} ({under}): {'; '.join(shown)}"
        columns.append(column)
    return columns if len(columns) >= 2 else None


def _regrouped(number: PrintedNumber, offset: int) -> PrintedNumber:
    return PrintedNumber(number.printed, number.value, number.start, number.end, number.group + offset, number.role)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[^\W\d_]{2,}", text.lower()) if w not in _ARM_WORDS_IGNORED}


def _names_an_arm(text: str, arms: tuple[str, ...]) -> bool:
    """Does ``text`` (a row's or a head's words) name one of the answer's arms: all of the arm's
    words in it, or all of its words in the arm's ("Smokers (palmvitee, n = 30)" and "200 mg/day
    palmvitee smokers")?"""
    words = _words(text)
    return bool(words) and any((arm := _words(name)) and (arm <= words or words <= arm) for name in arms)


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


def _own_label(lines: list[Line], row: Candidate, split: list[list[_Unit]]) -> str:
    """A row's own label: the last of its lines that is no cell (a group's head may be printed
    with the first row under it)."""
    taken = [(cell.start, cell.end) for cells in split for cell in cells]
    own = [
        line.text.strip()
        for line in lines
        if row.start <= line.start < row.end and line.kind == TEXT and not any(s <= line.start < e for s, e in taken)
    ]
    return own[-1] if own else ""


def _heads(lines: list[Line], caption: int, body: int) -> list[_Unit]:
    """The column heads between the caption (and the lines that carry it on) and the body; a head
    line that opens a parenthesis, or that carries the one before on (it ends with "and", "of" or a
    comma, or the next starts small), is joined to it."""
    heads: list[_Unit] = []
    carried = True  # the caption carries on while its lines start small
    for line in lines[caption + 1 : body]:
        stripped = line.text.strip()
        if line.kind in (BLANK, FOOTER) or not stripped:
            continue
        if carried and stripped[0].islower():
            continue
        carried = False
        # "n", "%", "a.n.", "SD" are heads of their own; "vegetable score" carries "Fruit and" on.
        statistic = len(stripped.split()) < 2 or bool(STATISTIC_HEAD.match(clean_label(stripped)))
        carries_on = stripped[0].islower() and not statistic
        joins = heads and (stripped[0] in "([" or carries_on or re.search(r"(?:\band|\bof|,|-|–)$", heads[-1].text))
        if joins:
            heads[-1] = _Unit(heads[-1].start, line.end, f"{heads[-1].text} {stripped}")
        else:
            heads.append(_Unit(line.start, line.end, stripped))
    return heads


def _said(head: _Unit) -> str:
    return _HEAD_MARKS.sub("", " ".join(head.text.split())).lower()


def _outcome_spans(
    heads: Sequence[_Unit], width: int
) -> tuple[list[tuple[_Unit, tuple[int, int]]], Sequence[_Unit]] | None:
    """Each outcome head with the cells (from, to) under it, and the column heads: the last heads
    before the body are ``width`` column heads repeating a pattern under each outcome head; before
    them, the outcome heads, as many as the repetitions, and nothing else but the stub's head. A line or two between
    the column heads and the body (the first group's head, "Baseline") may be skipped."""
    for skipped in range(3):
        end = len(heads) - skipped
        if end - width < 1:
            return None
        leaves = [_said(h) for h in heads[end - width : end]]
        for period in range(1, MAX_PERIOD + 1):
            count = width // period  # outcome heads
            if count < 2 or not _repeats(leaves, period):
                continue
            before = [h for h in heads[: end - width] if not _stub(h)]
            if len(before) != count or len({_said(h) for h in before}) < count:
                return None  # more heads than outcomes (a spanning head, a wrapped one): unsure
            spans = [(head, (period * i, period * (i + 1))) for i, head in enumerate(before)]
            return spans, heads[end - width : end]
    return None


def _repeats(leaves: list[str], period: int) -> bool:
    """The same ``period`` column heads under each outcome, at least one of them a statistic's
    head, not a word that might be an outcome's name (two heads repeated are "Mean", "SD", "%": a
    single one must be a statistic's head). Where one outcome has fewer columns than the others
    ("a.n.", then "%", "a.n." three times), the page text does not say which one: a run of
    repeated heads reads the same with the first outcome short as with the last."""
    pattern = leaves[:period]
    if len(leaves) % period or any(leaves[i] != pattern[i % period] for i in range(len(leaves))):
        return False
    if any(not re.search(r"[^\W\d_]|%", leaf) for leaf in pattern):
        return False
    return period >= 2 or bool(STATISTIC_HEAD.match(clean_label(pattern[0])))


def _stub(head: _Unit) -> bool:
    """The head of the rows' labels ("Time point", "Weeks", "Group", "Variable"), or a line no
    head is."""
    said = clean_label(_HEAD_MARKS.sub("", head.text))
    return (
        bool(_STUB.match(said))
        or bool(STATISTIC_HEAD.match(said))
        or len(said) > MAX_LABEL_LINE
        or not re.search(r"[^\W\d_]{2}", said)
    )
