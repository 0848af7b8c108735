"""Concurrency pools hold across concurrent runs: the parse step runs in `pdf_parse`; the
extraction step has no step-level pool, its model calls hold `llm` slots one call at a time
(test_llm_slots.py). Observed on a real instance with runs in separate processes, from the
step start/end events Dagster records.

The instance stores its data in PostgreSQL: there Dagster claims a slot with
SELECT … FOR UPDATE SKIP LOCKED — but on an AUTOCOMMIT connection (dagster-postgres 0.29), so
the lock ends with the SELECT and two claims in the same few milliseconds can still take the same
last slot (seen once in CI: two parse steps starting 4 ms apart with a limit of 1). On SQLite the
claim is a plain read-then-write. The processes here start half a second apart, so the test
checks what the pool promises for steps that overlap in time, not that race; the `llm` pool's
per-call gate re-checks its claim after taking it (defs/llm_slots.py)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import dagster as dg

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.defs.assets import extracted_document, parsed_document
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.ledgers import key_of
from extraction_pipeline_tests.support.processes import warm_context


def _materialize(instance_ref: object, ledger_url: str, home: str, key: str, uid: str) -> None:
    from extraction_pipeline.defs.resources import LedgerResource, PipelineSettingsResource

    with dg.DagsterInstance.from_ref(instance_ref) as instance:  # type: ignore[arg-type]
        result = dg.materialize(
            [parsed_document],
            partition_key=key,
            instance=instance,
            resources={
                "ledger": LedgerResource(database_url=ledger_url),
                "settings": PipelineSettingsResource(home=home),
            },
            tags={"extraction/batch_uid": uid},
        )
        assert result.success


def _step_intervals(instance: dg.DagsterInstance, step: str) -> list[tuple[float, float]]:
    intervals = []
    for record in instance.get_run_records():
        events = instance.all_logs(record.dagster_run.run_id)
        starts = [
            e.timestamp for e in events if e.step_key == step and e.dagster_event_type == dg.DagsterEventType.STEP_START
        ]
        ends = [
            e.timestamp
            for e in events
            if e.step_key == step and e.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS
        ]
        if starts and ends:
            intervals.append((starts[0], ends[-1]))
    return sorted(intervals)


def test_assets_declare_their_pools() -> None:
    assert parsed_document.op.pool == "pdf_parse"
    assert extracted_document.op.pool is None  # per call instead: a step would sit on a slot between calls


def test_pdf_parse_pool_limit_holds_across_concurrent_runs(tmp_path: Path, pg_dagster_database: str) -> None:
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger.connect(ledger_url)
    pdfs = [write_report(make_trial(i), tmp_path / "src") for i in range(1, 4)]
    doc_ids = [document.id for document in register_all(ledger, tmp_path / "documents", "p", pdfs)]
    batch = create_batch(ledger, idempotency_key="pools", project="p", user="u", document_ids=doc_ids).id
    uid = get_batch(ledger, batch)["uid"]  # type: ignore[index]
    storage = {"storage": {"postgres": {"postgres_url": pg_dagster_database}}}
    with dg.instance_for_test(overrides=storage) as instance:
        instance.event_log_storage.set_concurrency_slots("pdf_parse", 1)
        keys = [key_of(ledger, doc_id) for doc_id in doc_ids]
        instance.add_dynamic_partitions("documents", keys)
        ctx = warm_context()
        procs = [
            ctx.Process(target=_materialize, args=(instance.get_ref(), ledger_url, str(tmp_path), key, uid))
            for key in keys
        ]
        for proc in procs:
            proc.start()
            time.sleep(0.5)  # see the module docstring: Dagster's claim race is not what is tested
        for proc in procs:
            proc.join(timeout=300)
            assert proc.exitcode == 0
        intervals = _step_intervals(instance, "parsed_document")
    assert len(intervals) == 3
    for (_, first_end), (second_start, _) in itertools.pairwise(intervals):
        assert second_start >= first_end, intervals  # never two parse steps at once
