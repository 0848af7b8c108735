"""Every untrusted PDF is opened in a child process: its own session, a hard timeout, a memory cap.

MuPDF holds the interpreter while it works, so a PDF read in a server's thread freezes every
request of that process (a 2.4 KB file of nested drawings: over a minute and gigabytes). In a
child it costs one document. On timeout or cancellation of the caller: SIGTERM to the child's
whole process group, up to 3 s grace, then SIGKILL, so nothing the reader started survives it.

Children start through this module (``python -m extraction_pipeline.core.pdf.isolation MEMORY_MB
CPU_SECONDS MODULE ARGS...``): it caps the child's memory (RLIMIT_DATA: the heap and private
mappings, not the shared libraries) and its CPU time (a backstop should its caller die) and then
runs MODULE as ``__main__``. A decompression bomb then fails
inside the child with "needs more memory than the limit" instead of swapping the machine. One
home for the limits, whatever the child does: registration checks, the estimate's quick text,
parsing (pdf/child.py) and page images (review/page_image.py).

Most of a cold child's 0.35 CPU-s is starting Python and importing PyMuPDF, not reading: such a
child is forked instead from a server of the caller's own that has imported them (pdf/warm.py),
set up the same way (session, caps, directory, environment, output, exit status); when that
server cannot be had, the child starts cold as above.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.process_groups import group_alive

if TYPE_CHECKING:
    from extraction_pipeline.core.pdf.warm import WarmChild

TERM_GRACE_SECONDS = 3.0
WORKER_MODULE = "extraction_pipeline.core.pdf.child"
EXIT_STOPPED = 3  # the child's exit right after a PDF that failed, its answer written (pdf/child.py)
ISOLATION_MODULE = "extraction_pipeline.core.pdf.isolation"
MEMORY_HINT = "EXTRACTION_PDF_MEMORY_MB"
OUTPUT_TAIL_BYTES = 4096
# What an allocation refused by the cap looks like, from Python, MuPDF or a C++ library.
_OUT_OF_MEMORY = re.compile(
    r"MemoryError|bad_alloc|\b(?:m|c|re)alloc\b.*\bfailed|out of memory|cannot allocate", re.IGNORECASE
)
_MIB = 1024 * 1024


@dataclass(frozen=True)
class ParseOptions:
    """The limits a PDF is read under: the child's time, and the engine's (size, pages, memory)."""

    timeout_seconds: float = 120.0
    limits: EngineOptions = field(default_factory=EngineOptions)


class ParseTimeout(PermanentError):
    def __init__(self, seconds: float, what: str = "parse") -> None:
        super().__init__(f"{what} timed out after {seconds:g} s")
        self.seconds = seconds


def memory_message(memory_mb: int) -> str:
    return f"needs more memory than the limit of {memory_mb} MB ({MEMORY_HINT})"


def out_of_memory(exc_or_text: BaseException | str) -> str | None:
    """In a child: the one-line reason when ``exc_or_text`` is an allocation the cap refused."""
    cause = exc_or_text.__cause__ if isinstance(exc_or_text, BaseException) else None
    if any(isinstance(e, MemoryError) or _OUT_OF_MEMORY.search(str(e)) for e in (exc_or_text, cause) if e):
        cap = memory_cap_mb()
        return memory_message(cap) if cap else "ran out of memory"
    return None


def memory_cap_mb() -> int | None:
    """This process's memory cap in MB (None: none)."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if soft == resource.RLIM_INFINITY else soft // _MIB


def kill_process_group(process: subprocess.Popen[bytes] | WarmChild, grace: float = TERM_GRACE_SECONDS) -> None:
    """SIGTERM the child's group, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
    pgid = process.pid  # started in a session of its own: its group's id is its pid, even once it is reaped
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and group_alive(pgid):
            process.poll()  # reap the direct child so its pid leaves the group
            time.sleep(0.05)
        if not group_alive(pgid):
            break
    process.poll()


def isolated_command(module: str, memory_mb: int, cpu_seconds: float) -> list[str]:
    """How to start ``module`` as a child with the memory cap (0: no cap) and a CPU-time cap: a
    backstop for a child whose parent died and so never kills it at its timeout (generous, as a
    child may run threads: the parent's timeout is what applies otherwise)."""
    return [sys.executable, "-m", ISOLATION_MODULE, str(memory_mb), str(math.ceil(cpu_seconds)), module]


def cpu_cap(timeout_seconds: float, pdfs: int = 1) -> float:
    return 4 * timeout_seconds * pdfs + 60


@dataclass(frozen=True)
class ChildExit:
    returncode: int
    last_line: str  # the child's last line of output (stdout and stderr), for a crash's reason

    def crash_reason(self, memory_mb: int, what: str) -> str:
        """One line for a child that died without writing its answer."""
        if memory_mb and _OUT_OF_MEMORY.search(self.last_line):
            return memory_message(memory_mb)
        code = self.returncode
        if code == -signal.SIGXCPU:
            return f"{what} used more CPU time than its limit (its caller was gone?)"
        reason = f"signal {-code}" if code < 0 else f"exit status {code}"
        return f"{what} crashed ({reason}) {self.last_line[:300]}".rstrip()


def run_child(argv: list[str], *, timeout_seconds: float, what: str, progress: Path | None = None) -> ChildExit:
    """Run ``argv`` in its own session and wait. Raises ParseTimeout (``what`` names the work)
    when it runs longer than ``timeout_seconds``; with ``progress``, the time counts from the
    last moment that file grew (a child working through several PDFs has that long for each)."""
    with tempfile.TemporaryFile() as output:
        with _start(argv, output) as process:
            try:
                _wait(process, timeout_seconds, progress)
            except subprocess.TimeoutExpired:
                kill_process_group(process)
                raise ParseTimeout(timeout_seconds, what) from None
            finally:
                # Also on cancellation (Dagster interrupts the run with an exception here): never
                # leave the child or anything it spawned behind.
                if process.poll() is None or group_alive(process.pid):
                    kill_process_group(process)
        # Only the end: a child may have printed MuPDF's complaints for minutes.
        output.seek(max(output.seek(0, os.SEEK_END) - OUTPUT_TAIL_BYTES, 0))
        lines = output.read().decode(errors="replace").strip().splitlines()
    assert process.returncode is not None  # waited for when its `with` ended
    return ChildExit(process.returncode, lines[-1] if lines else "")


def _start(argv: list[str], output: IO[bytes]) -> subprocess.Popen[bytes] | WarmChild:
    """The child, forked from this process's warm server when ``argv`` is one of ours
    (``isolated_command``, pdf/warm.py), else started as a new interpreter."""
    if argv[:3] == [sys.executable, "-m", ISOLATION_MODULE] and len(argv) >= 6:
        from extraction_pipeline.core.pdf import warm

        with contextlib.suppress(ValueError):
            child = warm.start(int(argv[3]), int(argv[4]), argv[5], argv[6:], output.fileno())
            if child is not None:
                return child
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: killed as a whole
    )


def _wait(process: subprocess.Popen[bytes] | WarmChild, timeout_seconds: float, progress: Path | None) -> None:
    if progress is None:
        process.wait(timeout=timeout_seconds)
        return
    size, deadline = -1, time.monotonic() + timeout_seconds
    while True:
        try:
            process.wait(timeout=min(0.2, max(deadline - time.monotonic(), 0.001)))
            return
        except subprocess.TimeoutExpired:
            grown = progress.stat().st_size if progress.exists() else 0
            if grown != size:
                size, deadline = grown, time.monotonic() + timeout_seconds
            elif time.monotonic() >= deadline:
                raise


def run_isolated(
    pdf: Path,
    *,
    timeout_seconds: float,
    limits: EngineOptions,
    command: list[str] | None = None,
    task: str = "parse",
) -> dict[str, Any]:
    """Run the engine's ``task`` (parse, inspect, text; pdf/child.py) on ``pdf`` in a child.
    Returns its result; raises PermanentError with a specific reason (bad PDF, out of memory,
    crash) or ParseTimeout. ``command`` replaces the child's start (tests)."""
    return run_each([pdf], timeout_seconds=timeout_seconds, limits=limits, command=command, task=task)[0].result()


@dataclass(frozen=True)
class Outcome:
    """One PDF's answer from a child: the task's result, or why there is none."""

    value: dict[str, Any] | None
    error: PermanentError | None

    def result(self) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


def run_each(
    pdfs: list[Path],
    *,
    timeout_seconds: float,
    limits: EngineOptions,
    task: str = "parse",
    command: list[str] | None = None,
) -> list[Outcome]:
    """``task`` on each of ``pdfs``, in order, in as few children as possible: one child reads them
    one after another, each within ``timeout_seconds``. A PDF that hangs, crashes or exhausts its
    child gets that reason and a new child takes the rest, so one bomb costs one document."""
    what = {"parse": "parse", "inspect": "reading the PDF", "text": "reading the text"}[task]
    outcomes: list[Outcome] = []
    while len(outcomes) < len(pdfs):
        todo = pdfs[len(outcomes) :]
        with tempfile.TemporaryDirectory(prefix="pdf-") as tmp:
            out = Path(tmp) / "results.jsonl"
            argv = command or isolated_command(WORKER_MODULE, limits.memory_mb, cpu_cap(timeout_seconds, len(todo)))
            # In a file: thousands of paths would pass the system's limit on a command line.
            spec = Path(tmp) / "spec.json"
            spec.write_text(json.dumps({"task": task, "limits": asdict(limits), "pdfs": [str(p) for p in todo]}))
            failure: PermanentError
            ended: ChildExit | None
            try:
                ended = run_child(
                    [*argv, str(out), str(spec)],
                    timeout_seconds=timeout_seconds,
                    what=what,
                    progress=out if len(todo) > 1 else None,
                )
            except ParseTimeout as exc:
                ended, failure = None, exc
            else:
                failure = PermanentError(ended.crash_reason(limits.memory_mb, "parser" if task == "parse" else what))
            done = read_answers(out)[: len(todo)]
        outcomes.extend(done)
        # A child stops right after a PDF that failed, its answer written: the next PDF was not begun.
        chose_to_stop = bool(done) and done[-1].error is not None
        if len(outcomes) < len(pdfs) and not chose_to_stop:
            outcomes.append(Outcome(None, failure))  # the PDF the child was reading when it ended
    return outcomes


def read_answers(out: Path) -> list[Outcome]:
    """The answers a child wrote, one JSON line per PDF; a line cut short by a kill is not one."""
    answers: list[Outcome] = []
    if not out.exists():
        return answers
    for line in out.read_bytes().split(b"\n"):
        try:
            payload = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            break
        if "ok" in payload:
            answers.append(Outcome(dict(payload["ok"]), None))
        else:
            answers.append(Outcome(None, PermanentError(str(payload["error"]))))
    return answers


def main(argv: list[str]) -> None:
    """``MEMORY_MB CPU_SECONDS MODULE ARGS...``: cap this process's memory and CPU time, then run
    MODULE as the program (pdf/capped.py)."""
    from extraction_pipeline.core.pdf.capped import run

    run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
