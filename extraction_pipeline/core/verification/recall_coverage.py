"""What an answer covers and what it lacks, for the recall check: which of a place's numbers each
extracted outcome read, what a place an outcome read still holds for it (the other half of a
statistic, another arm's numbers), the numbers an outcome lacks beside those it has quoted, and
the group sizes outcomes lack.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from extraction_pipeline.core.evaluation.matching import label_names
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.recall_answer import SIZE_KINDS, Answer, ExtractedEntry, Number, Span
from extraction_pipeline.core.verification.recall_items import MissedKind, PossiblyMissed
from extraction_pipeline.core.verification.recall_labels import one_label
from extraction_pipeline.core.verification.recall_numbers import ARM, MAX_ROW_STATISTICS, SIZE, PrintedNumber
from extraction_pipeline.core.verification.recall_places import Layout, place_of, segment_text
from extraction_pipeline.core.verification.recall_ranking import (
    NO_NUMBERS_FOR,
    RANK_ABSENT_ARM,
    RANK_ARM_LEFT_OUT,
    RANK_GROUP_SIZE,
    RANK_HALF_READ,
    RANK_OTHER_ARM,
    RANK_THIRD_ARM,
    RANK_UNREAD_IN_ROW,
    Listed,
    listed_at,
    merged_by_place,
    unread_place,
)
from extraction_pipeline.core.verification.recall_rows import Candidate

# --- what the extraction read -------------------------------------------------------------------


def numbers_read(
    candidate: Candidate,
    extracted: list[ExtractedEntry],
    names: Iterable[str],
    sizes: frozenset[Decimal],
    quoted_rows: QuotedRows | None = None,
) -> dict[str, set[int]]:
    """Which of the candidate's numbers (by position) each extracted entry read; ``names`` are the
    paper's outcome names a row's label must tell an entry's name apart from (``label_names``);
    ``sizes`` the answer's group sizes, which tie no outcome to a place (every outcome of an arm
    has them: "42/402" and "41/388" are not read by an outcome holding only 402 and 388, quoted
    there or not); ``quoted_rows`` where each entry quotes each of its values (``rows_quoted``): a
    value an entry quotes only from other rows of the candidate's table is not read here (a
    baseline SD "6.31" quoted from its row is not the change's SD "5.07 (6.31)" of the next row; a
    group size is every row's)."""
    numbers = candidate.numbers
    read: dict[str, set[int]] = {}
    block = len({n.group for n in numbers if n.role == ARM}) > MAX_ROW_STATISTICS
    quoted = quoted_rows or {}
    for entry in extracted:
        equal = [
            i
            for i, n in enumerate(numbers)
            if n.value.normalize() in entry.values
            and (n.value in sizes or not _in_other_rows(quoted.get((entry.key, n.value.normalize()), ()), candidate))
        ]
        if not equal:
            continue
        spans = [(s, e) for page, source, s, e in entry.spans if page == candidate.page and source == candidate.source]
        covered = {i for i in equal if any(s <= numbers[i].start < e for s, e in spans)}
        if block:  # no row ties the numbers together: only a quote's own statistics are read
            groups = {numbers[i].group for i in covered}
            covered.update(i for i in equal if numbers[i].group in groups)
        else:
            over = any(candidate.holds(s, e) for s, e in spans)
            distinctive = {numbers[i].value for i in equal if numbers[i].distinctive and numbers[i].value not in sizes}
            named = (
                not candidate.prose  # a sentence's words name too much to tie an outcome to it
                and bool(entry.name and candidate.label)
                and label_names(candidate.label, entry.name, names)
            )
            if over or len(distinctive) >= 2 or named:
                covered.update(equal)
        # A reader of group sizes alone has not read the place: every outcome of an arm has them
        # (an outcome quoting "(n = 402)" from a row's "42/402").
        if any(numbers[i].value not in sizes for i in covered):
            read[entry.key] = covered
    return read


# Where an entry quotes a value: (entry key, value) -> for each of its fields holding the value, the
# table rows its quote overlaps (none: not located, or in no table row).
QuotedRows = dict[tuple[str, Decimal], tuple[tuple[Candidate, ...], ...]]


def rows_quoted(extracted: list[ExtractedEntry], candidates: Sequence[Candidate]) -> QuotedRows:
    """The table rows each located quote of each entry's values overlaps."""
    rows: dict[tuple[int, str], list[Candidate]] = {}
    for candidate in candidates:
        if candidate.table:
            rows.setdefault((candidate.page, candidate.source), []).append(candidate)
    found: dict[tuple[str, Decimal], list[tuple[Candidate, ...]]] = {}
    for entry in extracted:
        for number, value in entry.numbers.items():
            span = entry.where.get(number)
            overlapped: tuple[Candidate, ...] = ()
            if span is not None:
                page, source, start, end = span
                overlapped = tuple(r for r in rows.get((page, source), ()) if r.holds(start, end))
            found.setdefault((entry.key, value), []).append(overlapped)
    return {key: tuple(held) for key, held in found.items()}


def _in_other_rows(quotes: tuple[tuple[Candidate, ...], ...], candidate: Candidate) -> bool:
    """Is each of these quotes in other rows of the candidate's table, and none in the candidate?"""
    return bool(quotes) and all(
        rows and all(row is not candidate for row in rows) and any(row.table == candidate.table for row in rows)
        for rows in quotes
    )


def judge(candidate: Candidate, answer: Answer, layout: Layout) -> Listed | None:
    """Why a row or a sentence is listed, if it is: no value reads it, or an extracted outcome reads
    part of it and lacks the rest (half a statistic, the other arm, a three-arm row's third arm)."""
    extracted, sizes = answer.entries, answer.sizes
    numbers = candidate.numbers
    by_entry = numbers_read(candidate, extracted, layout.names, sizes, layout.quoted_rows)
    kind = MissedKind.RESULT_TEXT if candidate.prose else MissedKind.TABLE_ROW
    if not by_entry:
        arm_numbers = [n.value for n in numbers if n.role == ARM]
        if arm_numbers and all(value in sizes for value in arm_numbers):
            return None  # a row of the group sizes the answer has ("Analysed 402 388"): nothing unread
        return unread_place(candidate, extracted, layout, kind)
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
    anyone = set().union(*by_entry.values())
    shapes_read = {len(members) for members in groups.values() if members & anyone}
    unread = [members for members in groups.values() if not members & anyone and len(members) in shapes_read]
    readers = [e for e in extracted if e.key in by_entry]
    # Statistics of a place of more than two arms' (arms or outcomes as columns, time points), of
    # the kind the answer read there, that no value has (an arm the answer declares and its reader
    # lacks is ``incomplete``'s).
    unread_beside = (
        not candidate.prose
        and bool(unread)
        and len(groups) > 2
        and answer.study.version == 2
        and not any(answer.missing_arms(e) for e in readers)
    )
    if half_read:
        why = "an extracted outcome has one number of this statistic and not the other"
        if unread_beside and candidate.cells:
            # An outcome's column: its other arms' or times' results are shown too, checked in the
            # same look. (A row holds other outcomes' too, or a block read column by column.)
            half_read |= {i for members in unread for i in members}
            why += "; the statistics of the same kind beside it no value has"
        return listed_at(candidate, kind, [numbers[i] for i in sorted(half_read)], RANK_HALF_READ, why)
    if len(groups) == 2:
        for seen in by_entry.values():
            untouched = [
                members for members in groups.values() if all(numbers[i].value in sizes for i in seen & members)
            ]
            if len(untouched) == 1 and (missing := sorted(untouched[0] - seen)):
                why = "an extracted outcome has one arm's numbers here and not the other arm's"
                return listed_at(candidate, kind, [numbers[i] for i in missing], RANK_OTHER_ARM, why)
    if unread_beside:
        # They may be an outcome or an arm the answer left out.
        why = "the answer read statistics of this row; these of the same kind no value has"
        return listed_at(candidate, kind, [numbers[i] for m in unread for i in sorted(m)], RANK_UNREAD_IN_ROW, why)
    if len(groups) == 3 and answer.study.version == 1:
        # A two-arm answer (version 1): three statistics of one shape ("21 (42%) 11 (22%) 10 (20%)":
        # a three-arm trial), two of them an outcome's: the third arm's comparison is another
        # outcome, left out. A version 2 answer names its arms: ``incomplete`` lists the arm an
        # outcome has no numbers for.
        shapes = {len(members) for members in groups.values()}
        anyone = set().union(*by_entry.values())
        for seen in by_entry.values():
            untouched = [members for members in groups.values() if not seen & members]
            if len(shapes) == 1 and len(untouched) == 1 and not untouched[0] & anyone:
                why = "an extracted outcome compares two arms here; the third arm's numbers no value has"
                return listed_at(candidate, kind, [numbers[i] for i in sorted(untouched[0])], RANK_THIRD_ARM, why)
    return None


def missing_sizes(document: ParsedDocument, answer: Answer, rows: list[Candidate]) -> list[Listed]:
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
        in_row = any(r.page == page and r.source == source and r.holds(start, start + 1) for r in rows)
        said = answer.arm_said(arm)
        item = PossiblyMissed(
            kind=MissedKind.TABLE_ROW if in_row or source != "text" else MissedKind.RESULT_TEXT,
            label=one_label(f"{', '.join(dict.fromkeys(names))}: group size of the {said} arm"),
            text=" ".join(segment_text(document, page, source)[start:end].split()),
            page=page,
            source=source,
            start=start,
            end=end,
            numbers=(f"{value:f}",),
            why=f"these outcomes have {said}-arm numbers but no {said}-arm group size; other outcomes took it here",
        )
        listed.append(Listed(item, RANK_GROUP_SIZE, frozenset({value}), prose=False))
    return listed


# A number reported per arm: an outcome with one arm's and not the other's likely lost one. So did
# an outcome with events and no total, or a mean and no SD, for one arm (printed in one statistic:
# "42/402", "12.1 (3.4)").
PER_ARM = ("events", "total", "mean", "sd", "n")
GOES_WITH = {"events": "total", "mean": "sd", "sd": "mean"}
_SAID = {"events": "events", "total": "total", "mean": "mean", "sd": "SD", "n": "group size"}


@dataclass(frozen=True)
class _Lack:
    """A number an extracted outcome lacks, told from one it has."""

    have: Number  # the number it has: where its quote is, the lost one is printed
    same_statistic: bool  # the other half of that statistic (else another arm's statistic)
    said: str  # what a reviewer is told
    absent_arm: str = ""  # a declared arm with no number at all for the outcome (version 2)


def incomplete(document: ParsedDocument, answer: Answer, layout: Layout) -> list[Listed]:
    """Extracted outcomes missing a number their other numbers say the paper prints (another
    arm's, or the other half of a statistic), listed where the number they have is quoted, with
    the unread numbers printed beside it: whatever the table's layout, the lost number is there
    more often than not. A version 2 answer's arm with no number for an outcome its other arms
    have numbers for is listed so ("no numbers for H2 (haloperidol 2 mg)") even when nothing
    unread is printed beside them: the answer itself says an arm is missing."""
    listed = []
    arms = len(answer.study.arms) if answer.study.version >= 2 else 2
    for entry in answer.entries:
        if not entry.outcome:
            continue  # the arms' own numbers: their group sizes are ``missing_sizes``' business
        places: list[Listed] = []
        first_place: dict[str, tuple[Candidate, _Lack]] = {}  # an absent arm's first located place
        for lack in _lacking(entry, answer):
            span = entry.where.get(lack.have)
            if span is None:
                continue
            place = place_of(document, layout, span)
            if place is None:
                continue
            first_place.setdefault(lack.absent_arm, (place, lack))
            unread = _unread_beside(place, entry, lack, span, arms)
            if not unread:
                continue  # nothing to show (a total printed only in a column head): no item
            places.append(_lacked(entry, place, lack, unread, RANK_ARM_LEFT_OUT if lack.absent_arm else RANK_OTHER_ARM))
        for arm, (place, lack) in first_place.items():
            if arm and not any(lack.said in p.item.label for p in places):
                places.append(_lacked(entry, place, lack, [], RANK_ABSENT_ARM))
        listed.extend(merged_by_place(places))  # one item per place the outcome's quotes are
    return listed


def _unread_beside(place: Candidate, entry: ExtractedEntry, lack: _Lack, span: Span, arms: int) -> list[PrintedNumber]:
    """The numbers printed beside the one ``entry`` has (its statistic's other half, or another
    arm's statistic) that no value of the entry has: another arm's is next to it, or, in a table
    row printing each of the ``arms`` arms' statistics in turn ("7.3 (0.6) −1.5 (0.4) 7.6 (0.5)
    −2.2 (0.4)": two arms, a baseline and a change each), as many statistics away as each arm
    prints (the row's heads are not read, so both are shown)."""
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
        every = sorted({n.group for n in numbers if n.role in (ARM, SIZE)})
        others = [g for g in every if g != group]
        counterparts = {*[g for g in others if g < group][-1:], *[g for g in others if g > group][:1]}
        # A table row (not an outcome column, which prints an arm per row) whose statistics divide
        # evenly among the arms may print each arm's in turn: then the same statistic of the arms
        # before and after is as many cells away. Its heads are not read, so both are shown.
        row = not place.prose and not place.cells
        each = len(every) // arms if row and arms >= 2 and len(every) % arms == 0 else 0
        if each >= 2 and group in every:
            at_group = every.index(group)
            counterparts |= {every[i] for i in (at_group - each, at_group + each) if 0 <= i < len(every)}
        beside = [n for n in numbers if n.group in counterparts]
    # Arms may print the same number (326 randomised to each): beside this one, it is the other
    # arm's even though the outcome has that value.
    same = None if lack.same_statistic else have
    return [
        n
        for n in beside
        if n.role in (ARM, SIZE) and (n.value.normalize() not in entry.values or n.value.normalize() == same)
    ]


def _lacked(entry: ExtractedEntry, place: Candidate, lack: _Lack, unread: list[PrintedNumber], rank: float) -> Listed:
    name = entry.name or entry.key
    if lack.absent_arm:  # the item is the arm: a follow-up question asks for it by this label
        label, why = f"{name}: {lack.said}", "the answer has the other arms' numbers for it; they are quoted here"
    else:
        label, why = name, f"{lack.said}; the one it has is quoted here"
    kind = MissedKind.RESULT_TEXT if place.prose else MissedKind.TABLE_ROW
    if lack.absent_arm:  # a version 2 outcome entry is an arm's: that entry is missing whole
        kind = MissedKind.OUTCOME
    return replace(listed_at(place, kind, unread, rank, why, label=label), outcome=name)


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
        said = f"{NO_NUMBERS_FOR}{answer.arm_described(absent)}"
        for have in entry.numbers:
            if have[0] in PER_ARM and have[1] in arms:
                yield _Lack(have, False, said, absent)
