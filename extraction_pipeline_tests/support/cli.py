"""Running the command line as a user does: a process of its own, on a home of its own.

Each call is a real process (its own environment, working directory, stdin, stdout, stderr and
exit status), but not a fresh interpreter: it is forked from a warm process that has already
imported the command line and the libraries its commands load (support/processes.py).
A fresh ``python -m extraction_pipeline.cli`` costs 0.6-3.6 CPU-s, most of it imports, and the
suite runs several hundred of them on two cores (docs/development.md, CI time). What is given up:
an import-time warning would print in the warm process, not in the command's stderr, so only
modules that print nothing when imported are preloaded (``test_cli_runner`` checks both ways), and
the drills, the end-to-end tests and ``EXTRACTION_TEST_CLI=subprocess`` keep starting fresh
interpreters.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from extraction_pipeline_tests.support.processes import warm_context

TIMEOUT_SECONDS = 120


def _text_stream(fd: int, *, line_buffering: bool) -> io.TextIOWrapper:
    # As the interpreter sets up its standard streams when they are pipes or files.
    return io.TextIOWrapper(
        open(fd, "wb", closefd=False),
        encoding="utf-8",
        errors="backslashreplace" if fd == 2 else "strict",
        line_buffering=line_buffering,
    )


def _command(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The forked child: become ``python -m extraction_pipeline.cli ARGV`` and exit as it would."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(out, os.O_WRONLY | os.O_TRUNC), 1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_TRUNC), 2)
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8")  # noqa: SIM115
    sys.stdout = _text_stream(1, line_buffering=False)
    sys.stderr = _text_stream(2, line_buffering=True)
    sys.argv = [str(Path(sys.executable).parent / "extraction-pipeline"), *argv]
    from extraction_pipeline.cli import main

    code: int
    try:
        code = main(argv)
    except SystemExit as exc:  # what the interpreter makes of sys.exit(...)
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _fresh_interpreter() -> bool:
    return os.environ.get("EXTRACTION_TEST_CLI") == "subprocess"


def run_cli(home: Path, *args: str, check: bool = False, fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """``extraction-pipeline ARGS`` on ``home``; ``fresh=True`` (or ``EXTRACTION_TEST_CLI=subprocess``)
    starts a new interpreter instead of forking the warm one."""
    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    env.pop("EXTRACTION_DATABASE_URL", None)
    command = [sys.executable, "-m", "extraction_pipeline.cli", *args]
    if fresh or _fresh_interpreter():
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    else:
        result = _forked(command, list(args), env)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def _forked(command: list[str], argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="extraction-cli-") as scratch:
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        out.touch()
        err.touch()
        process = warm_context().Process(target=_command, args=(argv, env, os.getcwd(), str(out), str(err)))
        process.start()
        process.join(TIMEOUT_SECONDS)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(command, TIMEOUT_SECONDS, out.read_text(), err.read_text())
        assert process.exitcode is not None
        return subprocess.CompletedProcess(command, process.exitcode, out.read_text(), err.read_text())


def one_line_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
