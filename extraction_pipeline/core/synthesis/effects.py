"""One study's effect size and its standard error, from arm data or from the reported estimate.

Pooling needs every study on one scale with a standard error. Arm data give it directly; a paper
that prints only "HR 0.72 (95% CI 0.60 to 0.86)" gives it through the CI's width. Ratio measures
(RR, OR, HR) are analysed on the log scale, differences (RD, MD, SMD) on the raw scale, as in
metafor and RevMan.

The formulas are statsmodels' (``statsmodels.stats.meta_analysis``):
``effectsize_2proportions`` for log RR, log OR and RD, ``effectsize_smd`` for Hedges' g. Two
exceptions, each a definition rather than a model:

- the raw mean difference, which statsmodels' meta-analysis module does not offer: ``m1 - m2`` with
  variance ``sd1²/n1 + sd2²/n2`` (metafor's ``measure="MD"``, Cochrane Handbook 6.5.1.1);
- a reported CI turned into a standard error, ``(ub - lb) / (2 · 1.959964)`` on the analysis scale
  (Cochrane Handbook 6.3.2), which is what the issue asks.

Zero cells: statsmodels' ``zero_correction=0.5`` adds 0.5 to the events of *every* study but widens
the totals only of studies with a zero cell (statsmodels 0.15.0, ``effectsize_2proportions``), which
shifts studies that need no correction (dat.bcg's trial 1: log RR -0.816 instead of -0.889). So the
correction is applied here, to the studies that need it only, as metafor's ``escalc`` does by
default (``add=1/2, to="only0"``: 0.5 more events and non-events in each arm), and statsmodels is
called without one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from statsmodels.stats.meta_analysis import effectsize_2proportions, effectsize_smd  # type: ignore[import-untyped]

from extraction_pipeline.core.errors import ConfigError

RATIO_MEASURES: Final = ("RR", "OR", "HR")
BINARY_MEASURES: Final = ("RR", "OR", "RD")
CONTINUOUS_MEASURES: Final = ("MD", "SMD")
MEASURES: Final = ("RR", "OR", "RD", "MD", "SMD", "HR")
# The normal quantile of a two-sided 95% interval, norm.isf(0.025), to the digits a CI is printed with.
Z95: Final = 1.959963984540054
CONTINUITY: Final = 0.5

SOURCE_ARMS: Final = "arms"
SOURCE_REPORTED: Final = "reported"


def is_ratio(measure: str) -> bool:
    """True when the measure is pooled on the log scale."""
    return measure in RATIO_MEASURES


@dataclass(frozen=True)
class StudyEffect:
    """One study's effect on the analysis scale (log for ratio measures); ``source`` says whether
    it was computed from the arms (``"arms"``) or taken from the reported estimate (``"reported"``)."""

    study: str
    outcome: str
    measure: str
    estimate: float
    se: float
    ci_lower: float
    ci_upper: float
    source: str

    @property
    def variance(self) -> float:
        return self.se**2


def _finite(study: str, **values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value):
            raise ConfigError(f"study {study!r}: {name} is not a finite number ({value})")


def _from_variance(
    study: str, outcome: str, measure: str, estimate: float, variance: float, source: str
) -> StudyEffect:
    estimate, variance = float(estimate), float(variance)
    if not (math.isfinite(estimate) and math.isfinite(variance)) or variance <= 0:
        raise ConfigError(
            f"study {study!r}: the {measure} has no usable variance ({variance:g}); "
            "a study whose arms all had, or all lacked, the event carries no information on a risk difference"
        )
    se = math.sqrt(variance)
    return StudyEffect(study, outcome, measure, estimate, se, estimate - Z95 * se, estimate + Z95 * se, source)


NOT_ESTIMABLE: Final = "no events in either arm (or every participant had one): not estimable"


def not_estimable(
    measure: str, events_treatment: float, total_treatment: float, events_control: float, total_control: float
) -> bool:
    """A study whose arms both had no events (or, for an odds ratio, both all events) tells nothing
    about a ratio: RevMan calls it "not estimable" and leaves it out of the pooling; metafor pools
    it with its 0.5 continuity correction (``binary_effect``), which an analyst may choose."""
    if measure not in ("RR", "OR"):
        return False
    none = events_treatment == 0 and events_control == 0
    every = events_treatment == total_treatment and events_control == total_control
    return none or (measure == "OR" and every)


def binary_effect(
    study: str,
    outcome: str,
    measure: str,
    events_treatment: float,
    total_treatment: float,
    events_control: float,
    total_control: float,
) -> StudyEffect:
    """RR or OR (log scale) or RD from events/total per arm (treatment vs control)."""
    if measure not in BINARY_MEASURES:
        raise ConfigError(f"{measure!r} is not a measure for events (one of {', '.join(BINARY_MEASURES)})")
    _finite(
        study,
        events_treatment=events_treatment,
        total_treatment=total_treatment,
        events_control=events_control,
        total_control=total_control,
    )
    for arm, events, total in (
        ("treatment", events_treatment, total_treatment),
        ("control", events_control, total_control),
    ):
        if total <= 0:
            raise ConfigError(f"study {study!r}: the {arm} arm has {total:g} participants; a total must be above 0")
        if events < 0:
            raise ConfigError(f"study {study!r}: the {arm} arm has {events:g} events; events cannot be negative")
        if events > total:
            raise ConfigError(f"study {study!r}: {events:g} events exceed the {total:g} participants of the {arm} arm")
    cells = (events_treatment, total_treatment - events_treatment, events_control, total_control - events_control)
    if measure != "RD" and 0 in cells:
        # metafor's default (add=1/2, to="only0"): 0.5 more events and non-events in both arms.
        events_treatment, events_control = events_treatment + CONTINUITY, events_control + CONTINUITY
        total_treatment, total_control = total_treatment + 2 * CONTINUITY, total_control + 2 * CONTINUITY
    statistic = {"RR": "risk-ratio", "OR": "odds-ratio", "RD": "diff"}[measure]
    estimate, variance = effectsize_2proportions(
        events_treatment, total_treatment, events_control, total_control, statistic=statistic
    )
    return _from_variance(study, outcome, measure, estimate, variance, SOURCE_ARMS)


def continuous_effect(
    study: str,
    outcome: str,
    measure: str,
    mean_treatment: float,
    sd_treatment: float,
    n_treatment: float,
    mean_control: float,
    sd_control: float,
    n_control: float,
) -> StudyEffect:
    """MD (raw difference) or SMD (Hedges' g, statsmodels' bias correction) from mean, SD and n per arm."""
    if measure not in CONTINUOUS_MEASURES:
        raise ConfigError(f"{measure!r} is not a measure for means (one of {', '.join(CONTINUOUS_MEASURES)})")
    _finite(
        study,
        mean_treatment=mean_treatment,
        sd_treatment=sd_treatment,
        n_treatment=n_treatment,
        mean_control=mean_control,
        sd_control=sd_control,
        n_control=n_control,
    )
    for arm, sd, n in (("treatment", sd_treatment, n_treatment), ("control", sd_control, n_control)):
        if n <= 0:
            raise ConfigError(f"study {study!r}: the {arm} arm has n = {n:g}; it must be above 0")
        if sd < 0:
            raise ConfigError(f"study {study!r}: the {arm} arm has SD {sd:g}; a standard deviation cannot be negative")
    if measure == "MD":
        estimate = mean_treatment - mean_control
        variance = sd_treatment**2 / n_treatment + sd_control**2 / n_control
    else:
        if n_treatment + n_control <= 3:
            # Hedges' correction divides by 4N - 9 and its variance by N - 3.94.
            raise ConfigError(f"study {study!r}: an SMD needs more than 3 participants in all")
        if sd_treatment == 0 and sd_control == 0:
            raise ConfigError(f"study {study!r}: both SDs are 0, so the SMD is undefined")
        estimate, variance = effectsize_smd(
            mean_treatment, sd_treatment, n_treatment, mean_control, sd_control, n_control
        )
    return _from_variance(study, outcome, measure, estimate, variance, SOURCE_ARMS)


def reported_effect(
    study: str, outcome: str, measure: str, estimate: float, ci_lower: float, ci_upper: float
) -> StudyEffect:
    """The paper's own estimate with its 95% CI: a ratio (HR, OR, RR) on the log scale, a
    difference (RD, MD, SMD) as printed; the SE from the CI's width."""
    if measure not in MEASURES:
        raise ConfigError(f"study {study!r}: unknown effect measure {measure!r} (one of {', '.join(MEASURES)})")
    _finite(study, estimate=estimate, ci_lower=ci_lower, ci_upper=ci_upper)
    if not ci_lower < ci_upper:
        raise ConfigError(f"study {study!r}: the CI {ci_lower:g} to {ci_upper:g} is empty or reversed")
    if not ci_lower <= estimate <= ci_upper:
        raise ConfigError(
            f"study {study!r}: the {measure} {estimate:g} lies outside its own CI {ci_lower:g} to {ci_upper:g}"
        )
    if is_ratio(measure):
        if ci_lower <= 0:
            raise ConfigError(f"study {study!r}: a ratio ({measure}) and its CI must be above 0, got {ci_lower:g}")
        estimate, ci_lower, ci_upper = math.log(estimate), math.log(ci_lower), math.log(ci_upper)
    se = (ci_upper - ci_lower) / (2 * Z95)
    return StudyEffect(study, outcome, measure, estimate, se, ci_lower, ci_upper, SOURCE_REPORTED)
