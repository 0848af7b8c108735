"""Shared fixtures: ledgers on SQLite and PostgreSQL, the fake LLM server, synthetic PDFs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline_tests.fake_llm import FakeLLMServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PG_ADMIN_URL = os.environ.get("EXTRACTION_TEST_PG_ADMIN_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")


def _pg_available() -> str | None:
    try:
        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except OperationalError as exc:
        return str(exc).splitlines()[0]


def _fresh_pg_database() -> Iterator[str]:
    """Create a uniquely named database, yield its URL, drop it afterwards."""
    problem = _pg_available()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI but unreachable: {problem}")
        pytest.skip(f"PostgreSQL unreachable: {problem}")
    name = f"ep_test_{uuid.uuid4().hex[:10]}"  # generated here, never user input
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin.url.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session's ledger tests."""
    yield from _fresh_pg_database()


@pytest.fixture
def pg_dagster_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test's Dagster storage."""
    yield from _fresh_pg_database()


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
                "TRUNCATE model_answers, review_decisions, item_history, provider_breakers, prompt_audit, "
                "batch_items, batches, templates, documents, parsed_documents, document_contents "
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
