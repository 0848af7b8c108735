"""The paper's own arithmetic over a comparison: the printed effect, its 95% CI and its p-value
recomputed from the arm numbers.

A paper that prints "RR 0.99 (0.65–1.51)" beside "42/402" and "41/388" says the same thing twice;
a model that took one arm's count from another row, time point or population breaks the identity.
The effect is recomputed from the extracted arm numbers with the formulas the synthesis pools with
(``core.synthesis.effects``: statsmodels' risk ratio, odds ratio, risk difference and Hedges' g;
the raw mean difference), on the analysis scale (log for RR and OR), with its standard error.
Hazard ratios are not recomputed (they need the time-to-event data).

Each tolerance allows for how a paper may have computed its number, so that a flag means the
numbers cannot belong together, not that the paper used another method; an adjusted estimate,
interval or test (ANCOVA, a regression) can differ by design, and each flag says so.

- The estimate: half a unit of its last printed digit, plus what the arm numbers' own rounding can
  move it (each printed mean and SD moved by half a unit of its last digit, the moves added: a
  mean difference from means printed to one decimal can be 0.1 off), plus 1% of it. An SMD may be
  Cohen's d rather than Hedges' g: g's small-sample correction is allowed too.
- The 95% CI, checked whenever both bounds are printed (with or without the estimate): the Wald
  interval, estimate ± 1.96·SE, exponentiated for ratios. Each printed bound may be off by half a
  unit of its last digit, plus the arm numbers' rounding (its move of the estimate, and 1.96 times
  its move of the SE), plus a margin for the other standard methods, a fraction of the Wald
  half-width on the analysis scale (where Wald's interval is symmetric):

  - events: 10% + 1/√(the smallest of the four cells, events and non-events per arm). Score
    (Miettinen–Nurminen, Koopman), Newcombe, Agresti–Caffo, adjusted-logit and exact conditional
    intervals differ from Wald's through the binomial's skewness, which shrinks as 1/√count: in
    some 50,000 such intervals of 6,000 tables of 10 to 1,500 per arm, every bound fell within
    this margin of Wald's (at most 0.98 of it, with a cell of 1), while 10% alone is exceeded by
    Newcombe's with 20 events in a cell. With an empty cell only the containment below is checked.
  - means: 10% + how much wider a t interval is (with Welch's degrees of freedom for an MD, N − 2
    for an SMD) + for an MD, how far the pooled-SD (Student) SE is from the unpooled one. For an
    SMD this also covers Cohen's d with its own variance and the noncentral-t interval.

  Whatever the margin, the printed interval must contain the recomputed estimate (up to the same
  roundings). Bounds outside are flagged with the arm numbers, the sentence naming both intervals.
- The p-value, two-sided from the same effect: z = estimate / SE on the analysis scale against
  the normal distribution; for an MD, Welch's t with its Welch–Satterthwaite degrees of freedom.
  Papers test otherwise (chi-square, Fisher, Student's t, Mann–Whitney, adjusted models), so only
  a wide split across 0.05 is flagged: a printed p ≤ 0.01 ("p<0.01" is given as 0.01) where the
  numbers give p > 0.20, or a printed p > 0.20 where they give p < 0.01. "p<0.001" is given as
  0.001, so a printed p ≤ 0.001 is read, and named, as an upper bound. Not compared: a table with
  an empty cell (the Wald test runs on a corrected count, no test a paper prints) and a skewed
  measure, an arm's SD above its positive mean (papers test it by ranks, which can split from the
  t test that widely).

Simulated trials whose unadjusted intervals and tests were computed by each of these methods, and
whose numbers were rounded as papers round them, raise none of these flags. A risk difference may
be printed in percentage points ("RD 24.0% (10.3% to 37.7%)"): it is read on the scale
(proportion or percentage points) on which the printed estimate and bounds are nearer the
recomputed ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from extraction_pipeline.core.templates.arms import Comparison, Outcome, study_arms

Flags = dict[str, list[str]]
Disagreement = tuple[tuple[str, ...], str]  # the comparison's fields that disagree, and why
Numbers = Mapping[tuple[str, str], Decimal]  # ("arm" | "comparator", "events" | "total" | ...) -> number
BINARY = ("RR", "OR", "RD")
CONTINUOUS = ("MD", "SMD")
RATIOS = ("RR", "OR")
SIDES = ("arm", "comparator")
RELATIVE_TOLERANCE = 0.01
# The normal quantile of a two-sided 95% interval (core.synthesis.effects.Z95, not imported here so
# that importing this module does not import statsmodels).
Z95 = 1.959963984540054
# A CI bound's margin for other methods, as a fraction of the Wald half-width: the part every
# measure gets; see the module docstring for what is added per measure.
CI_MARGIN = 0.10
# The wide split across 0.05 that flags a p-value.
P_SIGNIFICANT = 0.01
P_NOT_SIGNIFICANT = 0.20
P_FLOOR = 0.001  # "p<0.001" is given as 0.001: at or below it, the printed p is an upper bound
PERCENT = 100.0
MAX_LOG = 700.0  # math.exp overflows past about 709


def measure_of(text: object) -> str | None:
    """The measure a printed name stands for ("risk ratio", "RR", "mean difference" -> "MD")."""
    words = " ".join(str(text or "").lower().replace("-", " ").split())
    names = {
        "RR": ("rr", "risk ratio", "relative risk"),  # not "rate ratio": person-time, not events/total
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
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _half_unit(number: Decimal) -> float:
    """Half a unit of the number's last printed digit: how far its rounding can have moved it."""
    exponent = number.as_tuple().exponent
    return float(Decimal(5).scaleb((exponent if isinstance(exponent, int) else 0) - 1))


@dataclass(frozen=True)
class Recomputed:
    """What the arm numbers give, on the analysis scale (log for RR and OR): the estimate, its SE,
    how far the arm numbers' rounding (and, for an SMD, d against g) can move each, the CI margin
    (a fraction of the Wald half-width), the degrees of freedom of its test (None: normal), and
    whether a paper's p can be compared with that test's."""

    measure: str
    estimate: float
    se: float
    estimate_slack: float
    se_slack: float
    margin: float
    df: float | None
    p_comparable: bool

    def shown(self, value: float, scale: float) -> float:
        """An analysis-scale value on the printed scale (a ratio as a ratio, an RD in its unit)."""
        return math.exp(min(value, MAX_LOG)) if self.measure in RATIOS else value * scale

    def p_value(self) -> float:
        stats = _scipy_stats()
        statistic = abs(self.estimate) / self.se
        if self.df is not None:
            return float(2 * stats.t.sf(statistic, self.df))
        return float(2 * stats.norm.sf(statistic))


def effect_flags(values: Mapping[str, Any]) -> Flags:
    """path -> flags for every comparison whose printed estimate, 95% CI or p-value the arm
    numbers do not give."""
    view = study_arms(values.keys(), values.get)
    flags: Flags = {}
    for outcome in view.outcomes:
        for comparison in outcome.comparisons:
            _check(outcome, comparison, values, flags)
    return flags


def _check(outcome: Outcome, comparison: Comparison, values: Mapping[str, Any], flags: Flags) -> None:
    measure = measure_of(values.get(comparison.paths.get("effect_measure", "")))
    arm, comparator = outcome.result(comparison.arm), outcome.result(comparison.comparator)
    if measure is None or arm is None or comparator is None:
        return
    printed = {
        name: number
        for name in ("effect_estimate", "ci_lower", "ci_upper", "p_value")
        if name in comparison.paths and (number := _decimal(values.get(comparison.paths[name]))) is not None
    }
    kinds = ("events", "total") if measure in BINARY else ("mean", "sd", "n")
    numbers = {}
    for side, result in zip(SIDES, (arm, comparator), strict=True):
        for kind in kinds:
            number = _decimal(values.get(result.paths.get(kind, "")))
            if number is None:
                return
            numbers[side, kind] = number
    effect = _recompute(measure, numbers)
    if not printed or effect is None:
        return
    scale = _scale(effect, printed)
    shown = _arm_numbers(measure, numbers)
    disagreements = (
        _estimate_disagreement(effect, printed, scale, shown),
        _interval_disagreement(effect, printed, scale, shown),
        _p_disagreement(effect, printed, shown),
    )
    for disagreement in disagreements:
        if disagreement is None:
            continue
        fields, sentence = disagreement
        # The estimate of an MD does not depend on the SDs and sizes; its interval and test do.
        involved = ("mean",) if measure == "MD" and fields == ("effect_estimate",) else kinds
        paths = [comparison.paths[name] for name in fields]
        paths += [result.paths[kind] for result in (arm, comparator) for kind in involved if kind in result.paths]
        for path in paths:
            if sentence not in flags.get(path, []):  # one sentence per disagreement and path
                flags.setdefault(path, []).append(sentence)


def _scale(effect: Recomputed, printed: Mapping[str, Decimal]) -> float:
    """1, or 100 for a risk difference printed in percentage points: the scale on which the
    recomputed difference and its Wald bounds are nearer the printed ones."""
    if effect.measure != "RD":
        return 1.0
    half_width = Z95 * effect.se
    pairs = [
        (float(printed[name]), effect.estimate + offset)
        for name, offset in (("effect_estimate", 0.0), ("ci_lower", -half_width), ("ci_upper", half_width))
        if name in printed
    ]
    return min((1.0, PERCENT), key=lambda scale: sum(abs(given - scale * value) for given, value in pairs))


def _estimate_disagreement(
    effect: Recomputed, printed: Mapping[str, Decimal], scale: float, shown: str
) -> Disagreement | None:
    estimate = printed.get("effect_estimate")
    if estimate is None:
        return None
    computed = effect.shown(effect.estimate, scale)
    tolerance = _half_unit(estimate) + effect.estimate_slack * scale + RELATIVE_TOLERANCE * abs(float(estimate))
    if abs(computed - float(estimate)) <= tolerance:
        return None
    return ("effect_estimate",), (
        f"the printed {effect.measure} {estimate} is not the {computed:.3g} the arm numbers give ({shown}):"
        " an arm number is from another row, time point or population, or the printed effect is adjusted"
    )


def _interval_disagreement(
    effect: Recomputed, printed: Mapping[str, Decimal], scale: float, shown: str
) -> Disagreement | None:
    """The printed bounds the arm numbers' interval does not allow, with one sentence naming both
    intervals (None when both agree, or the CI is not printed whole)."""
    lower, upper = printed.get("ci_lower"), printed.get("ci_upper")
    if lower is None or upper is None or lower > upper or (effect.measure in RATIOS and lower <= 0):
        return None  # a missing, reversed or non-positive ratio bound: the plain checks say so
    half_width = Z95 * effect.se
    # How far a bound may sit from Wald's on the analysis scale: the arm numbers' rounding moves the
    # estimate and the SE; other methods widen or narrow the interval by up to the margin.
    reach = effect.estimate_slack + Z95 * effect.se_slack + effect.margin * half_width
    estimate_low = effect.shown(effect.estimate - effect.estimate_slack, scale)
    estimate_high = effect.shown(effect.estimate + effect.estimate_slack, scale)
    off = []
    for name, bound, sign in (("ci_lower", lower, -1), ("ci_upper", upper, 1)):
        wald = effect.estimate + sign * half_width
        low, high = effect.shown(wald - reach, scale), effect.shown(wald + reach, scale)
        rounding = _half_unit(bound)
        value = float(bound)
        outside_width = not low - rounding <= value <= high + rounding
        # The interval must contain the estimate, whatever the method.
        excludes = value - rounding > estimate_high if sign < 0 else value + rounding < estimate_low
        if outside_width or excludes:
            off.append(name)
    if not off:
        return None
    wald_lower = effect.shown(effect.estimate - half_width, scale)
    wald_upper = effect.shown(effect.estimate + half_width, scale)
    recomputed = _interval_text(f"{wald_lower:.3g}", f"{wald_upper:.3g}")
    sentence = (
        f"the printed 95% CI {_interval_text(str(lower), str(upper))} is not the {recomputed} the arm numbers"
        f" give ({shown}): an arm number is from another row, time point or population, or the printed interval"
        " is adjusted"
    )
    return tuple(off), sentence


def _interval_text(lower: str, upper: str) -> str:
    """The interval as printed: 0.41–0.97, or -1.02 to -0.22 where a dash would read as a minus."""
    return f"{lower} to {upper}" if upper.startswith("-") or lower.startswith("-") else f"{lower}–{upper}"


def _p_disagreement(effect: Recomputed, printed: Mapping[str, Decimal], shown: str) -> Disagreement | None:
    p = printed.get("p_value")
    if p is None or not 0 <= p <= 1 or not effect.p_comparable:
        return None
    computed = effect.p_value()
    split = (float(p) <= P_SIGNIFICANT and computed > P_NOT_SIGNIFICANT) or (
        float(p) > P_NOT_SIGNIFICANT and computed < P_SIGNIFICANT
    )
    if not split:
        return None
    given = f"p ≤ {p}" if p <= Decimal(str(P_FLOOR)) else f"p {p}"
    got = f"p < {P_FLOOR}" if computed < P_FLOOR else f"p {computed:.2g}"
    return ("p_value",), (
        f"the printed {given} is not the {got} the arm numbers give ({shown}): an arm number is from another row,"
        " time point or population, or the printed p tests something else (an adjusted model, a change from"
        " baseline)"
    )


def _recompute(measure: str, numbers: Numbers) -> Recomputed | None:
    """The effect, its SE and their tolerances; None when the numbers give no effect (a zero
    total, both SDs zero, no variance)."""
    floats = {key: float(number) for key, number in numbers.items()}
    effect = _effect(measure, floats)
    if effect is None:
        return None
    estimate, se = effect
    if measure in BINARY:
        cells = [
            count
            for side in SIDES
            for count in (floats[side, "events"], floats[side, "total"] - floats[side, "events"])
        ]
        smallest = min(cells)
        margin = CI_MARGIN + 1 / math.sqrt(smallest) if smallest > 0 else math.inf
        # With an empty cell the Wald test runs on a corrected count: no test a paper prints.
        return Recomputed(measure, estimate, se, 0.0, 0.0, margin, None, p_comparable=smallest > 0)
    estimate_slack, se_slack = _rounding_slack(measure, floats, numbers, estimate, se)
    return _continuous(measure, floats, estimate, se, estimate_slack, se_slack)


def _continuous(
    measure: str,
    floats: Mapping[tuple[str, str], float],
    estimate: float,
    se: float,
    estimate_slack: float,
    se_slack: float,
) -> Recomputed:
    """An MD or SMD with the margin its interval gets for t quantiles and the pooled SD."""
    (n1, sd1), (n2, sd2) = ((floats[side, "n"], floats[side, "sd"]) for side in SIDES)
    if measure == "MD":
        # Tested with Welch's t; its degrees of freedom are at most Student's (N - 2), so its
        # quantile covers Student's interval too.
        df = _welch_df(sd1**2 / n1, n1, sd2**2 / n2, n2)
        # Student's interval uses the pooled SD, which differs from the unpooled SE when the arms'
        # sizes and SDs both differ.
        pooled_excess = 0.0
        if n1 + n2 > 2:
            pooled = math.sqrt(((n1 - 1) * sd1**2 + (n2 - 1) * sd2**2) / (n1 + n2 - 2) * (1 / n1 + 1 / n2))
            pooled_excess = abs(pooled / se - 1)
    else:
        df, pooled_excess = n1 + n2 - 2, 0.0
        # Cohen's d is printed as an SMD too: Hedges' g without its small-sample correction.
        correction = 1 - 3 / (4 * (n1 + n2) - 9)
        estimate_slack += abs(estimate) * (1 / correction - 1)
    t_excess = float(_scipy_stats().t.ppf(0.975, df)) / Z95 - 1
    margin = CI_MARGIN + t_excess + pooled_excess
    # An SD above a positive mean is a skewed measure (one that cannot be negative): papers test it
    # by ranks, which can split from the t test as widely as the p rule allows.
    skewed = any(floats[side, "sd"] > floats[side, "mean"] > 0 for side in SIDES)
    return Recomputed(
        measure,
        estimate,
        se,
        estimate_slack,
        se_slack,
        margin,
        df if measure == "MD" else None,  # an SMD is tested against the normal
        p_comparable=not skewed,
    )


def _welch_df(v1: float, n1: float, v2: float, n2: float) -> float:
    """Welch–Satterthwaite degrees of freedom of two variances of means (inf: the normal)."""
    denominator = sum(v**2 / (n - 1) for v, n in ((v1, n1), (v2, n2)) if n > 1)
    return (v1 + v2) ** 2 / denominator if denominator > 0 else math.inf


def _rounding_slack(
    measure: str, floats: Mapping[tuple[str, str], float], numbers: Numbers, estimate: float, se: float
) -> tuple[float, float]:
    """How far the printed means and SDs, each moved by half a unit of its last digit, move the
    estimate and its SE (the moves added: each number rounded the worst way)."""
    estimate_slack = se_slack = 0.0
    for key in ((side, kind) for side in SIDES for kind in ("mean", "sd")):
        moved = _effect(measure, {**floats, key: floats[key] + _half_unit(numbers[key])})
        if moved is not None:
            estimate_slack += abs(moved[0] - estimate)
            se_slack += abs(moved[1] - se)
    return estimate_slack, se_slack


def _effect(measure: str, floats: Mapping[tuple[str, str], float]) -> tuple[float, float] | None:
    """(estimate, SE) on the analysis scale, as the synthesis computes them; None when the numbers
    give no effect."""
    from extraction_pipeline.core.errors import ConfigError
    from extraction_pipeline.core.synthesis.effects import binary_effect, continuous_effect

    kinds = ("events", "total") if measure in BINARY else ("mean", "sd", "n")
    arm, comparator = ([floats[side, kind] for kind in kinds] for side in SIDES)
    compute = binary_effect if measure in BINARY else continuous_effect
    try:
        effect = compute("", "", measure, *arm, *comparator)
    except ConfigError:
        return None
    return effect.estimate, effect.se


def _scipy_stats() -> Any:
    """scipy's distributions, imported when first needed: importing this module stays cheap."""
    from scipy import stats  # type: ignore[import-untyped]

    return stats


def _arm_numbers(measure: str, numbers: Numbers) -> str:
    if measure in BINARY:
        arm = f"{numbers['arm', 'events']}/{numbers['arm', 'total']}"
        return f"{arm} vs {numbers['comparator', 'events']}/{numbers['comparator', 'total']}"
    return (
        f"{numbers['arm', 'mean']} (SD {numbers['arm', 'sd']}, n {numbers['arm', 'n']}) vs "
        f"{numbers['comparator', 'mean']} (SD {numbers['comparator', 'sd']}, n {numbers['comparator', 'n']})"
    )
