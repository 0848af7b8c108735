"""The PostgreSQL variant: Dagster storage *and* the ledger on PostgreSQL, set up by `init`."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.defs.assets import extracted_document, parsed_document
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.instance import init_home
from extraction_pipeline_tests.support.ledgers import key_of


def test_init_and_materialize_on_postgres(
    tmp_path: Path, pg_database: str, pg_dagster_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXTRACTION_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EXTRACTION_DATABASE_URL", pg_database)
    monkeypatch.setenv("EXTRACTION_DAGSTER_STORAGE", "postgres")
    monkeypatch.setenv("DAGSTER_PG_URL", pg_dagster_database)
    settings = Settings.from_env()
    report = init_home(settings)
    assert report.storage == "postgres"
    assert "storage:\n  postgres:" in (settings.dagster_home / "dagster.yaml").read_text()

    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))
    ledger = Ledger.connect(settings.ledger_url)
    assert ledger.backend == "postgresql"
    doc = register_pdf(ledger, settings.documents_dir, "pg", write_report(make_trial(1), tmp_path / "src")).id
    batch = create_batch(ledger, idempotency_key=f"pg-{tmp_path.name}", project="pg", user="u", document_ids=[doc]).id
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.event_log_storage.get_concurrency_info("llm").slot_count == 5
        instance.add_dynamic_partitions("documents", [key_of(ledger, doc)])
        result = dg.materialize(
            [parsed_document, extracted_document],
            partition_key=key_of(ledger, doc),
            instance=instance,
            resources={
                "ledger": LedgerResource(database_url=pg_database),
                "llm": LLMResource(),
                "settings": PipelineSettingsResource(home=str(settings.home_dir)),
            },
            tags={"extraction/batch_uid": get_batch(ledger, batch)["uid"]},  # type: ignore[index]
        )
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.tags["extraction/document"] == key_of(ledger, doc)
    [item] = batch_item_rows(ledger, batch)
    assert (item["status"], item["run_id"]) == ("completed", result.run_id)
    ledger.dispose()
