"""The `extraction-pipeline` command line.

Read commands (`batch status`, `history`, `documents list`) take `--json`. Errors print one line
on stderr and exit with status 2 (usage) or 1 (failure). Heavy libraries load only in the
commands that need them, so `batch create` answers in well under a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.core.errors import ConfigError, ExtractionError
from extraction_pipeline.core.settings import Settings, load_settings

EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A one-line message for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def _ledger(settings: Settings) -> Any:
    from extraction_pipeline.core.ledger import Ledger

    return Ledger.connect(settings.ledger_url)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _date(text: str) -> datetime:
    """An ISO date/time; with an offset it is converted to UTC, without one it is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date like 2026-11-30 or 2026-11-30T08:00, got {text!r}") from None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


# ---------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.instance import init_home

    report = init_home(settings, {"pdf_parse": args.parse_slots, "llm": args.llm_slots})
    print(f"home       {report.home}")
    print(f"dagster    {report.home / 'dagster' / 'dagster.yaml'} ({report.dagster_yaml}, {report.storage} storage)")
    print(f"ledger     {report.ledger_url}")
    print("pools      " + ", ".join(f"{name}={limit}" for name, limit in report.pools.items()))
    return 0


def cmd_documents_add(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.documents import check_pdf_file, register_pdf, validate_project

    validate_project(args.project)
    paths = [Path(p) for p in args.pdfs]
    for path in paths:  # check all first: a typo in the 10th file must not half-register a set
        check_pdf_file(path, settings.max_pdf_bytes)
    ledger = _ledger(settings)
    registered = [
        register_pdf(ledger, settings.documents_dir, args.project, path, settings.max_pdf_bytes) for path in paths
    ]
    if args.json:
        _print_json([doc.__dict__ for doc in registered])
    else:
        for doc in registered:
            note = "" if doc.created else " (already registered)"
            print(f"{doc.id}\t{doc.filename}\t{doc.pages} pages\t{doc.sha256[:12]}{note}")
    return 0


def cmd_documents_list(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.documents import documents_after

    docs = [d for d in documents_after(_ledger(settings), 0, limit=100_000) if args.project in (None, d["project"])]
    if args.json:
        _print_json(docs)
    else:
        for doc in docs:
            print(f"{doc['id']}\t{doc['project']}\t{doc['filename']}\t{doc['pages']} pages")
    return 0


def _parse_for_cli(path: Path, settings: Settings, tables: str | None, timeout: float | None) -> Any:
    """Parse a user-named PDF through the content cache of this home (isolated, time-limited)."""
    from extraction_pipeline.core.documents import check_pdf_file, sha256_of
    from extraction_pipeline.core.parsing import parse_document

    check_pdf_file(path, settings.max_pdf_bytes)
    settings.home_dir.mkdir(parents=True, exist_ok=True)  # the parse cache lives in the ledger
    options = settings.parse_options(table_detection=tables, timeout_seconds=timeout)
    try:
        return parse_document(_ledger(settings), sha256=sha256_of(path), stored_path=str(path), options=options)
    except ExtractionError as exc:
        raise CliError(f"{path.name}: {exc}") from exc


def cmd_parse(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(args.pdf)
    parsed = _parse_for_cli(path, settings, args.tables, args.timeout)
    summary = parsed.metadata()
    if args.json:
        _print_json(
            {
                **summary,
                "sha256": parsed.sha256,
                "pages_text": parsed.pages_text,
                "tables": [table.as_dict() for table in parsed.tables],
            }
        )
    else:
        print(
            f"{path.name}: {summary['pages']} pages, {summary['tables']} tables, engine {summary['engine']} "
            f"({summary['engine_version']}), {summary['seconds']} s, cache {summary['cache']}"
        )
    return 0


def _read_quotes(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CliError(f"{path}: no such file", EXIT_USAGE)
    quotes = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}:{number}: not a JSON line ({exc.msg})", EXIT_USAGE) from None
        if not isinstance(record, dict) or not isinstance(record.get("quote"), str):
            raise CliError(f"{path}:{number}: each line needs a string field 'quote'", EXIT_USAGE)
        if not isinstance(record.get("value"), str | int | float | None) or isinstance(record.get("value"), bool):
            raise CliError(f"{path}:{number}: 'value' must be a string or a number", EXIT_USAGE)
        quotes.append(record)
    return quotes


def cmd_ground(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.grounding import Grounder

    quotes = _read_quotes(Path(args.quotes))
    parsed = _parse_for_cli(Path(args.pdf), settings, args.tables, None)
    grounder = Grounder(parsed)
    for record in quotes:
        verdict = grounder.ground(record.get("value"), record["quote"]).as_dict()
        if args.json:
            print(json.dumps({**verdict, "quote": record["quote"], "value": record.get("value")}, ensure_ascii=False))
        else:
            where = f"p.{verdict['page']}" if verdict["page"] else "-"
            print(f"{verdict['status']:11s} {verdict['confidence']:.3f} {where:6s} {record['quote'][:70]}")
    return 0


def cmd_batch_create(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline.core.ledger.documents import documents_after
    from extraction_pipeline.core.ledger.templates import template_of_batch
    from extraction_pipeline.instance import require_initialized

    require_initialized(settings)
    ledger = _ledger(settings)
    if args.documents:
        doc_ids = args.documents
    else:
        doc_ids = [d["id"] for d in documents_after(ledger, 0, limit=1_000_000) if d["project"] == args.project]
        if not doc_ids:
            raise CliError(f"project {args.project!r} has no documents: add some with `documents add`")
    ref = create_batch(
        ledger, idempotency_key=args.idempotency_key, project=args.project, user=args.user, document_ids=doc_ids
    )
    frozen = template_of_batch(ledger, ref.id)
    template = frozen.label if frozen else "built-in rct base"
    if args.json:
        _print_json({"batch_id": ref.id, "created": ref.created, "documents": len(doc_ids), "template": template})
    else:
        state = "created" if ref.created else "already exists (same idempotency key)"
        print(f"batch {ref.id} {state}; {len(doc_ids)} document(s) queued for the batch_dispatcher sensor")
        print(f"template: {template}")
    return 0


def _bar(fraction: float, width: int = 30) -> str:
    filled = round(fraction * width)
    return "#" * filled + "-" * (width - filled)


def cmd_batch_status(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.batches import get_batch
    from extraction_pipeline.core.ledger.queries import progress

    ledger = _ledger(settings)
    while True:
        batch = get_batch(ledger, args.batch)
        if batch is None:
            raise CliError(f"unknown batch {args.batch}", EXIT_USAGE)
        counts = progress(ledger, args.batch)
        if args.json:
            _print_json({"batch": batch, "progress": counts.as_dict()})
        else:
            line = (
                f"batch {args.batch} [{_bar(counts.percent / 100)}] {counts.percent:5.1f}%  "
                f"{counts.done}/{counts.total} done  pending {counts.pending}  extracting {counts.extracting}  "
                f"completed {counts.completed}  error {counts.error}  {batch['status']}"
            )
            end = "\r" if args.watch and sys.stdout.isatty() and batch["status"] == "open" else "\n"
            print(line, end=end, flush=True)
        if not args.watch or batch["status"] != "open":
            if args.watch and not args.json and batch.get("export_path"):
                print(f"workbook: {batch['export_path']}")
            return 0
        time.sleep(args.interval)


def cmd_batch_export(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.export import default_export_path, write_workbook

    target = Path(args.output) if args.output else default_export_path(settings.exports_dir, args.batch)
    if target.suffix.lower() != ".xlsx":
        raise CliError(f"output must end in .xlsx: {target}", EXIT_USAGE)
    path = write_workbook(_ledger(settings), args.batch, target)
    print(path)
    return 0


MAX_TEMPLATE_FILE_BYTES = 1_000_000


def cmd_template_show(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.documents import validate_project
    from extraction_pipeline.core.ledger.templates import latest_version, list_versions
    from extraction_pipeline.core.prompts import describe_custom_rules, describe_template
    from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
    from extraction_pipeline.core.templates.schema import output_json_schema

    validate_project(args.project)
    ledger = _ledger(settings)
    if args.version is None:
        shown = latest_version(ledger, args.project)
    else:
        shown = next((v for v in list_versions(ledger, args.project) if v.version == args.version), None)
        if shown is None:
            raise CliError(f"project {args.project!r} has no template version {args.version}", EXIT_USAGE)
    # A project without a version is shown the base its first batch will freeze (nothing is saved).
    definition = shown.definition if shown else RCT_TEMPLATE
    if args.schema:
        _print_json(output_json_schema(definition))
    elif args.json:
        identity = {"id": shown.id, "version": shown.version} if shown else {"id": None, "version": None}
        _print_json({"project": args.project, **identity, **definition.to_json()})
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
    from extraction_pipeline.core.documents import validate_project
    from extraction_pipeline.core.ledger.templates import definition_from_project_file, save_version

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
    saved, created = save_version(_ledger(settings), args.project, definition)
    fields = len(definition.custom_fields)
    if created:
        print(f"template {saved.label} saved with {fields} custom field(s); new batches use it, existing keep theirs")
    else:
        print(f"template unchanged: {saved.label} already has this content")
    return 0


def cmd_template_versions(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.documents import validate_project
    from extraction_pipeline.core.ledger.templates import list_versions

    validate_project(args.project)
    versions = list_versions(_ledger(settings), args.project)
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
        _print_json(rows)
    elif not rows:
        print(f"project {args.project!r} has no template yet: its first batch uses the built-in rct base")
    else:
        for row in rows:
            custom = ", ".join(row["custom_fields"]) or "-"
            print(f"v{row['version']}\t{row['base']}\tcustom: {custom}\t{row['created_at']:%Y-%m-%d %H:%M}")
    return 0


HISTORY_COLUMNS = ("id", "batch_id", "user", "filename", "status", "attempts", "created_at", "message")


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.queries import history

    rows = history(
        _ledger(settings),
        user=args.user,
        status=args.status,
        filename=args.filename,
        batch_id=args.batch,
        since=args.since,
        until=args.until,
        limit=args.limit,
    )
    if args.json:
        _print_json([{k: row[k] for k in (*HISTORY_COLUMNS, "document_id", "run_id", "cost_usd")} for row in rows])
    else:
        print("\t".join(HISTORY_COLUMNS))
        for row in rows:
            print("\t".join("" if row[k] is None else str(row[k])[:80] for k in HISTORY_COLUMNS))
    return 0


def _run_in_foreground(settings: Settings, *, with_ui: bool, port: int = 3000) -> int:
    from extraction_pipeline.instance import DaemonProcess, require_initialized

    require_initialized(settings)
    daemon = DaemonProcess(settings, with_ui=with_ui, port=port).start()
    what = f"Dagster UI on http://127.0.0.1:{port}" if with_ui else "dagster-daemon running"
    print(f"{what} (log: {daemon.log_path}); Ctrl-C stops it", flush=True)
    try:
        while daemon.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        daemon.stop()
    return 0


def cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    return _run_in_foreground(settings, with_ui=True, port=args.port)


def cmd_daemon(args: argparse.Namespace, settings: Settings) -> int:
    return _run_in_foreground(settings, with_ui=False)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.demo import run_demo

    summary = run_demo(settings, documents=args.documents, timeout_seconds=args.timeout)
    if args.json:
        _print_json(summary)
    return 0 if summary["batch_status"] == "completed" else EXIT_FAILURE


# ---------------------------------------------------------------- parser


class OneLineErrorParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr (exit 2), like every other error of this CLI."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="extraction-pipeline",
        description="Extract source-grounded data from randomized-trial PDFs in batches, on Dagster. "
        "Settings come from EXTRACTION_* environment variables (EXTRACTION_HOME, "
        "EXTRACTION_DATABASE_URL, EXTRACTION_MODEL, EXTRACTION_API_BASE, EXTRACTION_API_KEY).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, func: Callable[[argparse.Namespace, Settings], int], help_text: str, target: Any = sub
    ) -> argparse.ArgumentParser:
        command: argparse.ArgumentParser = target.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(func=func)
        return command

    init = add(
        "init", cmd_init, "Create or complete the instance home: ledger schema, dagster.yaml, pool limits (idempotent)."
    )
    init.add_argument("--parse-slots", type=_positive_int, default=2, help="pdf_parse pool limit (default 2)")
    init.add_argument("--llm-slots", type=_positive_int, default=5, help="llm pool limit (default 5)")

    demo = add(
        "demo",
        cmd_demo,
        "Generate synthetic trial PDFs, run them as a batch through the Dagster daemon, write the workbook.",
    )
    demo.add_argument("--documents", type=_positive_int, default=5, help="number of synthetic PDFs (default 5)")
    demo.add_argument("--timeout", type=_positive_int, default=600, help="seconds to wait for the batch (default 600)")
    demo.add_argument("--json", action="store_true", help="also print the summary as JSON")

    documents = add("documents", lambda a, s: 0, "Register and list PDFs.")
    doc_sub = documents.add_subparsers(dest="documents_command", required=True, metavar="SUBCOMMAND")
    doc_add = add(
        "add", cmd_documents_add, "Register PDFs in a project (stores a copy; idempotent per content).", doc_sub
    )
    doc_add.add_argument("project", help="project name (letters, digits, . _ -)")
    doc_add.add_argument("pdfs", nargs="+", metavar="PDF", help="PDF files")
    doc_add.add_argument("--json", action="store_true")
    doc_list = add("list", cmd_documents_list, "List registered documents.", doc_sub)
    doc_list.add_argument("--project")
    doc_list.add_argument("--json", action="store_true")

    parse = add(
        "parse",
        cmd_parse,
        "Parse one PDF (isolated, with a hard timeout) and print its pages and tables; cached by content.",
    )
    parse.add_argument("pdf", metavar="PDF")
    parse.add_argument("--timeout", type=_non_negative_float, help="seconds (default EXTRACTION_PARSE_TIMEOUT_SECONDS)")
    parse.add_argument(
        "--tables", choices=["lines", "layout", "off"], help="table detection (default EXTRACTION_TABLE_DETECTION)"
    )
    parse.add_argument("--json", action="store_true", help="{pages, engine, seconds, cache, pages_text, tables}")

    ground = add(
        "ground",
        cmd_ground,
        "Verify quotes against a PDF: one line per quote with status, confidence, reason, page, start, end.",
    )
    ground.add_argument("pdf", metavar="PDF")
    ground.add_argument("--quotes", required=True, metavar="FILE.jsonl", help="JSON lines with 'quote' (and 'value')")
    ground.add_argument("--tables", choices=["lines", "layout", "off"])
    ground.add_argument("--json", action="store_true", help="one JSON object per quote")

    batch = add("batch", lambda a, s: 0, "Create, watch and export batches.")
    batch_sub = batch.add_subparsers(dest="batch_command", required=True, metavar="SUBCOMMAND")
    create = add(
        "create",
        cmd_batch_create,
        "Create a batch over a project's documents; the dispatcher sensor starts it.",
        batch_sub,
    )
    create.add_argument("project")
    create.add_argument("--user", required=True, help="who launches it (run tag extraction/user, per-user limit)")
    create.add_argument("--idempotency-key", required=True, help="same key = same batch, never a duplicate")
    create.add_argument(
        "--documents", type=_positive_int, nargs="+", metavar="ID", help="document ids (default: all of the project)"
    )
    create.add_argument("--json", action="store_true")
    status = add(
        "status", cmd_batch_status, "Progress of a batch; --watch shows a live progress bar until it closes.", batch_sub
    )
    status.add_argument("batch", type=_positive_int)
    status.add_argument("--watch", action="store_true")
    status.add_argument(
        "--interval", type=_non_negative_float, default=2.0, help="seconds between refreshes with --watch"
    )
    status.add_argument("--json", action="store_true")
    export = add(
        "export",
        cmd_batch_export,
        "Write a batch's workbook (default: $EXTRACTION_HOME/exports/batch-N.xlsx).",
        batch_sub,
    )
    export.add_argument("batch", type=_positive_int)
    export.add_argument("-o", "--output", help="target .xlsx file")

    template = add("template", lambda a, s: 0, "Show and edit a project's extraction template (versioned).")
    template_sub = template.add_subparsers(dest="template_command", required=True, metavar="SUBCOMMAND")
    show = add(
        "show", cmd_template_show, "Show the project's current template (or --version N) and its fields.", template_sub
    )
    show.add_argument("project")
    show.add_argument("--version", type=_positive_int)
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

    hist = add(
        "history", cmd_history, "Items across batches, newest first, filtered by user, status, filename, batch, dates."
    )
    hist.add_argument("--user")
    hist.add_argument("--status", choices=["pending", "extracting", "completed", "error"])
    hist.add_argument("--filename", help="substring of the filename")
    hist.add_argument("--batch", type=_positive_int)
    hist.add_argument("--since", type=_date, help="created at or after (UTC), e.g. 2026-11-30")
    hist.add_argument("--until", type=_date, help="created before (UTC)")
    hist.add_argument("--limit", type=_positive_int, default=200)
    hist.add_argument("--json", action="store_true")

    ui = add("ui", cmd_ui, "Open the Dagster UI (webserver + daemon) on this instance home.")
    ui.add_argument("--port", type=_positive_int, default=3000)
    add("daemon", cmd_daemon, "Run the Dagster daemon (sensors, run queue, monitoring) without the UI.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args, settings))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ExtractionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except SQLAlchemyError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: ledger database: {first_line}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # unwritable export target, full disk, missing directory...
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
