"""Settings from the environment: defaults, overrides, clear errors, no secret in repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.settings import Settings


def test_defaults_put_everything_under_the_home() -> None:
    settings = Settings.from_env({})
    assert settings.home_dir == Path(".extraction_home").resolve()
    assert settings.ledger_url == f"sqlite:///{settings.home_dir / 'ledger.db'}"
    assert (settings.model, settings.stale_minutes, settings.reconcile_grace_seconds) == (None, 30.0, 30.0)
    assert (settings.documents_per_run, settings.llm_slots_per_user) == (40, 0)


def test_environment_overrides(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "EXTRACTION_HOME": str(tmp_path),
            "EXTRACTION_DATABASE_URL": "postgresql+psycopg2://u@h/db",
            "EXTRACTION_MODEL": "openai/gpt-4o-mini",
            "EXTRACTION_API_KEY": "sk-very-secret",
            "EXTRACTION_STALE_MINUTES": "5",
            "EXTRACTION_RECONCILE_GRACE_SECONDS": "0",
        }
    )
    assert settings.exports_dir == tmp_path / "exports"
    assert settings.ledger_url == "postgresql+psycopg2://u@h/db"
    assert (settings.model, settings.stale_minutes, settings.reconcile_grace_seconds) == ("openai/gpt-4o-mini", 5, 0)
    assert "sk-very-secret" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("EXTRACTION_STALE_MINUTES", "soon", "EXTRACTION_STALE_MINUTES must be a number, got 'soon'"),
        ("EXTRACTION_STALE_MINUTES", "0", "EXTRACTION_STALE_MINUTES must be > 0"),
        ("EXTRACTION_RECONCILE_GRACE_SECONDS", "-1", "EXTRACTION_RECONCILE_GRACE_SECONDS must be >= 0"),
        ("EXTRACTION_LLM_TIMEOUT_SECONDS", "nan?", "must be a number"),
        ("EXTRACTION_DOCUMENTS_PER_RUN", "0", "EXTRACTION_DOCUMENTS_PER_RUN must be >= 1"),
        ("EXTRACTION_DOCUMENTS_PER_RUN", "2.5", "must be a whole number from 1 to 100, got '2.5'"),
        ("EXTRACTION_DOCUMENTS_PER_RUN", "500", "must be a whole number from 1 to 100, got '500'"),
        ("EXTRACTION_LLM_SLOTS_PER_USER", "-1", "EXTRACTION_LLM_SLOTS_PER_USER must be >= 0"),
    ],
)
def test_bad_values_are_named_in_one_message(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")):
        Settings.from_env({name: value})
