"""A page's furniture: the running heads and footers every page repeats (journal, authors, page
numbers). Their digits ("BMC Res Notes (2017) 10:423") are no finding of the paper, and a line of
them is no table row."""

from __future__ import annotations

import math
import re

LETTERS = re.compile(r"[^\W\d_]")
HEAD_CHARS = 120  # a running head or footer is a short line; a page of text in one line is none


def furniture_key(line: str) -> str:
    """A line as it repeats from page to page: spacing, case and digits (page numbers) aside."""
    return re.sub(r"\d+", "#", " ".join(line.split()).lower())


EDGE_LINES = 8  # a running head or footer is among the first or last lines of its page (a footer block of a
# citation, a web address, the page number, a publisher's marks runs to seven lines)


def edge_lines(text: str) -> list[str]:
    """A page's first and last lines: where running heads and footers are printed (a table's
    header repeated on two pages is not)."""
    lines = [line for line in text.split("\n") if line.strip()]
    return lines[:EDGE_LINES] + lines[max(EDGE_LINES, len(lines) - EDGE_LINES) :]


def furniture(pages: list[str]) -> set[str]:
    """The keys of lines repeated at the top or foot of many pages (running heads, footers,
    journal names)."""
    seen: dict[str, set[int]] = {}
    for page, text in enumerate(pages):
        for line in edge_lines(text):
            key = furniture_key(line)
            # A table cell ("#/# (#.#)") repeats too, and stays.
            if len(key) <= HEAD_CHARS and len(LETTERS.findall(key)) >= 6:
                seen.setdefault(key, set()).add(page)
    # Alternating heads (journal on odd pages, authors on even ones) are on half the pages, and on
    # three pages at least; a table's header repeated on two pages is not a running head.
    enough = max(3, math.ceil(0.4 * len(pages)))
    return {key for key, where in seen.items() if len(where) >= enough}
