"""Commands on PDFs: register and list them, parse one, verify quotes or check claims against one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from extraction_pipeline.cli.common import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    add_group,
    non_negative_float,
    open_ledger,
    print_json,
)
from extraction_pipeline.core.errors import ExtractionError
from extraction_pipeline.core.settings import Settings


def cmd_documents_add(args: argparse.Namespace, settings: Settings) -> int:
    """Each file on its own: the good ones are registered, each bad one is named with its reason
    (one line on stderr), and the exit status says whether any was refused."""
    from extraction_pipeline.core.pdf.registration import RegisteredDocument, register_pdfs, validate_project

    validate_project(args.project)
    ledger = open_ledger(settings)
    paths = [Path(p) for p in args.pdfs]
    registered: list[RegisteredDocument] = []
    refused = 0
    verdicts = register_pdfs(ledger, settings.documents_dir, args.project, paths, settings.parse_options())
    for path, verdict in zip(paths, verdicts, strict=True):
        if isinstance(verdict, RegisteredDocument):
            registered.append(verdict)
            continue
        refused += 1
        if isinstance(verdict, OSError):  # unreadable file, directory in the way
            print(f"error: {path}: {verdict.strerror or verdict}", file=sys.stderr)
        else:
            print(f"error: {verdict}", file=sys.stderr)
    if args.json:
        print_json([doc.__dict__ for doc in registered])
    else:
        for doc in registered:
            note = ""
            if not doc.created:
                same = doc.registered_name == doc.filename
                note = " (already registered)" if same else f" (already registered as {doc.registered_name})"
            print(f"{doc.id}\t{doc.filename}\t{doc.pages} pages\t{doc.sha256[:12]}{note}")
    return EXIT_USAGE if refused else 0


def cmd_documents_list(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.documents import documents_after

    docs = [d for d in documents_after(open_ledger(settings), 0, limit=100_000) if args.project in (None, d["project"])]
    if args.json:
        print_json(docs)
    else:
        for doc in docs:
            print(f"{doc['id']}\t{doc['project']}\t{doc['filename']}\t{doc['pages']} pages")
    return 0


def _parse_for_cli(path: Path, settings: Settings, tables: str | None, timeout: float | None) -> Any:
    """Parse a user-named PDF through the content cache of this home (isolated, time-limited)."""
    from extraction_pipeline.core.pdf.parsing import parse_document
    from extraction_pipeline.core.pdf.registration import check_pdf_file, sha256_of

    check_pdf_file(path, settings.max_pdf_bytes)
    settings.home_dir.mkdir(parents=True, exist_ok=True)  # the parse cache lives in the ledger
    options = settings.parse_options(table_detection=tables, timeout_seconds=timeout)
    try:
        # resolve(): the user's own file may be a link; only stored copies must not be.
        stored = str(path.resolve())
        return parse_document(open_ledger(settings), sha256=sha256_of(path), stored_path=stored, options=options)
    except ExtractionError as exc:
        raise CliError(f"{path.name}: {exc}") from exc


def cmd_parse(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(args.pdf)
    parsed = _parse_for_cli(path, settings, args.tables, args.timeout)
    summary = parsed.metadata()
    if args.json:
        print_json(
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
    if args.claims is not None:
        return _ground_claims(args, settings)
    from extraction_pipeline.core.verification.grounding import Grounder

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


def _ground_claims(args: argparse.Namespace, settings: Settings) -> int:
    """Claims with their context, grounded and checked as a batch does. Every bad line is named
    (one line on stderr each) and then nothing is checked."""
    from extraction_pipeline.core.verification.claims import ClaimsError, check_claims, read_claims

    path = Path(args.claims)
    if not path.is_file():
        raise CliError(f"{path}: no such file", EXIT_USAGE)
    try:
        claims = read_claims(path.read_text(encoding="utf-8", errors="replace").splitlines())
    except ClaimsError as exc:
        for number, problem in exc.problems:
            print(f"error: {path}:{number}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    parsed = _parse_for_cli(Path(args.pdf), settings, args.tables, None)
    for verdict in check_claims(parsed, claims):
        if args.json:
            print(json.dumps(verdict.as_json(), ensure_ascii=False))
            continue
        claim = verdict.claim
        where = f"p.{verdict.page}" if verdict.page else "-"
        flags = f"  [{len(verdict.flags)} flag(s): {verdict.flags[0]}]" if verdict.flags else ""
        print(
            f"line {claim.line:<4d} {verdict.status:11s} {where:6s} {claim.kind} {claim.value} "
            f"({claim.arm}): {verdict.reason}{flags}"
        )
    return 0


def register(add: AddCommand) -> None:
    doc_sub = add_group(add, "documents", "Register and list PDFs.")
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
    parse.add_argument("--timeout", type=non_negative_float, help="seconds (default EXTRACTION_PARSE_TIMEOUT_SECONDS)")
    parse.add_argument(
        "--tables", choices=["lines", "layout", "off"], help="table detection (default EXTRACTION_TABLE_DETECTION)"
    )
    parse.add_argument("--json", action="store_true", help="{pages, engine, seconds, cache, pages_text, tables}")

    ground = add(
        "ground",
        cmd_ground,
        "Verify quotes against a PDF (one line per quote with status, confidence, reason, page, start, end), "
        "or check claims with their context as a batch does (one line per claim with status, flags, page, reason).",
    )
    ground.add_argument("pdf", metavar="PDF")
    given = ground.add_mutually_exclusive_group(required=True)
    given.add_argument("--quotes", metavar="FILE.jsonl", help="JSON lines with 'quote' (and 'value')")
    given.add_argument(
        "--claims",
        metavar="FILE.jsonl",
        help="JSON lines with 'quote', 'value', 'kind' (events, total, mean, sd, n), 'outcome', 'arm', 'versus', "
        "optional 'timepoint', 'page', 'entry' (claims with the same entry are one outcome comparison)",
    )
    ground.add_argument("--tables", choices=["lines", "layout", "off"])
    ground.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per quote; per claim: line, status, flags, page, reason, field",
    )
