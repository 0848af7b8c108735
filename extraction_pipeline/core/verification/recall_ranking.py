"""The recall check's list: each finding with how likely a miss it is (the ranks), a place no
value reads ranked by what it is and what names it, and the merging of findings at one place
and of a table's unread rows into one item.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal

from extraction_pipeline.core.evaluation.matching import label_names
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.recall_answer import ExtractedEntry
from extraction_pipeline.core.verification.recall_items import LABEL_SEPARATOR, MissedKind, PossiblyMissed, rows_named
from extraction_pipeline.core.verification.recall_labels import mentioned, one_label, said, word_stems
from extraction_pipeline.core.verification.recall_numbers import ARM, MAX_ROW_STATISTICS, P_VALUE, PrintedNumber
from extraction_pipeline.core.verification.recall_places import Layout, segment_text
from extraction_pipeline.core.verification.recall_rows import Candidate, overlaps

# --- the list -----------------------------------------------------------------------------------

# Most likely misses first, in the order of how often each kind was a real miss on the papers the
# ranks were set on: a missing group size (printed where the answer's other outcomes took theirs:
# nine in ten), a half-read statistic (four in ten), a missing arm, or statistics of a row the
# answer read, of the kind it read, that no value has (an outcome or arm in a column), or an arm
# the answer declares with no number for an outcome where its other arms' are quoted (one in
# eight); an arm the answer declares with no number for an outcome where nothing unread is printed
# beside the other arms' numbers (the answer says it is missing, the page does not show it). Rows
# and sentences no value reads start at RANK_UNREAD and rise with what points to them (below):
# the likeliest of them rank among the findings above.
RANK_GROUP_SIZE, RANK_HALF_READ, RANK_OTHER_ARM, RANK_UNREAD_IN_ROW, RANK_THIRD_ARM = 9.0, 7.5, 6.5, 6.5, 6.5
RANK_ARM_LEFT_OUT, RANK_ABSENT_ARM = 5.5, 4.0
RANK_UNREAD = 2.0
RANK_TEXT_ONLY = 1.5  # added for a sentence (sentences repeating a listed row's numbers are dropped)
# A model skips what it passes by: a place no value reads ranks higher the closer it is to a quote
# of the answer (characters of the same page's text or the same table's), and higher when the
# abstract prints one of its numbers (a result the paper itself calls a headline).
NEAR_QUOTE, NEAR_PAGE = 300, 2000
RANK_NEAR_QUOTE, RANK_NEAR_PAGE, RANK_IN_ABSTRACT = 1.0, 0.5, 0.5


@dataclass(frozen=True)
class Listed:
    """A finding for the list: its item, how likely a miss it is, and its numbers' values."""

    item: PossiblyMissed
    rank: float
    values: frozenset[Decimal]  # the item's numbers' values
    prose: bool
    unread_row_of: str = ""  # the table of a row no value reads (``Candidate.table``)
    outcome: str = ""  # the extracted outcome a finding at the place its quote is in is about

    @property
    def place(self) -> tuple[int, str, int, int]:
        return self.item.page, self.item.source, self.item.start, self.item.end

    def merged(self, other: Listed) -> Listed:
        """Two findings at the same place: one item, with both labels and numbers. It is an
        outcome item when one of them is and both are named as one (an outcome's arm missing at
        the row it was read from); two things named side by side keep the likelier one's kind."""
        item = self.item
        label, as_one = _named_together(self, other)
        numbers = tuple(dict.fromkeys((*item.numbers, *other.item.numbers)))
        why = item.why if other.item.why == item.why else f"{item.why}; {other.item.why}"
        shown = _shown_together([self.item, other.item])
        cells = tuple(dict.fromkeys((*item.cells, *other.item.cells)))
        kind = MissedKind.OUTCOME if as_one and MissedKind.OUTCOME in (item.kind, other.item.kind) else item.kind
        merged = PossiblyMissed(
            kind, label, item.text, item.page, item.source, item.start, item.end, numbers, why, shown, cells
        )
        return Listed(
            merged,
            self.rank,
            self.values | other.values,
            self.prose and other.prose,
            outcome=self.outcome or other.outcome,
        )


def _named_together(likelier: Listed, other: Listed) -> tuple[str, bool]:
    """The label of two findings at one place, and whether it names them as one thing."""
    label, more = likelier.item.label, other.item.label
    if not label or not more:
        return label or more, True
    if _says_more(more, label):
        return more, True  # "PONV" and "PONV: no numbers for H1": the one that says more
    if _says_more(label, more):
        return label, True
    if row := _row_read_for(likelier, other) or _row_read_for(other, likelier):
        return row, True
    if same_outcome := _one_outcome(label, more):
        return same_outcome, True
    if said(more) in said(label):
        return label, True
    return f"{label}{LABEL_SEPARATOR}{more}", False


NO_NUMBERS_FOR = "no numbers for "  # what a declared arm's missing entry says (``incomplete``)
_UNITS = re.compile(r"\([^()]*\)")  # "Fruit (pieces)": the unit a row label prints beside its name


def _row_read_for(found: Listed, row: Listed) -> str:
    """One label for an extracted outcome's finding at the very row its quote is in and that row's
    own finding (half read, say): one row, named by the outcome and by what the row prints where
    its words are not the outcome's, "Intuitive eating total score (IES-2 total: Preintervention)";
    "" for anything else (a label naming several things is never folded into another)."""
    if not found.outcome or row.outcome or found.place != row.place or not row.item.label:
        return ""
    label, printed = found.item.label, row.item.label
    if LABEL_SEPARATOR in label or LABEL_SEPARATOR in printed or not said(label).startswith(said(found.outcome)):
        return ""
    if said(label) in said(printed) or said(printed) in said(label):
        return ""  # "pain score" read from "Pain score": the likelier one's label
    if not word_stems(_UNITS.sub(" ", printed)) or _same_words(printed, found.outcome):
        return label  # "Fruit intake" read from "Fruit (pieces)"; a row labelled "(Δ)"
    return f"{found.outcome} ({printed}){label[len(found.outcome) :]}"


def _same_words(row_label: str, name: str) -> bool:
    """Are a row label's words, its unit aside, all the name's ("Fruit (pieces)" and "Fruit
    intake"; not "Systolic blood pressure" and "Diastolic blood pressure")?"""
    printed = word_stems(_UNITS.sub(" ", row_label))
    return bool(printed) and printed <= word_stems(name)


def _says_more(label: str, other: str) -> bool:
    """Does ``label`` say all ``other`` says, at one place? "PONV: no numbers for H1" says "PONV";
    an extracted outcome's finding ("Fruit intake: no numbers for Control") says the row label
    its quote is in ("Fruit (pieces)") when the row's words, its unit aside, are the outcome's."""
    if said(other) in said(label) != said(other):
        return True
    name, what, _lacks = label.partition(": ")
    if not what or ": " in other or LABEL_SEPARATOR in label or LABEL_SEPARATOR in other:
        return False
    return _same_words(other, name)


def _one_outcome(label: str, other: str) -> str:
    """Two findings about one outcome ("PONV: no numbers for H1", "PONV: no numbers for H2") as one
    label ("PONV: no numbers for H1, H2"), so the list names the outcome once; "" for two outcomes."""
    name, separator, said_first = label.partition(": ")
    other_name, _, said_other = other.partition(": ")
    if not separator or not said_other or said(name) != said(other_name):
        return ""
    if said(said_other) in said(said_first):
        return label
    if said_first.startswith(NO_NUMBERS_FOR) and said_other.startswith(NO_NUMBERS_FOR):
        said_other = said_other.removeprefix(NO_NUMBERS_FOR)
    return f"{label}, {said_other}"


def tables_read_by_none(document: ParsedDocument, chosen: list[Listed], unread: Mapping[str, int]) -> list[Listed]:
    """The chosen unread rows of one table as one item naming each: a reviewer checks a table once.
    Its place runs from the first of them to the last (rows between them are shown too; the label
    names the chosen ones); ``unread`` counts each table's unread rows, chosen or not, so the item
    says how many more there are."""
    rows: dict[str, list[Listed]] = {}
    for entry in chosen:
        if entry.unread_row_of:
            rows.setdefault(entry.unread_row_of, []).append(entry)
    kept = [e for e in chosen if not e.unread_row_of or len(rows[e.unread_row_of]) == 1]
    kept += [
        _one_item(document, sorted(members, key=lambda e: e.item.start), unread.get(table, len(members)))
        for table, members in rows.items()
        if len(members) > 1
    ]
    return kept


def _one_item(document: ParsedDocument, members: list[Listed], unread: int) -> Listed:
    """Several rows of a table as one item, naming each; its text is all it highlights."""
    first, last = members[0].item, members[-1].item
    labels = list(dict.fromkeys(m.item.label for m in members if m.item.label.strip()))
    of = f"{len(members)} of the {unread}" if unread > len(members) else f"{len(members)}"
    item = PossiblyMissed(
        kind=MissedKind.OUTCOME if any(m.item.kind == MissedKind.OUTCOME for m in members) else MissedKind.TABLE_ROW,
        label=LABEL_SEPARATOR.join(labels),
        text=segment_text(document, first.page, first.source)[first.start : last.end],
        page=first.page,
        source=first.source,
        start=first.start,
        end=last.end,
        numbers=tuple(dict.fromkeys(n for m in members for n in m.item.numbers)),
        why=f"{of} rows of this table that no extracted value reads",
        shown=_shown_together([m.item for m in members]),
        cells=tuple(dict.fromkeys(cell for m in members for cell in m.item.cells)),
    )
    values = frozenset(v for m in members for v in m.values)
    return Listed(item, max(m.rank for m in members), values, prose=False)


def _shown_together(items: list[PossiblyMissed]) -> str:
    """What findings made one item show: "" when the item's text shows them all; else each one's
    (an outcome printed as a column shows its cells, a row its text), one line each."""
    if not any(item.shown for item in items):
        return ""
    return "\n".join(dict.fromkeys(item.shown or item.text for item in items))


def within_rows(likeliest: Iterable[Listed], limit: int) -> list[Listed]:
    """The likeliest findings that fit in ``limit`` rows, one item per place: a finding costs a row
    per outcome it names, and one at a place already chosen is merged into it when what it adds
    still fits (its outcome may be named there already). A less likely finding never rides in on a
    likelier one's place ahead of likelier findings elsewhere."""
    chosen: list[Listed] = []
    left = max(0, limit)
    for entry in likeliest:
        same = next((i for i, kept in enumerate(chosen) if _overlap(kept, entry)), None)
        if same is None:
            if (cost := rows_named(entry.item)) <= left:
                chosen.append(entry)
                left -= cost
            continue
        merged = chosen[same].merged(entry)
        if (cost := rows_named(merged.item) - rows_named(chosen[same].item)) <= left:
            chosen[same] = merged
            left -= cost
    return chosen


def merged_by_place(listed: Iterable[Listed]) -> list[Listed]:
    """One item per place: findings whose excerpts overlap (a row's half-read statistic and an
    outcome's missing arm quoted in that row) become one item, at the likelier one's place."""
    merged: list[Listed] = []
    for entry in listed:
        same = next((i for i, m in enumerate(merged) if _overlap(m, entry)), None)
        if same is None:
            merged.append(entry)
        else:
            merged[same] = merged[same].merged(entry)
    return merged


def _overlap(a: Listed, b: Listed) -> bool:
    """Are two findings at one place? Outcomes printed as columns of one table share its rows'
    stretch of the page, and are one place only where their cells are."""
    if a.item.page != b.item.page or a.item.source != b.item.source:
        return False
    spans = [a.item.cells or ((a.item.start, a.item.end),), b.item.cells or ((b.item.start, b.item.end),)]
    return any(overlaps(one, other) for one in spans[0] for other in spans[1])


def unread_place(candidate: Candidate, extracted: list[ExtractedEntry], layout: Layout, kind: MissedKind) -> Listed:
    """A row or sentence none of whose numbers any extracted value has."""
    named = (
        not candidate.prose
        and bool(candidate.label)
        and any(label_names(candidate.label, e.name, layout.names) for e in extracted if e.outcome and e.name)
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
    elif mentioned(candidate.label, layout.abstract, layout.acronyms):
        rank += 2.0
    elif mentioned(candidate.label, layout.results_text, layout.acronyms):
        rank += 0.5
    if not candidate.results_table:
        rank -= 1.0
    if candidate.table and candidate.table in layout.used_tables:
        rank += 1.5  # the extraction read this table's other rows and skipped this one
    if not candidate.cells and len({n.group for n in candidate.numbers if n.role == ARM}) > MAX_ROW_STATISTICS:
        rank -= 1.0  # a table read column by column: no row to show
    distance = _distance_to_quote(candidate, extracted, layout.page_starts)
    rank += RANK_NEAR_QUOTE * (distance < NEAR_QUOTE) + RANK_NEAR_PAGE * (distance < NEAR_PAGE)
    if any(n.distinctive and n.value in layout.abstract_numbers for n in candidate.numbers):
        rank += RANK_IN_ABSTRACT
    listed = listed_at(candidate, kind, [n for n in candidate.numbers if n.role != P_VALUE], rank, why)
    return replace(listed, unread_row_of="" if candidate.prose else candidate.table)


def _distance_to_quote(candidate: Candidate, extracted: list[ExtractedEntry], page_starts: tuple[int, ...]) -> float:
    """Characters between the place and the nearest quote of the answer in the same table, or in
    the page text read on across page breaks (a sentence the page break cut from a quoted one is
    beside it); infinite when none is there."""

    def at(page: int, offset: int) -> int:
        return page_starts[page - 1] + offset if candidate.source == "text" and page <= len(page_starts) else offset

    start, end = at(candidate.page, candidate.start), at(candidate.page, candidate.end)
    gaps = [
        max(at(page, quoted_start) - end, start - at(page, quoted_end), 0)
        for entry in extracted
        for page, source, quoted_start, quoted_end in entry.spans
        if source == candidate.source and (page == candidate.page or source == "text")
    ]
    return min(gaps, default=math.inf)


def listed_at(
    candidate: Candidate,
    kind: MissedKind,
    numbers: Iterable[PrintedNumber],
    rank: float,
    why: str,
    label: str | None = None,
) -> Listed:
    """A finding at a row or a sentence, with the numbers an extracted value should have; named by
    the place's label, or by ``label``."""
    chosen = list(numbers)
    item = PossiblyMissed(
        kind=kind,
        label=one_label(candidate.label if label is None else label),
        text=candidate.text,
        page=candidate.page,
        source=candidate.source,
        start=candidate.start,
        end=candidate.end,
        numbers=tuple(n.printed for n in chosen),
        why=why,
        shown=candidate.shown,
        cells=candidate.cells,
    )
    return Listed(item, rank, frozenset(n.value for n in chosen), candidate.prose)
