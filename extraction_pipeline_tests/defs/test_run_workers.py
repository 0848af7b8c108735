"""Which runs are forked warm (defs/run_workers.py). That a forked worker really executes a run,
and that terminating it interrupts its document, is shown end to end (e2e/test_e2e.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun

from extraction_pipeline.defs import run_workers
from extraction_pipeline.defs.run_workers import code_fingerprint, forkable
from extraction_pipeline.instance import CODE_LOCATION_MODULE

OURS = ModuleCodePointer(CODE_LOCATION_MODULE, "defs", None)


def _run(executable: str) -> DagsterRun:
    origin = JobPythonOrigin("extract_documents", RepositoryPythonOrigin(executable, OURS))
    return DagsterRun(job_name="extract_documents", run_id="r1", job_code_origin=origin)


def test_only_runs_on_this_very_python_are_forked(tmp_path: Path) -> None:
    assert forkable(_run(sys.executable))
    # Another environment built on the same interpreter (a virtualenv links to it): its own packages.
    other = tmp_path / "other-venv" / "bin" / "python"
    other.parent.mkdir(parents=True)
    other.symlink_to(sys.executable)
    assert not forkable(_run(str(other)))
    assert not forkable(DagsterRun(job_name="extract_documents", run_id="r2"))  # no origin recorded


def test_once_the_code_changed_runs_go_to_the_code_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_workers, "_imported_code", code_fingerprint())
    assert forkable(_run(sys.executable))
    count, newest, site = code_fingerprint()
    monkeypatch.setattr(run_workers, "_imported_code", (count, newest - 1, site))  # a source edited since
    assert not forkable(_run(sys.executable))


def test_the_fingerprint_follows_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "package"
    package.mkdir()
    (package / "a.py").write_text("A = 1\n")
    monkeypatch.setattr(run_workers, "PACKAGE_DIR", package)
    before = code_fingerprint()
    assert code_fingerprint() == before  # stable while nothing changes
    (package / "b.py").write_text("B = 2\n")
    assert code_fingerprint() != before
