"""The `extraction-pipeline` command line.

One module per group of commands (``service``, ``documents``, ``batches``, ``templates``, ``users``,
``synthesis``, ...); each
registers its own subcommands. Read commands (`batch status`, `history`, `documents list`) take
`--json`. Errors print one line on stderr and exit with status 2 (usage) or 1 (failure). Heavy
libraries load only in the commands that need them, so `batch create` answers in well under a
second.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from sqlalchemy.exc import SQLAlchemyError

from extraction_pipeline.cli import batches, documents, evaluation, review, service, synthesis, templates, users, worker
from extraction_pipeline.cli.common import EXIT_FAILURE, EXIT_USAGE, CliError, Command
from extraction_pipeline.core.errors import ConfigError, ExtractionError
from extraction_pipeline.core.settings import load_settings

__all__ = ["build_parser", "main"]


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

    def add(name: str, func: Command, help_text: str, target: Any = sub) -> argparse.ArgumentParser:
        command: argparse.ArgumentParser = target.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(func=func)
        return command

    for group in (service, documents, batches, templates, review, evaluation, synthesis, worker, users):
        group.register(add)
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
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error. Point stdout at /dev/null so the
        # interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # unwritable export target, full disk, missing directory...
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
