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


def furniture(pages: list[str]) -> set[str]:
    """The keys of lines repeated on many pages (running heads, footers, journal names)."""
    seen: dict[str, set[int]] = {}
    for page, text in enumerate(pages):
        for line in text.split("\n"):
            key = furniture_key(line)
            # A table cell ("#/# (#.#)") repeats too, and stays.
            if len(key) <= HEAD_CHARS and len(LETTERS.findall(key)) >= 6:
                seen.setdefault(key, set()).add(page)
    # Alternating heads (journal on odd pages, authors on even ones) are on half the pages; a row
    # label repeated in two or three tables is not.
    enough = max(2, math.ceil(0.4 * len(pages)))
    return {key for key, where in seen.items() if len(where) >= enough}
