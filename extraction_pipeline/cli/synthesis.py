"""`synthesis`: pool a batch's meta-analysis CSV from the command line.

An analyst checking a batch wants the pooled numbers without leaving the terminal for R: per outcome
and measure, the common effect, DerSimonian–Laird and REML random effects, tau², I², Q and the
prediction interval. Ratio measures are printed back-transformed (RR 0.49 [0.34, 0.70]); ``--json``
keeps them on the log scale, where they were computed, for scripts.

Pooling is one comparison at a time: without ``--arms``, the comparison proposed from the arm names
(placebo, saline, sham, usual care, control ... on the comparator side, every other arm an
intervention); ``--write-arms FILE`` writes that proposal (every study's every arm and its side) as
a CSV to edit, and ``--arms FILE`` (that CSV, or JSON ``{"comparison": {"study": {"arm": "side"}}}``)
pools each comparison it names, its arms on the sides it gives (an arm it leaves out keeps its
proposed side).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from extraction_pipeline.cli.common import EXIT_FAILURE, EXIT_USAGE, AddCommand, CliError, print_json
from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.settings import Settings

if TYPE_CHECKING:
    from extraction_pipeline.core.synthesis.comparisons import ComparisonSides

MEASURE_CHOICES = ("RR", "OR", "RD", "MD", "SMD")


def _number(value: float) -> str:
    # Two decimals as a forest plot prints them; small differences (a risk difference of 0.012)
    # keep two significant digits instead of rounding to 0.01.
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def _shown(ratio: bool, estimate: float, lower: float, upper: float) -> str:
    if ratio:
        estimate, lower, upper = math.exp(estimate), math.exp(lower), math.exp(upper)
    return f"{_number(estimate)} [{_number(lower)}, {_number(upper)}]"


def _write_arms(text: str, comparisons: tuple[ComparisonSides, ...], target: Path) -> int:
    """Every study's every arm with its side in each comparison, as a mapping CSV to edit."""
    from extraction_pipeline.core.synthesis.comparisons import sides_csv
    from extraction_pipeline.core.synthesis.csv_input import study_arms_of

    rows = []
    for comparison in comparisons:
        for study in study_arms_of(text):
            keys = [str(study.document_id)] if study.document_id is not None else []
            for arm, name, subgroup in study.arms:
                side = comparison.side([*keys, study.study], arm, name)
                shown = f"{name} ({subgroup})" if subgroup else name
                rows.append((comparison.name, keys[0] if keys else study.study, study.study, arm, shown, side))
    try:
        target.write_text(sides_csv(rows), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{target}: cannot write ({exc.strerror})", EXIT_FAILURE) from None
    return len(rows)


def cmd_synthesis(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.synthesis import pool
    from extraction_pipeline.core.synthesis.comparisons import DEFAULT_COMPARISON, ComparisonSides, read_sides_file
    from extraction_pipeline.core.synthesis.csv_input import parse_meta_csv, read_csv_text
    from extraction_pipeline.core.synthesis.effects import SOURCE_REPORTED

    path = Path(args.file)
    try:
        text = read_csv_text(path)
        comparisons = read_sides_file(Path(args.arms)) if args.arms else (ComparisonSides(DEFAULT_COMPARISON),)
        pooled = []
        for comparison in comparisons:
            try:
                pooled.append(
                    (
                        comparison,
                        parse_meta_csv(
                            text, args.measure, comparison=comparison, keep_double_zero=args.keep_double_zero
                        ),
                    )
                )
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if args.write_arms:
        count = _write_arms(text, comparisons, Path(args.write_arms))
        where = f"{count} arm(s) of {len(comparisons)} comparison(s) to {args.write_arms}"
        print(f"wrote {where}: edit the sides, then pool with --arms {args.write_arms}")
        return 0
    named = args.arms is not None
    results = [(comparison, group, pool(group.effects)) for comparison, data in pooled for group in data.groups]
    left_out = list(dict.fromkeys(note for _comparison, data in pooled for note in data.left_out))
    if args.json:
        print_json(
            {
                "file": str(path),
                "results": [
                    {**r.as_dict(), "comparison": c.name, "notes": list(group.notes)} for c, group, r in results
                ],
                "left_out": left_out,
            }
        )
    else:
        for comparison, group, result in results:
            m, ratio = result.measure, result.ratio
            reported = sum(1 for s in result.studies if s.source == SOURCE_REPORTED)
            origin = f"{result.k - reported} from arm data, {reported} from reported estimates"
            compared = f" [{comparison.name}]" if named else ""
            print(f"{result.outcome}{compared} - {m}, k={result.k} ({origin})")
            for note in group.notes:
                print(f"  note: {note}")
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
        for note in left_out:
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
    command.add_argument(
        "--keep-double-zero",
        action="store_true",
        help="pool a study with no events in either arm with a 0.5 continuity correction (metafor's default) "
        "instead of leaving it out as not estimable (RevMan's, the default) for RR and OR",
    )
    command.add_argument(
        "--arms",
        metavar="MAPPING",
        help="which arms are pooled against which: a CSV (comparison, study, arm, side) or JSON "
        '{"comparison": {"study": {"arm": "intervention|comparator|none"}}}; each comparison it names is pooled '
        "(default: one comparison, arms on the sides proposed from their names)",
    )
    command.add_argument(
        "--write-arms",
        metavar="FILE.csv",
        help="write every study's arms with their sides (as proposed, or as --arms gives them) to edit, and stop",
    )
