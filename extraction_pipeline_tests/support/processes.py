"""Child processes for tests, forked from a warm process instead of started as new interpreters.

A test that needs real processes (twenty ledgers racing for one batch, runs in parallel, a command
line) gets them from ``multiprocessing``'s forkserver, which imports the libraries below once: a
spawned interpreter pays 1-3 CPU-s of imports per child, and on two cores that is most of such a
test's time (docs/development.md, CI time). The children are still separate processes with their
own connections, memory and exit status.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context

# Imported once by the warm process. Each must print nothing when imported: a warning printed
# there would be missing from every child's stderr (tests/cli/test_cli_runner.py checks).
PRELOAD = [
    "extraction_pipeline_tests.support.cli",
    "extraction_pipeline.cli",
    "extraction_pipeline.instance",
    "dagster",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql.psycopg2",
    "openpyxl",
    "litellm",  # silent only with LITELLM_LOCAL_MODEL_COST_MAP=True, which the tests set (conftest.py)
]


def warm_context() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context
