"""`evaluate`: a batch against a gold table, per arm number, to choose a model with evidence."""

from __future__ import annotations

import argparse
from pathlib import Path

from extraction_pipeline.cli.common import AddCommand, CliError, open_ledger, positive_int, print_json
from extraction_pipeline.core.settings import Settings


def cmd_evaluate(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.evaluation.gold import read_gold, read_mapping
    from extraction_pipeline.core.evaluation.score import evaluate
    from extraction_pipeline.core.ledger.batches import get_batch

    ledger = open_ledger(settings)
    if get_batch(ledger, args.batch) is None:
        raise CliError(f"unknown batch {args.batch}", 2)
    mapping = read_mapping(Path(args.mapping)) if args.mapping else None
    gold = read_gold(Path(args.gold), mapping)
    result = evaluate(ledger, args.batch, gold, final=args.final, include_figures=args.include_figures)
    if args.json:
        print_json(result.as_dict())
        return 0
    studies = len({g.study for g in gold})
    print(
        f"batch {args.batch} against {Path(args.gold).name}: {studies - len(result.studies_not_in_batch)} of {studies} "
        f"studies in the batch; {'final (reviewed)' if args.final else 'machine'} values"
        + (
            f"; {result.left_out_in_figures} gold value(s) only in figures left out"
            if result.left_out_in_figures
            else ""
        )
    )
    print("arm numbers (one of events/total/mean/sd/n of one arm of one outcome):")
    print(
        f"{'field':18s} {'gold':>6s} {'found':>6s} {'right':>6s} {'wrong':>6s} {'missing':>8s} "
        f"{'precision':>9s} {'recall':>6s}"
    )
    rows = [(name, score) for name, score in result.fields.items() if score.gold] + [("total", result.total())]
    for name, score in rows:
        print(
            f"{name:18s} {score.gold:6d} {score.found:6d} {score.right:6d} {score.wrong:6d} {score.missing:8d} "
            f"{_percent(score.precision):>9s} {_percent(score.recall):>6s}"
        )
    print(f"{'field group':18s} {'gold':>6s} {'extracted':>9s} {'right':>6s} {'precision':>9s} {'recall':>6s}")
    for name, group in result.groups().items():
        if not group.gold:
            print(f"{name:18s} no gold values ({group.extracted} extracted)")
            continue
        precision, recall = _percent(group.precision), _percent(group.recall)
        print(f"{name:18s} {group.gold:6d} {group.extracted:9d} {group.right:6d} {precision:>9s} {recall:>6s}")
    print("comparisons matched (gold outcome: intervention vs comparator -> extracted):")
    for document, match in result.matches:
        arms = f" {match.gold.intervention!r} vs {match.gold.comparator!r}" if match.gold.intervention else ""
        print(f"  {document}: {match.gold.outcome!r}{arms} -> {match.why}")
    if result.wrong:
        print("wrong values:")
        for wrong in result.wrong:
            print(
                f"  {wrong['document']}: {wrong['outcome']!r} {wrong['arm']!r} {wrong['field']}: "
                f"gold {wrong['gold']:g}, extracted {wrong['extracted']:g} under {wrong['extracted_arm']!r}"
                f" - quote: {wrong['quote'][:120]!r}"
            )
    for study in result.studies_not_in_batch:
        print(f"  study {study}: no document of the batch (matched by file name, study id or NCT number)")
    return 0


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{share:.0%}"


def register(add: AddCommand) -> None:
    command = add("evaluate", cmd_evaluate, "Score a batch against gold values, per arm number.")
    command.add_argument("batch", type=positive_int)
    command.add_argument("--gold", required=True, help="gold table: the corpus JSON format, or a CSV")
    command.add_argument("--mapping", help="JSON mapping of your CSV's column names (see docs/guide.md: Evaluating)")
    command.add_argument("--final", action="store_true", help="score the reviewed (final) values, not the machine's")
    command.add_argument("--include-figures", action="store_true", help="also score gold values only shown in figures")
    command.add_argument("--json", action="store_true")
