"""PDF children forked from a warm server (pdf/warm.py) keep every isolation property of a cold
one: their own session, the memory and CPU caps, the caller's directory and environment, the exit
status and last line a crash is told by, the group kill on timeout; and the cold start takes over
whenever the server cannot be had."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extraction_pipeline.core.pdf import warm
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import (
    ChildExit,
    ParseTimeout,
    isolated_command,
    memory_message,
    run_child,
    run_isolated,
)
from extraction_pipeline_tests.support import pdf_samples

FAULTS = "extraction_pipeline_tests.support.pdf_child_faults"


@pytest.fixture(autouse=True)
def _faults_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The faults module is a test module: children (cold ones started in another directory, the
    warm server) find it on the path whatever the directory the tests run in."""
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))


@pytest.fixture(params=["warm", "cold"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    warm.stop()
    monkeypatch.setattr(warm, "_failures", 0)
    monkeypatch.setattr(warm, "_asked", 1)  # not this process's first child, which starts cold
    monkeypatch.setattr(warm, "MODULES", (*warm.MODULES, FAULTS))
    monkeypatch.setenv(warm.ENABLED, "0" if request.param == "cold" else "1")
    yield request.param
    warm.stop()


def _run(tmp_path: Path, *args: str, memory_mb: int = 0, cpu: int = 60, timeout: float = 60) -> tuple[ChildExit, Any]:
    out = tmp_path / "facts.json"
    out.unlink(missing_ok=True)
    ended = run_child(
        [*isolated_command(FAULTS, memory_mb, cpu), args[0], str(out), *args[1:]], timeout_seconds=timeout, what="test"
    )
    return ended, json.loads(out.read_text()) if out.exists() else None


def test_a_child_has_its_own_session_caps_directory_and_environment(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(tmp_path, "exit", "0")  # the server is started here, before the directory and environment change
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PDF_FAULT_MARK", "set after the server started")
    ended, facts = _run(tmp_path, "exit", "0", memory_mb=300, cpu=17)
    assert ended == ChildExit(0, "")
    assert facts["sid"] == facts["pgid"] == facts["pid"] != os.getpid()
    assert (facts["data"], facts["cpu"]) == (300 * 1024 * 1024, 17)
    assert (facts["cwd"], facts["env"], facts["stdin"]) == (str(tmp_path), "set after the server started", "")
    if mode == "warm":
        assert warm._server is not None and facts["ppid"] == warm._server.process.pid and facts["pymupdf"]
    else:
        assert facts["ppid"] == os.getpid() and not facts["pymupdf"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("print",), ChildExit(0, "done")),
        (("exit", "3"), ChildExit(3, "")),
        (("raise",), ChildExit(1, "RuntimeError: the reader fell over")),
        (("segfault",), ChildExit(-signal.SIGSEGV, "")),
    ],
    ids=["ok", "exit-3", "exception", "segfault"],
)
def test_exit_status_and_last_line_as_a_cold_child_reports_them(
    mode: str, tmp_path: Path, args: tuple[str, ...], expected: ChildExit
) -> None:
    assert _run(tmp_path, *args)[0] == expected


def test_cpu_and_memory_caps_end_the_child_with_their_reasons(mode: str, tmp_path: Path) -> None:
    ended, _ = _run(tmp_path, "spin", cpu=1)
    assert ended.returncode == -signal.SIGXCPU
    assert "used more CPU time than its limit" in ended.crash_reason(0, "parser")
    ended, _ = _run(tmp_path, "allocate", memory_mb=300)
    assert ended.crash_reason(300, "parser") == memory_message(300), ended


def test_a_pdf_is_read_the_same_warm_or_cold(mode: str, tmp_path: Path) -> None:
    result = run_isolated(pdf_samples.good(tmp_path), timeout_seconds=60, limits=EngineOptions())
    assert result["engine"] == "pymupdf-text+tables" and len(result["pages_text"]) == 2


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


def test_timeout_kills_the_warm_childs_whole_group(mode: str, tmp_path: Path) -> None:
    with pytest.raises(ParseTimeout, match=r"test timed out after 2 s"):
        _run(tmp_path, "hang", timeout=2)
    parser_pid, grandchild_pid = map(int, (tmp_path / "facts.pids").read_text().split())
    deadline = time.monotonic() + 5  # the server reaps the parser a moment later
    while time.monotonic() < deadline and _alive(parser_pid):
        time.sleep(0.05)
    assert not _alive(parser_pid) and not _alive(grandchild_pid)


def test_without_a_server_children_start_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warm.stop()
    monkeypatch.setattr(warm, "_failures", 0)
    monkeypatch.setattr(warm, "_asked", 1)  # not this process's first child, which starts cold
    monkeypatch.setattr(warm, "MODULES", (*warm.MODULES, FAULTS))
    monkeypatch.setenv(warm.ENABLED, "1")

    def broken() -> None:
        raise OSError("the warm PDF server did not start")

    monkeypatch.setattr(warm, "_Server", broken)
    for _ in range(warm.MAX_FAILURES + 1):
        ended, facts = _run(tmp_path, "print")
        assert ended == ChildExit(0, "done") and facts["ppid"] == os.getpid()
    assert warm._failures == warm.MAX_FAILURES  # then it stops trying


def test_a_server_that_died_or_whose_code_changed_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warm.stop()
    monkeypatch.setattr(warm, "_failures", 0)
    monkeypatch.setattr(warm, "_asked", 1)  # not this process's first child, which starts cold
    monkeypatch.setattr(warm, "MODULES", (*warm.MODULES, FAULTS))
    monkeypatch.setenv(warm.ENABLED, "1")
    first = _run(tmp_path, "print")[1]["ppid"]
    assert warm._server is not None and first == warm._server.process.pid
    os.kill(first, signal.SIGKILL)
    warm._server.process.wait()
    second = _run(tmp_path, "print")[1]["ppid"]
    assert second not in (first, os.getpid())
    path = next(iter(warm._server.files))
    monkeypatch.setitem(warm._server.files, path, 0)  # as if the file had been edited since
    third = _run(tmp_path, "print")[1]["ppid"]
    assert third not in (first, second, os.getpid())
    # The server dies while its child runs: the child's end is still seen (its status is lost).
    ended: list[ChildExit] = []
    (tmp_path / "facts.json").unlink()
    reader = threading.Thread(target=lambda: ended.append(_run(tmp_path, "sleep", "2")[0]))
    reader.start()
    while not (tmp_path / "facts.json").exists():
        time.sleep(0.02)
    os.kill(third, signal.SIGKILL)
    reader.join(timeout=30)
    assert ended == [ChildExit(warm._UNKNOWN_EXIT, "done")]
    warm.stop()


def test_a_process_first_child_starts_cold_and_the_next_warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warm.stop()
    monkeypatch.setattr(warm, "_failures", 0)
    monkeypatch.setattr(warm, "_asked", 0)
    monkeypatch.setattr(warm, "MODULES", (*warm.MODULES, FAULTS))
    monkeypatch.setenv(warm.ENABLED, "1")
    assert _run(tmp_path, "print")[1]["ppid"] == os.getpid() and warm._server is None
    facts = _run(tmp_path, "print")[1]
    assert warm._server is not None and facts["ppid"] == warm._server.process.pid
    warm.stop()
