"""Double extraction: two models' grounded answers compared value by value.

Cochrane asks for two independent extractions and a record of how disagreements were resolved.
Here the second extractor is a second model given the same prompt (neither sees the other's
answer). Per value: ``agree`` (the same normalized value), ``disagree``, ``first only`` or
``second only`` (one model found a value, the other none); values both left empty are not
compared. Numbers are equal when numerically equal (7.10 and 7.1), text when equal after case and
spacing are normalized.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extraction_pipeline.core.extraction.grounded import GroundedFields

AGREE, DISAGREE, FIRST_ONLY, SECOND_ONLY = "agree", "disagree", "first only", "second only"
NEEDS_REVIEW = (DISAGREE, FIRST_ONLY, SECOND_ONLY)


def normalized(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    text = " ".join(str(value).lower().split())
    try:
        return float(text.replace(",", "")) if re.fullmatch(r"-?[\d,]*\.?\d+", text) else text
    except ValueError:
        return text


def compare(first: GroundedFields, second: GroundedFields) -> dict[str, str]:
    """path -> agreement, for every path where at least one model gave a value."""
    agreement = {}
    for path in dict.fromkeys([*first, *second]):
        a = first[path].value if path in first else None
        b = second[path].value if path in second else None
        if a is None and b is None:
            continue
        if a is None:
            agreement[path] = SECOND_ONLY
        elif b is None:
            agreement[path] = FIRST_ONLY
        else:
            agreement[path] = AGREE if normalized(a) == normalized(b) else DISAGREE
    return agreement


def agreement_rate(agreement: dict[str, str]) -> float | None:
    """Share of compared values on which both models agree (None: nothing compared)."""
    if not agreement:
        return None
    return round(Counter(agreement.values())[AGREE] / len(agreement), 3)


def field_of(path: str) -> str:
    """ "outcomes.3.events_control" -> "outcomes.events_control": rates are per field, over entries."""
    parts = path.split(".")
    return f"{parts[0]}.{parts[-1]}" if len(parts) == 3 else path
