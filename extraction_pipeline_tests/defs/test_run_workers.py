"""Which runs are forked warm (defs/run_workers.py). That a forked worker really executes a run,
and that terminating it hands its document back, is shown end to end (e2e/test_e2e.py)."""

from __future__ import annotations

import os
import sys

from dagster._core.code_pointer import FileCodePointer, ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun

from extraction_pipeline.defs.run_workers import forkable
from extraction_pipeline.instance import CODE_LOCATION_MODULE


def _run(executable: str, pointer: object) -> DagsterRun:
    origin = JobPythonOrigin("extract_documents", RepositoryPythonOrigin(executable, pointer))  # type: ignore[arg-type]
    return DagsterRun(job_name="extract_documents", run_id="r1", job_code_origin=origin)


def test_only_runs_on_this_python_are_forked() -> None:
    ours = ModuleCodePointer(CODE_LOCATION_MODULE, "defs", None)
    assert forkable(_run(sys.executable, ours))
    assert forkable(_run(os.path.realpath(sys.executable), FileCodePointer("/tmp/definitions.py", "defs", None)))
    # Another environment's Python: its own code server starts the run.
    assert not forkable(_run("/opt/other-venv/bin/python", ours))
    assert not forkable(DagsterRun(job_name="extract_documents", run_id="r2"))  # no origin recorded
