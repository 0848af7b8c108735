"""Plausibility checks on extracted numbers: a second line of defence after grounding.

A value can be verbatim in the paper and still be the wrong one (the SD taken for the mean, the
control arm's events for the treatment arm's). These rules flag combinations that cannot be
right; each flag is attached to the field it concerns, with the reason.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

RATIO_MEASURES = {"HR", "OR", "RR", "IRR"}
ARMS = ("intervention", "comparator")


def _number(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value).replace(",", "").strip().rstrip("%"))
    except InvalidOperation:
        return None


def check_fields(values: dict[str, Any]) -> dict[str, list[str]]:
    """Flags per field name, for whichever of the known fields are present."""
    flags: dict[str, list[str]] = {}

    def flag(field: str, reason: str) -> None:
        flags.setdefault(field, []).append(reason)

    numbers = {name: _number(value) for name, value in values.items()}
    estimate, lower, upper = numbers.get("effect_estimate"), numbers.get("ci_lower"), numbers.get("ci_upper")
    measure = str(values.get("effect_measure") or "").upper()
    if lower is not None and upper is not None and lower > upper:
        flag("ci_lower", f"lower bound {lower} is above the upper bound {upper}")
    if (
        estimate is not None
        and lower is not None
        and upper is not None
        and lower <= upper
        and not lower <= estimate <= upper
    ):
        flag("effect_estimate", f"estimate {estimate} lies outside its own CI {lower} to {upper}")
    if measure in RATIO_MEASURES:
        for name in ("effect_estimate", "ci_lower", "ci_upper"):
            if (number := numbers.get(name)) is not None and number <= 0:
                flag(name, f"a ratio ({measure}) must be positive, got {number}")

    for name, number in numbers.items():
        if number is None:
            continue
        is_count = name == "randomized_n" or name.endswith(("_events", "_group_size"))
        if (is_count or name.endswith(("_standard_deviation", "_sd"))) and number < 0:
            flag(name, f"cannot be negative, got {number}")
        if is_count and number != number.to_integral_value():
            flag(name, f"a count must be a whole number, got {number}")
        if (name == "p_value" or name.endswith("_p_value")) and not 0 <= number <= 1:
            flag(name, f"a p-value must be between 0 and 1, got {number}")

    for arm in ARMS:
        events, total = numbers.get(f"{arm}_events"), numbers.get(f"{arm}_group_size")
        if events is not None and total is not None and events > total:
            flag(f"{arm}_events", f"{events} events exceed the {total} participants of the arm")
    randomized = numbers.get("randomized_n")
    sizes = [size for arm in ARMS if (size := numbers.get(f"{arm}_group_size")) is not None]
    if randomized is not None and len(sizes) == len(ARMS):
        arms_total = sum(sizes, Decimal(0))
        if arms_total > randomized:
            flag("randomized_n", f"arm sizes add up to {arms_total}, more than the {randomized} randomized")
        elif arms_total < randomized:
            flag("randomized_n", f"arm sizes add up to {arms_total}, not the {randomized} randomized")
    return flags
