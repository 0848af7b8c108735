"""Which batch item a run works on, whatever launched it.

- runs from our dispatcher carry ``extraction/batch_uid`` (CLI batches);
- runs of a UI backfill carry ``dagster/backfill``: the backfill *is* the batch — one batch per
  project it touches (key ``backfill:<id>:<project>``), created idempotently with one item per
  targeted document of that project, so a backfill over two projects never mixes their templates;
- a single materialization from the UI becomes a one-document batch keyed by its run id.

The run is then tagged with batch, document, filename and user so the Runs page filters by them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._check import CheckError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import (
    BATCH_RUN_TAG,
    BATCH_UID_RUN_TAG,
    create_batch,
    find_batch_by_key,
    find_batch_by_uid,
    get_batch,
)
from extraction_pipeline.core.ledger.documents import document_id_from_partition, get_document, partition_key_of
from extraction_pipeline.core.ledger.items import find_item
from extraction_pipeline.core.ledger.reopening import retry_failed
from extraction_pipeline.core.ledger.rows import BatchRow, DocumentRow, ItemRow
from extraction_pipeline.core.ledger.schema import BatchOrigin, ItemStatus
from extraction_pipeline.core.runs.liveness import worker_stamp

BACKFILL_TAG = "dagster/backfill"
PARENT_RUN_TAG = "dagster/parent_run_id"
RETRY_NUMBER_TAG = "dagster/retry_number"  # set by Dagster's automatic run retries only
WORKER_TAG = "extraction/worker"  # host|boot id|pid|start tick of the process running the steps
USER_TAG = "extraction/user"
ITEM_TAG = "extraction/item"
DOCUMENT_TAG = "extraction/document"
# On a dispatcher run of several documents: their ids, comma-separated (the aggregator reads them).
DOCUMENTS_TAG = "extraction/documents"
FILENAME_TAG = "extraction/filename"
# Which dispatch round of its item a run belongs to (absent on a UI backfill's own runs: round 0).
ROUND_TAG = "extraction/round"
SECOND_MODEL_TAG = "extraction/second_model"  # on a UI launch: double extraction with this model
ADJUDICATOR_TAG = "extraction/adjudicator"  # with it: a third model suggests where the two disagree
FRESH_TAG = "extraction/fresh"  # "true" on a UI launch: ask the model again, never reuse a paid answer
FOLLOW_UP_TAG = "extraction/follow_up"  # "true" on a UI launch: ask again for outcomes the recall check lists
PROVIDER_BATCH_TAG = "extraction/provider_batch"  # "true" on a UI launch: first through the provider's batch API
DEFAULT_UI_USER = "ui"


@dataclass(frozen=True)
class Binding:
    batch_id: int
    item: ItemRow
    document: DocumentRow
    dispatch_round: int  # the item's round this run was launched for (0: the first launch)
    user: str  # the analyst whose batch it is


def backfill_partition_keys(instance: dg.DagsterInstance, backfill_id: str, asset_graph: Any) -> list[str]:
    """Every document partition a backfill targets (over all its assets, in order)."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is None:
        raise ConfigError(f"backfill {backfill_id} not found")
    if backfill.is_asset_backfill:
        data = backfill.get_asset_backfill_data(asset_graph)
        keys: dict[str, None] = {}
        for subset in data.target_subset.partitions_subsets_by_asset_key.values():
            keys.update(dict.fromkeys(subset.get_partition_keys()))
        return list(keys)
    return list(backfill.partition_names or [])


def backfill_batch_key(backfill_id: str, project: str) -> str:
    """One batch per (backfill, project): each project keeps its own template and workbook."""
    return f"backfill:{backfill_id}:{project}"


def ensure_backfill_batch(
    ledger: Ledger,
    instance: dg.DagsterInstance,
    backfill_id: str,
    asset_graph: Any,
    user: str,
    project: str,
    *,
    fresh: bool = False,
    second_model: str | None = None,
    adjudicator_model: str | None = None,
    follow_up: bool = False,
    provider_batch: bool = False,
) -> int:
    """The batch of a UI backfill for ``project``, created on first sight with one item per
    targeted document of that project (a backfill over two projects becomes two batches)."""
    key = backfill_batch_key(backfill_id, project)
    existing = find_batch_by_key(ledger, key)  # every run of the backfill asks: answer cheaply
    if existing is not None:
        return existing
    keys = backfill_partition_keys(instance, backfill_id, asset_graph)
    doc_ids = [doc_id for key in keys if (doc_id := document_id_from_partition(key)) is not None]
    own = [doc_id for doc_id in doc_ids if (doc := get_document(ledger, doc_id)) and doc["project"] == project]
    return create_batch(
        ledger,
        idempotency_key=key,
        project=project,
        user=user,
        document_ids=own,
        origin=BatchOrigin.BACKFILL,
        origin_ref=backfill_id,
        fresh=fresh,
        second_model=second_model,
        adjudicator_model=adjudicator_model,
        follow_up=follow_up,
        provider_batch=provider_batch,
    ).id


def _asset_graph(context: dg.AssetExecutionContext) -> Any:
    """The code location's asset graph; a run executed in-process outside a repository (as
    `dg.materialize` does) has none on its context, and its job's own assets answer."""
    try:
        return context.repository_def.asset_graph
    except CheckError:
        return context.job_def.asset_layer.asset_graph


def _batch_of_run(
    context: dg.AssetExecutionContext, ledger: Ledger, doc_id: int, project: str, run_keys: Sequence[str]
) -> BatchRow:
    tags = context.run.tags
    user = tags.get(USER_TAG) or DEFAULT_UI_USER
    if BATCH_UID_RUN_TAG in tags:
        batch = find_batch_by_uid(ledger, tags[BATCH_UID_RUN_TAG])
        if batch is None:
            raise dg.Failure(f"batch {tags[BATCH_UID_RUN_TAG]} is not in this ledger", allow_retries=False)
        return batch
    fresh = tags.get(FRESH_TAG, "").strip().lower() in ("true", "1", "yes")
    follow_up = tags.get(FOLLOW_UP_TAG, "").strip().lower() in ("true", "1", "yes")
    provider_batch = tags.get(PROVIDER_BATCH_TAG, "").strip().lower() in ("true", "1", "yes")
    second_model = tags.get(SECOND_MODEL_TAG, "").strip() or None
    adjudicator = tags.get(ADJUDICATOR_TAG, "").strip() or None if second_model else None
    if BACKFILL_TAG in tags:
        batch_id = ensure_backfill_batch(
            ledger,
            context.instance,
            tags[BACKFILL_TAG],
            _asset_graph(context),
            user,
            project,
            fresh=fresh,
            second_model=second_model,
            adjudicator_model=adjudicator,
            follow_up=follow_up,
            provider_batch=provider_batch,
        )
    else:
        # A run launched from the UI without a backfill: its documents are one batch.
        run_docs = [d for key in run_keys if (d := document_id_from_partition(key)) is not None]
        batch_id = create_batch(
            ledger,
            idempotency_key=f"run:{context.run.run_id}",
            project=project,
            user=user,
            document_ids=[d for d in run_docs if (doc := get_document(ledger, d)) and doc["project"] == project]
            or [doc_id],
            origin=BatchOrigin.RUN,
            origin_ref=context.run.run_id,
            fresh=fresh,
            second_model=second_model,
            adjudicator_model=adjudicator,
            follow_up=follow_up,
            provider_batch=provider_batch,
        ).id
    batch = get_batch(ledger, batch_id)
    assert batch is not None  # just created or found by its key
    return batch


def item_run_tags(
    *,
    batch_id: int,
    batch_uid: str,
    item_id: int,
    document_key: str,
    filename: str,
    user: str,
    several: bool = False,
) -> dict[str, str]:
    """The tags of a run working on a batch item: the Runs page filters on them. A run of
    ``several`` documents carries only batch and user; its documents are in its partition range
    and in each document's own materialization."""
    tags = {BATCH_RUN_TAG: str(batch_id), BATCH_UID_RUN_TAG: batch_uid, USER_TAG: user}
    if not several:
        tags.update({ITEM_TAG: str(item_id), DOCUMENT_TAG: document_key, FILENAME_TAG: filename[:200]})
    return tags


def bind_document(context: dg.AssetExecutionContext, ledger: Ledger, key: str, *, run_keys: Sequence[str]) -> Binding:
    """Find (or create) the batch item of document partition ``key`` of this run; raise
    dg.Failure with one clear line if impossible. A run may carry several documents
    (``run_keys``, the step's ``context.partition_keys`` read once: each read asks Dagster's
    storage again, behind a lock every thread of the run shares): each is bound on its own."""
    doc_id = document_id_from_partition(key)
    document = get_document(ledger, doc_id) if doc_id is not None else None
    if document is None or doc_id is None or partition_key_of(doc_id, document["partition_key"]) != key:
        raise dg.Failure(f"partition {key!r} is not a registered document", allow_retries=False)
    batch = _batch_of_run(context, ledger, doc_id, document["project"], run_keys)
    item = find_item(ledger, batch_id=batch["id"], document_id=doc_id)
    if item is None:
        raise dg.Failure(f"document {key} is not part of batch {batch['id']}", allow_retries=False)
    # Read fresh: a previous step of this run may have moved it to a new round (UI re-execution).
    stored = context.instance.get_run_by_id(context.run.run_id)
    round_tag = (stored.tags if stored else context.run.tags).get(ROUND_TAG, "0")
    dispatch_round = int(round_tag) if round_tag.isdigit() else 0
    if item["status"] == ItemStatus.ERROR and _reexecuted_by_a_person(context):
        item = _retry_from_ui(context, ledger, batch, item)
        dispatch_round = item["dispatch_round"]
    run_tags = item_run_tags(
        batch_id=batch["id"],
        batch_uid=batch["uid"],
        item_id=item["id"],
        filename=document["filename"],
        user=batch["user"],
        document_key=key,
        several=len(run_keys) > 1,
    )
    # Who works on it: run monitoring's health check finds this exact process by it.
    run_tags[WORKER_TAG] = worker_stamp()
    missing = {k: v for k, v in run_tags.items() if context.run.tags.get(k) != v}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)
    return Binding(
        batch_id=batch["id"], item=item, document=document, dispatch_round=dispatch_round, user=batch["user"]
    )


def _reexecuted_by_a_person(context: dg.AssetExecutionContext) -> bool:
    """A re-execution launched from the UI (Dagster's automatic retries carry a retry number)."""
    tags = context.run.tags
    return PARENT_RUN_TAG in tags and RETRY_NUMBER_TAG not in tags


def _retry_from_ui(context: dg.AssetExecutionContext, ledger: Ledger, batch: BatchRow, item: ItemRow) -> ItemRow:
    """Re-executing a failed run from the UI is the UI's `batch retry` for its document: the
    item goes back to pending (history kept), this run takes it, the batch reopens."""
    user = context.run.tags.get(USER_TAG) or DEFAULT_UI_USER
    retry_failed(
        ledger,
        batch["id"],
        actor=f"{user} (re-executed run {context.run.tags[PARENT_RUN_TAG]} in the Dagster UI)",
        document_ids=[item["document_id"]],
        allow_superseded=True,
        launched_by_caller=True,
    )
    refreshed = find_item(ledger, batch_id=batch["id"], document_id=item["document_id"])
    assert refreshed is not None  # it was there a moment ago; items are never deleted
    context.instance.add_run_tags(context.run.run_id, {ROUND_TAG: str(refreshed["dispatch_round"])})
    context.log.info(f"document {item['document_id']} of batch {batch['id']} retried: {refreshed['message']}")
    return refreshed


def crashed_parent_run(context: dg.AssetExecutionContext) -> str | None:
    """The parent run's id if this run retries a run that failed or was canceled (else None)."""
    parent_id = context.run.tags.get(PARENT_RUN_TAG)
    if not parent_id:
        return None
    parent = context.instance.get_run_by_id(parent_id)
    if parent is None or parent.status not in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED):
        return None
    return parent_id
