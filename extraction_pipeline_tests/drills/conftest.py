"""The drills' fixtures: the fake model, two fresh PostgreSQL databases, and the drill maker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from extraction_pipeline_tests.support.drills import Drill, DrillLLM, new_drill
from extraction_pipeline_tests.support.ledgers import fresh_pg_database


@pytest.fixture
def llm() -> Iterator[DrillLLM]:
    fake = DrillLLM()
    yield fake
    if fake.server is not None:
        fake.server.stop()


@pytest.fixture
def drill_dbs() -> Iterator[tuple[str, str]]:
    ledger_db = fresh_pg_database()
    dagster_db = fresh_pg_database()
    yield next(ledger_db), next(dagster_db)
    for generator in (ledger_db, dagster_db):
        next(generator, None)


@pytest.fixture
def make_drill(tmp_path: Path, drill_dbs: tuple[str, str], llm: DrillLLM) -> Iterator[Callable[..., Drill]]:
    made: list[Drill] = []

    def make(ledger_url: str | None = None, dagster_url: str | None = None, **settings: str) -> Drill:
        drill = new_drill(tmp_path, ledger_url or drill_dbs[0], dagster_url or drill_dbs[1], llm, **settings)
        made.append(drill)
        return drill

    yield make
    for drill in made:
        drill.close()
        drill.ledger.dispose()
        for log in drill.logs:  # kept for a failing test's report
            print(f"--- {log.name} ---\n{log.read_text()[-1500:]}")
