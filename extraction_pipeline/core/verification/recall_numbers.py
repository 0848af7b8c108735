"""The numbers of a row or a sentence as the recall check reads them: each number as printed,
grouped into the statistic it belongs to ("74.1 ± 12.2", "42/402 (10.5)"), with its role (an
arm number the template asks for, a group size, a percentage, a p-value, a range bound, an
estimate), and the group sizes a page prints.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

# --- numbers and the statistics they form -------------------------------------------------------

# A number as printed: "12", "1,234", "0.55", ".55" (journals drop the leading zero). Not the "2"
# of "IL-2", "H2" or "kg/m2": a number glued to a word is part of a label.
NUMBER = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)")
_PLUS_MINUS = re.compile(r"^\s*(?:±|\+/-|\+-|\+/−)\s*$")
_SLASH = re.compile(r"^\s*/\s*$")
# "12 (", "0.25 (SD ", "72.49 (CI95% ": what opens a statistic's parenthesis ("(95% CI " opens at "95").
_PAREN_OPEN = re.compile(
    r"^\s*%?\s*[(\[]\s*(?:(?:SD|SE|SEM)\b\s*[=:]?\s*|CI\s*95\s*%\s*[=:,]?\s*)?[-−–]?\s*$", re.IGNORECASE
)
_CLOSING = re.compile(r"[)\]]")
_P_BEFORE = re.compile(r"(?:[<>=≤≥]|\bp\b)\s*$", re.IGNORECASE)
_SIZE_BEFORE = re.compile(r"\b[nN]\s*[=:]\s*$")  # "n = 49": a group size, not a p-value's "="
_MINUS = ("-", "\u2212", "\u2013")

ARM, PERCENT, P_VALUE, RANGE, ESTIMATE, SIZE = "arm", "percent", "p", "range", "estimate", "size"
TIME = "time"  # a sentence's time point ("At week 8,", "after 12 months"): no statistic
MAX_ROW_STATISTICS = 10  # more statistics than this: a table read column by column, not a row


@dataclass(frozen=True)
class PrintedNumber:
    """A number of a row or a sentence as printed, with the statistic it belongs to and its role."""

    printed: str
    value: Decimal  # absolute: a sign the model dropped is grounding's flag, not a miss
    start: int  # offsets in the segment
    end: int
    group: int  # the numbers of one statistic share a group: "74.1 ± 12.2", "42/402 (10.5)"
    role: str  # ARM (a number the template asks for), SIZE ("n = 49"), PERCENT, P_VALUE, RANGE, ESTIMATE or TIME

    @property
    def distinctive(self) -> bool:
        """Equal by chance only rarely: a decimal, or an integer of at least 10."""
        return "." in self.printed or self.value >= 10


def _decimal(printed: str) -> Decimal | None:
    try:
        return abs(Decimal(printed.replace(",", "")))
    except InvalidOperation:
        return None


def numbers_in(text: str, start: int, end: int, sizes: frozenset[Decimal]) -> list[PrintedNumber]:
    """The numbers of ``text[start:end]``, grouped into statistics, each with its role."""
    groups: list[list[tuple[str, int, int, str]]] = []  # (printed, start, end, how it joined)
    open_paren = False  # the statistic's parenthesis ("12 (4.5", "0.99 (0.65–") is still open
    previous_end = start
    for match in NUMBER.finditer(text, start, end):
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
    found: list[PrintedNumber] = []
    for index, members in enumerate(groups):
        last_of_several = len(groups) >= 3 and index == len(groups) - 1
        for printed, at, stop, role in _roles(text, members, sizes, last_of_several):
            value = _decimal(printed)
            if value is not None:
                found.append(PrintedNumber(printed, value, at, stop, index, role))
    return found


# The words of a time ("12 weeks", "Weeks" over a table's time points).
TIME_WORDS = r"weeks?|months?|days?|years?|hours?"
# A time point: a whole number after "week", "month", "day"... or before "weeks", "months", "h".
_TIME_BEFORE = re.compile(rf"\b(?:{TIME_WORDS}|visits?|time points?|T)\s*$", re.IGNORECASE)
_TIME_AFTER = re.compile(rf"^\s*(?:-|‐)?\s*(?:{TIME_WORDS}|h|wk|mo)\b", re.IGNORECASE)
# What an estimate with its interval is when it is not an arm's: a ratio, a difference, an effect.
_EFFECT_WORDS = re.compile(
    r"\b(?:ratio|OR|aOR|RR|aRR|HR|aHR|IRR|differences?|effects?|changes?|coefficient|beta|β|"
    r"risk|odds|hazard|reductions?|increases?|decreases?|association)\b",
    re.IGNORECASE,
)


def sentence_numbers(text: str, start: int, end: int, sizes: frozenset[Decimal]) -> list[PrintedNumber]:
    """The numbers of the sentence ``text[start:end]`` (``numbers_in``), read as a sentence says
    them: a whole number alone at a time point it names ("At week 8,", "after 12 months") is no
    statistic (TIME); two or more estimates with their intervals in a sentence that names no ratio,
    difference or effect are the arms' statistics ("61.07 (95% CI 55.42–66.71) compared to 63.27
    (95% CI 58.28–68.25)": their first numbers are ARM numbers, the intervals stay ranges)."""
    numbers = numbers_in(text, start, end, sizes)
    members: dict[int, int] = {}
    for n in numbers:
        members[n.group] = members.get(n.group, 0) + 1
    read = []
    for n in numbers:
        alone = members[n.group] == 1 and n.role == ARM and "." not in n.printed
        if alone and (_TIME_BEFORE.search(text[start : n.start]) or _TIME_AFTER.match(text[n.end : end])):
            n = replace(n, role=TIME)
        read.append(n)
    estimates = {n.group for n in read if n.role == ESTIMATE}
    arm_statistics = {n.group for n in read if n.role == ARM and members[n.group] >= 2}
    if len(estimates) >= 2 and not arm_statistics and not _EFFECT_WORDS.search(text[start:end]):
        read = [replace(n, role=ARM) if n.role == ESTIMATE else n for n in read]
    return read


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


def reports_results(numbers: list[PrintedNumber]) -> bool:
    """A statistic per arm at least: two numbers other than p-values, or one with its spread."""
    useful = [n for n in numbers if n.role not in (P_VALUE, SIZE)]
    return len(useful) >= 2 and (len({n.group for n in useful}) >= 2 or any(n.role == ARM for n in useful[1:]))


def group_sizes(text: str) -> frozenset[Decimal]:
    """Group sizes printed on a page ("n = 49", "N=326", "(40)"): what percentages are shares of."""
    found = set()
    for match in re.finditer(r"\b[nN]\s*[=:]\s*([\d,]+)|\((\d{2,5})\)", text):
        value = _decimal(match.group(1) or match.group(2))
        if value:
            found.add(value)
    return frozenset(found)
