"""Plausibility checks on extracted numbers: a second line of defence after grounding.

A value can be verbatim in the paper and still be the wrong one (the SD taken for the mean, the
control arm's events for the treatment arm's). These rules flag combinations that cannot be
right; each flag is attached to the field it concerns (by its path, e.g. ``outcomes.2.ci_lower``),
with the reason.

The rules run per group of fields: the ``metadata`` and ``baseline`` modules together (arm sizes
against the randomized total), and each outcome entry on its own.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal, InvalidOperation
from typing import Any

RATIO_MEASURES = {"HR", "OR", "RR", "IRR"}
ARMS = ("treatment", "control")
COUNT_PREFIXES = ("n_", "events_", "total_")
COUNT_NAMES = {"randomized_n"}
NON_NEGATIVE_PREFIXES = ("sd_", "age_")
PERCENT_PREFIXES = ("male_percent_",)
STUDY_MODULES = ("metadata", "baseline")

Flags = dict[str, list[str]]


def _number(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value).replace(",", "").strip().rstrip("%"))
    except InvalidOperation:
        return None


def check_values(values: dict[str, Any]) -> Flags:
    """Flags per field path for the values of one extraction (path -> value)."""
    groups: dict[str, dict[str, Any]] = defaultdict(dict)
    for path, value in values.items():
        group, _, name = path.rpartition(".")
        groups["study" if group in STUDY_MODULES else group][name] = (path, value)
    flags: Flags = {}
    randomized = _number(values.get("metadata.randomized_n"))
    for fields in groups.values():
        _check_group(fields, flags, randomized)
    return flags


def _check_group(fields: dict[str, tuple[str, Any]], flags: Flags, randomized: Decimal | None) -> None:
    def flag(name: str, reason: str) -> None:
        flags.setdefault(fields[name][0], []).append(reason)

    numbers = {name: _number(value) for name, (_path, value) in fields.items()}
    _check_effect(numbers, str(fields.get("effect_measure", ("", ""))[1] or "").upper(), flag)
    for name, number in numbers.items():
        if number is None:
            continue
        is_count = name in COUNT_NAMES or name.startswith(COUNT_PREFIXES)
        if (is_count or name.startswith(NON_NEGATIVE_PREFIXES)) and number < 0:
            flag(name, f"cannot be negative, got {number}")
        if is_count and number != number.to_integral_value():
            flag(name, f"a count must be a whole number, got {number}")
        if name == "p_value" and not 0 <= number <= 1:
            flag(name, f"a p-value must be between 0 and 1, got {number}")
        if name.startswith(PERCENT_PREFIXES) and not 0 <= number <= 100:
            flag(name, f"a percentage must be between 0 and 100, got {number}")
    for arm in ARMS:
        events, total = numbers.get(f"events_{arm}"), numbers.get(f"total_{arm}")
        if events is not None and total is not None and events > total:
            flag(f"events_{arm}", f"{events} events exceed the {total} participants of the {arm} arm")
        for name in (f"n_{arm}", f"total_{arm}"):
            size = numbers.get(name)
            if size is not None and randomized is not None and size > randomized:
                flag(name, f"{size} in the {arm} arm exceed the {randomized} randomized in the trial")
    _check_arm_sizes(numbers, flag)


def _check_effect(numbers: dict[str, Decimal | None], measure: str, flag: Any) -> None:
    estimate, lower, upper = numbers.get("effect_estimate"), numbers.get("ci_lower"), numbers.get("ci_upper")
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


def _check_arm_sizes(numbers: dict[str, Decimal | None], flag: Any) -> None:
    """Arms randomized (baseline) against the randomized total, when all are reported."""
    randomized = numbers.get("randomized_n")
    sizes = [numbers.get(f"n_{arm}") for arm in ARMS]
    if randomized is None or "randomized_n" not in numbers or any(size is None for size in sizes):
        return
    arms_total = sum((size for size in sizes if size is not None), Decimal(0))
    if arms_total > randomized:
        flag("randomized_n", f"arm sizes add up to {arms_total}, more than the {randomized} randomized")
    elif arms_total < randomized:
        flag("randomized_n", f"arm sizes add up to {arms_total}, not the {randomized} randomized")
