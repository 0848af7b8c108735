"""Recovery inside Dagster (issue: nothing lost), on a real instance and ledger file with the
loopback fake LLM: step retries within a time budget, results that must not be discarded
silently, failed documents retried inside their batch (CLI and UI re-execution), dead workers
found by the launcher, sensors that survive a database outage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import openpyxl
import pytest
from dagster._core.launcher import WorkerStatus

from extraction_pipeline.cli import main as cli_main
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch, get_batch, record_workbook
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.reopening import retry_failed
from extraction_pipeline.core.ledger.schema import ItemStatus, batches
from extraction_pipeline.core.ledger.templates import definition_from_project_file, save_version
from extraction_pipeline.core.runs.liveness import worker_alive, worker_stamp
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.defs.assets import batch_workbook, extracted_document, parsed_document
from extraction_pipeline.defs.binding import WORKER_TAG
from extraction_pipeline.defs.launcher import HealthCheckedRunLauncher
from extraction_pipeline.defs.partitions import DOCUMENTS_PARTITIONS
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline.defs.sensors import batch_aggregator, batch_dispatcher
from extraction_pipeline.defs.step_retries import WAITING_TAG
from extraction_pipeline_tests.support.dagster_runs import (
    answer_from_trial,
    batch_tags,
    register_trials,
    resources_for,
)
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply


def _fast_retries(home_ledger: Ledger, home: Path, fake: FakeLLMServer, budget_minutes: float) -> dict[str, object]:
    resources = resources_for(home_ledger, home, fake)
    resources["settings"] = PipelineSettingsResource(
        home=str(home),
        retry_budget_minutes=budget_minutes,
        retry_base_seconds=0.2,
        retry_max_delay_seconds=0.5,
        breaker_failures=100,
    )
    return resources


def _materialize(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    batch: int,
    resources: dict[str, object],
    key: str = "doc-1-trial-001",
    tags: Mapping[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, [key])
    return dg.materialize(
        [parsed_document, extracted_document],
        partition_key=key,
        instance=instance,
        resources=resources,
        tags={**batch_tags(home_ledger, batch), **(tags or {})},
        raise_on_error=False,
    )


def test_a_rate_limit_is_waited_out_in_the_call_a_server_error_by_a_step_retry_and_the_run_says_it_recovered(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    fake_llm.push(Reply(status=429, headers={"Retry-After": "1"}), Reply(status=503))
    fake_llm.answer = answer_from_trial
    result = _materialize(instance, home_ledger, batch, _fast_retries(home_ledger, home, fake_llm, budget_minutes=5))
    assert result.success
    assert len(fake_llm.requests) == 3
    [item] = batch_item_rows(home_ledger, batch)
    # The 429 (Retry-After: 1) was sent again within its attempt; only the 503 cost an attempt.
    assert (item["status"], item["attempts"], item["failing_since"]) == ("completed", 2, None)
    assert (item["message"] or "").startswith("completed on attempt 2, after: waited out: HTTP 429 RateLimitError")
    assert "HTTP 503" in (item["message"] or "")
    assert item["tokens_in"] == 900 + 2 * 0  # the failed calls returned no usage
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.tags[WAITING_TAG].startswith("nothing (recovered")
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 1


def test_a_provider_failing_beyond_the_budget_fails_the_document_with_the_real_cause(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    fake_llm.answer = lambda messages: Reply(status=429, error_message="quota exceeded for this minute")
    result = _materialize(instance, home_ledger, batch, _fast_retries(home_ledger, home, fake_llm, budget_minutes=0.03))
    assert not result.success
    [item] = batch_item_rows(home_ledger, batch)
    assert item["status"] == "error"
    assert (item["message"] or "").startswith("gave up after")
    assert "HTTP 429 RateLimitError: quota exceeded for this minute" in (item["message"] or "")
    assert 2 <= len(fake_llm.requests) <= 12  # retried, with backoff, for about two seconds


def test_a_result_that_arrives_after_the_item_was_taken_away_fails_its_run_and_keeps_the_cost(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id

    def swept_while_answering(messages: list[dict[str, str]]) -> Reply:
        [item] = batch_item_rows(home_ledger, batch)
        assert states.sweep(
            home_ledger, item, idle=__import__("datetime").timedelta(0), reason="test: worker presumed dead"
        )
        return answer_from_trial(messages)

    fake_llm.answer = swept_while_answering
    result = _materialize(instance, home_ledger, batch, resources_for(home_ledger, home, fake_llm))
    assert not result.success  # Dagster must not say success for a document the home_ledger says failed
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    description = str(failure.step_failure_data.user_failure_data.description)  # type: ignore[union-attr]
    assert description.startswith("result discarded: the item was error")
    [item] = batch_item_rows(home_ledger, batch)
    assert item["status"] == "error" and item["tokens_in"] == 900 and item["tokens_out"] == 40
    assert instance.get_materialized_partitions(extracted_document.key) == set()


def test_batch_retry_reopens_the_batch_dispatches_again_and_writes_a_new_workbook_version(
    instance: dg.DagsterInstance,
    home_ledger: Ledger,
    home: Path,
    fake_llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    for item in batch_item_rows(home_ledger, batch):
        states.claim(home_ledger, item["id"], run_id="r0", worker="w")
    states.fail(home_ledger, 1, message="HTTP 401 AuthenticationError: bad key")
    states.complete(home_ledger, 2, run_id="r0", result={"fields": {}}, usage=Usage("m"))
    resources = resources_for(home_ledger, home, fake_llm)
    aggregated = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(aggregated, dg.SensorResult) and get_batch(home_ledger, batch)["status"] == "exporting"  # type: ignore[index]
    instance.add_dynamic_partitions("batches", [f"batch-{batch}"])
    first = dg.materialize([batch_workbook], partition_key=f"batch-{batch}", instance=instance, resources=resources)
    assert first.success and (home / "exports" / f"batch-{batch}.xlsx").is_file()

    monkeypatch.setenv("EXTRACTION_HOME", str(home))
    monkeypatch.setenv("EXTRACTION_DATABASE_URL", str(home_ledger.engine.url))
    assert cli_main(["batch", "retry", str(batch), "--user", "rita"]) == 0
    assert f"batch {batch} reopened: 1 document(s) back in the queue ({doc_ids[0]})" in capsys.readouterr().out
    assert cli_main(["batch", "retry", str(batch), "--user", "rita"]) == 0  # idempotent
    assert "nothing to retry" in capsys.readouterr().out
    retried = states.get_item(home_ledger, 1)
    assert retried is not None and (retried["status"], retried["dispatch_round"]) == ("pending", 1)
    [history] = states.item_history_of(home_ledger, 1)
    assert (history["event"], history["from_status"], history["actor"]) == ("retry", "error", "rita")
    assert "HTTP 401" in history["message"]
    assert get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]

    dispatched = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(dispatched, dg.SensorResult)
    [request] = dispatched.run_requests or []
    assert request.run_key and request.run_key.endswith("-item-1-r1")
    fake_llm.answer = answer_from_trial
    stale = _materialize(instance, home_ledger, batch, resources)  # a late run of round 0 cannot take it
    assert not stale.success and fake_llm.requests == []
    run = _materialize(instance, home_ledger, batch, resources, tags=request.tags)  # the dispatcher's run
    assert run.success and states.get_item(home_ledger, 1)["status"] == "completed"  # type: ignore[index]
    # The run that settled the batch's last document closed it and wrote its workbook at once, no
    # aggregator tick in between, and reported it as the batch's `batch_workbook` materialization.
    assert get_batch(home_ledger, batch)["status"] == "completed"  # type: ignore[index]
    event = instance.get_latest_materialization_event(batch_workbook.key)
    assert event is not None and event.run_id == run.run_id and event.dagster_event is not None
    assert event.dagster_event.partition == f"batch-{batch}" and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert metadata["version"].value == 2 and metadata["completed"].value == 2
    # Clickable in the Dagster UI: the same server serves both files (test_web.py fetches them).
    assert metadata["download"].value == f"/extraction/batches/{batch}/workbook.xlsx"  # relative: any host, any port
    assert str(metadata["meta_analysis_csv"].value).endswith(f"/extraction/batches/{batch}/meta-analysis.csv")
    v2 = home / "exports" / f"batch-{batch}-v2.xlsx"
    assert get_batch(home_ledger, batch)["export_path"] == str(v2)  # type: ignore[index]
    assert (home / "exports" / f"batch-{batch}.xlsx").is_file()  # the first workbook is kept
    statuses = [row[2].value for row in openpyxl.load_workbook(v2)["Documents"].iter_rows(min_row=2)]
    assert statuses == ["completed", "completed"]


def test_retry_is_refused_when_the_template_was_superseded_unless_asked(
    home_ledger: Ledger, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    states.fail(home_ledger, 1, message="boom", from_status=ItemStatus.PENDING, run_id=None)
    save_version(home_ledger, "p", definition_from_project_file({"base": "rct", "instructions": "Table 2."}))
    monkeypatch.setenv("EXTRACTION_HOME", str(home))
    monkeypatch.setenv("EXTRACTION_DATABASE_URL", str(home_ledger.engine.url))
    assert cli_main(["batch", "retry", str(batch), "--user", "rita"]) == 2
    assert "--allow-superseded-template" in capsys.readouterr().err
    assert cli_main(["batch", "retry", str(batch), "--user", "rita", "--documents", "99"]) == 2
    with pytest.raises(SystemExit) as empty_user:  # argparse: one line, exit 2
        cli_main(["batch", "retry", str(batch), "--user", " ", "--allow-superseded-template"])
    assert empty_user.value.code == 2
    assert cli_main(["batch", "retry", str(batch), "--user", "rita", "--allow-superseded-template"]) == 0
    assert states.get_item(home_ledger, 1)["status"] == "pending"  # type: ignore[index]


def test_re_executing_a_failed_run_from_the_ui_retries_its_document(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    fake_llm.answer = lambda messages: Reply(status=401, error_message="bad key")
    failed = _materialize(instance, home_ledger, batch, resources_for(home_ledger, home, fake_llm))
    assert not failed.success and states.get_item(home_ledger, 1)["status"] == "error"  # type: ignore[index]
    fake_llm.answer = answer_from_trial  # the key was fixed; the analyst clicks Re-execute
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001"])
    again = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags={**batch_tags(home_ledger, batch), "dagster/parent_run_id": failed.run_id, "extraction/user": "ann"},
    )
    assert again.success
    item = states.get_item(home_ledger, 1)
    assert item is not None and (item["status"], item["dispatch_round"], item["run_id"]) == (
        "completed",
        1,
        again.run_id,
    )
    [history] = states.item_history_of(home_ledger, 1)
    assert history["actor"] == f"ann (re-executed run {failed.run_id} in the Dagster UI)"
    run = instance.get_run_by_id(again.run_id)
    assert run is not None and run.tags["extraction/round"] == "1"


def test_an_automatic_run_retry_never_reopens_a_permanent_error(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    states.fail(home_ledger, 1, message="parse failed: PDF is encrypted", from_status=ItemStatus.PENDING, run_id=None)
    tags = {**batch_tags(home_ledger, batch), "dagster/parent_run_id": "x", "dagster/retry_number": "1"}
    instance.add_dynamic_partitions(DOCUMENTS_PARTITIONS, ["doc-1-trial-001"])
    result = dg.materialize(
        [parsed_document, extracted_document],
        partition_key="doc-1-trial-001",
        instance=instance,
        resources=resources_for(home_ledger, home, fake_llm),
        tags=tags,
        raise_on_error=False,
    )
    assert not result.success and fake_llm.requests == []
    assert states.get_item(home_ledger, 1)["status"] == "error"  # type: ignore[index]


def test_sensors_wait_out_a_database_outage_instead_of_failing(instance: dg.DagsterInstance, home: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = f"postgresql+psycopg2://postgres@127.0.0.1:{port}/ledger"
    resources = {
        "ledger": LedgerResource(database_url=down),
        "llm": LLMResource(),
        "settings": PipelineSettingsResource(home=str(home)),
    }
    for sensor in (batch_aggregator, batch_dispatcher):
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        assert isinstance(result, dg.SensorResult)
        assert result.skip_reason is not None
        assert (result.skip_reason.skip_message or "").startswith(
            "ledger database connection lost: connection to server"
        )


def test_the_launcher_fails_only_runs_whose_worker_is_gone(instance: dg.DagsterInstance) -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        launcher = HealthCheckedRunLauncher()
        launcher.register_instance(instance)

        @dg.op
        def noop() -> None:
            pass

        @dg.job
        def some_job() -> None:
            noop()

        def started_run(pid: int) -> dg.DagsterRun:
            run = instance.create_run_for_job(some_job)
            event = dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name="some_job", pid=pid)
            instance.report_dagster_event(event, run.run_id)
            found = instance.get_run_by_id(run.run_id)
            assert found is not None and found.status == dg.DagsterRunStatus.STARTED
            return found

        alive = started_run(worker.pid)
        assert launcher.check_run_worker_health(alive).status == WorkerStatus.RUNNING
        # The exact stamp a worker records on its run (host, boot id, pid, start tick).
        stamped = started_run(worker.pid)
        instance.add_run_tags(stamped.run_id, {WORKER_TAG: worker_stamp(worker.pid)})
        stamped = instance.get_run_by_id(stamped.run_id)  # type: ignore[assignment]
        assert launcher.check_run_worker_health(stamped).status == WorkerStatus.RUNNING
        host, boot, pid, ticks = worker_stamp(worker.pid).split("|")
        rebooted = started_run(worker.pid)
        instance.add_run_tags(rebooted.run_id, {WORKER_TAG: "|".join((host, "another-boot", pid, ticks))})
        rebooted = instance.get_run_by_id(rebooted.run_id)  # type: ignore[assignment]
        assert launcher.check_run_worker_health(rebooted).status == WorkerStatus.NOT_FOUND
        elsewhere = started_run(worker.pid)
        instance.add_run_tags(elsewhere.run_id, {WORKER_TAG: "|".join(("other-host", boot, pid, ticks))})
        elsewhere = instance.get_run_by_id(elsewhere.run_id)  # type: ignore[assignment]
        assert launcher.check_run_worker_health(elsewhere).status == WorkerStatus.RUNNING  # cannot tell: never fail it
        # A retry run inherits its dead parent's stamp with its tags: judged by its own start pid.
        inherited = started_run(os.getpid())
        instance.add_run_tags(inherited.run_id, {WORKER_TAG: "|".join((host, boot, "999999", "1"))})
        inherited = instance.get_run_by_id(inherited.run_id)  # type: ignore[assignment]
        assert launcher.check_run_worker_health(inherited).status == WorkerStatus.RUNNING
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        dead = launcher.check_run_worker_health(alive)
        assert dead.status == WorkerStatus.NOT_FOUND and "is gone" in (dead.msg or "")
        assert launcher.check_run_worker_health(stamped).status == WorkerStatus.NOT_FOUND
        # A pid that now belongs to a process started after the run (pid reuse after a restart).
        assert worker_alive(os.getpid(), started_by=time.time() - 3600) is False
        assert worker_alive(os.getpid(), started_by=time.time()) is True
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_zombie_worker_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child.pid}/stat").read_text().split(")")[1].split()[0] != "Z":
        time.sleep(0.05)
    assert worker_alive(child.pid) is False  # exited, not yet reaped
    child.wait()
    assert worker_alive(child.pid) is False


def test_a_workbook_written_while_the_batch_was_reopened_is_not_recorded(home_ledger: Ledger, home: Path) -> None:
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    states.fail(home_ledger, 1, message="boom", from_status=ItemStatus.PENDING, run_id=None)
    with home_ledger.engine.begin() as conn:
        conn.execute(batches.update().values(status="completed", completed_at=utcnow()))
    retry_failed(home_ledger, batch, actor="rita")  # reopened while export v1 is being written
    assert not record_workbook(home_ledger, batch, "/exports/stale.xlsx", 1)
    assert get_batch(home_ledger, batch)["export_path"] is None  # type: ignore[index]


def test_a_batch_whose_last_document_fails_is_closed_by_that_run(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    """Two documents: the first run leaves the batch open (one still pending); the run that
    settles the second, which fails for good (a bad key), closes the batch and writes the
    workbook naming both, with no aggregator tick."""
    doc_ids = register_trials(home_ledger, home, 2)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids).id
    resources = resources_for(home_ledger, home, fake_llm)
    fake_llm.answer = answer_from_trial
    first = _materialize(instance, home_ledger, batch, resources, key="doc-1-trial-001")
    assert first.success and get_batch(home_ledger, batch)["status"] == "open"  # type: ignore[index]
    assert instance.get_latest_materialization_event(batch_workbook.key) is None
    fake_llm.answer = lambda messages: Reply(status=401, error_message="bad key")
    second = _materialize(instance, home_ledger, batch, resources, key="doc-2-trial-002")
    assert not second.success
    closed = get_batch(home_ledger, batch)
    assert closed is not None and closed["status"] == "completed" and closed["export_path"]
    statuses = [row[2].value for row in openpyxl.load_workbook(closed["export_path"])["Documents"].iter_rows(min_row=2)]
    assert sorted(statuses) == ["completed", "error"]
    event = instance.get_latest_materialization_event(batch_workbook.key)
    assert event is not None and event.run_id == second.run_id


def test_a_workbook_the_run_cannot_write_is_left_to_the_aggregator_with_the_reason(
    instance: dg.DagsterInstance, home_ledger: Ledger, home: Path, fake_llm: FakeLLMServer
) -> None:
    """The exports folder cannot be made (a file stands in its place): the run still closes the
    batch, which waits in `exporting` saying why; the aggregator launches the export run."""
    [doc] = register_trials(home_ledger, home, 1)
    batch = create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    (home / "exports").write_text("not a folder")
    fake_llm.answer = answer_from_trial
    resources = resources_for(home_ledger, home, fake_llm)
    assert _materialize(instance, home_ledger, batch, resources).success  # the document is not lost
    waiting = get_batch(home_ledger, batch)
    assert waiting is not None and waiting["status"] == "exporting" and waiting["export_error"]
    assert instance.get_latest_materialization_event(batch_workbook.key) is None
    tick = batch_aggregator(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(tick, dg.SensorResult)
    assert [request.partition_key for request in tick.run_requests or []] == [f"batch-{batch}"]
