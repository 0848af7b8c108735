"""The paper's own arithmetic over a comparison: the printed effect recomputed from the arm numbers.

A paper that prints "RR 0.99 (0.65–1.51)" beside "42/402" and "41/388" says the same thing twice;
a model that took one arm's count from another row, time point or population breaks the identity.
The effect is recomputed from the extracted arm numbers with the formulas the synthesis pools with
(``core.synthesis.effects``: statsmodels' risk ratio, odds ratio, risk difference and Hedges' g;
the raw mean difference) and compared with the printed estimate. Tolerance: half a unit of the
estimate's last printed digit, plus what the arm numbers' own rounding can move it (a mean
difference from means printed to one decimal can be 0.1 off), plus 1% of it. An adjusted
estimate (ANCOVA, a regression) can differ by design: the flag says so, and names both values.
Hazard ratios and p-values are not recomputed (they need the time-to-event data or the test).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from extraction_pipeline.core.templates.arms import Comparison, Outcome, study_arms

Flags = dict[str, list[str]]
BINARY = ("RR", "OR", "RD")
CONTINUOUS = ("MD", "SMD")
RELATIVE_TOLERANCE = 0.01


def measure_of(text: object) -> str | None:
    """The measure a printed name stands for ("risk ratio", "RR", "mean difference" -> "MD")."""
    words = " ".join(str(text or "").lower().replace("-", " ").split())
    names = {
        "RR": ("rr", "risk ratio", "relative risk", "rate ratio"),
        "OR": ("or", "odds ratio"),
        "RD": ("rd", "risk difference", "absolute risk difference"),
        "MD": ("md", "mean difference", "difference in means", "wmd"),
        "SMD": ("smd", "standardized mean difference", "standardised mean difference", "hedges g", "cohen d"),
    }
    for measure, spellings in names.items():
        if words in spellings:
            return measure
    return None


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _half_unit(number: Decimal) -> float:
    exponent = number.as_tuple().exponent
    return 0.5 * 10.0 ** (exponent if isinstance(exponent, int) else 0)


def effect_flags(values: Mapping[str, Any]) -> Flags:
    """path -> flags for every comparison whose printed estimate the arm numbers do not give."""
    view = study_arms(values.keys(), values.get)
    flags: Flags = {}
    for outcome in view.outcomes:
        for comparison in outcome.comparisons:
            _check(outcome, comparison, values, flags)
    return flags


def _check(outcome: Outcome, comparison: Comparison, values: Mapping[str, Any], flags: Flags) -> None:
    measure = measure_of(values.get(comparison.paths.get("effect_measure", "")))
    estimate_path = comparison.paths.get("effect_estimate")
    printed = _decimal(values.get(estimate_path)) if estimate_path else None
    arm, comparator = outcome.result(comparison.arm), outcome.result(comparison.comparator)
    if measure is None or printed is None or estimate_path is None or arm is None or comparator is None:
        return
    kinds = ("events", "total") if measure in BINARY else ("mean", "sd", "n")
    numbers = {}
    for side, result in (("arm", arm), ("comparator", comparator)):
        for kind in kinds:
            number = _decimal(values.get(result.paths.get(kind, "")))
            if number is None:
                return
            numbers[side, kind] = number
    computed, slack = _recompute(measure, numbers)
    if computed is None:
        return
    tolerance = _half_unit(printed) + slack + RELATIVE_TOLERANCE * abs(float(printed))
    if abs(computed - float(printed)) <= tolerance:
        return
    shown = _arm_numbers(measure, numbers)
    sentence = (
        f"the printed {measure} {printed} is not the {computed:.3g} the arm numbers give ({shown}):"
        " an arm number is from another row, time point or population, or the printed effect is adjusted"
    )
    involved = [estimate_path] + [
        result.paths[kind]
        for result in (arm, comparator)
        for kind in (("events", "total") if measure in BINARY else ("mean",) if measure == "MD" else kinds)
        if kind in result.paths
    ]
    for path in involved:
        flags.setdefault(path, []).append(sentence)


def _recompute(measure: str, numbers: Mapping[tuple[str, str], Decimal]) -> tuple[float | None, float]:
    """The effect on its printed scale (a ratio as a ratio) and how far the arm numbers' rounding
    can move it; None when the numbers give no effect (a zero total, both SDs zero)."""
    from extraction_pipeline.core.errors import ConfigError
    from extraction_pipeline.core.synthesis.effects import binary_effect, continuous_effect

    get: Callable[[str, str], float] = lambda side, kind: float(numbers[side, kind])  # noqa: E731
    try:
        if measure in BINARY:
            effect = binary_effect(
                "",
                "",
                measure,
                get("arm", "events"),
                get("arm", "total"),
                get("comparator", "events"),
                get("comparator", "total"),
            )
            value = math.exp(effect.estimate) if measure in ("RR", "OR") else effect.estimate
            return value, 0.0
        effect = continuous_effect(
            "",
            "",
            measure,
            get("arm", "mean"),
            get("arm", "sd"),
            get("arm", "n"),
            get("comparator", "mean"),
            get("comparator", "sd"),
            get("comparator", "n"),
        )
    except ConfigError:
        return None, 0.0
    slack = _half_unit(numbers["arm", "mean"]) + _half_unit(numbers["comparator", "mean"])
    if measure == "SMD":
        pooled = math.sqrt((get("arm", "sd") ** 2 + get("comparator", "sd") ** 2) / 2) or 1.0
        slack /= pooled
    return effect.estimate, slack


def _arm_numbers(measure: str, numbers: Mapping[tuple[str, str], Decimal]) -> str:
    if measure in BINARY:
        arm = f"{numbers['arm', 'events']}/{numbers['arm', 'total']}"
        return f"{arm} vs {numbers['comparator', 'events']}/{numbers['comparator', 'total']}"
    return (
        f"{numbers['arm', 'mean']} (SD {numbers['arm', 'sd']}, n {numbers['arm', 'n']}) vs "
        f"{numbers['comparator', 'mean']} (SD {numbers['comparator', 'sd']}, n {numbers['comparator', 'n']})"
    )
