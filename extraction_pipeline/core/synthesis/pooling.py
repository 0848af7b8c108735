"""Pooling study effects: common effect, DerSimonian–Laird and REML random effects, heterogeneity.

The issue asks for what a meta-analyst reports: the common-effect (inverse-variance) estimate, the
random-effects estimate by DerSimonian–Laird and by REML (metafor's default), tau², I², Cochran's Q
and the prediction interval. statsmodels' ``combine_effects`` (0.15.0) computes the common effect,
Q and I², and tau² by DerSimonian–Laird (``method_re="dl"``) or Paule–Mandel (``"iterated"``/``"pm"``);
it has **no REML estimator**. So:

- REML's tau² is the maximum of the restricted log-likelihood of the normal random-effects model
  (Viechtbauer 2005, eq. 10; metafor's ``method="REML"``), found with ``scipy.optimize``'s bounded
  scalar minimizer on [0, upper]; the likelihood at tau² = 0 is compared too, since a bounded search
  never evaluates its ends. It is the documented estimator, maximized numerically instead of by
  metafor's Fisher scoring: both find the same maximum (dat.bcg: tau² 0.3132 in both).
- Given a tau², the random-effects estimate is the inverse-variance estimate with variances
  ``v_i + tau²``, so both random-effects fits are ``combine_effects``' common effect on those
  variances, never a formula of ours.
- statsmodels leaves a DerSimonian–Laird tau² below zero when Q < k - 1; metafor and RevMan
  truncate it at 0, and so does this module (likewise I² = max(0, (Q - df) / Q)).

CIs are Wald intervals on the normal distribution (metafor's ``test="z"``). I² is Higgins'
Q-based I² in percent (what RevMan prints, and metafor for a DL fit). The prediction interval is
REML's, ``mu ± z · sqrt(se² + tau²)``, as metafor's ``predict()`` gives it for an ``rma`` fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar  # type: ignore[import-untyped]
from statsmodels.stats.meta_analysis import combine_effects  # type: ignore[import-untyped]

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.synthesis.effects import Z95, StudyEffect, is_ratio


@dataclass(frozen=True)
class Estimate:
    """A pooled estimate on the analysis scale (log for ratio measures) with its 95% CI."""

    estimate: float
    se: float
    ci_lower: float
    ci_upper: float

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "se": self.se, "ci_lower": self.ci_lower, "ci_upper": self.ci_upper}


@dataclass(frozen=True)
class PooledResult:
    """One outcome's meta-analysis. With one study (``k == 1``) there is nothing to pool: ``common``
    is that study's own estimate and every random-effects and heterogeneity field is None."""

    outcome: str
    measure: str
    k: int
    common: Estimate
    random_dl: Estimate | None
    random_reml: Estimate | None
    tau2_dl: float | None
    tau2_reml: float | None
    i2: float | None  # percent
    q: float | None
    q_df: int
    prediction_interval: tuple[float, float] | None
    studies: tuple[StudyEffect, ...] = ()

    @property
    def ratio(self) -> bool:
        """Whether estimates are log ratios (shown back-transformed with exp)."""
        return is_ratio(self.measure)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, on the analysis scale (log for ratio measures)."""
        return {
            "outcome": self.outcome,
            "measure": self.measure,
            "scale": "log" if self.ratio else "raw",
            "k": self.k,
            "common": self.common.as_dict(),
            "random_dl": self.random_dl.as_dict() if self.random_dl else None,
            "random_reml": self.random_reml.as_dict() if self.random_reml else None,
            "tau2_dl": self.tau2_dl,
            "tau2_reml": self.tau2_reml,
            "i2": self.i2,
            "q": self.q,
            "q_df": self.q_df,
            "prediction_interval": list(self.prediction_interval) if self.prediction_interval else None,
            "studies": [
                {
                    "study": s.study,
                    "estimate": s.estimate,
                    "se": s.se,
                    "ci_lower": s.ci_lower,
                    "ci_upper": s.ci_upper,
                    "source": s.source,
                }
                for s in self.studies
            ],
        }


def _restricted_neg_loglik(tau2: float, effects: np.ndarray, variances: np.ndarray) -> float:
    """Minus the REML log-likelihood of the random-effects model, without its constant."""
    weights = 1.0 / (variances + tau2)
    mean = float(weights @ effects / weights.sum())
    return 0.5 * float(np.log(variances + tau2).sum() + math.log(weights.sum()) + weights @ (effects - mean) ** 2)


def reml_tau2(effects: ArrayLike, variances: ArrayLike) -> float:
    """The REML estimate of the between-study variance tau² (at least 0)."""
    y, v = np.asarray(effects, dtype=float), np.asarray(variances, dtype=float)
    if len(y) < 2:
        raise ConfigError("tau² needs at least 2 studies")
    # tau² above the spread of the effects plus the largest within-study variance (times 10) is
    # never the maximum; bounding the search keeps the minimizer from wandering off.
    upper = 10.0 * (float(np.var(y, ddof=1)) + float(v.max())) + 1e-8
    found = minimize_scalar(
        _restricted_neg_loglik, bounds=(0.0, upper), args=(y, v), method="bounded", options={"xatol": 1e-10}
    )
    tau2 = float(found.x)
    if _restricted_neg_loglik(0.0, y, v) <= _restricted_neg_loglik(tau2, y, v):
        return 0.0
    return tau2


def _inverse_variance(effects: np.ndarray, variances: np.ndarray) -> tuple[Estimate, Any]:
    """statsmodels' common-effect estimate for these variances, and its full result."""
    # Q = 0 (identical effects) makes statsmodels' I² divide by zero; the value is not used from there.
    with np.errstate(divide="ignore", invalid="ignore"):
        result = combine_effects(effects, variances, method_re="dl", use_t=False)
        lower, upper = result.conf_int(use_t=False)[0]
    return Estimate(float(result.mean_effect_fe), float(result.sd_eff_w_fe), float(lower), float(upper)), result


def pool(effects: Sequence[StudyEffect]) -> PooledResult:
    """Pool studies of one outcome and one measure."""
    if not effects:
        raise ConfigError("no study to pool")
    outcome, measure = effects[0].outcome, effects[0].measure
    mixed = sorted({e.measure for e in effects} - {measure})
    if mixed:
        raise ConfigError(f"cannot pool {measure} with {', '.join(mixed)} for outcome {outcome!r}")
    studies = tuple(effects)
    if len(studies) == 1:
        only = studies[0]
        common = Estimate(only.estimate, only.se, only.ci_lower, only.ci_upper)
        return PooledResult(outcome, measure, 1, common, None, None, None, None, None, None, 0, None, studies)

    y = np.array([e.estimate for e in studies], dtype=float)
    v = np.array([e.variance for e in studies], dtype=float)
    common, result = _inverse_variance(y, v)
    q, df = float(result.q), len(studies) - 1
    tau2_dl = max(0.0, float(result.tau2))
    tau2_reml = reml_tau2(y, v)
    random_dl, _ = _inverse_variance(y, v + tau2_dl)
    random_reml, _ = _inverse_variance(y, v + tau2_reml)
    i2 = 100.0 * max(0.0, float(result.i2))  # -inf when Q = 0
    half = Z95 * math.sqrt(random_reml.se**2 + tau2_reml)
    prediction = (random_reml.estimate - half, random_reml.estimate + half)
    return PooledResult(
        outcome,
        measure,
        len(studies),
        common,
        random_dl,
        random_reml,
        tau2_dl,
        tau2_reml,
        i2,
        q,
        df,
        prediction,
        studies,
    )
