"""The recall check: what a paper reports that no extracted value covers.

Extraction models are precise but forgetful: they leave out whole outcomes and single arm numbers
without a word. After extraction, each document gets a short list of *possibly missed* items,
each placed in the paper the way a grounded value is (page, "text" or "table N", character
offsets in that page's text or table text), so the review page can highlight it:

- ``OUTCOME``: a result the paper reports (a row of a results table that names no extracted
  outcome, or a sentence of the abstract or the results section with a statistic per arm) whose
  numbers no extracted value has. Its label is the outcome's name as printed: a row's label, or a
  sentence's subject (the words before its first verb, or after "difference in", without a
  section lead-in, articles, "mean" or the groups compared), so a follow-up question can ask
  for it by name;
- ``TABLE_ROW``: a results-table row with arm numbers (means, SDs, events, totals, group sizes)
  that an extracted outcome should have and does not: half of a statistic read ("12.1 (3.4)" with
  the mean extracted, not the SD), one arm read and not the other, the row of an extracted
  outcome whose numbers were taken from nowhere, or the group size an outcome lacks;
- ``RESULT_TEXT``: the same for a sentence of the abstract or the results section.

The answer is read in arms (``recall_answer``: version 1's two arms, or version 2's declared
arms with one outcome entry per arm), each outcome with its numbers per arm. An arm a version 2
answer declares with no number for an outcome its other arms have numbers for is listed by name,
"<outcome>: no numbers for H2 (haloperidol 2 mg)" (the arm's label, and what it received where
the label does not say it), where the other arms' numbers are quoted, with the unread statistics
printed beside them. Only arms reported together with the outcome's arms count (a paper may
compare treatments in its outcomes and, apart, patients with and without a diagnosis), and arms
of subgroups and arms of the whole trial are apart.

An extracted outcome missing a number its other numbers imply (one arm's SD and not another's,
events without their total, a mean without its SD) is also listed where the number it has is
quoted — a results row, a baseline-table row, a methods sentence — with the unread numbers printed
beside that one (the other arm's statistic, or the other half of its own): whatever the layout,
the lost number is there more often than not. Findings whose places overlap are one item (labels
joined with ``LABEL_SEPARATOR``), and the unread rows of one table are one item naming each row:
a reviewer checks a table once, and a long table nobody read does not fill the list alone.

How the paper is read. Plain PDF text prints a table one cell per line (sometimes a row per line,
sometimes column by column), so rows are rebuilt from the page text: a table's region starts at
its caption ("Table 2 ..."); in it, a row is a label line followed by the lines that hold only
numbers. Baseline-characteristics tables ("Baseline", "Characteristics", "Demographics" in the
caption) hold no results and are skipped. Parsed tables are used only on pages whose text gave no
rows (their numbers are less faithful than the page text's). Running heads and footers (lines
repeated on many pages) are ignored.

What "read" means. A number of the paper is read by an extracted outcome when one of the
outcome's values equals it (sign aside) and the outcome is tied to the place: one of its quotes
is located there, or it has two distinctive numbers there (decimals, or integers of 10 and more),
or one number and a row label that names it (``name_score`` >= 70, the evaluation's matching).
Numbers the template has no field for (p-values, percentages beside counts, confidence and
interquartile ranges) are shown but never asked for.

Precision matters as much as recall, so a row an extraction used is listed only for the specific
arm numbers above, and the list is capped, most likely misses first: half-read statistics, then a
missing arm, missing group sizes, a three-arm row's third arm (for a version 1 answer, which
cannot name it), an arm without numbers where none are printed beside the others', then unread
results: rows of
tables the extraction used or that the abstract names, and sentences of the abstract and the
results section no table repeats (a result printed only in the text is one a model easily
skips), then the rest. The list is returned in reading order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

from extraction_pipeline.core.evaluation.matching import NAME_ENOUGH, name_score, normalize_name
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.pdf.furniture import furniture, furniture_key
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.verification.recall_answer import (
    SIZE_KINDS,
    Answer,
    ExtractedEntry,
    Number,
    Span,
    read_answer,
)

DEFAULT_LIMIT = 10  # items per document: a list a reviewer reads to the end
LABEL_SEPARATOR = "; "  # an item found at one place for several outcomes names each of them


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
        )


def possibly_missed(
    document: ParsedDocument,
    fields: Mapping[str, GroundedValue],
    *,
    limit: int = DEFAULT_LIMIT,
    likeliest_first: bool = False,
) -> list[PossiblyMissed]:
    """What ``document`` reports that none of ``fields`` (a result's grounded fields, path ->
    GroundedValue, as ``fields_of`` reads them) covers: at most ``limit`` items, the most likely
    misses kept, in reading order (page, then place on the page), or likeliest first."""
    answer = read_answer(fields)
    extracted, sizes = answer.entries, answer.sizes
    layout = _layout(document, sizes)
    layout.used_tables = {c.table for c in layout.candidates if c.table and _read(c, extracted)}
    listed = [j for c in layout.candidates if (j := _judge(c, answer, layout)) is not None]
    listed += _missing_sizes(document, answer, [c for c in layout.candidates if not c.prose])
    listed += _incomplete(document, answer, layout)
    # A sentence that only repeats the numbers of a listed row adds nothing for the reviewer.
    in_rows = {n for entry in listed if not entry.prose for n in entry.values}
    listed = [e for e in listed if not (e.prose and e.values and e.values <= in_rows)]
    listed = _tables_read_by_none(document, listed)
    likeliest = _merged_by_place(sorted(listed, key=lambda e: (-e.rank, e.item.page, e.item.start)))
    chosen: list[_Listed] = []  # one item per key (a dismissal names its key), the likeliest
    for entry in likeliest:
        if all(entry.item.key != kept.item.key for kept in chosen):
            chosen.append(entry)
    chosen = chosen[: max(0, limit)]
    if likeliest_first:
        return [e.item for e in chosen]
    chosen.sort(key=lambda e: (e.item.page, e.item.source != "text", e.item.source, e.item.start))
    return [e.item for e in chosen]


# --- numbers and the statistics they form -------------------------------------------------------

# A number as printed: "12", "1,234", "0.55", ".55" (journals drop the leading zero). Not the "2"
# of "IL-2", "H2" or "kg/m2": a number glued to a word is part of a label.
_NUMBER = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)")
_PLUS_MINUS = re.compile(r"^\s*(?:±|\+/-|\+-|\+/−)\s*$")
_SLASH = re.compile(r"^\s*/\s*$")
_PAREN_OPEN = re.compile(r"^\s*%?\s*[(\[]\s*(?:(?:SD|SE|SEM)\b\s*[=:]?\s*)?[-−–]?\s*$")  # "12 (", "0.25 (SD "
_CLOSING = re.compile(r"[)\]]")
_P_BEFORE = re.compile(r"(?:[<>=≤≥]|\bp\b)\s*$", re.IGNORECASE)
_SIZE_BEFORE = re.compile(r"\b[nN]\s*[=:]\s*$")  # "n = 49": a group size, not a p-value's "="
_MINUS = ("-", "\u2212", "\u2013")

ARM, PERCENT, P_VALUE, RANGE, ESTIMATE, SIZE = "arm", "percent", "p", "range", "estimate", "size"


@dataclass(frozen=True)
class _Number:
    printed: str
    value: Decimal  # absolute: a sign the model dropped is grounding's flag, not a miss
    start: int  # offsets in the segment
    end: int
    group: int  # the numbers of one statistic share a group: "74.1 ± 12.2", "42/402 (10.5)"
    role: str  # ARM (a number the template asks for), SIZE ("n = 49"), PERCENT, P_VALUE, RANGE or ESTIMATE

    @property
    def distinctive(self) -> bool:
        """Equal by chance only rarely: a decimal, or an integer of at least 10."""
        return "." in self.printed or self.value >= 10


def _decimal(printed: str) -> Decimal | None:
    try:
        return abs(Decimal(printed.replace(",", "")))
    except InvalidOperation:
        return None


def _numbers(text: str, start: int, end: int, sizes: frozenset[Decimal]) -> list[_Number]:
    """The numbers of ``text[start:end]``, grouped into statistics, each with its role."""
    groups: list[list[tuple[str, int, int, str]]] = []  # (printed, start, end, how it joined)
    open_paren = False  # the statistic's parenthesis ("12 (4.5", "0.99 (0.65–") is still open
    previous_end = start
    for match in _NUMBER.finditer(text, start, end):
        printed, at, stop = match.group(1), match.start(1), match.end(1)
        gap = text[previous_end:at]
        previous_end = stop
        if groups and open_paren and not _CLOSING.search(gap) and len(gap) <= 6:
            groups[-1].append((printed, at, stop, "paren"))
        elif groups and _PAREN_OPEN.match(gap):
            groups[-1].append((printed, at, stop, "paren"))
            open_paren = True
        elif groups and _PLUS_MINUS.match(gap):
            groups[-1].append((printed, at, stop, "pm"))
        elif groups and _SLASH.match(gap) and len(groups[-1]) == 1:
            groups[-1].append((printed, at, stop, "slash"))
        else:
            joined = "size" if _SIZE_BEFORE.search(gap) else "p" if _P_BEFORE.search(gap) else "main"
            groups.append([(printed, at, stop, joined)])
            open_paren = False
    found: list[_Number] = []
    for index, members in enumerate(groups):
        last_of_several = len(groups) >= 3 and index == len(groups) - 1
        for printed, at, stop, role in _roles(text, members, sizes, last_of_several):
            value = _decimal(printed)
            if value is not None:
                found.append(_Number(printed, value, at, stop, index, role))
    return found


def _roles(
    text: str, members: list[tuple[str, int, int, str]], sizes: frozenset[Decimal], last_of_several: bool
) -> Iterator[tuple[str, int, int, str]]:
    """Each number of one statistic with what it is: an arm number the template asks for, or a
    p-value, percentage, range bound or estimate it does not. ``last_of_several``: the last
    statistic of a row or sentence, where its p-value is printed."""
    first, at, stop, joined = members[0]
    in_paren = [m for m in members[1:] if m[3] == "paren"]
    has_slash = any(m[3] == "slash" for m in members)
    if joined == "p":
        main_role = P_VALUE
    elif joined == "size":
        main_role = SIZE
    elif text[stop : stop + 2].lstrip().startswith("%"):
        main_role = PERCENT
    elif len(in_paren) >= 2:
        main_role = ESTIMATE  # "0.99 (0.65–1.51)", "5 (4–5)": an effect with its CI, a median with its IQR
    elif len(members) == 1 and _looks_like_p(text, first, stop, last_of_several):
        main_role = P_VALUE
    else:
        main_role = ARM
    yield first, at, stop, main_role
    count = _decimal(first) or Decimal(0)
    for printed, start, end, how in members[1:]:
        if how in ("pm", "slash"):
            yield printed, start, end, ARM
        elif len(in_paren) >= 2:
            yield printed, start, end, RANGE
        elif has_slash or text[end : end + 2].lstrip().startswith("%") or _is_share(count, printed, sizes):
            yield printed, start, end, PERCENT
        else:
            yield printed, start, end, ARM  # "12.1 (3.4)": a mean and its SD


def _looks_like_p(text: str, printed: str, end: int, last: bool) -> bool:
    """A lone decimal of at most 1 printed with three places ("0.004"), or with two and a
    footnote mark ("0.03*", "0.86#", "0.62b") or at the end of a row: a p-value. "0.6" or
    "−0.2" may well be a mean."""
    value = _decimal(printed)
    before = text[max(0, end - len(printed) - 1) : end - len(printed)]
    if value is None or value > 1 or "." not in printed or before in _MINUS:
        return False
    places = len(printed.split(".")[1])
    marked = bool(re.match(r"[*†‡§#a-fA-F]", text[end : end + 1]))
    return places >= 3 or (places == 2 and (marked or last))


def _is_share(count: Decimal, printed: str, sizes: frozenset[Decimal]) -> bool:
    """Is ``printed`` the percentage ``count`` makes of one of the known group sizes?"""
    value = _decimal(printed)
    if value is None or value > 100 or count != count.to_integral_value():
        return False
    places = len(printed.split(".")[1]) if "." in printed else 0
    tolerance = Decimal("0.5") * Decimal(10) ** -places + Decimal("0.05")
    return any(size >= count and abs(100 * count / size - value) <= tolerance for size in sizes if size > 0)


def _reports_results(numbers: list[_Number]) -> bool:
    """A statistic per arm at least: two numbers other than p-values, or one with its spread."""
    useful = [n for n in numbers if n.role not in (P_VALUE, SIZE)]
    return len(useful) >= 2 and (len({n.group for n in useful}) >= 2 or any(n.role == ARM for n in useful[1:]))


# --- the paper's layout: captions, sections, rows, sentences ------------------------------------

_CAPTION = re.compile(r"^\W{0,4}(?:Table|TABLE)\s*[-–.]?\s*([0-9]+|[IVX]+)\b\s*(?:[.:|\-–]|\s+[A-Z(\"“‘']|$)")
_BASELINE = re.compile(
    r"baseline|characteristic|demographic|at (?:entry|enrol|inclusion|randomi)|patient profile", re.IGNORECASE
)
_SAYS_RESULTS = re.compile(
    r"outcome|result|effect|change|complication|adverse|response|efficacy|endpoint|score|level|compar|differen|"
    r"after|follow|post",
    re.IGNORECASE,
)
_NUMBERED = r"^\W{0,4}(?:\d+\.?\s*|[IVX]+\.\s*)"
_RESULTS_HEADING = re.compile(_NUMBERED + r"?(?:results?|findings)\b\W{0,4}\s*$", re.IGNORECASE)
_END_HEADING = re.compile(
    _NUMBERED + r"?(?:discussion|conclusions?|references|acknowledge?ments?|bibliography)\b\W{0,4}\s*$", re.IGNORECASE
)
# The abstract ends where the introduction starts ("Background" opens many structured abstracts,
# so it ends the abstract only when numbered).
_INTRO_HEADING = re.compile(
    r"^\W{0,4}(?:(?:\d+\.?\s*|[IVX]+\.\s*)?introduction|(?:\d+\.?\s*|[IVX]+\.\s*)background)\b\W{0,4}\s*$",
    re.IGNORECASE,
)
ABSTRACT_PAGES = 2  # an abstract with no introduction heading after it ends with page 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")
# A row label that only says when or in whom ("Baseline", "12 weeks", "Post"): the outcome is
# named by the group label above it.
_GENERIC_LABEL = re.compile(
    r"^(?:pre|post|baseline|change|total|overall|all|mean|median|sd|n|week|weeks|month|months|day|days|visit|"
    r"follow[- ]?up|after|before|end|t\d|pre[- ]?intervention|post[- ]?intervention|endpoint|final|"
    r"\d+[- ]?(?:weeks?|months?|days?|h|hours?|years?)|[\d\s.,:-]+)\b.{0,25}$",
    re.IGNORECASE,
)
# What a cell may hold besides numbers: range words, "vs", empty-cell marks, footnote marks.
_CELL_WORDS = re.compile(r"\b(?:to|vs|versus|ns|n\.s|na|nr|ne|n/a|nd|ci|and)\b\.?", re.IGNORECASE)
_FOOTNOTE_MARKS = re.compile(r"[*†‡§¶#|^∗]+")
_PLACEHOLDER = re.compile(r"^\s*(?:[-–—−]+|n/?a|nr|ns|n\.s\.|ne|nd|\.\.\.|…)\s*$", re.IGNORECASE)
_ARM_HEAD = re.compile(r"\(\s*[nN]\s*=\s*[\d,]+\s*\)\s*$")  # "Placebo (n=600)": an arm's column head
_GROUP_SIZE_LINE = re.compile(r"^[\s(\[]*[nN]\s*[=:]\s*[\d,]+[\s)\]]*$")
_LETTERS = re.compile(r"[^\W\d_]")
MAX_LABEL_LINE = 90
PROSE_LINE = 40  # four lines in a row this long or longer: the table has ended, prose goes on

CELL, PLACEHOLDER, TEXT, GROUP_SIZE, BLANK = "cell", "placeholder", "text", "group size", "blank"


@dataclass(frozen=True)
class _Line:
    text: str
    start: int  # offsets in the page text
    end: int
    kind: str  # CELL, PLACEHOLDER, TEXT, GROUP_SIZE or BLANK (empty, or a running head)


@dataclass
class _Candidate:
    """A place that reports results: a table row or a sentence."""

    page: int
    source: str
    start: int
    end: int
    label: str
    text: str
    numbers: list[_Number]
    prose: bool  # a sentence of the abstract or results text, not a table row
    results_table: bool = True  # False: a table whose caption does not say it holds results
    in_abstract: bool = False
    table: str = ""  # which table a row belongs to ("page:caption line"); "" for a sentence


@dataclass
class _Layout:
    """What the document is made of, for the recall check."""

    candidates: list[_Candidate] = field(default_factory=list)
    abstract: frozenset[str] = frozenset()  # the abstract's word stems: outcomes it names rank higher
    results_text: frozenset[str] = frozenset()  # the results section's, likewise
    acronyms: Mapping[str, str] = field(default_factory=dict)  # "rds" -> "respiratory distress syndrome"
    used_tables: set[str] = field(default_factory=set)  # tables with a row the extraction read
    # Rows of baseline tables: never listed as unread, but a value quoted there is placed in them.
    baseline_rows: list[_Candidate] = field(default_factory=list)


def _line_kind(line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return BLANK
    if _GROUP_SIZE_LINE.match(stripped):
        return GROUP_SIZE
    if _PLACEHOLDER.match(stripped):
        return PLACEHOLDER
    if not any(c.isdigit() for c in stripped):
        return TEXT
    # Footnote marks glued to a number ("2.75iii", "0.626b", "<0.001A") are not words.
    unglued = re.sub(r"(?<=\d)[a-zA-Z]{1,4}\b", " ", stripped)
    rest = _FOOTNOTE_MARKS.sub(" ", _CELL_WORDS.sub(" ", _NUMBER.sub(" ", unglued)))
    return TEXT if any(len(word) > 1 for word in re.findall(r"[^\W\d_]+", rest)) else CELL


def _lines(text: str, furniture_keys: set[str]) -> list[_Line]:
    found = []
    at = 0
    for raw in text.split("\n"):
        kind = BLANK if furniture_key(raw) in furniture_keys else _line_kind(raw)
        found.append(_Line(raw, at, at + len(raw), kind))
        at += len(raw) + 1
    return found


def _caption_is_results(caption: str) -> bool | None:
    """True for a results caption, False for a baseline one, None when it does not say."""
    if _BASELINE.search(caption) and not re.search(r"outcome|result|effect|change|after|follow", caption, re.I):
        return False
    return True if _SAYS_RESULTS.search(caption) else None


def _sizes(text: str) -> frozenset[Decimal]:
    """Group sizes printed on a page ("n = 49", "N=326", "(40)"): what percentages are shares of."""
    found = set()
    for match in re.finditer(r"\b[nN]\s*[=:]\s*([\d,]+)|\((\d{2,5})\)", text):
        value = _decimal(match.group(1) or match.group(2))
        if value:
            found.add(value)
    return frozenset(found)


def _layout(document: ParsedDocument, sizes: frozenset[Decimal]) -> _Layout:
    layout = _Layout()
    furniture_keys = furniture(document.pages_text)
    in_results, in_abstract = False, True
    abstract: list[str] = []
    results: list[str] = []
    for page, text in enumerate(document.pages_text, start=1):
        page_sizes = sizes | _sizes(text)
        lines = _lines(text, furniture_keys)
        rows, baseline_rows, table_lines = _table_rows(page, text, lines, page_sizes)
        layout.baseline_rows.extend(baseline_rows)
        layout.candidates.extend(rows or _parsed_table_rows(page, document.tables_on(page), page_sizes))
        # The sentences: the abstract (up to the introduction), the results section.
        in_abstract = in_abstract and page <= ABSTRACT_PAGES
        zone: list[_Line] = []
        zone_is_abstract = in_abstract
        for index, line in enumerate(lines):
            stripped = line.text.strip()
            if in_abstract and _INTRO_HEADING.match(stripped):
                in_abstract = False
            if _RESULTS_HEADING.match(stripped):
                in_results = True
            elif _END_HEADING.match(stripped):
                in_results = False
            heading = bool(_RESULTS_HEADING.match(stripped) or _END_HEADING.match(stripped))
            wanted = (in_abstract or in_results) and index not in table_lines and line.kind != BLANK and not heading
            if zone and not (wanted and zone_is_abstract == in_abstract):
                layout.candidates.extend(_sentences(page, text, zone, page_sizes, abstract=zone_is_abstract))
                (abstract if zone_is_abstract else results).extend(z.text for z in zone)
                zone = []
            if wanted:
                zone_is_abstract = in_abstract
                zone.append(line)
        if zone:
            layout.candidates.extend(_sentences(page, text, zone, page_sizes, abstract=zone_is_abstract))
            (abstract if zone_is_abstract else results).extend(z.text for z in zone)
    layout.acronyms = _acronyms(document.full_text)
    layout.abstract = _words(" ".join(abstract))
    layout.results_text = _words(" ".join(results))
    return layout


def _table_rows(
    page: int, text: str, lines: list[_Line], sizes: frozenset[Decimal]
) -> tuple[list[_Candidate], list[_Candidate], set[int]]:
    """Rows rebuilt from a page's text, in the regions that start at a table caption: the rows of
    results tables, the rows of baseline tables, and the indexes of the lines the tables took (the
    sentences leave those out)."""
    rows: list[_Candidate] = []
    baseline: list[_Candidate] = []
    taken: set[int] = set()
    captions = [i for i, line in enumerate(lines) if _CAPTION.match(line.text)]
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
    page: int, text: str, lines: list[_Line], first: int, last: int, sizes: frozenset[Decimal]
) -> tuple[list[_Candidate], set[int]]:
    """The rows of one table region: label lines, then the cell lines that follow them."""
    rows: list[_Candidate] = []
    used: set[int] = set()
    labels: list[int] = []  # text lines since the last row: the next row's label
    group_label = ""  # the last label with no numbers of its own: it names the rows under it
    cells: list[int] = []
    prose_run = 0

    def close() -> None:
        nonlocal cells, labels
        if cells:
            row = _row(page, text, lines, labels[-2:], cells, group_label, sizes)
            if row is not None:
                rows.append(row)
                used.update(labels[-2:])
                used.update(cells)
            labels = []
        cells = []

    for index in range(first, last):
        line = lines[index]
        if line.kind in (CELL, PLACEHOLDER):
            prose_run = 0
            if not cells and len(labels) > 2:
                group_label = lines[labels[-3]].text.strip()
            cells.append(index)
            continue
        if line.kind == BLANK:
            continue
        close()
        if line.kind == GROUP_SIZE or len(line.text.strip()) <= 2 or _ARM_HEAD.search(line.text):
            # a column head ("n = 50", "P", "Placebo (n=600)"), never part of a row's label
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
        inline = _inline_row(page, text, line, group_label, sizes)
        if inline is not None:
            rows.append(inline)
            used.add(index)
            labels = []
    close()
    return rows, used


def _clean_label(label: str) -> str:
    return " ".join(_FOOTNOTE_MARKS.sub(" ", label).split()).strip(" ,;:")


def _labelled(label: str, group_label: str) -> str:
    """A generic label ("12 weeks", "Post") under the label of its group ("Fat mass: 12 weeks")."""
    if group_label and (not label or _GENERIC_LABEL.match(label)):
        return f"{_clean_label(group_label)}: {label}" if label else _clean_label(group_label)
    return label


HEADS_AFTER_NOTES = 12  # lines after a caption's notes in which a table's column heads may start


def _column_heads_follow(lines: list[_Line], first: int, last: int) -> bool:
    """Do an arm's column heads ("Placebo (n = 45)", "n = 45") follow within a few lines?"""
    return any(
        lines[i].kind == GROUP_SIZE or _ARM_HEAD.search(lines[i].text)
        for i in range(first, min(last, first + HEADS_AFTER_NOTES))
    )


def _row(
    page: int,
    text: str,
    lines: list[_Line],
    labels: list[int],
    cells: list[int],
    group_label: str,
    sizes: frozenset[Decimal],
) -> _Candidate | None:
    start, end = lines[cells[0]].start, lines[cells[-1]].end
    numbers = _numbers(text, start, end, sizes)
    if not _reports_results(numbers):
        return None
    label = _labelled(_clean_label(" ".join(lines[i].text.strip() for i in labels)), group_label)
    span_start = lines[labels[0]].start if labels else start
    return _Candidate(page, "text", span_start, end, label, text[span_start:end], numbers, prose=False)


def _inline_row(page: int, text: str, line: _Line, group_label: str, sizes: frozenset[Decimal]) -> _Candidate | None:
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
    numbers = _numbers(text, numbers_from, line.end, sizes)
    if len([n for n in numbers if n.role != P_VALUE]) < 2 or not _reports_results(numbers):
        return None
    label = _labelled(_clean_label(label_part), group_label)
    return _Candidate(page, "text", line.start, line.end, label, line.text, numbers, prose=False)


def _parsed_table_rows(page: int, tables: list[ParsedTable], sizes: frozenset[Decimal]) -> list[_Candidate]:
    """Rows of the page's parsed tables (cells by tabs, rows by lines), in that table's text."""
    rows: list[_Candidate] = []
    for number, table in enumerate(tables, start=1):
        if _caption_is_results(table.text.split("\n", 1)[0]) is False:
            continue
        at = 0
        for line in table.text.split("\n"):
            first_cell = line.split("\t", 1)[0]
            label = _clean_label(first_cell) if _LETTERS.search(first_cell) else ""
            numbers = _numbers(table.text, at + (len(first_cell) if label else 0), at + len(line), sizes)
            if label and _reports_results(numbers):
                row = _Candidate(page, f"table {number}", at, at + len(line), label, line, numbers, prose=False)
                row.table = f"{page}:table {number}"
                rows.append(row)
            at += len(line) + 1
    return rows


def _sentences(
    page: int, text: str, zone: list[_Line], sizes: frozenset[Decimal], *, abstract: bool
) -> list[_Candidate]:
    """Sentences of the abstract or results text that report a statistic for two arms."""
    found: list[_Candidate] = []
    runs: list[tuple[int, int]] = []  # consecutive lines of the zone: sentences are split inside one
    for line in zone:
        if runs and line.start <= runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], line.end)
        else:
            runs.append((line.start, line.end))
    for run_start, run_end in runs:
        chunk = text[run_start:run_end]
        at = 0
        for piece in _SENTENCE_END.split(chunk):
            where = chunk.find(piece, at)
            at = where + len(piece)
            start, end = run_start + where, run_start + where + len(piece)
            numbers = _numbers(text, start, end, sizes)
            partnered = {n.group for n in numbers if sum(1 for m in numbers if m.group == n.group) >= 2}
            if len({n.group for n in numbers if n.role in (ARM, PERCENT, RANGE) and n.group in partnered}) < 2:
                continue
            label = _sentence_label(" ".join(text[start : numbers[0].start].split()))
            found.append(
                _Candidate(page, "text", start, end, label, " ".join(piece.split()), numbers, True, True, abstract)
            )
    return found


# A sentence's outcome is its subject: the words before its first verb ("The mean operation time
# was 74.1 ..."), or after "difference in" when the sentence opens with one ("There was no
# difference in the incidence of PONV between the groups").
_VERB = re.compile(
    r"\b(?:was|were|is|are|had|has|have|did|does|showed?|shown|remained|differed|increased|decreased|"
    r"reduced|improved|declined|rose|fell|obtained|observed|reported|found|occurred|ranged|averaged)\b",
    re.IGNORECASE,
)
_COMPARING = re.compile(r"\b(?:between|among|amongst|versus|vs\.?|compared|in (?:the|both|each|all) )", re.IGNORECASE)
_DIFFERENCE_IN = re.compile(r"\b(?:differences?|changes?|reductions?|increases?|decreases?) (?:in|of)\b", re.IGNORECASE)
_LEADING = re.compile(
    r"^(?:(?:the|a|an|overall|mean|median|average|total|matched|respective|respectively)\b[\s,]*)+", re.I
)
_TRAILING = re.compile(
    r"(?:[\s(:;,=−–-]+|\b(?:the|a|an|of|in|for|at|with|and|to|by|from|on|during|after|groups?)\b)+$", re.I
)
MAX_SENTENCE_LABEL = 100


def _sentence_label(before: str) -> str:
    """An outcome name from the words of a sentence before its first number: its subject, without
    a section lead-in ("Operative Findings:"), articles, "mean", or the groups it compares."""
    text = before[-MAX_SENTENCE_LABEL:]
    if (difference := _DIFFERENCE_IN.search(text)) is not None:
        text = text[difference.end() :]
    elif (verb := _VERB.search(text)) is not None and _LETTERS.search(text[: verb.start()]):
        text = text[: verb.start()]
    text = re.split(r"[:;]|, ", text)[-1] if re.search(r"[:;]|, ", text) else text
    if (comparing := _COMPARING.search(text)) is not None and comparing.start() > 0:
        text = text[: comparing.start()]
    label = _TRAILING.sub("", _LEADING.sub("", text.strip())).strip()
    return label if len(_LETTERS.findall(label)) >= 3 else re.sub(r"[\s(:;,=−–-]+$", "", before[-MAX_SENTENCE_LABEL:])


_DEFINED = re.compile(r"((?:[A-Za-z][\w'-]*[\s-]+){1,6})\(([A-Z][A-Za-z0-9]{1,7})\)")
STEM = 5  # "complications" and "complication", "infections" and "infection" share a stem
_VAGUE = frozenset(
    word[:STEM]
    for word in re.findall(
        r"\w+",
        "mean median total number rate score group groups patients participants change baseline after before "
        "week weeks month months days day time level levels value values with without from during other all any "
        "the and for per",
    )
)


def _acronyms(text: str) -> dict[str, str]:
    """Abbreviations the paper defines ("respiratory distress syndrome (RDS)"): a row labelled
    "RDS" names what the abstract spells out."""
    found: dict[str, str] = {}
    for match in _DEFINED.finditer(text):
        letters = [c.lower() for c in match.group(2) if c.isupper()]
        words = re.findall(r"[A-Za-z]+", match.group(1))
        if len(letters) >= 2 and len(words) >= len(letters):
            tail = words[-len(letters) :]
            if [w[0].lower() for w in tail] == letters:
                found.setdefault(match.group(2).lower(), " ".join(tail).lower())
    return found


def _words(text: str) -> frozenset[str]:
    """The word stems of a text (for "does the abstract name this outcome?")."""
    return frozenset(word[:STEM] for word in normalize_name(text).split() if len(word) >= 3)


def _mentioned(label: str, words: frozenset[str], acronyms: Mapping[str, str]) -> bool:
    """Does a text (the abstract, the results) name this outcome too: most of its telling words?"""
    spelled = " ".join(acronyms.get(w.lower(), w) for w in re.findall(r"[\w-]+", label))
    telling = [w for w in _words(spelled) if w not in _VAGUE and not w.isdigit()]
    return bool(telling) and sum(1 for w in telling if w in words) >= max(1, math.ceil(0.6 * len(telling)))


# --- what the extraction read -------------------------------------------------------------------

MAX_ROW_STATISTICS = 10  # more statistics than this: a table read column by column, not a row


def _read(candidate: _Candidate, extracted: list[ExtractedEntry]) -> dict[str, set[int]]:
    """Which of the candidate's numbers (by position) each extracted entry read."""
    numbers = candidate.numbers
    read: dict[str, set[int]] = {}
    block = len({n.group for n in numbers if n.role == ARM}) > MAX_ROW_STATISTICS
    for entry in extracted:
        equal = [i for i, n in enumerate(numbers) if n.value.normalize() in entry.values]
        if not equal:
            continue
        spans = [(s, e) for page, source, s, e in entry.spans if page == candidate.page and source == candidate.source]
        covered = {i for i in equal if any(s <= numbers[i].start < e for s, e in spans)}
        if block:  # no row ties the numbers together: only a quote's own statistics are read
            groups = {numbers[i].group for i in covered}
            covered.update(i for i in equal if numbers[i].group in groups)
        else:
            over = any(s < candidate.end and e > candidate.start for s, e in spans)
            distinctive = {numbers[i].value for i in equal if numbers[i].distinctive}
            named = (
                not candidate.prose  # a sentence's words name too much to tie an outcome to it
                and bool(entry.name and candidate.label)
                and name_score(entry.name, candidate.label) >= NAME_ENOUGH
            )
            if over or len(distinctive) >= 2 or named:
                covered.update(equal)
        if covered:
            read[entry.key] = covered
    return read


# --- the list -----------------------------------------------------------------------------------

# Most likely misses first: a half-read statistic, a missing arm, a missing group size; then rows
# no value reads, higher when the extraction used their table or the abstract names them, and
# sentences no value reads (higher in the abstract): a result printed only in the text.
RANK_HALF_READ, RANK_OTHER_ARM, RANK_GROUP_SIZE, RANK_THIRD_ARM, RANK_UNREAD = 7.0, 6.5, 6.0, 5.0, 2.0
# An arm the answer declares with no number for an outcome, where nothing unread is printed beside
# the other arms' numbers: the answer says it is missing, the page does not show it.
RANK_ABSENT_ARM = 4.0
RANK_TEXT_ONLY = 1.5  # added for a sentence (sentences repeating a listed row's numbers are dropped)


@dataclass(frozen=True)
class _Listed:
    item: PossiblyMissed
    rank: float
    values: frozenset[Decimal]  # the item's numbers' values
    prose: bool
    unread_row_of: str = ""  # the table of a row no value reads (``_Candidate.table``)
    rows: int = 0  # an item for this many unread rows of one table (its place spans read rows too)

    def merged(self, other: _Listed) -> _Listed:
        """Two findings at the same place: one item, with both labels and numbers."""
        item = self.item
        label = item.label or other.item.label
        if item.label and _said(item.label) in _said(other.item.label) != _said(item.label):
            label = other.item.label  # "PONV" and "PONV: no numbers for H1": the one that says more
        elif item.label and other.item.label and _said(other.item.label) not in _said(item.label):
            label = f"{item.label}{LABEL_SEPARATOR}{other.item.label}"
        numbers = tuple(dict.fromkeys((*item.numbers, *other.item.numbers)))
        why = item.why if other.item.why == item.why else f"{item.why}; {other.item.why}"
        merged = PossiblyMissed(item.kind, label, item.text, item.page, item.source, item.start, item.end, numbers, why)
        return _Listed(merged, self.rank, self.values | other.values, self.prose and other.prose)


def _tables_read_by_none(document: ParsedDocument, listed: list[_Listed]) -> list[_Listed]:
    """The unread rows of one table as one item naming each: a reviewer checks a table once, and a
    table whose rows no value reads does not fill the list on its own. Its place runs from the
    first of them to the last (rows read between them are shown too; the label names the unread)."""
    rows: dict[str, list[_Listed]] = {}
    for entry in listed:
        if entry.unread_row_of:
            rows.setdefault(entry.unread_row_of, []).append(entry)
    kept = [e for e in listed if not e.unread_row_of or len(rows[e.unread_row_of]) == 1]
    kept += [
        _one_item(document, sorted(members, key=lambda e: e.item.start))
        for members in rows.values()
        if len(members) > 1
    ]
    return kept


def _one_item(document: ParsedDocument, members: list[_Listed]) -> _Listed:
    """Several rows of a table as one item, naming each; its text is all it highlights."""
    first, last = members[0].item, members[-1].item
    labels = list(dict.fromkeys(m.item.label for m in members if m.item.label.strip()))
    item = PossiblyMissed(
        kind=MissedKind.OUTCOME if any(m.item.kind == MissedKind.OUTCOME for m in members) else MissedKind.TABLE_ROW,
        label=LABEL_SEPARATOR.join(labels),
        text=_segment_text(document, first.page, first.source)[first.start : last.end],
        page=first.page,
        source=first.source,
        start=first.start,
        end=last.end,
        numbers=tuple(dict.fromkeys(n for m in members for n in m.item.numbers)),
        why=f"{len(members)} rows of this table that no extracted value reads",
    )
    values = frozenset(v for m in members for v in m.values)
    return _Listed(item, max(m.rank for m in members), values, prose=False, rows=len(members))


def _one_label(label: str) -> str:
    """A label as one name: the separator of several names is not part of it."""
    return label.replace(LABEL_SEPARATOR, ", ")


def _said(label: str) -> str:
    return " ".join(label.lower().split())


def _merged_by_place(listed: Iterable[_Listed]) -> list[_Listed]:
    """One item per place: findings whose excerpts overlap (a row's half-read statistic and an
    outcome's missing arm quoted in that row) become one item, at the likelier one's place."""
    merged: list[_Listed] = []
    for entry in listed:
        item = entry.item
        same = next((i for i, m in enumerate(merged) if not (m.rows or entry.rows) and _overlap(m.item, item)), None)
        if same is None:
            merged.append(entry)
        else:
            merged[same] = merged[same].merged(entry)
    return merged


def _overlap(a: PossiblyMissed, b: PossiblyMissed) -> bool:
    return (
        a.page == b.page
        and a.source == b.source
        and a.start < max(b.end, b.start + 1)
        and b.start < max(a.end, a.start + 1)
    )


def _judge(candidate: _Candidate, answer: Answer, layout: _Layout) -> _Listed | None:
    extracted, sizes = answer.entries, answer.sizes
    by_entry = _read(candidate, extracted)
    numbers = candidate.numbers
    kind = MissedKind.RESULT_TEXT if candidate.prose else MissedKind.TABLE_ROW
    if not by_entry:
        return _unread(candidate, extracted, layout, kind)
    groups: dict[int, set[int]] = {}
    for i, n in enumerate(numbers):
        if n.role == ARM:
            groups.setdefault(n.group, set()).add(i)
    # Half read: an outcome has one number of a statistic and not the other (a mean without its SD,
    # events without their total), even when another outcome has that other number. A group size
    # alone says nothing: every outcome of the arm shares it.
    half_read: set[int] = set()
    for seen in by_entry.values():
        for members in groups.values():
            hit = seen & members
            if any(numbers[i].value not in sizes for i in hit) and hit != members:
                half_read |= members - seen
    if half_read:
        why = "an extracted outcome has one number of this statistic and not the other"
        return _listed(candidate, kind, [numbers[i] for i in sorted(half_read)], RANK_HALF_READ, why)
    if len(groups) == 2:
        for seen in by_entry.values():
            untouched = [
                members for members in groups.values() if all(numbers[i].value in sizes for i in seen & members)
            ]
            if len(untouched) == 1 and (missing := sorted(untouched[0] - seen)):
                why = "an extracted outcome has one arm's numbers here and not the other arm's"
                return _listed(candidate, kind, [numbers[i] for i in missing], RANK_OTHER_ARM, why)
    if len(groups) == 3 and answer.study.version == 1:
        # A two-arm answer (version 1): three statistics of one shape ("21 (42%) 11 (22%) 10 (20%)":
        # a three-arm trial), two of them an outcome's: the third arm's comparison is another
        # outcome, left out. A version 2 answer names its arms: ``_incomplete`` lists the arm an
        # outcome has no numbers for.
        shapes = {len(members) for members in groups.values()}
        anyone = set().union(*by_entry.values())
        for seen in by_entry.values():
            untouched = [members for members in groups.values() if not seen & members]
            if len(shapes) == 1 and len(untouched) == 1 and not untouched[0] & anyone:
                why = "an extracted outcome compares two arms here; the third arm's numbers no value has"
                return _listed(candidate, kind, [numbers[i] for i in sorted(untouched[0])], RANK_THIRD_ARM, why)
    return None


def _unread(candidate: _Candidate, extracted: list[ExtractedEntry], layout: _Layout, kind: MissedKind) -> _Listed:
    """A row or sentence none of whose numbers any extracted value has."""
    named = (
        not candidate.prose
        and bool(candidate.label)
        and any(name_score(e.name, candidate.label) >= NAME_ENOUGH for e in extracted if e.name)
    )
    rank = RANK_UNREAD
    if named:
        rank -= 0.5
        why = "its label names an extracted outcome, but no extracted value has these numbers"
    elif candidate.prose:  # a sentence's words name too much to say it is an extracted outcome's
        kind = MissedKind.OUTCOME
        why = "no extracted value has the numbers this sentence reports"
    else:
        kind = MissedKind.OUTCOME
        why = "no extracted outcome is named like it, and no extracted value has its numbers"
    if candidate.prose:
        rank += RANK_TEXT_ONLY + (0.5 if candidate.in_abstract else 0.0)
    elif _mentioned(candidate.label, layout.abstract, layout.acronyms):
        rank += 2.0
    elif _mentioned(candidate.label, layout.results_text, layout.acronyms):
        rank += 0.5
    if not candidate.results_table:
        rank -= 1.0
    if candidate.table and candidate.table in layout.used_tables:
        rank += 1.5  # the extraction read this table's other rows and skipped this one
    if len({n.group for n in candidate.numbers if n.role == ARM}) > MAX_ROW_STATISTICS:
        rank -= 1.0  # a table read column by column: no row to show
    listed = _listed(candidate, kind, [n for n in candidate.numbers if n.role != P_VALUE], rank, why)
    return replace(listed, unread_row_of="" if candidate.prose else candidate.table)


def _listed(candidate: _Candidate, kind: MissedKind, numbers: Iterable[_Number], rank: float, why: str) -> _Listed:
    chosen = list(numbers)
    item = PossiblyMissed(
        kind=kind,
        label=_one_label(candidate.label),
        text=candidate.text,
        page=candidate.page,
        source=candidate.source,
        start=candidate.start,
        end=candidate.end,
        numbers=tuple(n.printed for n in chosen),
        why=why,
    )
    return _Listed(item, rank, frozenset(n.value for n in chosen), candidate.prose)


def _missing_sizes(document: ParsedDocument, answer: Answer, rows: list[_Candidate]) -> list[_Listed]:
    """Outcomes with an arm's numbers but no group size for it, listed where the other outcomes (or
    the arm itself) found that arm's size (a paper prints it once, for every outcome of the arm)."""
    extracted = answer.entries
    missing: dict[Span, tuple[list[str], Decimal, str]] = {}
    for entry in extracted:
        for arm in entry.arms():
            has_numbers = any((name, arm) in entry.numbers for name in ("events", "mean", "sd"))
            if not has_numbers or any((size, arm) in entry.numbers for size in ("total", "n")):
                continue
            found = Counter(
                (other.numbers[number], other.where[number])
                for other in extracted
                if other is not entry
                for number in other.numbers
                if number[1] == arm and number[0] in SIZE_KINDS and number in other.where
            )
            if found:
                (value, span), _count = found.most_common(1)[0]
                names, _value, _arm = missing.setdefault(span, ([], value, arm))
                names.append(entry.name or entry.key)
    listed = []
    for (page, source, start, end), (names, value, arm) in missing.items():
        in_row = any(r.page == page and r.source == source and r.start <= start < r.end for r in rows)
        said = answer.arm_said(arm)
        item = PossiblyMissed(
            kind=MissedKind.TABLE_ROW if in_row or source != "text" else MissedKind.RESULT_TEXT,
            label=_one_label(f"{', '.join(dict.fromkeys(names))}: group size of the {said} arm"),
            text=" ".join(_segment_text(document, page, source)[start:end].split()),
            page=page,
            source=source,
            start=start,
            end=end,
            numbers=(f"{value:f}",),
            why=f"these outcomes have {said}-arm numbers but no {said}-arm group size; other outcomes took it here",
        )
        listed.append(_Listed(item, RANK_GROUP_SIZE, frozenset({value}), prose=False))
    return listed


def _segment_text(document: ParsedDocument, page: int, source: str) -> str:
    """A page's text, or one of its tables' text ("table 2")."""
    if source == "text":
        return document.pages_text[page - 1] if 0 < page <= document.pages else ""
    tables = document.tables_on(page)
    number = source.rsplit(" ", 1)[-1]
    return tables[int(number) - 1].text if number.isdigit() and 0 < int(number) <= len(tables) else ""


# A number reported per arm: an outcome with one arm's and not the other's likely lost one. So did
# an outcome with events and no total, or a mean and no SD, for one arm (printed in one statistic:
# "42/402", "12.1 (3.4)").
PER_ARM = ("events", "total", "mean", "sd", "n")
GOES_WITH = {"events": "total", "mean": "sd", "sd": "mean"}
_SAID = {"events": "events", "total": "total", "mean": "mean", "sd": "SD", "n": "group size"}
MAX_EXCERPT = 300  # characters of a quote's lines shown when no row or sentence holds it


@dataclass(frozen=True)
class _Lack:
    """A number an extracted outcome lacks, told from one it has."""

    have: Number  # the number it has: where its quote is, the lost one is printed
    same_statistic: bool  # the other half of that statistic (else another arm's statistic)
    said: str  # what a reviewer is told
    absent_arm: str = ""  # a declared arm with no number at all for the outcome (version 2)


def _incomplete(document: ParsedDocument, answer: Answer, layout: _Layout) -> list[_Listed]:
    """Extracted outcomes missing a number their other numbers say the paper prints (another
    arm's, or the other half of a statistic), listed where the number they have is quoted, with
    the unread numbers printed beside it: whatever the table's layout, the lost number is there
    more often than not. A version 2 answer's arm with no number for an outcome its other arms
    have numbers for is listed so ("no numbers for H2 (haloperidol 2 mg)") even when nothing
    unread is printed beside them: the answer itself says an arm is missing."""
    listed = []
    for entry in answer.entries:
        if not entry.outcome:
            continue  # the arms' own numbers: their group sizes are ``_missing_sizes``' business
        places: list[_Listed] = []
        first_place: dict[str, tuple[_Candidate, _Lack]] = {}  # an absent arm's first located place
        for lack in _lacking(entry, answer):
            span = entry.where.get(lack.have)
            if span is None:
                continue
            place = _place(document, layout, span)
            if place is None:
                continue
            first_place.setdefault(lack.absent_arm, (place, lack))
            unread = _unread_beside(place, entry, lack, span)
            if not unread:
                continue  # nothing to show (a total printed only in a column head): no item
            places.append(_lacked(entry, place, lack, unread, RANK_OTHER_ARM))
        for arm, (place, lack) in first_place.items():
            if arm and not any(lack.said in p.item.label for p in places):
                places.append(_lacked(entry, place, lack, [], RANK_ABSENT_ARM))
        listed.extend(_merged_by_place(places))  # one item per place the outcome's quotes are
    return listed


def _unread_beside(place: _Candidate, entry: ExtractedEntry, lack: _Lack, span: Span) -> list[_Number]:
    """The numbers printed beside the one ``entry`` has (its statistic's other half, or the
    statistics next to it) that no value of the entry has."""
    numbers = place.numbers
    have = entry.numbers[lack.have]
    at = [i for i, n in enumerate(numbers) if n.value == have and span[2] <= n.start < span[3]]
    at = at or [i for i, n in enumerate(numbers) if n.value == have]
    if not at:
        return []
    group = numbers[at[0]].group
    if lack.same_statistic:
        beside = [n for n in numbers if n.group == group]
    else:  # another arm's: the statistics printed next to this one
        arm_groups = sorted({n.group for n in numbers if n.role in (ARM, SIZE) and n.group != group})
        before = [g for g in arm_groups if g < group][-1:]
        after = [g for g in arm_groups if g > group][:1]
        beside = [n for n in numbers if n.group in (*before, *after)]
    # Arms may print the same number (326 randomised to each): beside this one, it is the other
    # arm's even though the outcome has that value.
    same = None if lack.same_statistic else have
    return [
        n
        for n in beside
        if n.role in (ARM, SIZE) and (n.value.normalize() not in entry.values or n.value.normalize() == same)
    ]


def _lacked(entry: ExtractedEntry, place: _Candidate, lack: _Lack, unread: list[_Number], rank: float) -> _Listed:
    name = entry.name or entry.key
    if lack.absent_arm:  # the item is the arm: a follow-up question asks for it by this label
        label, why = f"{name}: {lack.said}", "the answer has the other arms' numbers for it; they are quoted here"
    else:
        label, why = name, f"{lack.said}; the one it has is quoted here"
    item = PossiblyMissed(
        kind=MissedKind.RESULT_TEXT if place.prose else MissedKind.TABLE_ROW,
        label=_one_label(label),
        text=place.text,
        page=place.page,
        source=place.source,
        start=place.start,
        end=place.end,
        numbers=tuple(n.printed for n in unread),
        why=why,
    )
    return _Listed(item, rank, frozenset(n.value for n in unread), prose=place.prose)


def _lacking(entry: ExtractedEntry, answer: Answer) -> Iterator[_Lack]:
    """What ``entry`` lacks, each with a number it has. Version 1 compares its two arms always;
    version 2 the arms the outcome has numbers for, and lists each declared arm it has none for."""
    arms = [arm.key for arm in answer.study.arms] if answer.study.version == 1 else entry.arms()
    for kind in PER_ARM:
        for arm in arms:
            for other in arms:
                if other != arm and (kind, arm) in entry.numbers and (kind, other) not in entry.numbers:
                    said = (
                        f"it has the {answer.arm_said(arm)} arm's {_SAID[kind]}, not the {answer.arm_said(other)} arm's"
                    )
                    yield _Lack((kind, arm), False, said)
    for kind, partner in GOES_WITH.items():
        for arm in arms:
            if (kind, arm) in entry.numbers and (partner, arm) not in entry.numbers:
                said = f"it has the {answer.arm_said(arm)} arm's {_SAID[kind]}, not its {_SAID[partner]}"
                yield _Lack((kind, arm), True, said)
    for absent in answer.missing_arms(entry):
        said = f"no numbers for {answer.arm_described(absent)}"
        for have in entry.numbers:
            if have[0] in PER_ARM and have[1] in arms:
                yield _Lack(have, False, said, absent)


def _place(document: ParsedDocument, layout: _Layout, span: Span) -> _Candidate | None:
    """The row or sentence a quote is in; else the lines it spans (a methods sentence, a table
    the check does not rebuild), as a place of its own."""
    page, source, start, _end = span
    for candidate in (*layout.candidates, *layout.baseline_rows):
        if candidate.page == page and candidate.source == source and candidate.start <= start < candidate.end:
            return candidate
    text = _segment_text(document, page, source)
    if not text or start >= len(text):
        return None
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", max(start, span[3] - 1))
    last = len(text) if last < 0 else last
    first, last = max(first, start - MAX_EXCERPT // 2), min(last, max(span[3], start + MAX_EXCERPT // 2))
    lines = text[first:last].split("\n")
    cells = re.search(r"\t| {3,}", text[first:last])  # cells set apart (two spaces may end a sentence)
    prose = source == "text" and not cells and sum(len(line) for line in lines) / len(lines) >= PROSE_LINE
    if prose:
        # Prose: the sentence around the quote (a PDF line often holds half of it). Table cells
        # keep to the quote's own lines.
        floor, ceiling = max(0, start - MAX_EXCERPT // 2), min(len(text), max(span[3], start + MAX_EXCERPT // 2))
        ends = [m.end() for m in _SENTENCE_END.finditer(text, floor, start)]
        first = ends[-1] if ends else floor
        after = _SENTENCE_END.search(text, max(start, span[3] - 1), ceiling)
        last = after.start() if after else ceiling
    numbers = _numbers(text, first, last, frozenset())
    excerpt = " ".join(text[first:last].split())
    return _Candidate(page, source, first, last, "", excerpt, numbers, prose=prose)
