"""Meta-analysis of a batch's exported CSV: study effect sizes, pooling, heterogeneity.

Pure domain code on statsmodels and scipy (no Dagster, no web): ``effects`` turns arm data or a
reported estimate into an effect with its standard error, ``pooling`` combines them (common effect,
DerSimonian–Laird and REML random effects), ``csv_input`` reads the CSV that
``core.export.meta_csv`` writes. The ``extraction-pipeline synthesis`` command prints the result.
"""

from extraction_pipeline.core.synthesis.csv_input import MetaCsv, OutcomeGroup, parse_meta_csv, read_meta_csv
from extraction_pipeline.core.synthesis.effects import (
    MEASURES,
    RATIO_MEASURES,
    StudyEffect,
    binary_effect,
    continuous_effect,
    is_ratio,
    reported_effect,
)
from extraction_pipeline.core.synthesis.pooling import Estimate, PooledResult, pool, reml_tau2

__all__ = [
    "MEASURES",
    "RATIO_MEASURES",
    "Estimate",
    "MetaCsv",
    "OutcomeGroup",
    "PooledResult",
    "StudyEffect",
    "binary_effect",
    "continuous_effect",
    "is_ratio",
    "parse_meta_csv",
    "pool",
    "read_meta_csv",
    "reml_tau2",
    "reported_effect",
]
