"""The arm sizes a paper's tables print in their headers ("Intervention* (N = 40)").

An outcome's own table says how many were analysed for it; a size quoted from elsewhere (the
patients interviewed, the randomized total, another table's header) is the wrong denominator when
that table says otherwise: in a cluster trial its N counts clusters, in a subgroup its members.
Pure text: each "Table N" caption on a page starts a table that runs to the next caption or the
page's end; its header is the lines just below the caption, where "n = 40" is printed beside or
under its group's name. Which outcome a table is about, and which arm a header names, is judged by
``context``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "Table 6", "Table 6. Patient adherence", "TABLE 2 Outcomes" — not "Table 2 shows ..." in running text.
CAPTION_LINE = re.compile(r"^[^\S\n]*(?:Table|TABLE)[^\S\n]+[0-9IVX]+\b(?![^\S\n]+[a-z])", re.MULTILINE)
TABLE_NUMBER = re.compile(r"^\s*(?:Table|TABLE)\s+([0-9IVX]+)\b")
SIZE = re.compile(r"\b[Nn]\s*=\s*(\d[\d,]*)(?![\d.])")
LETTERS = re.compile(r"[A-Za-z]{2,}")
HEADER_LINES = 25  # a header is the first lines under the caption
LABEL_CHARS = 60  # a group's name in a header, not a sentence
ROW_LABEL_CHARS = 80  # a line this short can be a row's label


@dataclass(frozen=True)
class PrintedTable:
    """A table as printed on its page: its caption and title, its lines, and the sizes its header gives."""

    page: int
    caption: str  # the "Table N ..." line
    title: str  # the caption line and the one after it (titles wrap)
    lines: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]  # (the group's name as printed, N)


def table_number(caption: str) -> str:
    """ "Table 6. Patient adherence" -> "6"; "" for no caption."""
    found = TABLE_NUMBER.match(caption)
    return found.group(1) if found else ""


def printed_tables(pages_text: list[str]) -> list[PrintedTable]:
    found = []
    for page, text in enumerate(pages_text, start=1):
        starts = [match.start() for match in CAPTION_LINE.finditer(text)]
        for index, start in enumerate(starts):
            end = starts[index + 1] if index + 1 < len(starts) else len(text)
            lines = tuple(line.strip() for line in text[start:end].splitlines() if line.strip())
            if not lines:
                continue
            found.append(
                PrintedTable(page, lines[0], " ".join(lines[:2]), lines, _header_sizes(lines[1 : 1 + HEADER_LINES]))
            )
    return found


def _header_sizes(lines: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """(group, N) for each header line printing "n = N": the group is the words before it, or the
    line above when the size has a line of its own ("Placebo" over "(n = 50)")."""
    sizes = []
    for index, line in enumerate(lines):
        previous = 0
        for match in SIZE.finditer(line):
            # "Drug A (n = 40) Placebo (n = 38)": each size's group is the words since the last size
            label = line[previous : match.start()].strip(" (),*")
            previous = match.end()
            if not LETTERS.search(label) and index > 0:
                label = lines[index - 1]
            if LETTERS.search(label) and len(label) <= LABEL_CHARS:
                sizes.append((label, int(match.group(1).replace(",", ""))))
    return tuple(sizes)
