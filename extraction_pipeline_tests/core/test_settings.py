"""Settings from the environment: defaults, overrides, clear errors, no secret in repr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.llm.config import LLMConfig
from extraction_pipeline.core.settings import Settings


def test_defaults_put_everything_under_the_home() -> None:
    settings = Settings.from_env({})
    assert settings.home_dir == Path(".extraction_home").resolve()
    assert settings.ledger_url == f"sqlite:///{settings.home_dir / 'ledger.db'}"
    assert (settings.model, settings.stale_minutes, settings.reconcile_grace_seconds) == (None, 30.0, 30.0)
    assert (settings.documents_per_run, settings.llm_slots_per_user) == (400, 0)


def test_environment_overrides(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "EXTRACTION_HOME": str(tmp_path),
            "EXTRACTION_DATABASE_URL": "postgresql+psycopg2://u@h/db",
            "EXTRACTION_MODEL": "openai/gpt-4o-mini",
            "EXTRACTION_API_KEY": "sk-very-secret",
            "EXTRACTION_STALE_MINUTES": "5",
            "EXTRACTION_RECONCILE_GRACE_SECONDS": "0",
            "EXTRACTION_PDF_MEMORY_MB": "768",
        }
    )
    assert settings.parse_options().limits.memory_mb == 768  # every reader of a PDF gets the cap
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
        ("EXTRACTION_DOCUMENTS_PER_RUN", "2.5", "must be a whole number from 1 to 2000, got '2.5'"),
        ("EXTRACTION_DOCUMENTS_PER_RUN", "5000", "must be a whole number from 1 to 2000, got '5000'"),
        ("EXTRACTION_LLM_SLOTS_PER_USER", "-1", "EXTRACTION_LLM_SLOTS_PER_USER must be >= 0"),
        ("EXTRACTION_PDF_MEMORY_MB", "64", "EXTRACTION_PDF_MEMORY_MB must be >= 256"),
    ],
)
def test_bad_values_are_named_in_one_message(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")):
        Settings.from_env({name: value})


def test_keys_and_endpoints_per_provider_are_read_and_never_printed() -> None:
    settings = Settings.from_env(
        {
            "EXTRACTION_API_KEYS": " anthropic=sk-ant-secret-1 , openai/gpt-4o-mini=sk-model-secret-2,",
            "EXTRACTION_API_BASES": "anthropic=https://anthropic.example",
        }
    )
    assert settings.api_keys == (("anthropic", "sk-ant-secret-1"), ("openai/gpt-4o-mini", "sk-model-secret-2"))
    assert settings.api_bases == (("anthropic", "https://anthropic.example"),)
    assert "secret" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("EXTRACTION_API_KEYS", "sk-secret-without-a-name", "entry 1 ((no '=')) is not NAME=VALUE"),
        ("EXTRACTION_API_KEYS", "openai=sk-secret-a,openai=sk-secret-b", "openai is given twice"),
        ("EXTRACTION_API_KEYS", "openai=", "entry 1 (openai) is not NAME=VALUE"),
        ("EXTRACTION_API_BASES", "anthropic=ftp://host", "the endpoint of anthropic must start with http"),
    ],
)
def test_a_malformed_key_list_is_refused_without_showing_a_key(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as refused:
        Settings.from_env({variable: value})
    assert "secret" not in str(refused.value)


def test_each_model_gets_its_providers_key_and_never_anothers() -> None:
    llm = LLMConfig(
        model="openai/gpt-4o-mini",
        api_base="https://gateway.example/v1",
        api_key="sk-openai",
        keys=(("anthropic", "sk-ant"), ("anthropic/claude-opus-4-1", "sk-opus")),
        bases=(("anthropic", "https://anthropic.example"),),
    )
    same = llm.for_model("openai/gpt-4.1")
    assert (same.api_key, same.api_base) == ("sk-openai", "https://gateway.example/v1")  # the same provider's
    other = llm.for_model("anthropic/claude-sonnet-4-5-20250929")
    assert (other.api_key, other.api_base) == ("sk-ant", "https://anthropic.example")
    assert llm.for_model("anthropic/claude-opus-4-1").api_key == "sk-opus"  # a model's own entry first
    unknown = llm.for_model("gemini/gemini-2.5-pro")
    assert (unknown.api_key, unknown.api_base) == (None, None)  # litellm reads GEMINI_API_KEY itself
    back = other.for_model("openai/gpt-4o-mini")
    assert (back.api_key, back.api_base) == ("sk-openai", "https://gateway.example/v1")
