"""The items of the recall check's "possibly missed" list: what kind of omission each is, where
it is in the paper, and its stored form.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

LABEL_SEPARATOR = "; "  # an item found at one place for several outcomes names each of them


EXCERPT_CHARS = 500  # what a follow-up question shows of a place: a row, or a sentence


def rows_named(item: PossiblyMissed) -> int:
    """How many rows (outcomes) an item names: a reviewer reads each of them."""
    return max(1, sum(1 for label in item.label.split(LABEL_SEPARATOR) if label.strip()))


def labelled_excerpts(item: PossiblyMissed) -> list[tuple[str, str]]:
    """Each outcome an item names, with what the paper prints for it: from its label to the next
    label (a table's rows are printed one after another), else the item's whole excerpt (a
    sentence, or a finding named apart from its place, such as "PONV: no numbers for H1"); one
    line each, cut to ``EXCERPT_CHARS``. A label is found by its letters and digits only (a label
    is cleaned of the cell's punctuation and ligatures, "ﬁ" is "fi"), without a group head ("3
    months: BMI" is printed "BMI"), at the start of a word where it can be ("Total", not the end of
    "Subtotal")."""
    text = " ".join((item.shown or item.text).split())
    letters, source = _comparable(text)
    word_starts = [i == 0 or not text[source[i] - 1].isalnum() for i in range(len(source))]
    labels = [" ".join(label.split()) for label in item.label.split(LABEL_SEPARATOR)]
    starts, ends = [], {}
    named_up_to = 0  # the rows of a table are named in reading order: "Preintervention" under each outcome
    for label in labels:
        keys = [_comparable(part)[0] for part in (label, label.split(": ")[-1])]
        at, key = next(
            (
                (hit, key)
                for key in keys
                for begin in (named_up_to, 0)
                if key and (hit := _find(letters, key, word_starts, begin)) >= 0
            ),
            (-1, ""),
        )
        starts.append(source[at] if at >= 0 else -1)
        if at >= 0:
            ends[source[at]] = source[at + len(key) - 1] + 1
            named_up_to = at + len(key)
    found = sorted(start for start in starts if start >= 0)
    # A table printed right to left prints each row's label after its cells: the place opens with
    # numbers and ends with a label.
    after_cells = bool(found) and _digits(text[: found[0]]) and not _digits(text[ends[found[-1]] :])
    excerpts = []
    for label, start in zip(labels, starts, strict=True):
        if not label:
            continue
        if start < 0 or (after_cells and len(found) == 1):
            excerpt = text
        elif after_cells:
            before = [ends[other] for other in found if other < start]
            excerpt = text[before[-1] if before else 0 : ends[start]].strip()
        else:
            next_ones = [other for other in found if other > start]
            excerpt = text[start : next_ones[0] if next_ones else len(text)].strip()
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[:EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"
        excerpts.append((label, excerpt))
    return excerpts


def _digits(text: str) -> bool:
    return any(char.isdigit() for char in text)


def _comparable(text: str) -> tuple[str, list[int]]:
    """``text``'s letters and digits, compatibility-normalised and case-folded ("ﬁ" is "fi"), and
    for each of them the index of the character of ``text`` it comes from."""
    letters: list[str] = []
    source: list[int] = []
    for index, char in enumerate(text):
        for out in unicodedata.normalize("NFKC", char).casefold():
            if out.isalnum():
                letters.append(out)
                source.append(index)
    return "".join(letters), source


def _find(letters: str, key: str, word_starts: list[bool], begin: int = 0) -> int:
    """Where ``key`` first starts a word of ``letters`` from ``begin`` on, else where it first
    occurs there (-1: nowhere)."""
    at = letters.find(key, begin)
    first = at
    while at >= 0 and not word_starts[at]:
        at = letters.find(key, at + 1)
    return at if at >= 0 else first


class MissedKind(StrEnum):
    """What kind of omission an item is (the words are stored in results)."""

    OUTCOME = "outcome"
    TABLE_ROW = "table row"
    RESULT_TEXT = "results text"


@dataclass(frozen=True)
class PossiblyMissed:
    """One thing the paper reports that no extracted value covers, placed like a grounded value.

    ``label`` is the outcome as printed (a row's label, the words of a sentence before its
    numbers, or the extracted outcomes that lack a group size); ``text`` is the excerpt to show;
    ``numbers`` are the numbers an extracted value should have, as printed; ``why`` says why the
    item is listed, in a reviewer's words."""

    kind: MissedKind
    label: str
    text: str
    page: int
    source: str  # "text" or "table N", as grounding's Location
    start: int  # offsets within that page's text or that table's text
    end: int
    numbers: tuple[str, ...] = ()
    why: str = ""
    # What the place prints for its outcomes where the page does not print it in one stretch (an
    # outcome printed as a column: each row's label with its cells); "" when ``text`` shows it.
    shown: str = ""
    # The characters of the place it is about, where that is not all of start..end (an outcome
    # printed as a column: its cells in every row): what the page highlights.
    cells: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> str:
        """A stable id (the same document and parse give the same key), so a reviewer's
        dismissal still refers to the item when the page is rendered again."""
        return f"{self.kind.value}:{self.page}:{self.source}:{self.start}"

    def as_dict(self) -> dict[str, Any]:
        """The stored form (JSON), with its key."""
        return {
            "key": self.key,
            "kind": self.kind.value,
            "label": self.label,
            "text": self.text,
            "page": self.page,
            "source": self.source,
            "start": self.start,
            "end": self.end,
            "numbers": list(self.numbers),
            "why": self.why,
            "shown": self.shown,
            "cells": [list(cell) for cell in self.cells],
        }

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> PossiblyMissed:
        return cls(
            kind=MissedKind(str(stored["kind"])),
            label=str(stored.get("label") or ""),
            text=str(stored.get("text") or ""),
            page=int(stored["page"]),
            source=str(stored.get("source") or "text"),
            start=int(stored["start"]),
            end=int(stored["end"]),
            numbers=tuple(str(n) for n in stored.get("numbers") or ()),
            why=str(stored.get("why") or ""),
            shown=str(stored.get("shown") or ""),
            cells=tuple((int(cell[0]), int(cell[1])) for cell in stored.get("cells") or ()),
        )
