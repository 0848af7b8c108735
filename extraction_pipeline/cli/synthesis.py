"""`synthesis`: pool a batch's meta-analysis CSV from the command line.

An analyst checking a batch wants the pooled numbers without leaving the terminal for R: per outcome
and measure, the common effect, DerSimonian–Laird and REML random effects, tau², I², Q and the
prediction interval. Ratio measures are printed back-transformed (RR 0.49 [0.34, 0.70]); ``--json``
keeps them on the log scale, where they were computed, for scripts.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from extraction_pipeline.cli.common import EXIT_FAILURE, EXIT_USAGE, AddCommand, CliError, print_json
from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.settings import Settings

MEASURE_CHOICES = ("RR", "OR", "RD", "MD", "SMD")


def _number(value: float) -> str:
    # Two decimals as a forest plot prints them; small differences (a risk difference of 0.012)
    # keep two significant digits instead of rounding to 0.01.
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def _shown(ratio: bool, estimate: float, lower: float, upper: float) -> str:
    if ratio:
        estimate, lower, upper = math.exp(estimate), math.exp(lower), math.exp(upper)
    return f"{_number(estimate)} [{_number(lower)}, {_number(upper)}]"


def cmd_synthesis(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.synthesis import pool, read_meta_csv
    from extraction_pipeline.core.synthesis.effects import SOURCE_REPORTED

    path = Path(args.file)
    try:
        data = read_meta_csv(path, args.measure)
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    results = [pool(group.effects) for group in data.groups]
    if args.json:
        print_json({"file": str(path), "results": [r.as_dict() for r in results], "left_out": list(data.left_out)})
    else:
        for result in results:
            m, ratio = result.measure, result.ratio
            reported = sum(1 for s in result.studies if s.source == SOURCE_REPORTED)
            origin = f"{result.k - reported} from arm data, {reported} from reported estimates"
            print(f"{result.outcome} - {m}, k={result.k} ({origin})")
            c = result.common
            print(f"  common effect:              {m} {_shown(ratio, c.estimate, c.ci_lower, c.ci_upper)}")
            if result.random_dl is None or result.random_reml is None:
                print("  one study: nothing to pool, no random effects or heterogeneity")
                continue
            for label, fit, tau2 in (
                ("random effects, DL:         ", result.random_dl, result.tau2_dl),
                ("random effects, REML:       ", result.random_reml, result.tau2_reml),
            ):
                print(f"  {label}{m} {_shown(ratio, fit.estimate, fit.ci_lower, fit.ci_upper)}  tau² {tau2:.4f}")
            print(f"  heterogeneity:              Q {result.q:.2f} (df {result.q_df}), I² {result.i2:.1f}%")
            if result.prediction_interval is not None:
                low, high = result.prediction_interval
                if ratio:
                    low, high = math.exp(low), math.exp(high)
                print(f"  prediction interval (REML): {m} [{_number(low)}, {_number(high)}]")
        for note in data.left_out:
            print(f"left out: {note}")
    if not results:
        wanted = f" in {args.measure}" if args.measure else ""
        raise CliError(f"{path}: no outcome with data to pool{wanted}", EXIT_FAILURE)
    return 0


def register(add: AddCommand) -> None:
    command = add(
        "synthesis",
        cmd_synthesis,
        "Pool a batch's meta-analysis CSV per outcome: common effect, DL and REML random effects, "
        "tau², I², Q and the prediction interval.",
    )
    command.add_argument(
        "file",
        metavar="FILE.csv",
        help="a batch's meta-analysis CSV (the web UI's download, batch-N-meta-analysis.csv)",
    )
    command.add_argument(
        "--measure",
        type=str.upper,
        choices=MEASURE_CHOICES,
        help="the effect computed from arm data (default: the row's measure, else RR for events, MD for means); "
        "only outcomes in this measure are shown",
    )
    command.add_argument("--json", action="store_true", help="machine-readable, ratio measures on the log scale")
