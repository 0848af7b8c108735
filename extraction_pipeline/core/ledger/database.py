"""Engine creation and the ``Ledger`` handle shared by every ledger module."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, create_engine, event, insert, inspect, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger.schema import ledger_meta, metadata

SQLITE_BUSY_TIMEOUT_MS = 30_000
# (table, column, SQL type) added to tables after their first release; constants, never user input.
ADDED_COLUMNS = (
    ("documents", "partition_key", "VARCHAR(120)"),
    ("batches", "template_id", "INTEGER REFERENCES templates(id)"),
    ("batches", "export_version", "INTEGER NOT NULL DEFAULT 0"),
    ("batches", "fresh", "INTEGER NOT NULL DEFAULT 0"),
    ("batches", "second_model", "VARCHAR(200)"),
    ("batches", "adjudicator_model", "VARCHAR(200)"),
    ("batch_items", "dispatch_round", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_items", "failing_since", "TIMESTAMP"),
    ("batch_items", "retry_round", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_items", "dispatched_by", "VARCHAR(20)"),
    ("batches", "export_error", "TEXT"),
    ("batches", "export_attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("batches", "export_failed_at", "TIMESTAMP"),
    ("provider_budgets", "probe_until", "FLOAT NOT NULL DEFAULT 0"),
    ("provider_budgets", "answers_seen", "INTEGER NOT NULL DEFAULT 0"),
    ("batches", "follow_up", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_items", "cached_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_items", "saved_usd", "FLOAT NOT NULL DEFAULT 0"),
    ("model_answers", "cached_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("model_answers", "saved_usd", "FLOAT NOT NULL DEFAULT 0"),
    ("batches", "provider_batch", "VARCHAR(20)"),
    ("parsed_documents", "layout_json", "TEXT"),
    ("provider_batches", "submission_key", "VARCHAR(120)"),
    ("provider_budgets", "learned_output_tokens_per_minute", "INTEGER"),
    ("provider_budgets", "output_ready_at", "FLOAT NOT NULL DEFAULT 0"),
    ("batch_items", "cache_written_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("model_answers", "cache_written_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("batch_items", "abandoned_calls", "INTEGER NOT NULL DEFAULT 0"),
    ("provider_budgets", "heard_at", "FLOAT NOT NULL DEFAULT 0"),
    ("documents", "title", "TEXT"),
    ("documents", "first_author", "VARCHAR(200)"),
    ("documents", "year", "INTEGER"),
)
# Rows rewritten when a ledger is upgraded; constants, idempotent. Before the `exporting` state a
# batch was `completed` as soon as its documents were, workbook or not.
ROW_UPGRADES = ("UPDATE batches SET status = 'exporting' WHERE status = 'completed' AND export_path IS NULL",)


@functools.cache
def schema_fingerprint() -> str:
    """Changes whenever a table, column, column type or index is added, dropped or renamed.
    Computed on first use (~8 ms), not at import: most importers never open a ledger."""
    parts = [repr(ADDED_COLUMNS), repr(ROW_UPGRADES)]
    for table in metadata.sorted_tables:
        parts.append(table.name)
        parts.extend(f"{column.name}:{column.type!r}:{column.nullable}" for column in table.columns)
        parts.extend(sorted(f"{index.name}:{[c.name for c in index.columns]}" for index in table.indexes))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def utcnow() -> datetime:
    """Naive UTC: stored and compared the same way on SQLite and PostgreSQL."""
    return datetime.now(UTC).replace(tzinfo=None)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (progress, UI sensors) proceed while a worker writes; the busy timeout
    # makes concurrent writers wait instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def create_ledger_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018  (make_url parses the port lazily; a bad one raises here)
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(f"invalid ledger database URL (EXTRACTION_DATABASE_URL): {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            # SQLAlchemy 2.1 maps bare postgresql:// to psycopg 3, which we do not ship.
            parsed = parsed.set(drivername="postgresql+psycopg2")
        return create_engine(parsed, pool_pre_ping=True)
    raise ConfigError(f"unsupported ledger database {backend!r}: use sqlite:/// or postgresql+psycopg2://")


@dataclass
class Ledger:
    """A connection pool to the ledger database. Cheap to pass around; create once per process."""

    engine: Engine

    @classmethod
    def connect(cls, url: str, *, create_schema: bool = True) -> Ledger:
        ledger = cls(create_ledger_engine(url))
        if create_schema:
            ledger.create_schema()
        return ledger

    def create_schema(self, *, full_check: bool = False) -> None:
        """Create missing tables, columns and indexes. Idempotent, and safe when several processes
        start at once. Every command and run worker connects, and inspecting a dozen tables costs
        ~0.2 s on PostgreSQL, so a ledger that records this release's schema fingerprint is
        trusted after one query; ``full_check`` (``init``) inspects it anyway."""
        if not full_check and self._recorded_fingerprint() == schema_fingerprint():
            return
        try:
            metadata.create_all(self.engine, checkfirst=True)
        except (IntegrityError, OperationalError, ProgrammingError):
            # Another process created the same table between our check and our CREATE
            # (PostgreSQL reports it as a duplicate type); the second pass sees it exists.
            metadata.create_all(self.engine, checkfirst=True)
        self._add_missing_columns()
        self._add_missing_indexes()
        self._upgrade_rows()
        self._record_fingerprint()

    def _recorded_fingerprint(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == "schema")).scalar()
        except (OperationalError, ProgrammingError):  # a ledger from before ledger_meta, or a new one
            return None

    def _record_fingerprint(self) -> None:
        with self.engine.begin() as conn:
            recorded = update(ledger_meta).where(ledger_meta.c.key == "schema").values(value=schema_fingerprint())
            if conn.execute(recorded).rowcount:
                return
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(ledger_meta).values(key="schema", value=schema_fingerprint()))
        except IntegrityError:
            pass  # another process recorded it first; its release's value stands until the next check

    def _add_missing_indexes(self) -> None:
        """Indexes added after their table first shipped: created on an existing ledger too
        (``create_all`` only indexes the tables it creates)."""
        for table in metadata.sorted_tables:
            present = {index["name"] for index in inspect(self.engine).get_indexes(table.name)}
            for index in table.indexes:
                if index.name in present:
                    continue
                try:
                    index.create(self.engine, checkfirst=True)
                except (OperationalError, ProgrammingError):
                    # Another process created it first; anything else shows up on the re-check.
                    if index.name not in {i["name"] for i in inspect(self.engine).get_indexes(table.name)}:
                        raise

    def _upgrade_rows(self) -> None:
        with self.engine.begin() as conn:
            for statement in ROW_UPGRADES:
                conn.execute(text(statement))

    def _add_missing_columns(self) -> None:
        """Columns added after a table first shipped: an existing ledger gets them in place
        (nullable, so old rows stay valid). ``create_all`` never alters an existing table."""
        for table_name, column, ddl_type in ADDED_COLUMNS:
            present = {c["name"] for c in inspect(self.engine).get_columns(table_name)}
            if column in present:
                continue
            try:
                with self.engine.begin() as conn:
                    conn.execute(text(f'ALTER TABLE {table_name} ADD COLUMN "{column}" {ddl_type}'))
            except (OperationalError, ProgrammingError):
                # Another process added it first; anything else shows up on the re-check.
                if column not in {c["name"] for c in inspect(self.engine).get_columns(table_name)}:
                    raise

    @property
    def backend(self) -> str:
        return self.engine.url.get_backend_name()

    def dispose(self) -> None:
        self.engine.dispose()
