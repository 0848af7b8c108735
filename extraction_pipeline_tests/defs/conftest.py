"""Fixtures of the Dagster tests: a real instance (``instance_for_test``) and an instance home
with its SQLite ledger (``home_ledger``; the root conftest's ``ledger`` runs on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from extraction_pipeline.core.ledger import Ledger


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def home_ledger(home: Path) -> Ledger:
    """The SQLite ledger inside the test's instance home (the Dagster tests need one home for both)."""
    home.mkdir()
    return Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
