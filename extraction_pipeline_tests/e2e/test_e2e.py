"""End to end: a real `dagster dev` (webserver + daemon: sensors, run queue, run monitoring, run
retries) on a temporary instance home, with the extraction model served by the loopback fake.

Slow (a few minutes): each run is a real process that imports the code location.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import openpyxl
import pytest

from extraction_pipeline.core.export.meta_csv import meta_analysis_rows
from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, find_batch_by_key, get_batch
from extraction_pipeline.core.ledger.documents import get_document, partition_key_of
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.reopening import retry_failed
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import SyntheticTrial, make_trial, write_report
from extraction_pipeline.defs.launcher import RUN_WORKER_TAG
from extraction_pipeline.demo import wait_for_batch
from extraction_pipeline.instance import DaemonProcess, init_home
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.invariant import invariant_violations, run_partitions, wait_for_runs_to_end
from extraction_pipeline_tests.support.ledgers import key_of
from extraction_pipeline_tests.support.oracle import CORPUS, ORACLE_PAPERS, OracleAnswer, build_answer, skeleton
from extraction_pipeline_tests.support.web import free_port

pytestmark = pytest.mark.e2e
BATCH_TIMEOUT = 420


@dataclass
class Stack:
    settings: Settings
    ledger: Ledger
    fake: FakeLLMServer
    daemon: DaemonProcess
    port: int
    instance: dg.DagsterInstance
    trials: dict[str, SyntheticTrial]
    hang_once: set[str]  # NCT numbers whose first request hangs (the worker gets killed)
    invalid: set[str]  # NCT numbers answered with text that is not JSON (a permanent failure)
    oracles: list[OracleAnswer]  # real corpus papers answered from their gold values

    def register(self, indices: range) -> list[int]:
        paths = []
        for index in indices:
            trial = make_trial(index)
            self.trials[trial.nct_number] = trial
            paths.append(write_report(trial, self.settings.home_dir / "incoming"))
        return [document.id for document in register_all(self.ledger, self.settings.documents_dir, "e2e", paths)]

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query, "variables": variables}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]


def _fake_answer(
    stack_trials: dict[str, SyntheticTrial], hang_once: set[str], invalid: set[str], oracles: list[OracleAnswer]
) -> Any:
    def answer(messages: list[dict[str, str]]) -> Reply:
        text = document_from_messages(messages)
        document = skeleton(text)
        for oracle in oracles:
            if skeleton(oracle.fingerprint) in document:
                return Reply(oracle.as_json(), tokens_in=9000, tokens_out=900)
        trial = next(t for nct, t in stack_trials.items() if nct in text)
        if trial.nct_number in hang_once:
            hang_once.discard(trial.nct_number)
            return Reply(status=500, delay=120)  # hangs until the worker is killed
        if trial.nct_number in invalid:
            return Reply("I could not find a trial in this document, sorry.")
        registered = f"This trial was registered at ClinicalTrials.gov ({trial.nct_number})."
        methods = (
            f"A total of {trial.randomized_n} patients were randomized in a 1:1 ratio to {trial.drug} "
            "or placebo at 42 centres."
        )
        return Reply(
            extraction_json(
                {
                    "metadata.nct_number": (trial.nct_number, registered),
                    "metadata.randomized_n": (trial.randomized_n, methods),
                }
            ),
            tokens_in=1500,
            tokens_out=60,
        )

    return answer


def _wait_until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("e2e-home")
    fake = FakeLLMServer().start()
    port = free_port()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EXTRACTION_HOME", str(home))
        env.delenv("EXTRACTION_DATABASE_URL", raising=False)
        env.setenv("EXTRACTION_MODEL", "openai/fake-model")
        env.setenv("EXTRACTION_API_BASE", fake.api_base)
        env.setenv("EXTRACTION_API_KEY", "sk-e2e-secret-value")
        env.setenv("EXTRACTION_RECONCILE_GRACE_SECONDS", "45")
        settings = Settings.from_env()
        init_home(settings)
        env.setenv("DAGSTER_HOME", str(settings.dagster_home))
        ledger = Ledger.connect(settings.ledger_url)
        trials: dict[str, SyntheticTrial] = {}
        hang_once: set[str] = set()
        invalid: set[str] = set()
        oracles: list[OracleAnswer] = []
        fake.answer = _fake_answer(trials, hang_once, invalid, oracles)
        daemon = DaemonProcess(settings, with_ui=True, port=port).start()
        instance = dg.DagsterInstance.get()
        stack = Stack(settings, ledger, fake, daemon, port, instance, trials, hang_once, invalid, oracles)
        try:
            _wait_until(lambda: _server_up(port) or not daemon.alive(), 120, "the Dagster webserver")
            assert daemon.alive(), daemon.log_path.read_text()[-3000:]
            yield stack
        finally:
            daemon.stop()
            instance.dispose()
            fake.stop()
            ledger.dispose()


def _server_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _runs_for_batch(instance: dg.DagsterInstance, batch_id: int) -> list[dg.DagsterRun]:
    """The batch's extraction runs (its export run carries the batch tag too)."""
    records = instance.get_run_records(dg.RunsFilter(tags={"extraction/batch": str(batch_id)}))
    return [r.dagster_run for r in records if r.dagster_run.job_name != "export_batch"]


def _assert_ledger_and_dagster_agree(stack: Stack, batch_id: int) -> None:
    batch = get_batch(stack.ledger, batch_id)
    assert batch is not None
    wait_for_runs_to_end(stack.instance, batch)
    materialized = stack.instance.get_materialized_partitions(dg.AssetKey("extracted_document"))
    runs = {run.run_id: run for run in _runs_for_batch(stack.instance, batch_id)}
    for item in batch_item_rows(stack.ledger, batch_id):
        key = partition_key_of(item["document_id"], item["partition_key"])
        run = runs[item["run_id"] or ""]
        assert key in run_partitions(stack.instance, run)
        if len(run_partitions(stack.instance, run)) == 1:
            assert run.tags["extraction/item"] == str(item["id"])
        if item["status"] == "completed":
            assert key in materialized
            assert run.status == dg.DagsterRunStatus.SUCCESS or len(run_partitions(stack.instance, run)) > 1
        else:
            assert run.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def test_cli_batch_runs_through_daemon_and_sensor_closes_it(stack: Stack) -> None:
    doc_ids = stack.register(range(101, 106))
    requests_before = len(stack.fake.requests)
    batch_id = create_batch(stack.ledger, idempotency_key="e2e-cli", project="e2e", user="ann", document_ids=doc_ids).id
    batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    assert batch["status"] == "completed" and batch["completed_at"] is not None

    items = batch_item_rows(stack.ledger, batch_id)
    assert [i["status"] for i in items] == ["completed"] * 5
    assert [i["attempts"] for i in items] == [1] * 5  # each executed exactly once
    assert len(stack.fake.requests) - requests_before == 5
    assert sum(i["tokens_in"] for i in items) == 7500

    sheet = openpyxl.load_workbook(batch["export_path"])["Documents"]
    header = [c.value for c in sheet[1]]
    rows = [dict(zip(header, (c.value for c in row), strict=True)) for row in sheet.iter_rows(min_row=2)]
    assert len(rows) == 5
    for row in rows:
        trial = next(t for t in stack.trials.values() if t.filename == row["filename"])
        assert (row["metadata.nct_number"], row["metadata.randomized_n"]) == (trial.nct_number, trial.randomized_n)
        assert (row["metadata.nct_number status"], row["metadata.randomized_n status"]) == ("verified", "verified")
        assert row["model"] == "openai/fake-model" and row["status"] == "completed"

    _assert_ledger_and_dagster_agree(stack, batch_id)
    assert {run.tags["extraction/user"] for run in _runs_for_batch(stack.instance, batch_id)} == {"ann"}
    # The API key reached the model but never any log, run record or file of the instance home.
    leaks = [
        path
        for path in stack.settings.home_dir.rglob("*")
        if path.is_file() and b"sk-e2e-secret-value" in path.read_bytes()
    ]
    assert leaks == []


LAUNCH_BACKFILL = """
mutation LaunchBackfill($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}
"""


def _launch_backfill(stack: Stack, keys: list[str], title: str) -> str:
    """What the UI sends from the asset page: Materialize -> select partitions -> Launch backfill
    (as analyst bob); returns the backfill id."""
    _wait_until(
        lambda: set(keys) <= set(stack.instance.get_dynamic_partitions("documents")), 60, "the partition sensor"
    )
    reply = stack.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": ["parsed_document"]}, {"path": ["extracted_document"]}],
                "partitionNames": keys,
                "tags": [{"key": "extraction/user", "value": "bob"}],
                "title": title,
            }
        },
    )
    result = reply["data"]["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", reply
    return str(result["backfillId"])


def test_ui_backfill_becomes_a_batch_that_the_sensor_closes(stack: Stack) -> None:
    doc_ids = stack.register(range(201, 204))
    backfill_id = _launch_backfill(stack, [key_of(stack.ledger, doc_id) for doc_id in doc_ids], "e2e backfill")

    batch_id = _wait_until(
        lambda: find_batch_by_key(stack.ledger, f"backfill:{backfill_id}:e2e"), 180, "the backfill's batch"
    )
    batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    assert (batch["origin"], batch["user"], batch["total_items"]) == ("backfill", "bob", 3)
    items = batch_item_rows(stack.ledger, batch_id)
    assert sorted(i["document_id"] for i in items) == sorted(doc_ids)
    assert {i["status"] for i in items} == {"completed"}
    _assert_ledger_and_dagster_agree(stack, batch_id)
    assert openpyxl.load_workbook(batch["export_path"])["Documents"].max_row == 4


def _with_two_bad_documents(stack: Stack, doc_ids: list[int], broken: int, invalid: int) -> None:
    """``broken``: its stored copy is overwritten (a permanent parse failure); ``invalid``: the
    model answers it with prose (a permanent output failure)."""
    document = get_document(stack.ledger, doc_ids[broken])
    assert document is not None
    Path(document["stored_path"]).write_bytes(b"%PDF-1.7 this is not the registered file")
    stack.invalid.add(_nct_of(stack, doc_ids[invalid]))


def _nct_of(stack: Stack, doc_id: int) -> str:
    document = get_document(stack.ledger, doc_id)
    assert document is not None
    return next(nct for nct, trial in stack.trials.items() if trial.filename == document["filename"])


def _calls_for(stack: Stack, nct: str) -> int:
    return sum(nct in json.dumps(request) for request in stack.fake.requests)


def _assert_isolated(stack: Stack, batch_id: int, failed_ids: set[int]) -> list[dg.DagsterRun]:
    """Several documents per run; the two bad ones failed alone; every other document has its own
    materialization with its own metadata; Dagster's partition status agrees (once the runs have
    ended: the run that settles the last document closes the batch before it ends itself)."""
    batch = get_batch(stack.ledger, batch_id)
    assert batch is not None
    wait_for_runs_to_end(stack.instance, batch)
    items = batch_item_rows(stack.ledger, batch_id)
    assert {i["document_id"] for i in items if i["status"] == "error"} == failed_ids
    assert {i["status"] for i in items if i["document_id"] not in failed_ids} == {"completed"}
    runs = _runs_for_batch(stack.instance, batch_id)
    assert len(runs) < len(items) and max(len(run_partitions(stack.instance, run)) for run in runs) > 1
    statuses = stack.instance.get_status_by_partition(
        dg.AssetKey("extracted_document"),
        [partition_key_of(i["document_id"], i["partition_key"]) for i in items],
        dg.DynamicPartitionsDefinition(name="documents"),
    )
    for item in items:
        key = partition_key_of(item["document_id"], item["partition_key"])
        expected = "FAILED" if item["document_id"] in failed_ids else "MATERIALIZED"
        assert statuses is not None
        status = statuses[key]
        assert status is not None and status.value == expected, (key, status)
        if item["status"] == "completed":
            record = stack.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("extracted_document"), asset_partitions=[key]), limit=1
            ).records[0]
            metadata = record.asset_materialization.metadata  # type: ignore[union-attr]
            assert metadata["filename"].value == item["filename"] and metadata["status"].value == "completed"
            assert record.run_id == item["run_id"]
    failing_runs = {i["run_id"] for i in items if i["document_id"] in failed_ids}
    for run in runs:
        expected_status = dg.DagsterRunStatus.FAILURE if run.run_id in failing_runs else dg.DagsterRunStatus.SUCCESS
        assert run.status == expected_status, run.tags
    assert invariant_violations(stack.ledger, stack.instance, batch_id) == []
    return runs


def test_several_documents_per_run_and_a_bad_one_fails_alone(stack: Stack) -> None:
    """CLI path: 11 documents in fewer runs; a damaged PDF and an unusable answer fail only their
    own documents; retrying the failed one does not redo its run-mates."""
    doc_ids = stack.register(range(401, 412))
    _with_two_bad_documents(stack, doc_ids, broken=2, invalid=6)
    invalid_nct = _nct_of(stack, doc_ids[6])
    batch_id = create_batch(
        stack.ledger, idempotency_key="e2e-many", project="e2e", user="ann", document_ids=doc_ids
    ).id
    wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    _assert_isolated(stack, batch_id, {doc_ids[2], doc_ids[6]})
    items = {i["document_id"]: i for i in batch_item_rows(stack.ledger, batch_id)}
    assert "does not match its registered sha256" in (items[doc_ids[2]]["message"] or "")
    assert [i["attempts"] for i in items.values() if i["status"] == "completed"] == [1] * 9

    # The model now answers the invalid one properly: a retry re-extracts it, and only it.
    stack.invalid.clear()
    calls_before, all_before = _calls_for(stack, invalid_nct), len(stack.fake.requests)
    report = retry_failed(stack.ledger, batch_id, actor="ann", document_ids=[doc_ids[6]])
    assert report.retried == [doc_ids[6]]
    batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    assert batch["status"] == "completed"
    assert _calls_for(stack, invalid_nct) == calls_before + 1 and len(stack.fake.requests) == all_before + 1
    after = {i["document_id"]: i for i in batch_item_rows(stack.ledger, batch_id)}
    assert after[doc_ids[6]]["status"] == "completed"
    assert all(after[d]["run_id"] == items[d]["run_id"] for d in doc_ids if d not in (doc_ids[2], doc_ids[6]))


def test_a_ui_backfill_runs_several_documents_per_run_and_a_bad_one_fails_alone(stack: Stack) -> None:
    doc_ids = stack.register(range(421, 426))
    _with_two_bad_documents(stack, doc_ids, broken=1, invalid=3)
    keys = [key_of(stack.ledger, doc_id) for doc_id in doc_ids]
    backfill_id = _launch_backfill(stack, keys, "e2e backfill of five")
    batch_id = _wait_until(
        lambda: find_batch_by_key(stack.ledger, f"backfill:{backfill_id}:e2e"), 180, "the backfill's batch"
    )
    wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    runs = _assert_isolated(stack, batch_id, {doc_ids[1], doc_ids[3]})
    assert len(runs) == 1 and run_partitions(stack.instance, runs[0]) == keys
    stack.invalid.clear()


def _first_document_hanging(stack: Stack, indices: range, key: str, user: str) -> tuple[list[int], int, Any]:
    """A batch of the trials ``indices`` whose first document's model call hangs: its ids, the
    batch, and the first document's item once its extraction has started."""
    doc_ids = stack.register(indices)
    trial = make_trial(indices[0])
    stack.hang_once.add(trial.nct_number)
    batch_id = create_batch(stack.ledger, idempotency_key=key, project="e2e", user=user, document_ids=doc_ids).id

    def extracting() -> ItemListing | None:
        if trial.nct_number in stack.hang_once:
            return None  # the hanging request has not arrived yet
        item = next(i for i in batch_item_rows(stack.ledger, batch_id) if i["document_id"] == doc_ids[0])
        return item if item["status"] == "extracting" else None

    return doc_ids, batch_id, _wait_until(extracting, 240, "the hanging document's extraction to start")


def test_killed_worker_ends_in_terminal_state_and_batch_closes(stack: Stack) -> None:
    doc_ids, batch_id, item = _first_document_hanging(stack, range(301, 303), "e2e-kill", "cy")
    killed_run = item["run_id"]
    worker_pid = int(item["worker"].rsplit(":", 1)[1])
    os.kill(worker_pid, signal.SIGKILL)

    batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    assert batch["status"] == "completed"
    victim = next(i for i in batch_item_rows(stack.ledger, batch_id) if i["document_id"] == doc_ids[0])
    # Either Dagster's run retry took the document over, or (no retry in time) the aggregator
    # put it back in the queue for a fresh run naming the dead one. Both finish it.
    explanations = (
        f"its run's worker died (run {killed_run}); Dagster's retry of the run took it over",
        f"dispatched again (round 1): run {killed_run} ended FAILURE while extracting",
    )
    assert victim["status"] == "completed"
    message = victim["message"] or ""
    assert message.startswith("completed on attempt 2, after: "), message
    assert message.removeprefix("completed on attempt 2, after: ").startswith(explanations), message
    killed = stack.instance.get_run_by_id(killed_run)
    assert killed is not None and killed.status == dg.DagsterRunStatus.FAILURE
    other = next(i for i in batch_item_rows(stack.ledger, batch_id) if i["document_id"] == doc_ids[1])
    assert other["status"] == "completed"
    assert get_batch(stack.ledger, batch_id)["export_path"]  # type: ignore[index]


def _parent_command(pid: int) -> str:
    parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    return Path(f"/proc/{parent}/cmdline").read_text().replace("\0", " ")


def test_a_run_worker_is_forked_warm_and_terminating_its_run_stops_its_document(stack: Stack) -> None:
    _, batch_id, item = _first_document_hanging(stack, range(351, 352), "e2e-stop", "di")
    worker_pid = int(item["worker"].rsplit(":", 1)[1])
    # Forked from the server that imported the code once, not a new interpreter of the code server.
    assert "multiprocessing.forkserver" in _parent_command(worker_pid)
    run_id = item["run_id"] or ""
    run = stack.instance.get_run_by_id(run_id)
    assert run is not None and run.tags[RUN_WORKER_TAG].split("|")[2] == str(worker_pid)

    # What Terminate in the UI calls, from another process than the daemon that launched the run.
    assert stack.instance.run_launcher.terminate(run_id) is True

    def ended() -> dg.DagsterRun | None:
        run = stack.instance.get_run_by_id(run_id)
        return run if run is not None and run.is_finished else None

    assert _wait_until(ended, 120, "the terminated run to end").status == dg.DagsterRunStatus.CANCELED
    # The interrupted extraction handed its document back before the run ended (the aggregator then
    # fails it: canceled work is not restarted behind the analyst's back, core/test_transient.py).
    assert batch_item_rows(stack.ledger, batch_id)[0]["status"] == "pending"
    assert stack.instance.run_launcher.terminate(run_id) is False  # a finished run is left alone


def test_double_extraction_through_the_daemon_with_two_fake_models(stack: Stack) -> None:
    doc_ids = stack.register(range(401, 403))
    first_answer = stack.fake.answer

    def by_model(model: str, messages: list[dict[str, str]]) -> Reply:
        reply = first_answer(messages)
        if model == "fake-model-b" and reply.content:  # the second model misreads the sample size
            trial = next(t for t in stack.trials.values() if t.nct_number in document_from_messages(messages))
            reply = Reply(reply.content.replace(f'"value": {trial.randomized_n}', f'"value": {trial.randomized_n + 1}'))
        return reply

    stack.fake.answer_by_model = by_model
    try:
        batch_id = create_batch(
            stack.ledger,
            idempotency_key="e2e-double",
            project="e2e",
            user="dee",
            document_ids=doc_ids,
            second_model="openai/fake-model-b",
        ).id
        batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    finally:
        stack.fake.answer_by_model = None
    assert batch["status"] == "completed"
    rows = _sheet_rows(str(batch["export_path"]), "Documents")
    assert [row["agreement"] for row in rows] == ["50% with openai/fake-model-b"] * 2  # NCT agrees, N does not
    values = [r for r in _sheet_rows(str(batch["export_path"]), "Values") if r["field"] == "randomized_n"]
    assert [(v["agreement"], v["second model value"] - v["value"]) for v in values] == [("disagree", 1)] * 2
    for item in batch_item_rows(stack.ledger, batch_id):
        [event] = stack.instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey("extracted_document"),
                asset_partitions=[partition_key_of(item["document_id"], item["partition_key"])],
            ),
            limit=1,
        ).records
        metadata = event.asset_materialization.metadata  # type: ignore[union-attr]
        assert metadata["second_model"].value == "openai/fake-model-b" and metadata["agreement"].value == 0.5
        assert metadata["disagreements"].value == "metadata.randomized_n (disagree)"
    _assert_ledger_and_dagster_agree(stack, batch_id)


def _sheet_rows(path: str, name: str) -> list[dict[str, Any]]:
    sheet = openpyxl.load_workbook(path)[name]
    header = [c.value for c in sheet[1]]
    return [dict(zip(header, (c.value for c in row), strict=True)) for row in sheet.iter_rows(min_row=2)]


CSV_COLUMN = {"events": "xi", "total": "ni", "n": "ni", "mean": "mi", "sd": "sdi"}


def _tamper_value(oracle: OracleAnswer) -> tuple[int, str]:
    """A model that reports a wrong number next to a correct quote."""
    gold = oracle.gold[0]
    pair = oracle.answer["outcomes"][gold.outcome - 1][gold.field]
    wrong = pair["value"] + 1 if isinstance(pair["value"], int) else round(pair["value"] + 0.11, 2)
    assert str(wrong) not in pair["quote"]
    pair["value"] = wrong
    return gold.outcome, gold.field


def _tamper_quote(oracle: OracleAnswer) -> tuple[int, str]:
    """A model that misreads a digit and quotes its misreading: value and quote agree, the PDF does not.
    The last gold number whose quote prints its digits (not "ten healthy volunteers")."""
    gold = next(
        g
        for g in reversed(oracle.gold)
        if str(oracle.answer["outcomes"][g.outcome - 1][g.field]["value"])
        in oracle.answer["outcomes"][g.outcome - 1][g.field]["quote"]
    )
    pair = oracle.answer["outcomes"][gold.outcome - 1][gold.field]
    text = str(pair["value"])
    wrong_text = text[:-1] + ("1" if text[-1] != "1" else "2")
    pair["quote"] = pair["quote"].replace(text, wrong_text, 1)
    pair["value"] = type(pair["value"])(wrong_text)
    return gold.outcome, gold.field


@pytest.mark.skipif(
    not (CORPUS / "gold_outcomes.json").exists(), reason="the trial corpus is not present (EXTRACTION_CORPUS)"
)
def test_oracle_gold_values_reach_the_workbook_verified_and_wrong_numbers_do_not(stack: Stack) -> None:
    oracles = [build_answer(pmcid) for pmcid in ORACLE_PAPERS]
    assert all(oracle.gold for oracle in oracles) and sum(len(o.gold) for o in oracles) >= 60
    wrong_value = (oracles[4].pmcid, *_tamper_value(oracles[4]))
    wrong_quote = (oracles[5].pmcid, *_tamper_quote(oracles[5]))
    stack.oracles.extend(oracles)
    pdfs = [CORPUS / "pdf" / f"{o.pmcid}.pdf" for o in oracles]
    doc_ids = [document.id for document in register_all(stack.ledger, stack.settings.documents_dir, "oracle", pdfs)]
    batch_id = create_batch(
        stack.ledger, idempotency_key="e2e-oracle", project="oracle", user="dee", document_ids=doc_ids
    ).id
    batch = wait_for_batch(stack.ledger, batch_id, timeout_seconds=BATCH_TIMEOUT, daemon=stack.daemon, quiet=True)
    assert {i["status"] for i in batch_item_rows(stack.ledger, batch_id)} == {"completed"}

    outcomes = {(row["filename"], row["outcome"]): row for row in _sheet_rows(str(batch["export_path"]), "Outcomes")}
    # the meta-analysis CSV's rows: one per outcome and arm, the arm by its name
    csv_rows = {(r["filename"], r["outcome_name"], r["group"]): r for r in meta_analysis_rows(stack.ledger, batch_id)}
    checked = 0
    for oracle in oracles:
        for gold in oracle.gold:
            row = outcomes[(f"{oracle.pmcid}.pdf", gold.outcome)]
            where = (oracle.pmcid, gold.outcome, gold.field)
            # every number under its gold outcome and arm (three-arm and four-arm papers among them)
            assert (row["outcome_name"], row["arm"]) == (gold.outcome_name, gold.arm), where
            arm_row = csv_rows[(f"{oracle.pmcid}.pdf", gold.outcome_name, gold.arm)]
            if where in (wrong_value, wrong_quote):
                assert row[f"{gold.field} status"].startswith("unverified"), where  # a check may flag it too
                continue
            assert arm_row[CSV_COLUMN[gold.field]] == gold.value, where
            assert row[gold.field] == gold.value, where
            # Quoted where the paper prints it as its outcome's and arm's: verified, no flag; a gold
            # number the paper prints nowhere so is quoted from elsewhere, and the checks say so.
            status = "verified" if gold.placed else "verified, flagged"
            assert row[f"{gold.field} status"] == status, (where, row[f"{gold.field} quote"])
            assert isinstance(row[f"{gold.field} page"], int)
            checked += 1
    assert checked == sum(len(o.gold) for o in oracles) - 2

    values = {
        (row["filename"], row["outcome"], row["field"]): row for row in _sheet_rows(str(batch["export_path"]), "Values")
    }
    pmcid, outcome, field = wrong_value
    assert values[(f"{pmcid}.pdf", outcome, field)]["reason"] == "value not in quote"
    pmcid, outcome, field = wrong_quote
    assert values[(f"{pmcid}.pdf", outcome, field)]["reason"].startswith("numbers differ from the source")
    documents = {row["filename"]: row for row in _sheet_rows(str(batch["export_path"]), "Documents")}
    for pmcid, *_ in (wrong_value, wrong_quote):
        assert documents[f"{pmcid}.pdf"]["values unverified"] >= 1
