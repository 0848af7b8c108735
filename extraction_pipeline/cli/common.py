"""What every command shares: exit codes, the one-line error, argument types, output helpers."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from extraction_pipeline.core.settings import Settings

EXIT_FAILURE = 1
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace, Settings], int]


class AddCommand(Protocol):
    """Adds a (sub)command: ``add(name, func, help_text, target=<subparsers>)``."""

    def __call__(self, name: str, func: Command, help_text: str, target: Any = ...) -> argparse.ArgumentParser: ...


def add_group(add: AddCommand, name: str, help_text: str) -> Any:
    """A command that only groups subcommands (``documents``, ``batch``, ``template``); returns
    the subparsers to add them to."""
    group = add(name, lambda args, settings: 0, help_text)  # never called: a subcommand is required
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND")


class CliError(Exception):
    """A one-line message for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def open_ledger(settings: Settings) -> Any:
    from extraction_pipeline.core.ledger import Ledger

    if not settings.database_url and not settings.home_dir.is_dir():
        # Otherwise SQLite says "unable to open database file", which tells the user nothing.
        raise CliError(f"{settings.home_dir} does not exist: run `extraction-pipeline init` first", EXIT_USAGE)
    return Ledger.connect(settings.ledger_url)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def iso_date(text: str) -> datetime:
    """An ISO date/time; with an offset it is converted to UTC, without one it is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date like 2026-11-30 or 2026-11-30T08:00, got {text!r}") from None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value
