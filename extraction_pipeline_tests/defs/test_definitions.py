"""Assets and sensors against a real Dagster instance (instance_for_test) and a real ledger file."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch, describe_state, get_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress
from extraction_pipeline.core.ledger.schema import BatchOrigin, batch_items, documents
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import report_pages
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.definitions import defs
from extraction_pipeline.defs.assets import batch_workbook, extracted_document, parsed_document
from extraction_pipeline.defs.batch_job_sensor import provider_batch_follower
from extraction_pipeline.defs.jobs import export_batch_job
from extraction_pipeline.defs.partitions import DOCUMENTS_PARTITIONS
from extraction_pipeline.defs.resources import PipelineSettingsResource
from extraction_pipeline.defs.sensors import batch_aggregator, batch_dispatcher, document_partitions_sensor
from extraction_pipeline_tests.support.dagster_runs import (
    answer_from_trial,
    batch_tags,
    failed_run,
    queued_run,
    register_trials,
    resources_for,
)
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.ledgers import key_of


def test_definitions_load_with_one_role_per_module() -> None:
    repo = defs().get_repository_def()
    assert {s.name for s in repo.sensor_defs} == {
        "document_partitions_sensor",
        "stray_partitions_sensor",
        "batch_dispatcher",
        "batch_aggregator",
        "provider_batch_follower",
    }
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {
        "parsed_document",
        "extracted_document",
        "batch_workbook",
    }
    for asset in (parsed_document, extracted_document, batch_workbook):
        assert asset.descriptions_by_key[asset.key]  # every asset says what it means
    graph = repo.asset_graph  # the lineage a user sees: parse -> extract -> workbook
    assert graph.get(batch_workbook.key).parent_keys == {extracted_document.key}
    assert graph.get(extracted_document.key).parent_keys == {parsed_document.key}
    for sensor in (document_partitions_sensor, batch_dispatcher, batch_aggregator, provider_batch_follower):
        assert sensor.description


def test_settings_are_read_when_the_definitions_load_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRACTION_DOCUMENTS_PER_RUN", "7")
    monkeypatch.setenv("EXTRACTION_STALE_MINUTES", "12.5")
    loaded = defs()  # the module was imported long before: only loading reads the environment
    graph = loaded.get_repository_def().asset_graph
    for key in (parsed_document.key, extracted_document.key):
        assert graph.get(key).backfill_policy.max_partitions_per_run == 7  # type: ignore[union-attr]
    settings = loaded.resources["settings"]  # type: ignore[index]
    assert (settings.documents_per_run, settings.stale_minutes) == (7, 12.5)
    assert parsed_document.backfill_policy.max_partitions_per_run == Settings.documents_per_run  # type: ignore[union-attr]


def test_partition_sensor_publishes_new_documents_with_a_cursor(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    register_trials(home_ledger, home, 2)
    context = dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home))
    result = document_partitions_sensor(context)
    # Published at once, but the cursor waits until no lower id can still commit (PostgreSQL).
    assert isinstance(result, dg.SensorResult) and result.cursor == "0"
    [request] = result.dynamic_partitions_requests or []
    assert list(request.partition_keys or []) == ["doc-1-trial-001", "doc-2-trial-002"]
    with home_ledger.engine.begin() as conn:
        conn.execute(documents.update().values(created_at=utcnow() - timedelta(minutes=2)))
    settled = document_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home))
    )
    assert isinstance(settled, dg.SensorResult) and settled.cursor == "2"
    again = document_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home), cursor="2")
    )
    assert isinstance(again, dg.SensorResult) and not again.dynamic_partitions_requests


def test_dispatcher_requests_one_tagged_run_per_item_once(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 3)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="ann", document_ids=doc_ids).id
    resources = resources_for(home_ledger, home, per_run=1)
    context = dg.build_sensor_context(instance=instance, resources=resources)
    result = batch_dispatcher(context)
    assert isinstance(result, dg.SensorResult)
    requests = result.run_requests or []
    uid = batch_tags(home_ledger, batch)["extraction/batch_uid"]
    assert [r.run_key for r in requests] == [f"{uid}-item-{i}" for i in (1, 2, 3)]
    assert [r.partition_key for r in requests] == ["doc-1-trial-001", "doc-2-trial-002", "doc-3-trial-003"]
    assert requests[0].tags == {
        "extraction/batch": str(batch),
        "extraction/batch_uid": uid,
        "extraction/item": "1",
        "extraction/document": "doc-1-trial-001",
        "extraction/filename": "trial-001.pdf",
        "extraction/user": "ann",
        "extraction/round": "0",
    }
    second = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(second, dg.SensorResult) and not second.run_requests


def test_materializing_a_dispatched_document_completes_its_item(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="ann", document_ids=[doc]).id
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, [key_of(home_ledger, doc)])
    fake_llm.answer = answer_from_trial
    result = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags={**batch_tags(home_ledger, batch), "extraction/user": "ann"},
    )
    assert result.success
    [row] = batch_item_rows(home_ledger, batch)
    assert row["status"] == "completed" and row["run_id"] == result.run_id and row["tokens_in"] == 900
    assert json.loads(row["result_json"] or "")["fields"]["metadata.nct_number"]["status"] == "verified"
    meta = result.asset_materializations_for_node("extracted_document")[0].metadata
    assert meta["status"].value == "completed" and meta["values_verified"].value == 1 and meta["tokens_in"].value == 900
    assert str(meta["template"].value).endswith("v1 (rct base v2)") and meta["outcomes"].value == 0
    parse_meta = result.asset_materializations_for_node("parsed_document")[0].metadata
    assert (parse_meta["pages"].value, parse_meta["cache"].value, parse_meta["tables"].value) == (2, "miss", 0)
    assert parse_meta["engine"].value == "pymupdf-text+tables" and float(parse_meta["seconds"].value) > 0  # type: ignore[arg-type]
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.tags["extraction/filename"] == "trial-001.pdf" and run.tags["extraction/item"] == "1"
    # Re-materializing the same document (a duplicate run) makes no LLM call and changes nothing.
    again = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags=batch_tags(home_ledger, batch),
    )
    assert again.success and len(fake_llm.requests) == 1
    assert batch_item_rows(home_ledger, batch)[0]["run_id"] == result.run_id


def test_single_ui_materialization_becomes_a_one_document_batch(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    register_trials(home_ledger, home, 1)
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001"])
    result = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home),
    )
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    batch = int(run.tags["extraction/batch"])
    assert get_batch(home_ledger, batch)["idempotency_key"] == f"run:{result.run_id}"  # type: ignore[index]
    [row] = batch_item_rows(home_ledger, batch)
    assert (row["status"], row["model"]) == ("completed", "offline/pattern-v1")


def test_a_ui_launch_tagged_for_the_follow_up_question_makes_a_batch_that_asks_it(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    from extraction_pipeline.core.extraction.follow_up import follows_up
    from extraction_pipeline.defs.binding import FOLLOW_UP_TAG

    register_trials(home_ledger, home, 1)
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001"])
    result = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home),
        tags={FOLLOW_UP_TAG: "true"},
    )
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    [row] = batch_item_rows(home_ledger, int(run.tags["extraction/batch"]))
    assert follows_up(home_ledger, row["id"]) and row["status"] == "completed"


def test_permanent_llm_failure_fails_the_run_without_retry(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001"])
    fake_llm.answer = lambda messages: Reply(status=401, error_message="invalid key")
    result = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags=batch_tags(home_ledger, batch),
        raise_on_error=False,
    )
    assert not result.success
    assert len(fake_llm.requests) == 1  # RetryPolicy skipped: Failure(allow_retries=False)
    [row] = batch_item_rows(home_ledger, batch)
    assert row["status"] == "error" and "401" in (row["message"] or "")


def test_a_bug_fails_its_document_with_one_line_and_keeps_its_traceback_in_the_runs_log(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    home: Path,
    fake_llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of two documents whose first meets a bug of ours (a fault injected after the paid
    call): that document fails with the cause in one line, the other completes, and the run's
    log keeps the bug's traceback (the run raises one failure for its documents, which carries
    none of theirs)."""
    from extraction_pipeline.core.extraction import assembly
    from extraction_pipeline.core.extraction.grounded import ground_entries as real

    breaks = [RuntimeError("bug in grounding")]  # once: the two documents run in two lanes at once

    def ground_entries(*args: Any, **kwargs: Any) -> Any:
        try:
            bug = breaks.pop()  # atomic: only one lane gets it
        except IndexError:
            return real(*args, **kwargs)
        raise bug

    monkeypatch.setattr(assembly, "ground_entries", ground_entries)
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    keys = [key_of(home_ledger, doc) for doc in doc_ids]
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, keys)
    fake_llm.answer = answer_from_trial
    result = dg.materialize(
        [parsed_document, extracted_document],
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags={
            **batch_tags(home_ledger, batch),
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[1],
        },
        raise_on_error=False,
    )
    assert not result.success
    rows = {row["document_id"]: row for row in batch_item_rows(home_ledger, batch)}
    failed = [row for row in rows.values() if row["status"] == "error"]
    assert len(failed) == 1 and sorted(row["status"] for row in rows.values()) == ["completed", "error"]
    assert failed[0]["message"] == "internal error: RuntimeError: bug in grounding"
    logged = [
        str(record.event_log_entry.user_message) for record in instance.get_records_for_run(result.run_id).records
    ]
    [told] = [message for message in logged if "extraction failed: internal error: bug in grounding" in message]
    assert "Traceback (most recent call last):" in told and "RuntimeError: bug in grounding" in told, told
    assert "in ground_entries" in told  # down to the frame that raised


def test_broken_pdf_fails_only_its_document(instance: dg.DagsterInstance, home_ledger: Ledger, home: Path) -> None:
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    stored = Path(batch_item_rows(home_ledger, batch)[0]["stored_path"])
    stored.write_bytes(stored.read_bytes()[:300])  # the stored copy gets damaged after registration
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001", "doc-2-trial-002"])
    results = [
        dg.materialize(
            [parsed_document, extracted_document],
            partition_key=key,
            instance=instance,
            resources=resources_for(home_ledger, home),
            tags=batch_tags(home_ledger, batch),
            raise_on_error=False,
        )
        for key in ("doc-1-trial-001", "doc-2-trial-002")
    ]
    first, second = batch_item_rows(home_ledger, batch)
    damaged = "parse failed: stored copy"  # the damaged copy no longer has its registered sha256
    assert first["status"] == "error" and (first["message"] or "").startswith(damaged)
    assert "does not match its registered sha256" in (first["message"] or "")
    assert second["status"] == "completed"
    assert first["run_id"] == results[0].run_id  # history names the run that found the broken PDF
    # The failed run tells the story in one line (the Runs page shows this description).
    [failure] = [e for e in results[0].all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.step_key == "parsed_document"
    description = str(failure.step_failure_data.user_failure_data.description)  # type: ignore[union-attr]
    assert description.startswith(damaged) and "\n" not in description
    assert results[1].success


def test_aggregator_requeues_documents_of_dead_runs_then_gives_up_with_the_cause(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 3)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    items = batch_item_rows(home_ledger, batch)
    tags = batch_tags(home_ledger, batch)
    dead = failed_run(instance, {**tags, "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, items[0]["id"], run_id=dead, worker="w")  # its worker died while extracting
    interrupted = failed_run(instance, {**tags, "dagster/partition": "doc-2-trial-002"})
    states.claim(home_ledger, items[1]["id"], run_id=interrupted, worker="w")
    states.release(home_ledger, items[1]["id"], run_id=interrupted, message="transient, will retry: HTTP 503 boom")
    states.claim(home_ledger, items[2]["id"], run_id="ok", worker="w")
    states.complete(home_ledger, items[2]["id"], run_id="ok", result={}, usage=Usage("m"))
    resources = resources_for(home_ledger, home, grace=0, max_rounds=2, per_run=1)

    # Round 0's runs are gone without a verdict on the documents: nobody's fault but the workers'.
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    rows = {row["document_id"]: row for row in batch_item_rows(home_ledger, batch)}
    assert [rows[d]["status"] for d in doc_ids] == ["pending", "pending", "completed"]
    assert [rows[d]["dispatch_round"] for d in doc_ids] == [1, 1, 0]
    assert f"run {dead} ended FAILURE while extracting" in (rows[doc_ids[0]]["message"] or "")
    assert "last error: HTTP 503 boom" in (rows[doc_ids[1]]["message"] or "")
    [history] = states.item_history_of(home_ledger, items[0]["id"])
    assert (history["event"], history["from_status"], history["run_id"]) == ("requeue", "extracting", dead)
    assert get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]

    # The dispatcher launches round 1 under new run keys, whatever launched round 0.
    dispatched = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(dispatched, dg.SensorResult)
    uid = tags["extraction/batch_uid"]
    assert sorted(r.run_key or "" for r in dispatched.run_requests or []) == [
        f"{uid}-item-{items[0]['id']}-r1",
        f"{uid}-item-{items[1]['id']}-r1",
    ]
    assert {(r.tags or {})["extraction/round"] for r in dispatched.run_requests or []} == {"1"}

    # A late retry of round 0 cannot take the item from round 1 (the claim names the round).
    assert not states.claim(home_ledger, items[0]["id"], run_id="late-retry", worker="w", dispatch_round=0)
    # Round 1 dies too and the limit (2 rounds) is reached: error, naming the run and the cause.
    again = failed_run(instance, {**tags, "dagster/partition": "doc-1-trial-001", "extraction/round": "1"})
    assert states.claim(home_ledger, items[0]["id"], run_id=again, worker="w", dispatch_round=1)
    failed_run(instance, {**tags, "dagster/partition": "doc-2-trial-002", "extraction/round": "1"})
    result = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    rows = {row["document_id"]: row for row in batch_item_rows(home_ledger, batch)}
    assert rows[doc_ids[0]]["status"] == "error"
    assert (rows[doc_ids[0]]["message"] or "").startswith(f"gave up after 2 rounds of runs: run {again} ended FAILURE")
    assert rows[doc_ids[1]]["status"] == "error"
    assert (rows[doc_ids[1]]["message"] or "").startswith("gave up after 2 rounds of runs")
    assert get_batch(home_ledger, batch)["status"] == "exporting"  # type: ignore[index]
    assert isinstance(result, dg.SensorResult)
    assert [(r.run_key, r.partition_key) for r in result.run_requests or []] == [
        (f"export-{uid}-v1-0", f"batch-{batch}")
    ]
    assert progress(home_ledger, batch).error == 2


def test_aggregator_waits_while_a_run_is_alive_or_within_grace(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    item = batch_item_rows(home_ledger, batch)[0]["id"]
    dead = failed_run(instance, {**batch_tags(home_ledger, batch), "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, item, run_id=dead, worker="w")
    # Within the grace period a run retry may still take the item over: leave it alone.
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home, grace=3600)))
    assert batch_item_rows(home_ledger, batch)[0]["status"] == "extracting"
    assert get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]


def test_export_asset_writes_one_row_per_document(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    instance.add_dynamic_partitions("batches", [f"batch-{batch}"])
    result = dg.materialize(
        [batch_workbook], partition_key=f"batch-{batch}", instance=instance, resources=resources_for(home_ledger, home)
    )
    path = Path(str(result.asset_materializations_for_node("batch_workbook")[0].metadata["path"].value))
    # Still open (materialized by hand): a partial workbook, never recorded as the batch's.
    assert path.name.startswith(f"batch-{batch}-partial-") and path.is_file()
    assert get_batch(home_ledger, batch)["export_path"] is None  # type: ignore[index]
    import openpyxl

    assert openpyxl.load_workbook(path)["Documents"].max_row == 3
    assert callable(report_pages)  # synthetic helpers stay importable for the e2e tests


def test_aggregator_leaves_an_item_held_by_a_live_run_of_another_job_or_round(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    item = batch_item_rows(home_ledger, batch)[0]["id"]
    tags = batch_tags(home_ledger, batch)
    failed_run(instance, {**tags, "dagster/partition": "doc-1-trial-001"})  # round 0's dispatcher run ended ...
    ui_run = queued_run(instance, {"dagster/partition": "doc-1-trial-001", "extraction/item": str(item)})
    with home_ledger.engine.begin() as conn:  # ... and a run of another job took the item meanwhile
        conn.execute(batch_items.update().values(status="extracting", run_id=ui_run, dispatched_at=utcnow()))
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home, grace=0)))
    row = batch_item_rows(home_ledger, batch)[0]
    assert (row["status"], row["run_id"], row["dispatch_round"]) == ("extracting", ui_run, 0)


def test_aggregator_never_fails_an_item_whose_run_is_alive(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    item = batch_item_rows(home_ledger, batch)[0]["id"]
    alive = queued_run(instance, {**batch_tags(home_ledger, batch), "dagster/partition": "doc-1-trial-001"})
    states.claim(home_ledger, item, run_id=alive, worker="w")
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home, grace=0)))
    assert batch_item_rows(home_ledger, batch)[0]["status"] == "extracting"


def test_single_run_batch_is_matched_by_run_id_before_tags_exist(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    run_id = queued_run(instance, {"dagster/partition": "doc-1-trial-001"})  # no extraction tags yet
    batch = create_batch(
        home_ledger,
        idempotency_key=f"run:{run_id}",
        project="p",
        user="u",
        document_ids=[doc],
        origin=BatchOrigin.RUN,
        origin_ref=run_id,
    ).id
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home, grace=0)))
    assert batch_item_rows(home_ledger, batch)[0]["status"] == "pending"
    assert get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]


def test_new_ledger_on_an_old_instance_does_not_inherit_old_runs(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, tmp_path: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    old = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    failed_run(instance, {**batch_tags(home_ledger, old), "dagster/partition": "doc-1-trial-001"})
    fresh = Ledger.connect(f"sqlite:///{tmp_path / 'fresh.db'}")  # ids restart at 1
    [new_doc] = register_trials(fresh, tmp_path / "fresh-home", 1)
    new = create_batch(fresh, idempotency_key="k", project="p", user="u", document_ids=[new_doc]).id
    assert (new, new_doc) == (old, doc)
    resources = resources_for(fresh, tmp_path / "fresh-home", grace=0)
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    assert batch_item_rows(fresh, new)[0]["status"] == "pending"
    dispatched = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(dispatched, dg.SensorResult)
    assert [r.run_key for r in dispatched.run_requests or []] == [
        f"{batch_tags(fresh, new)['extraction/batch_uid']}-item-1"
    ]


def test_lost_dispatch_is_dispatched_again_not_failed(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    item = batch_item_rows(home_ledger, batch)[0]["id"]
    states.mark_dispatched(home_ledger, [item])
    with home_ledger.engine.begin() as conn:  # ... ten minutes ago, and no run ever appeared
        conn.execute(batch_items.update().values(dispatched_at=utcnow() - timedelta(minutes=10)))
    resources = resources_for(home_ledger, home, grace=0)
    batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    row = batch_item_rows(home_ledger, batch)[0]
    assert (row["status"], row["dispatched_at"]) == ("pending", None)
    again = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(again, dg.SensorResult) and len(again.run_requests or []) == 1


def test_failed_export_keeps_the_batch_exporting_and_is_retried_with_backoff_until_it_succeeds(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[]).id
    (home / "exports").write_text("a file where the exports directory should be")
    resources = {
        **resources_for(home_ledger, home),
        # Waits of 1.5-2.5 s, doubling: "no attempt right after a failure" must hold on a loaded
        # 2-core machine, where a failed run and the next tick can be a second apart (0.4 s flaked).
        "settings": PipelineSettingsResource(home=str(home), retry_base_seconds=2.0),
    }

    def tick() -> list[dg.RunRequest]:
        result = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
        assert isinstance(result, dg.SensorResult)
        return list(result.run_requests or [])

    def export_attempt() -> tuple[str | None, bool]:
        [request] = _wait_for(tick, 30)  # the fourth wait is 12-20 s
        instance.add_dynamic_partitions("batches", [f"batch-{batch}"])
        job = dg.Definitions(assets=[batch_workbook], jobs=[export_batch_job], resources=resources).resolve_job_def(
            export_batch_job.name
        )
        run = job.execute_in_process(
            partition_key=f"batch-{batch}", instance=instance, tags=request.tags, raise_on_error=False
        )
        return request.run_key, run.success

    uid = batch_tags(home_ledger, batch)["extraction/batch_uid"]
    for attempt in range(4):  # more attempts than any fixed limit would allow: it never gives up
        assert export_attempt() == (f"export-{uid}-v1-{attempt}", False)
        assert tick() == []  # backing off: no attempt right after a failure
        state = get_batch(home_ledger, batch)
        assert state is not None
        assert (state["status"], state["export_path"], state["export_attempts"]) == ("exporting", None, attempt + 1)
        assert describe_state(state).startswith(f"export failed: file exists ({home / 'exports'})")
    (home / "exports").unlink()  # the disk problem is fixed
    assert export_attempt() == (f"export-{uid}-v1-4", True)
    state = get_batch(home_ledger, batch)
    assert state is not None
    assert (state["status"], state["export_error"]) == ("completed", None)
    assert Path(state["export_path"] or "").is_file()
    assert tick() == []


def test_an_export_run_that_died_without_a_word_is_recorded_as_such(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    from extraction_pipeline.defs.sensors import EXPORT_VERSION_TAG

    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[]).id
    tags = {**batch_tags(home_ledger, batch), EXPORT_VERSION_TAG: "1"}
    run_id = failed_run(instance, tags, job_name="export_batch")
    resources = resources_for(home_ledger, home)
    result = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SensorResult) and not result.run_requests  # backing off after the failure
    state = get_batch(home_ledger, batch)
    assert state is not None and state["status"] == "exporting"
    assert state["export_error"] == f"the export run {run_id[:8]} ended FAILURE before writing the workbook"
    assert state["export_attempts"] == 1


def _wait_for(probe: Callable[[], list[dg.RunRequest]], seconds: float) -> list[dg.RunRequest]:
    deadline = time.monotonic() + seconds
    while not (found := probe()):
        assert time.monotonic() < deadline, "no export run requested"
        time.sleep(0.1)
    return found


def _add_backfill(instance: dg.DagsterInstance, backfill_id: str, keys: list[str], assets: list[dg.AssetKey]) -> Any:
    """A UI backfill as the webserver records it (REQUESTED), over these document partitions."""
    import time

    from dagster._core.execution.backfill import PartitionBackfill

    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=defs().get_repository_def().asset_graph,
        partition_names=keys,
        asset_selection=assets,
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=None,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill


# Dagster's own backfill builder calls its deprecated AssetSelection.sources.
@pytest.mark.filterwarnings("ignore:Function `AssetSelection.sources` is deprecated:DeprecationWarning")
def test_a_ui_backfill_batch_stays_open_across_aggregator_ticks_without_a_failed_tick(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    """The aggregator once crashed on every tick while a UI batch was open (`dg.BulkActionStatus`
    does not exist). Every branch for a backfill batch: still requested, then over."""
    from dagster._core.execution.backfill import BulkActionStatus

    doc_ids = register_trials(home_ledger, home, 2)
    keys = [key_of(home_ledger, doc) for doc in doc_ids]
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, keys)
    backfill = _add_backfill(instance, "bf1", keys, [extracted_document.key])
    batch = create_batch(
        home_ledger,
        idempotency_key="backfill:bf1:p",
        project="p",
        user="ui",
        document_ids=doc_ids,
        origin=BatchOrigin.BACKFILL,
        origin_ref="bf1",
    ).id
    resources = resources_for(home_ledger, home, grace=0)
    cursor = None  # the first tick reads the batch in full, the next ones follow the cursor
    for _ in range(3):  # the backfill is still launching its runs: wait, and never fail a tick
        result = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
        assert isinstance(result, dg.SensorResult) and result.cursor
        assert json.loads(result.cursor)["backfills"] == []  # not settled while it launches
        cursor = result.cursor
        assert [row["status"] for row in batch_item_rows(home_ledger, batch)] == ["pending", "pending"]
    instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED))
    # No run of it ended: the cursor's tick still settles the backfill batch once it stops launching.
    over = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
    assert isinstance(over, dg.SensorResult) and over.cursor
    assert json.loads(over.cursor)["backfills"] == []  # settled and closed: no longer open, forgotten
    rows = batch_item_rows(home_ledger, batch)
    assert [row["status"] for row in rows] == ["error", "error"]
    assert (rows[0]["message"] or "").startswith("no run was ever started for this document")
    assert get_batch(home_ledger, batch)["status"] == "exporting"  # type: ignore[index]


@pytest.mark.filterwarnings("ignore:Function `AssetSelection.sources` is deprecated:DeprecationWarning")
def test_a_backfill_over_two_projects_becomes_one_batch_per_project(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    from extraction_pipeline.core.ledger.batches import find_batch_by_key
    from extraction_pipeline.core.pdf.registration import register_pdf
    from extraction_pipeline.core.synthetic import make_trial, write_report

    [mine] = register_trials(home_ledger, home, 1)  # project "p"
    theirs = register_pdf(home_ledger, home / "documents", "q", write_report(make_trial(7), home / "src-q")).id
    keys = [key_of(home_ledger, mine), key_of(home_ledger, theirs)]
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, keys)
    _add_backfill(instance, "mixed", keys, [parsed_document.key, extracted_document.key])
    fake_llm.answer = answer_from_trial
    from extraction_pipeline.defs.jobs import extract_documents_job

    job = dg.Definitions(
        assets=[parsed_document, extracted_document],
        jobs=[extract_documents_job],
        resources=resources_for(home_ledger, home, fake_llm),
    ).resolve_job_def(extract_documents_job.name)
    for key in keys:  # what the backfill daemon launches: one run per partition, tagged with the backfill
        result = job.execute_in_process(
            partition_key=key, instance=instance, tags={"dagster/backfill": "mixed", "extraction/user": "bob"}
        )
        assert result.success
    batches = {project: find_batch_by_key(home_ledger, f"backfill:mixed:{project}") for project in ("p", "q")}
    assert None not in batches.values() and len(set(batches.values())) == 2
    for project, batch_id in batches.items():
        batch = get_batch(home_ledger, batch_id)  # type: ignore[arg-type]
        assert batch is not None and (batch["project"], batch["user"], batch["total_items"]) == (project, "bob", 1)
        [item] = batch_item_rows(home_ledger, batch_id)  # type: ignore[arg-type]
        assert item["document_id"] == (mine if project == "p" else theirs) and item["status"] == "completed"


def test_partitions_that_are_not_registered_documents_are_removed(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path
) -> None:
    from extraction_pipeline.defs.sensors import stray_partitions_sensor

    [doc] = register_trials(home_ledger, home, 1)
    assert key_of(home_ledger, doc) == "doc-1-trial-001"  # readable in the launch dialog
    typed_by_hand = ["foo", "doc-999", "doc-x", "doc-1", "doc-1-other-name", key_of(home_ledger, doc)]
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, typed_by_hand)
    result = stray_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home))
    )
    assert isinstance(result, dg.SensorResult)
    [request] = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.DeleteDynamicPartitionsRequest)
    assert sorted(request.partition_keys or []) == ["doc-1", "doc-1-other-name", "doc-999", "doc-x", "foo"]
    for key in request.partition_keys or []:
        instance.delete_dynamic_partition(DOCUMENTS_PARTITIONS, key)
    again = stray_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources=resources_for(home_ledger, home))
    )
    assert isinstance(again, dg.SensorResult) and not again.dynamic_partitions_requests
    assert instance.get_dynamic_partitions(DOCUMENTS_PARTITIONS) == [key_of(home_ledger, doc)]


def test_a_key_naming_a_document_by_another_name_is_refused_and_legacy_keys_still_work(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    from sqlalchemy import update

    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-not-its-name"])
    wrong = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-not-its-name",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags=batch_tags(home_ledger, batch),
        raise_on_error=False,
    )
    assert not wrong.success
    assert states.get_item(home_ledger, 1)["status"] == "pending"  # type: ignore[index]
    # A document registered before readable keys has none stored: its "doc-1" partition still works.
    with home_ledger.engine.begin() as conn:
        conn.execute(update(documents).values(partition_key=None))
    assert key_of(home_ledger, doc) == "doc-1"
    fake_llm.answer = answer_from_trial
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1"])
    legacy = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags=batch_tags(home_ledger, batch),
    )
    assert legacy.success and states.get_item(home_ledger, 1)["status"] == "completed"  # type: ignore[index]
