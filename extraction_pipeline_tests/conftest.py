"""Shared fixtures: ledgers on SQLite and PostgreSQL, the fake LLM server, synthetic PDFs."""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.ledgers import fresh_pg_database

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# `./dev test` runs the suite on parallel workers (pytest-xdist, `--dist loadgroup`). Tests that run a
# whole batch through daemons, a browser or a fuzz campaign each keep a core busy; they go into a few
# lanes, each lane one worker's queue run one test after another, so that no more than HEAVY_LANES of
# them share the machine's cores at once while the other workers take the quick tests. Estimated
# seconds per heavy test (measured on 2 cores) balance the lanes; a module whose tests share a
# module-scoped fixture stays whole, on one worker, so the fixture is built once.
HEAVY_LANES = int(os.environ.get("EXTRACTION_TEST_HEAVY_LANES", "3"))
_HEAVY_SECONDS = {"slow_drill": 85, "drill": 55, "fuzz": 50, "browser": 70, "e2e": 45}


def _estimated_seconds(item: pytest.Item) -> int:
    return max((seconds for marker, seconds in _HEAVY_SECONDS.items() if item.get_closest_marker(marker)), default=0)


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in definitions.name2fixturedefs.values())


def _unit_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0] if _shares_a_module_fixture(item) else item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put each test in its xdist group (see HEAVY_LANES): heavy ones in the least loaded lane,
    longest first; the tests of a module with a module-scoped fixture in a group of their own. The
    lanes go first (`./dev test` passes --no-loadscope-reorder: work is handed out in this order)."""
    if not getattr(config.option, "loadgroup", False):  # what xdist sets on its workers for --dist loadgroup
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit_of(item), []).append(item)
    lanes = [(0, lane) for lane in range(max(1, HEAVY_LANES))]
    heavy = {unit: sum(map(_estimated_seconds, members)) for unit, members in units.items()}
    for unit in sorted((unit for unit, seconds in heavy.items() if seconds), key=lambda u: -heavy[u]):
        load, lane = heapq.heappop(lanes)
        for item in units[unit]:
            item.add_marker(pytest.mark.xdist_group(f"heavy-lane-{lane}"))
        heapq.heappush(lanes, (load + heavy[unit], lane))
    for unit, members in units.items():
        if not heavy[unit] and len(members) > 1:
            for item in members:
                item.add_marker(pytest.mark.xdist_group(unit))
    items.sort(key=lambda item: not heavy[_unit_of(item)])


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
                "batch_items, batches, templates, documents, parsed_documents, document_contents, user_sessions, users "
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
