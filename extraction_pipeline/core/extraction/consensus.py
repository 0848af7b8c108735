"""Double extraction: two models' grounded answers compared value by value.

Cochrane asks for two independent extractions and a record of how disagreements were resolved.
Here the second extractor is a second model given the same prompt (neither sees the other's
answer). Per value: ``agree`` (the same normalized value), ``disagree``, ``first only`` or
``second only`` (one model found a value, the other none); values both left empty are not
compared. Numbers are equal when numerically equal (7.10 and 7.1), text when equal after case and
spacing are normalized.

The two answers number their entries (arms, outcome results, comparisons) independently, so the
second answer's entries are first aligned to the first's by meaning (``align``: an arm by name, an
outcome result by outcome, arm, time point and population, a comparison by outcome, both arms and
time point; see ``core.extraction.entries``): the same answer in another order agrees everywhere,
and a number given under another arm is a disagreement on that arm's entry. The second answer is
stored aligned, so a path names the same entry in both.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any

from extraction_pipeline.core.extraction.entries import entry_key, entry_location, has_identity, repeated_entries
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
    """path -> agreement, for every path where at least one model gave a value (``second``
    aligned to ``first`` by ``align``)."""
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


def align(first: GroundedFields, second: GroundedFields) -> GroundedFields:
    """``second`` with its repeated entries renumbered to the first answer's entries they are
    about: the same name, arms and qualifiers first, then the same name and arms (a time point
    written differently is a disagreement on the time point, not two entries). An entry the first
    answer has nothing like gets a number after the first answer's own ("second only"). Entries of
    a module without an identity keep their numbers."""
    firsts, seconds = repeated_entries(first), repeated_entries(second)
    numbers: dict[tuple[str, int], int] = {}
    for module, entries in seconds.items():
        if not has_identity(module):
            continue
        known = {index: entry_key(module, entry) for index, entry in firsts.get(module, {}).items()}
        keys = {index: entry_key(module, entry) for index, entry in entries.items()}
        taken: set[int] = set()
        for strict in (True, False):
            for index, key in keys.items():
                if (module, index) in numbers:
                    continue
                match = next(
                    (
                        number
                        for number, other in known.items()
                        if number not in taken and (key.same(other) if strict else key.named and key.core_same(other))
                    ),
                    None,
                )
                if match is not None:
                    numbers[module, index] = match
                    taken.add(match)
        after = max(known, default=0)
        for index in keys:
            if (module, index) not in numbers:
                after += 1
                numbers[module, index] = after
    aligned: GroundedFields = {}
    for path, value in second.items():
        location = entry_location(path, value)
        if location is None or location not in numbers:
            aligned[path] = value
            continue
        module, number = location[0], numbers[location]
        aligned[f"{module}.{number}.{value.field}"] = replace(value, index=number)
    return aligned


def agreement_rate(agreement: dict[str, str]) -> float | None:
    """Share of compared values on which both models agree (None: nothing compared)."""
    if not agreement:
        return None
    return round(Counter(agreement.values())[AGREE] / len(agreement), 3)


def field_of(path: str) -> str:
    """ "outcomes.3.events_control" -> "outcomes.events_control": rates are per field, over entries."""
    parts = path.split(".")
    return f"{parts[0]}.{parts[-1]}" if len(parts) == 3 else path
