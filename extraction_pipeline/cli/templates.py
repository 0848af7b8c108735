"""Commands on a project's extraction template: show, set (a new version), list versions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from extraction_pipeline.cli.common import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    add_group,
    open_ledger,
    positive_int,
    print_json,
)
from extraction_pipeline.core.settings import Settings

MAX_TEMPLATE_FILE_BYTES = 1_000_000


def cmd_template_show(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.extraction.prompts import describe_custom_rules, describe_template
    from extraction_pipeline.core.ledger.documents import project_exists
    from extraction_pipeline.core.ledger.templates import latest_version, list_versions
    from extraction_pipeline.core.pdf.registration import validate_project
    from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
    from extraction_pipeline.core.templates.schema import output_json_schema

    validate_project(args.project)
    ledger = open_ledger(settings)
    if args.version is None:
        shown = latest_version(ledger, args.project)
        if shown is None and not project_exists(ledger, args.project):
            raise CliError(
                f"unknown project {args.project!r}: it has no documents and no template "
                "(add PDFs with `documents add` or a template with `template set`)",
                EXIT_USAGE,
            )
    else:
        shown = next((v for v in list_versions(ledger, args.project) if v.version == args.version), None)
        if shown is None:
            raise CliError(f"project {args.project!r} has no template version {args.version}", EXIT_USAGE)
    # A project without a version is shown the base its first batch will freeze (nothing is saved).
    definition = shown.definition if shown else RCT_TEMPLATE
    if args.schema:
        print_json(output_json_schema(definition))
    elif args.json:
        identity = {"id": shown.id, "version": shown.version} if shown else {"id": None, "version": None}
        print_json({"project": args.project, **identity, **definition.to_json()})
    else:
        if shown:
            print(f"template {shown.label}, created {shown.created_at:%Y-%m-%d %H:%M} UTC\n")
        else:
            print(f"project {args.project!r} has no template yet; its first batch freezes the built-in rct base:\n")
        print(describe_template(definition))
        if custom := describe_custom_rules(definition):
            print(f"\n{custom}")
    return 0


def cmd_template_set(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.templates import definition_from_project_file, save_version
    from extraction_pipeline.core.pdf.registration import validate_project

    validate_project(args.project)
    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"template file not found: {path}", EXIT_USAGE)
    if path.stat().st_size > MAX_TEMPLATE_FILE_BYTES:
        raise CliError(f"template file is larger than {MAX_TEMPLATE_FILE_BYTES} bytes: {path}", EXIT_USAGE)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"template file is not valid JSON: {path}: {exc}", EXIT_USAGE) from exc
    definition = definition_from_project_file(data)
    saved, created = save_version(open_ledger(settings), args.project, definition)
    fields = len(definition.custom_fields)
    if created:
        print(f"template {saved.label} saved with {fields} custom field(s); new batches use it, existing keep theirs")
    else:
        print(f"template unchanged: {saved.label} already has this content")
    return 0


def cmd_template_versions(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.templates import list_versions
    from extraction_pipeline.core.pdf.registration import validate_project

    validate_project(args.project)
    versions = list_versions(open_ledger(settings), args.project)
    rows: list[dict[str, Any]] = [
        {
            "id": v.id,
            "version": v.version,
            "base": f"{v.definition.base} v{v.definition.base_version}",
            "custom_fields": [f.name for f in v.definition.custom_fields],
            "created_at": v.created_at,
        }
        for v in versions
    ]
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"project {args.project!r} has no template yet: its first batch uses the built-in rct base")
    else:
        for row in rows:
            custom = ", ".join(row["custom_fields"]) or "-"
            print(f"v{row['version']}\t{row['base']}\tcustom: {custom}\t{row['created_at']:%Y-%m-%d %H:%M}")
    return 0


def register(add: AddCommand) -> None:
    template_sub = add_group(add, "template", "Show and edit a project's extraction template (versioned).")
    show = add(
        "show", cmd_template_show, "Show the project's current template (or --version N) and its fields.", template_sub
    )
    show.add_argument("project")
    show.add_argument("--version", type=positive_int)
    show.add_argument("--json", action="store_true", help="the stored definition")
    show.add_argument("--schema", action="store_true", help="the JSON Schema the model answers in")
    tset = add(
        "set",
        cmd_template_set,
        'Save a new template version from a JSON file {"base": "rct", "custom_fields": [...], "instructions": ""}.',
        template_sub,
    )
    tset.add_argument("project")
    tset.add_argument("file", metavar="FILE.json")
    versions = add("versions", cmd_template_versions, "List a project's template versions.", template_sub)
    versions.add_argument("project")
    versions.add_argument("--json", action="store_true")
