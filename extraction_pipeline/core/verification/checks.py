"""Plausibility checks on extracted numbers: a second line of defence after grounding.

A value can be verbatim in the paper and still be the wrong one (the SD taken for the mean, the
control arm's events for the treatment arm's). These rules flag combinations that cannot be
right; each flag is attached to the field it concerns (by its path, e.g. ``outcomes.2.ci_lower``),
with the reason.

The rules run per group of fields: the ``metadata`` and ``baseline`` modules together (arm sizes
against the randomized total), each arm, outcome and comparison entry on its own, and the arms
together (their sizes against the randomized total). An entry that names an arm the answer does
not declare is flagged there: its numbers cannot be placed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from extraction_pipeline.core.templates.arms import EFFECT_FIELDS, RESULT_FIELDS, study_arms
from extraction_pipeline.core.verification.recomputed import effect_flags

RATIO_MEASURES = {"HR", "OR", "RR", "IRR"}
# Version 1 names each number's arm in a suffix; version 2 entries hold one arm's numbers ("").
ARM_SUFFIXES = ("", "_treatment", "_control")
COUNT_PREFIXES = ("n_", "events_", "total_")
COUNT_NAMES = {"randomized_n", "analysed_n", "events", "total", "n"}
NON_NEGATIVE_PREFIXES = ("sd_", "age_")
NON_NEGATIVE_NAMES = {"sd", "age"}
PERCENT_PREFIXES = ("male_percent_",)
PERCENT_NAMES = {"male_percent"}
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
    for group, fields in groups.items():
        _check_group(fields, flags, randomized, arm_entry=group.startswith("arms."))
    _check_declared_arm_sizes(values, flags, randomized)
    _check_arm_references(values, flags)
    _check_outcome_sizes(values, flags)
    for path, reasons in effect_flags(values).items():
        flags.setdefault(path, []).extend(reasons)
    return flags


def _check_outcome_sizes(values: dict[str, Any], flags: Flags) -> None:
    """An outcome's total or n for an arm against the arm's sizes (version 2): above the number
    randomized to it (another arm's or the whole trial's size), or, where the answer gives the
    arm's analysed number, neither that nor the randomized one (a subgroup's or another
    population's size; an outcome with its own missing data also reads so, and says why here)."""
    view = study_arms(values.keys(), values.get)
    if view.version != 2:
        return
    for outcome in view.outcomes:
        for result in outcome.results:
            arm = view.arm(result.arm)
            if arm is None:
                continue
            randomized = _number(values.get(arm.paths.get("randomized_n", "")))
            analysed = _number(values.get(arm.paths.get("analysed_n", "")))
            for kind in ("total", "n"):
                size = _number(values.get(result.paths.get(kind, "")))
                if size is None:
                    continue
                if randomized is not None and size > randomized:
                    reason = f"{size} is more than the {randomized} randomized to '{arm.label}'"
                elif analysed is not None and size not in (analysed, randomized):
                    sizes = (
                        f"{randomized} randomized, {analysed} analysed"
                        if randomized is not None
                        else f"{analysed} analysed"
                    )
                    reason = (
                        f"{size} is not a size of '{arm.label}' ({sizes}): the size of a subgroup, another "
                        "population, or of those with this outcome measured"
                    )
                else:
                    continue
                flags.setdefault(result.paths[kind], []).append(reason)


def _check_declared_arm_sizes(values: dict[str, Any], flags: Flags, randomized: Decimal | None) -> None:
    """The arms randomized (the arms without a subgroup) against the randomized total."""
    if randomized is None:
        return
    arms = [path.rpartition(".")[0] for path in values if path.startswith("arms.") and path.endswith(".arm_name")]
    whole = [arm for arm in arms if not str(values.get(f"{arm}.subgroup") or "").strip()]
    sizes = [_number(values.get(f"{arm}.randomized_n")) for arm in whole]
    if len(whole) < 2 or any(size is None for size in sizes):
        return
    total = sum((size for size in sizes if size is not None), Decimal(0))
    if total != randomized:
        word = "more than" if total > randomized else "not"
        flags.setdefault("metadata.randomized_n", []).append(
            f"the {len(whole)} arms' sizes add up to {total}, {word} the {randomized} randomized"
        )


def _check_arm_references(values: dict[str, Any], flags: Flags) -> None:
    """An outcome or comparison entry must name an arm the same answer declared."""
    view = study_arms(values, values.get)
    if view.version != 2:
        return
    declared = ", ".join(f"'{arm.label}'" for arm in view.arms)
    for path in view.undeclared:
        named = str(values.get(path)).strip()
        where = f"declared: {declared}" if declared else "the answer declares no arms"
        flags.setdefault(path, []).append(f"names the arm '{named}', which is not one of the study's arms ({where})")
    if view.arms:
        # Numbers that name no arm cannot be placed in a study that declares its arms: said on the
        # numbers themselves, as the reference they lack has no value to carry a flag.
        for result in (r for outcome in view.outcomes for r in outcome.results):
            if not result.arm_name:
                _flag_answered(
                    values, flags, result.paths, RESULT_FIELDS, f"these numbers name no arm (declared: {declared})"
                )
        for comparison in (c for outcome in view.outcomes for c in outcome.comparisons):
            missing = [
                side
                for side, name in (("arm", comparison.arm_name), ("comparator_arm", comparison.comparator_name))
                if not name
            ]
            if missing:
                sides = " and ".join(
                    "its intervention arm" if side == "arm" else "its comparator arm" for side in missing
                )
                _flag_answered(
                    values,
                    flags,
                    comparison.paths,
                    EFFECT_FIELDS,
                    f"the comparison does not name {sides} (declared: {declared})",
                )
    for comparison in (c for outcome in view.outcomes for c in outcome.comparisons):
        if comparison.arm and comparison.arm == comparison.comparator:
            flags.setdefault(comparison.paths["comparator_arm"], []).append(
                f"compares the arm '{comparison.arm_name}' with itself"
            )


def _check_group(
    fields: dict[str, tuple[str, Any]], flags: Flags, randomized: Decimal | None, *, arm_entry: bool = False
) -> None:
    def flag(name: str, reason: str) -> None:
        flags.setdefault(fields[name][0], []).append(reason)

    numbers = {name: _number(value) for name, (_path, value) in fields.items()}
    _check_effect(numbers, str(fields.get("effect_measure", ("", ""))[1] or "").upper(), flag)
    for name, number in numbers.items():
        if number is None:
            continue
        is_count = name in COUNT_NAMES or name.startswith(COUNT_PREFIXES)
        non_negative = name in NON_NEGATIVE_NAMES or name.startswith(NON_NEGATIVE_PREFIXES)
        if (is_count or non_negative) and number < 0:
            flag(name, f"cannot be negative, got {number}")
        if is_count and number != number.to_integral_value():
            flag(name, f"a count must be a whole number, got {number}")
        if name == "p_value" and not 0 <= number <= 1:
            flag(name, f"a p-value must be between 0 and 1, got {number}")
        if (name in PERCENT_NAMES or name.startswith(PERCENT_PREFIXES)) and not 0 <= number <= 100:
            flag(name, f"a percentage must be between 0 and 100, got {number}")
    for suffix in ARM_SUFFIXES:
        arm = f"the {suffix[1:]} arm" if suffix else "the arm"
        events, total = numbers.get(f"events{suffix}"), numbers.get(f"total{suffix}")
        if events is not None and total is not None and events > total:
            flag(f"events{suffix}", f"{events} events exceed the {total} participants of {arm}")
        sizes = (f"n{suffix}", f"total{suffix}") + (("randomized_n", "analysed_n") if arm_entry and not suffix else ())
        for name in sizes:
            size = numbers.get(name)
            if size is not None and randomized is not None and size > randomized:
                flag(name, f"{size} in {arm} exceed the {randomized} randomized in the trial")
    if not arm_entry:
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
    sizes = [numbers.get(f"n_{arm}") for arm in ("treatment", "control")]
    if randomized is None or "randomized_n" not in numbers or any(size is None for size in sizes):
        return
    arms_total = sum((size for size in sizes if size is not None), Decimal(0))
    if arms_total > randomized:
        flag("randomized_n", f"arm sizes add up to {arms_total}, more than the {randomized} randomized")
    elif arms_total < randomized:
        flag("randomized_n", f"arm sizes add up to {arms_total}, not the {randomized} randomized")


def _flag_answered(
    values: dict[str, Any], flags: Flags, paths: Mapping[str, str], names: tuple[str, ...], reason: str
) -> None:
    for name in names:
        path = paths.get(name)
        if path is not None and values.get(path) is not None:
            flags.setdefault(path, []).append(reason)
