"""Shared fixtures: ledgers on SQLite and PostgreSQL, the fake LLM server, synthetic PDFs."""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline_tests.support import lanes
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.ledgers import fresh_pg_database

_GROUPS_FILE = pytest.StashKey[Path]()

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def pytest_configure(config: pytest.Config) -> None:
    """On xdist's controller with `--dist loadgroup`: the file its workers write the groups to."""
    if getattr(config.option, "dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        config.stash[_GROUPS_FILE] = Path(tempfile.mkdtemp(prefix="extraction-test-groups-")) / "groups.json"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GROUPS_FILE in config.stash:
        shutil.rmtree(config.stash[_GROUPS_FILE].parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if _GROUPS_FILE in node.config.stash:  # only with `--dist loadgroup`
        node.workerinput[lanes.WORKER_INPUT_KEY] = str(node.config.stash[_GROUPS_FILE])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The parallel schedule of `./dev test` (support/lanes.py)."""
    if _GROUPS_FILE in config.stash:
        return lanes.LaneScheduling(config, log, config.stash[_GROUPS_FILE])
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if os.environ.get("EXTRACTION_TEST_TIMELINE"):
        # The worker's process id travels to the controller with the report: with process
        # accounting (`accton`), the CPU of every process a test started can be traced to it.
        item.user_properties.append(("worker_pid", os.getpid()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    if os.environ.get("EXTRACTION_TEST_TIMELINE"):
        # CPU seconds so far of the worker and of every process it started and has reaped (a
        # daemon's run workers count once the daemon has reaped them and been reaped itself): the
        # difference between two phases is what the phase cost the machine.
        used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        item.user_properties.append(("cpu", round(sum(u.ru_utime + u.ru_stime for u in used), 3)))
    return (yield)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With EXTRACTION_TEST_TIMELINE=<file>: one JSON line per test phase (worker, its process id,
    the worker's CPU seconds so far, test, phase, start, stop), to see where a parallel run's time
    and CPU go (docs/development.md)."""
    path = os.environ.get("EXTRACTION_TEST_TIMELINE")
    node = getattr(report, "node", None)  # set on xdist's controller, which alone writes
    if path and node is not None:
        properties = dict(report.user_properties)  # the last "cpu" is this phase's
        line = {"worker": node.gateway.id, "pid": properties.get("worker_pid"), "cpu": properties.get("cpu")}
        line |= {"test": report.nodeid, "phase": report.when}
        with open(path, "a") as timeline:
            timeline.write(json.dumps({**line, "start": report.start, "stop": report.stop}) + "\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = getattr(config, "workerinput", {}).get(lanes.WORKER_INPUT_KEY)
    if path:
        lanes.write_groups(Path(path), lanes.assign_groups(items))


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session's ledger tests."""
    yield from fresh_pg_database()


@pytest.fixture
def pg_dagster_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test's Dagster storage."""
    yield from fresh_pg_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each ledger test runs on a SQLite file and on a PostgreSQL database (empty tables)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    url = request.getfixturevalue("pg_database")
    ledger = Ledger.connect(url)
    with ledger.engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE provider_batch_entries, provider_batches, missed_reviews, outcome_labels, model_answers, "
                "review_decisions, item_history, "
                "provider_breakers, provider_budgets, prompt_audit, "
                "batch_items, batches, templates, documents, parsed_documents, document_contents, signin_codes, "
                "user_sessions, users "
                "RESTART IDENTITY CASCADE"
            )
        )
    ledger.dispose()
    yield url


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    handle = Ledger.connect(ledger_url)
    yield handle
    handle.dispose()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer().start()
    yield server
    server.stop()
