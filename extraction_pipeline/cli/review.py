"""Commands on reviews: import the decisions typed into a workbook's Values sheet."""

from __future__ import annotations

import argparse
from pathlib import Path

from extraction_pipeline.cli.common import AddCommand, add_group, non_empty, open_ledger, print_json
from extraction_pipeline.core.settings import Settings

EXIT_CONFLICTS = 1


def cmd_review_import(args: argparse.Namespace, settings: Settings) -> int:
    """Apply a reviewed workbook. Exit 0 when every decision was applied or already recorded, 1 when
    some conflicted with decisions made meanwhile (reported, not applied), 2 for a bad file."""
    from extraction_pipeline.core.review.excel_import import import_decisions

    report = import_decisions(
        open_ledger(settings), Path(args.file), reviewer=args.reviewer, options=settings.parse_options()
    )
    if args.json:
        print_json(
            {
                "recorded": len(report.recorded),
                "unchanged": report.unchanged,
                "comments": report.comments,
                "conflicts": report.conflicts,
                "batches": sorted(report.batches),
            }
        )
    else:
        for line in report.recorded:
            print(f"recorded  {line}")
        for line in report.conflicts:
            print(f"CONFLICT  {line}")
        print(
            f"{len(report.recorded)} decision(s) recorded, {report.unchanged} unchanged, {report.comments} comment(s), "
            f"{len(report.conflicts)} conflict(s) not applied"
        )
        if report.batches:
            batches = ", ".join(str(b) for b in sorted(report.batches))
            print(f"download the reviewed workbook again (or `batch export`) for batch {batches}")
    return EXIT_CONFLICTS if report.conflicts else 0


def register(add: AddCommand) -> None:
    group = add_group(add, "review", "Review decisions made outside the browser.")
    imported = add(
        "import",
        cmd_review_import,
        "Apply the decision / corrected value / corrected quote / comment columns of a workbook's Values sheet.",
        group,
    )
    imported.add_argument("file", metavar="FILE.xlsx", help="a workbook exported by this pipeline, filled in")
    imported.add_argument("--reviewer", required=True, type=non_empty, help="who made these decisions")
    imported.add_argument("--json", action="store_true")
