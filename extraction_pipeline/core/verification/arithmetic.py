"""The paper's own arithmetic around a number: a percentage printed beside a count.

"23 (46%)" printed for an arm of 50 says 46% of 50, which is 23: a count quoted from the row of
another arm or population, or a total taken from elsewhere (the randomized instead of the
analysed n), breaks the sum. Tolerance: the printed percentage's own rounding (half its last
digit) plus 0.1 point, so "33.3%" for 1 of 3 passes and "46%" for 23 of 49 (46.9%) does not.
"""

from __future__ import annotations

import re
from decimal import Decimal

PERCENT_BESIDE = re.compile(r"^[-−–]?\d+(?:\.\d+)?\s*[(\[]\s*(\d+(?:\.\d+)?)\s*%")
# "524 (78)" in a row or column headed "n (%)": the bracket is the percentage.
BRACKET_BESIDE = re.compile(r"^[-−–]?\d+(?:\.\d+)?\s*[(\[]\s*(\d+(?:\.\d+)?)\s*[)\]]")


def percent_flag(printed: str, events: object, total: object, bracket_is_percent: bool = False) -> str | None:
    """A flag when ``printed`` (the events as printed, "23 (46 %)") gives a percentage that is not
    ``events`` of ``total``; None when it agrees or prints none. ``bracket_is_percent``: the
    table's header says a bare bracket is one ("n (%)")."""
    match = PERCENT_BESIDE.match(printed.strip()) or (
        BRACKET_BESIDE.match(printed.strip()) if bracket_is_percent else None
    )
    if match is None or not isinstance(events, int | float) or not isinstance(total, int | float) or total <= 0:
        return None
    shown = Decimal(match.group(1))
    exponent = shown.as_tuple().exponent
    decimals = -exponent if isinstance(exponent, int) else 0
    tolerance = Decimal(5) / Decimal(10) ** (max(decimals, 0) + 1) + Decimal("0.1")
    actual = Decimal(str(events)) * 100 / Decimal(str(total))
    if abs(actual - shown) <= tolerance:
        return None
    return (
        f"the quote prints {events} as {shown}%, but {events} of {total:g} is {actual:.1f}%:"
        " the count or the total is from another arm, row or population"
    )


ONLY_PERCENT = re.compile(r"^[-−–]?\d+(?:\.\d+)?\s*%")


def percentage_only_flag(printed: str, value: object) -> str | None:
    """A count whose digits are printed as a percentage ("7 (14 %)" quoted for 14 events)."""
    if ONLY_PERCENT.match(printed.strip()):
        return f"the quote prints {value} as a percentage ({printed.strip().split('%')[0].strip()}%), not as a count"
    return None
