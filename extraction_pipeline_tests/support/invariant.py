"""The ledger/Dagster invariant (ARCHITECTURE.md, "Ledger and Dagster tell the same story"),
checked at the end of every fault drill.

For every item of a closed batch:
- it is terminal (``completed`` or ``error``) and no run of it is queued or in progress;
- ``completed`` ⇔ the run named on the item materialized ``extracted_document`` for the
  document's partition with status ``completed``, and ended SUCCESS unless a run-mate (another
  document of the same run) failed;
- ``error`` ⇒ no run of it ended SUCCESS (Dagster never shows success for a failed document);
- any other run of it that ended SUCCESS only re-confirmed the completed result ("already completed").
And the batch has a workbook with every document exactly once.
"""

from __future__ import annotations

import time

import dagster as dg
import openpyxl

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.documents import partition_key_of
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import BatchRow

TERMINAL = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
RUNS_END_SECONDS = 60.0


def _extraction_materializations(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """partition -> metadata status of the run's extracted_document materializations."""
    found: dict[str, str] = {}
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is None or materialization.asset_key != dg.AssetKey("extracted_document"):
            continue
        status = materialization.metadata.get("status")
        found[str(materialization.partition)] = str(status.value) if status is not None else ""
    return found


def run_partitions(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """The document partitions a run works on: its partition, or its range of them."""
    if "dagster/partition" in run.tags:
        return [run.tags["dagster/partition"]]
    start, end = run.tags.get("dagster/asset_partition_range_start"), run.tags.get("dagster/asset_partition_range_end")
    if start is None or end is None:
        return []
    keys = list(instance.get_dynamic_partitions("documents"))
    return keys[keys.index(start) : keys.index(end) + 1]


def batch_runs(instance: dg.DagsterInstance, batch: BatchRow) -> list[dg.DagsterRun]:
    runs = instance.get_runs(dg.RunsFilter(tags={"extraction/batch_uid": batch["uid"]}))
    return [run for run in runs if run.job_name != "export_batch"]


def wait_for_runs_to_end(instance: dg.DagsterInstance, batch: BatchRow, seconds: float = RUNS_END_SECONDS) -> None:
    """The run that settles a batch's last document closes it and writes its workbook before the
    run itself ends: the batch's story is told once its runs have ended, seconds later."""
    deadline = time.monotonic() + seconds
    while any(run.status not in TERMINAL for run in batch_runs(instance, batch)) and time.monotonic() < deadline:
        time.sleep(0.5)


def invariant_violations(ledger: Ledger, instance: dg.DagsterInstance, batch_id: int) -> list[str]:
    """Every way in which ledger and Dagster disagree about this batch (empty: they agree), once
    its runs have ended (or a minute has passed: a run still going then is a violation)."""
    problems: list[str] = []
    batch = get_batch(ledger, batch_id)
    assert batch is not None
    wait_for_runs_to_end(instance, batch)
    runs = batch_runs(instance, batch)
    for run in runs:
        if run.status not in TERMINAL:
            problems.append(f"run {run.run_id} is still {run.status.value}")
    covered = {run.run_id: run_partitions(instance, run) for run in runs}
    items = batch_item_rows(ledger, batch_id)
    for item in items:
        key = partition_key_of(item["document_id"], item["partition_key"])
        item_runs = [run for run in runs if key in covered[run.run_id]]
        succeeded = [run for run in item_runs if run.status == dg.DagsterRunStatus.SUCCESS]
        if item["status"] == "completed":
            holder = next((run for run in item_runs if run.run_id == item["run_id"]), None)
            alone = holder is not None and len(covered[holder.run_id]) == 1
            if holder is None or (alone and holder.status != dg.DagsterRunStatus.SUCCESS):
                problems.append(f"{key}: completed by run {item['run_id']}, which is {holder and holder.status.value}")
            elif _extraction_materializations(instance, holder.run_id).get(key) != "completed":
                problems.append(f"{key}: completed but run {holder.run_id} did not materialize it as completed")
            for run in succeeded:
                if run.run_id != item["run_id"]:
                    status = _extraction_materializations(instance, run.run_id).get(key)
                    if status != "already completed":
                        problems.append(f"{key}: second successful run {run.run_id} materialized it as {status!r}")
        elif item["status"] == "error":
            problems.extend(f"{key}: error in the ledger, run {run.run_id} SUCCESS in Dagster" for run in succeeded)
        else:
            problems.append(f"{key}: still {item['status']}")
    if batch["status"] != "completed":
        problems.append(f"batch is {batch['status']}")
    elif not batch["export_path"]:
        problems.append("batch closed without a workbook")
    else:
        sheet = openpyxl.load_workbook(batch["export_path"])["Documents"]
        header = [cell.value for cell in sheet[1]]
        column = header.index("document_id")
        in_workbook = sorted(row[column].value for row in sheet.iter_rows(min_row=2))
        if in_workbook != sorted(item["document_id"] for item in items):
            problems.append(f"workbook documents {in_workbook} != batch documents")
    return problems
