"""Running the command line as a user does: a subprocess on a home of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(home: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    env.pop("EXTRACTION_DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "extraction_pipeline.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def one_line_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
