"""Runtime settings, all from environment variables prefixed ``EXTRACTION_``.

One place resolves where the instance home, the ledger and the exports live, so the CLI, the
Dagster code server and every run process agree on them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_HOME = Path(".extraction_home")


class Settings(BaseSettings):
    """Environment-driven settings. Secrets are ``SecretStr`` so they never print."""

    model_config = SettingsConfigDict(env_prefix="EXTRACTION_", extra="ignore")

    home: Path = Field(default=DEFAULT_HOME, description="Instance home: ledger, documents, exports.")
    database_url: str | None = Field(default=None, description="Ledger URL; SQLite under home if unset.")
    model: str | None = Field(default=None, description="litellm model string; offline extractor if unset.")
    api_base: str | None = None
    api_key: SecretStr | None = None
    llm_timeout_seconds: float = Field(default=120.0, gt=0)
    stale_minutes: float = Field(default=30.0, gt=0, description="Extracting this long without update = stale.")
    reconcile_grace_seconds: float = Field(
        default=30.0, ge=0, description="Wait after a run fails before judging its item (run retries)."
    )

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def ledger_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home_dir / 'ledger.db'}"

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def documents_dir(self) -> Path:
        return self.home_dir / "documents"

    @property
    def exports_dir(self) -> Path:
        return self.home_dir / "exports"


def load_settings() -> Settings:
    return Settings()
