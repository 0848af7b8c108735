"""Where a paper reports results, for the recall check: its layout (the rows of its tables, the
sentences of the abstract and the results section that report a statistic per arm, the words
of both, the abbreviations it defines), a page's or a table's text, and the place a quote is in.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from extraction_pipeline.core.pdf.furniture import furniture
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.recall_answer import Span
from extraction_pipeline.core.verification.recall_columns import outcome_columns
from extraction_pipeline.core.verification.recall_labels import defined_acronyms, sentence_label, word_stems
from extraction_pipeline.core.verification.recall_numbers import (
    ARM,
    PERCENT,
    RANGE,
    TIME,
    PrintedNumber,
    group_sizes,
    numbers_in,
    sentence_numbers,
)
from extraction_pipeline.core.verification.recall_rows import (
    BLANK,
    PROSE_LINE,
    Candidate,
    Line,
    page_lines,
    parsed_table_rows,
    table_rows,
)

# --- the paper's layout: captions, sections, rows, sentences ------------------------------------

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


@dataclass
class Layout:
    """What the document is made of, for the recall check."""

    candidates: list[Candidate] = field(default_factory=list)
    abstract: frozenset[str] = frozenset()  # the abstract's word stems: outcomes it names rank higher
    # The abstract's distinctive numbers: a row or sentence printing one reports a headline result.
    abstract_numbers: frozenset[Decimal] = frozenset()
    results_text: frozenset[str] = frozenset()  # the results section's, likewise
    acronyms: Mapping[str, str] = field(default_factory=dict)  # "rds" -> "respiratory distress syndrome"
    used_tables: set[str] = field(default_factory=set)  # tables with a row the extraction read
    # Every outcome name the paper and the answer use (row labels, extracted names): a row names an
    # extracted outcome only when it is told apart from these ("Hip flexion" is not "Wrist flexion").
    names: tuple[str, ...] = ()
    # Rows of baseline tables: never listed as unread, but a value quoted there is placed in them.
    baseline_rows: list[Candidate] = field(default_factory=list)
    # The table rows each extracted value's quotes overlap ((entry key, value) -> rows per quote): a
    # value quoted from one row of a table is not read in another row printing it too.
    quoted_rows: dict[tuple[str, Decimal], tuple[tuple[Candidate, ...], ...]] = field(default_factory=dict)
    # Where each page's text starts in the document's: the page text is read on across a page break.
    page_starts: tuple[int, ...] = ()


def read_layout(document: ParsedDocument, sizes: frozenset[Decimal], arms: tuple[str, ...] = ()) -> Layout:
    """The document's rows and results sentences, the words of its abstract and results section,
    and the abbreviations it defines; ``sizes`` are the answer's group sizes (percentages are
    shares of them), ``arms`` the names of its arms (a table whose rows name them may print
    outcomes as columns)."""
    layout = Layout(page_starts=tuple(itertools.accumulate((len(t) for t in document.pages_text), initial=0)))
    furniture_keys = furniture(document.pages_text)
    in_results, in_abstract = False, True
    abstract: list[str] = []
    results: list[str] = []
    for page, text in enumerate(document.pages_text, start=1):
        page_sizes = sizes | group_sizes(text)
        lines = page_lines(text, furniture_keys)
        rows, baseline_rows, table_lines = table_rows(page, text, lines, page_sizes)
        rows = outcome_columns(page, text, lines, rows, page_sizes, arms)
        layout.baseline_rows.extend(baseline_rows)
        layout.candidates.extend(rows or parsed_table_rows(page, document.tables_on(page), page_sizes))
        # The sentences: the abstract (up to the introduction), the results section.
        in_abstract = in_abstract and page <= ABSTRACT_PAGES
        zone: list[Line] = []
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
                layout.candidates.extend(_sentences(page, text, zone, page_sizes, arms, abstract=zone_is_abstract))
                (abstract if zone_is_abstract else results).extend(z.text for z in zone)
                zone = []
            if wanted:
                zone_is_abstract = in_abstract
                zone.append(line)
        if zone:
            layout.candidates.extend(_sentences(page, text, zone, page_sizes, arms, abstract=zone_is_abstract))
            (abstract if zone_is_abstract else results).extend(z.text for z in zone)
    layout.acronyms = defined_acronyms(document.full_text)
    abstract_text = " ".join(abstract)
    layout.abstract = word_stems(abstract_text)
    layout.abstract_numbers = frozenset(
        n.value for n in numbers_in(abstract_text, 0, len(abstract_text), frozenset()) if n.distinctive
    )
    layout.results_text = word_stems(" ".join(results))
    return layout


# A number printed with the arm it is of ("80% in Group II", "2 in placebo") or set against another
# ("100% vs 80%"): an arm's result, though nothing else (a total, an SD) is printed with it.
_WITH_ARM = r"%?\s+(?:[a-z]+\s+){0,2}?(?:in|with|on|receiving|given)\s+(?:the\s+)?(?:[\w-]+\s+){0,3}?"
# A range's bound is no arm's result: "75–95% versus 39 to 79%".
_RANGE_BEFORE = re.compile(r"(?:[–—-]|\bto)\s*$")
_RANGE_AFTER = re.compile(r"\s*(?:%\s*)?(?:[–—-]|to\b)\s*\d")
# Sentences about who took part, not what happened to them: the trial's flow, its baseline, its
# design ("56% in the drug group were women", "5 in the placebo group withdrew", "80% power").
# Outcomes that sound like them stay results: "complete remission", "change from baseline",
# "discontinued because of adverse events", "muscle power".
_NOT_RESULTS = re.compile(
    r"\b(?:withdr[ae]w\w* (?:their )?consent|withdr[ae]w from the (?:study|trial)|lost to follow|dropp\w+ out|"
    r"completed|available|missing|randomi[sz]ed|allocated|assigned|enrolled|at baseline|baseline characteristics|"
    r"women|men|female|male|\d+ ?% power|sample size|assum\w+)\b",
    re.IGNORECASE,
)
# A number beside a time point ("40% at 6 months versus 20% at 12 months") sets times against
# each other, not arms.
_AT_TIME = re.compile(r"%?\s*(?:at|after|by|over)\s+(?:\w+\s+)?\d+\s*(?:days?|weeks?|months?|years?|h|hours?)\b", re.I)
_AGAINST = re.compile(r"%?\s*(?:vs\.?|versus|v\.|compared (?:with|to))\s*", re.IGNORECASE)


def _arms_compared(text: str, numbers: list[PrintedNumber], arms: tuple[str, ...], start: int, end: int) -> set[int]:
    """The groups of numbers printed alone (a count, a percentage) that the sentence
    ``text[start:end]`` gives as arms' results: each followed by its arm (a word naming a group or
    arm, or an arm of the answer by its first word), or two set against each other, neither a
    range's bound nor beside a time point. None in a sentence about the trial's flow, baseline or
    design."""
    if _NOT_RESULTS.search(text, start, end):
        return set()
    names = "|".join(dict.fromkeys(re.escape(arm.split()[0]) for arm in arms if len(arm.split()[0]) >= 3))
    with_arm = re.compile(_WITH_ARM + r"(?:groups?|arms?" + (f"|{names}" if names else "") + r")\b", re.IGNORECASE)
    alone = [
        n
        for n in numbers
        if (n.role == PERCENT or (n.role == ARM and "." not in n.printed))
        and sum(1 for m in numbers if m.group == n.group) == 1
        and not _RANGE_BEFORE.search(text, start, n.start)
        and not _RANGE_AFTER.match(text, n.end, end)
    ]
    found = {n.group for n in alone if with_arm.match(text, n.end, end)}
    for one, other in itertools.pairwise(alone):
        timed = _AT_TIME.match(text, one.end) or _AT_TIME.match(text, other.end)
        if not timed and _AGAINST.fullmatch(text, one.end, other.start):
            found |= {one.group, other.group}
    return found


def _sentences(
    page: int, text: str, zone: list[Line], sizes: frozenset[Decimal], arms: tuple[str, ...], *, abstract: bool
) -> list[Candidate]:
    """Sentences of the abstract or results text that report a statistic for two arms (statistics
    of two numbers or more, or numbers the sentence gives as arms' results)."""
    found: list[Candidate] = []
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
            numbers = sentence_numbers(text, start, end, sizes)
            partnered = {n.group for n in numbers if sum(1 for m in numbers if m.group == n.group) >= 2}
            if len(compared := _arms_compared(text, numbers, arms, start, end)) >= 2:
                partnered |= compared
            if len({n.group for n in numbers if n.role in (ARM, PERCENT, RANGE) and n.group in partnered}) < 2:
                continue
            # Named by the words before its first statistic: "At week 8, ..." is a time point.
            first = next((n for n in numbers if n.role != TIME), numbers[0])
            label = sentence_label(" ".join(text[start : first.start].split()))
            found.append(
                Candidate(page, "text", start, end, label, " ".join(piece.split()), numbers, True, True, abstract)
            )
    return found


def segment_text(document: ParsedDocument, page: int, source: str) -> str:
    """A page's text, or one of its tables' text ("table 2")."""
    if source == "text":
        return document.pages_text[page - 1] if 0 < page <= document.pages else ""
    tables = document.tables_on(page)
    number = source.rsplit(" ", 1)[-1]
    return tables[int(number) - 1].text if number.isdigit() and 0 < int(number) <= len(tables) else ""


MAX_EXCERPT = 300  # characters of a quote's lines shown when no row or sentence holds it


def place_of(document: ParsedDocument, layout: Layout, span: Span) -> Candidate | None:
    """The row or sentence a quote is in; else the lines it spans (a methods sentence, a table
    the check does not rebuild), as a place of its own."""
    page, source, start, _end = span
    for candidate in (*layout.candidates, *layout.baseline_rows):
        # A row or sentence is where a quote starts; a column, where a quote meets one of its cells
        # (a quote may open with a row's label, which is no column's).
        at = candidate.holds(start, span[3]) if candidate.cells else candidate.holds(start, start + 1)
        if candidate.page == page and candidate.source == source and at:
            return candidate
    text = segment_text(document, page, source)
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
    numbers = numbers_in(text, first, last, frozenset())
    excerpt = " ".join(text[first:last].split())
    return Candidate(page, source, first, last, "", excerpt, numbers, prose=prose)
