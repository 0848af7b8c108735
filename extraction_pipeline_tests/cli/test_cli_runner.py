"""The tests' command-line runner: a command forked from the warm process behaves as a fresh one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from extraction_pipeline_tests.support.cli import run_cli
from extraction_pipeline_tests.support.processes import PRELOAD


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("batch", "status"),  # an argument error: usage, one line, status 2
        ("documents", "list", "--json"),  # not initialized yet: the home's own message
        ("init", "--llm-slots", "3"),
        ("no-such-command",),
    ],
)
def test_a_forked_command_prints_and_exits_as_a_fresh_interpreter_does(tmp_path: Path, args: tuple[str, ...]) -> None:
    forked = run_cli(tmp_path / "forked", *args)
    fresh = run_cli(tmp_path / "fresh", *args, fresh=True)

    def same_home(text: str, home: str) -> str:
        return text.replace(str(tmp_path / home), "HOME")

    assert forked.returncode == fresh.returncode
    assert same_home(forked.stdout, "forked") == same_home(fresh.stdout, "fresh")
    assert same_home(forked.stderr, "forked") == same_home(fresh.stderr, "fresh")


@pytest.mark.parametrize("module", PRELOAD)
def test_a_preloaded_module_prints_nothing_when_imported(module: str) -> None:
    """Else a warning a user would see on stderr would be printed once, in the warm process, and
    every forked command's stderr would lack it."""
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
