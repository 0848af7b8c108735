"""Shared fixtures: ledgers on SQLite and PostgreSQL, the fake LLM server, synthetic PDFs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.ledgers import fresh_pg_database

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


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
