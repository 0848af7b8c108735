"""Batches: idempotent creation and closing.

Creation never reads before writing: the INSERT either wins the UNIQUE idempotency key or fails
with an IntegrityError, after which the existing batch is returned. The batch and all its items
are written in one transaction, so a batch that exists always has every item.

Closing has two steps: ``open -> exporting`` once no document is pending or extracting, then
``exporting -> completed`` when its workbook is recorded. A failed workbook keeps the batch in
``exporting`` with the reason (``record_export_failure``) until an attempt succeeds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import DateTime, exists, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.id_lists import id_in, id_values
from extraction_pipeline.core.ledger.rows import BatchRow, batch_row
from extraction_pipeline.core.ledger.schema import (
    ACTIVE_ITEM_STATUSES,
    BatchOrigin,
    BatchStatus,
    ItemStatus,
    ProviderBatchPhase,
    batch_items,
    batches,
    documents,
)
from extraction_pipeline.core.ledger.templates import current_template

BATCH_RUN_TAG = "extraction/batch"  # the batch id, for people filtering the Runs page
BATCH_UID_RUN_TAG = "extraction/batch_uid"  # the batch uid, for matching runs to batches
MAX_KEY_CHARS = 200
MAX_EXPORT_ERROR_CHARS = 500


@dataclass(frozen=True)
class BatchRef:
    id: int
    created: bool


def create_batch(
    ledger: Ledger,
    *,
    idempotency_key: str,
    project: str,
    user: str,
    document_ids: list[int],
    origin: BatchOrigin = BatchOrigin.DISPATCH,
    origin_ref: str | None = None,
    fresh: bool = False,
    second_model: str | None = None,
    adjudicator_model: str | None = None,
    follow_up: bool = False,
    provider_batch: bool = False,
) -> BatchRef:
    """Create a batch of one pending item per document, or return the batch that already has
    this idempotency key (``created=False``). ``origin_ref``: the backfill or run id behind it.
    The batch freezes the project's current template version. ``fresh``: its documents are
    extracted by a new call even where the same prompt's answer was already paid for.
    ``follow_up``: outcomes the recall check lists as possibly missed are asked for again in one
    follow-up call per document. ``provider_batch``: its prompts go to the provider's batch API
    first (half price, answers within hours); its documents are dispatched once that has ended,
    and what it did not answer is asked by ordinary calls."""
    if (adjudicator_model or "").strip() and not (second_model or "").strip():
        raise ConfigError("an adjudicator model needs a second model: it settles their disagreements")
    if not idempotency_key or len(idempotency_key) > MAX_KEY_CHARS:
        raise ConfigError(f"idempotency key must be 1..{MAX_KEY_CHARS} characters")
    template_id = current_template(ledger, project).id
    unique_ids = list(dict.fromkeys(document_ids))
    now = utcnow()
    try:
        with ledger.engine.begin() as conn:
            status = BatchStatus.OPEN if unique_ids else BatchStatus.EXPORTING
            batch_id = conn.execute(
                insert(batches)
                .values(
                    idempotency_key=idempotency_key,
                    project=project,
                    user=user,
                    uid=uuid.uuid4().hex,
                    origin=origin,
                    origin_ref=origin_ref,
                    status=status,
                    total_items=len(unique_ids),
                    template_id=template_id,
                    fresh=1 if fresh else 0,
                    follow_up=1 if follow_up else 0,
                    provider_batch=ProviderBatchPhase.PREPARING if provider_batch and unique_ids else None,
                    second_model=(second_model or "").strip() or None,
                    adjudicator_model=(adjudicator_model or "").strip() or None,
                    created_at=now,
                    # An empty batch has nothing to wait for: it closes on creation (its workbook next).
                    completed_at=None if unique_ids else now,
                )
                .returning(batches.c.id)
            ).scalar_one()
            if unique_ids:
                # One INSERT ... SELECT over the ids sent as one parameter (see id_lists).
                ids = id_values(conn.dialect.name, unique_ids)
                item = {
                    "batch_id": literal(batch_id),
                    "document_id": ids,
                    "status": literal(ItemStatus.PENDING.value),
                    "attempts": literal(0),
                    "created_at": literal(now, DateTime),
                    "updated_at": literal(now, DateTime),
                    "tokens_in": literal(0),
                    "tokens_out": literal(0),
                    "cost_usd": literal(0.0),
                    "cached_tokens": literal(0),
                    "saved_usd": literal(0.0),
                    "cache_written_tokens": literal(0),
                    "dispatch_round": literal(0),
                    "retry_round": literal(0),
                }
                conn.execute(insert(batch_items).from_select(list(item), select(*item.values())))
        return BatchRef(id=batch_id, created=True)
    except IntegrityError:
        existing = find_batch_by_key(ledger, idempotency_key)
        if existing is None:  # the conflict was not on the key: an unknown document (foreign key)?
            missing = _missing_documents(ledger, unique_ids)
            if missing:
                raise ConfigError(f"unknown document id(s): {', '.join(map(str, missing[:10]))}") from None
            raise
        owner = get_batch(ledger, existing)
        if owner is not None and owner["project"] != project:
            # Same key, other project: returning that batch would silently hand over someone
            # else's work; the key is global, so the caller must choose another one.
            raise ConfigError(
                f"idempotency key {idempotency_key!r} already belongs to batch {existing} of project "
                f"{owner['project']!r}; use another key"
            ) from None
        return BatchRef(id=existing, created=False)


def _missing_documents(ledger: Ledger, document_ids: list[int]) -> list[int]:
    """Asked only after the items' foreign key refused the insert: checking 10,000 ids before
    every insert would cost each batch a query that almost never finds anything."""
    with ledger.engine.connect() as conn:
        wanted = id_in(documents.c.id, conn.dialect.name, document_ids)
        found = set(conn.execute(select(documents.c.id).where(wanted)).scalars())
    return [doc_id for doc_id in document_ids if doc_id not in found]


def find_batch_by_key(ledger: Ledger, idempotency_key: str) -> int | None:
    with ledger.engine.connect() as conn:
        return conn.execute(
            select(batches.c.id).where(batches.c.idempotency_key == idempotency_key)
        ).scalar_one_or_none()


def find_batch_by_uid(ledger: Ledger, uid: str) -> BatchRow | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(batches).where(batches.c.uid == uid)).mappings().first()
    return batch_row(row) if row else None


def get_batch(ledger: Ledger, batch_id: int) -> BatchRow | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(batches).where(batches.c.id == batch_id)).mappings().first()
    return batch_row(row) if row else None


def open_batches(ledger: Ledger) -> list[BatchRow]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(batches).where(batches.c.status == BatchStatus.OPEN).order_by(batches.c.id))
        return [batch_row(row) for row in rows.mappings()]


def active_count(ledger: Ledger, batch_id: int) -> int:
    """How many items of the batch are pending or extracting: a read (one index range), asked
    before the closing update by whoever might close it (the runs ask after every document they
    settle)."""
    still_active = select(func.count()).where(
        batch_items.c.batch_id == batch_id, batch_items.c.status.in_(ACTIVE_ITEM_STATUSES)
    )
    with ledger.engine.connect() as conn:
        return int(conn.execute(still_active).scalar_one())


def close_if_done(ledger: Ledger, batch_id: int) -> bool:
    """open -> exporting, only when no item is pending or extracting (checked in the same UPDATE)."""
    still_active = exists().where(
        batch_items.c.batch_id == batches.c.id, batch_items.c.status.in_(ACTIVE_ITEM_STATUSES)
    )
    statement = (
        update(batches)
        .where(batches.c.id == batch_id, batches.c.status == BatchStatus.OPEN, ~still_active)
        .values(status=BatchStatus.EXPORTING, completed_at=utcnow())
    )
    with ledger.engine.begin() as conn:
        return conn.execute(statement).rowcount == 1


def record_workbook(ledger: Ledger, batch_id: int, path: str, version: int) -> bool:
    """exporting -> completed with workbook ``version``. Refused (False) when the batch was
    reopened by `batch retry` meanwhile or another writer recorded this version first: the new
    workbook comes when it closes again, and a stale one never replaces it."""
    statement = (
        update(batches)
        .where(
            batches.c.id == batch_id,
            batches.c.status == BatchStatus.EXPORTING,
            batches.c.export_path.is_(None),
            batches.c.export_version == version - 1,
        )
        .values(
            status=BatchStatus.COMPLETED,
            export_path=path,
            export_version=version,
            export_error=None,
            export_failed_at=None,
        )
    )
    with ledger.engine.begin() as conn:
        return conn.execute(statement).rowcount == 1


def record_export_failure(ledger: Ledger, batch_id: int, reason: str) -> bool:
    """A failed attempt at the workbook of a batch in ``exporting``: the batch stays there, saying
    why, and the attempt is counted (the aggregator backs off by it). False: not exporting."""
    statement = (
        update(batches)
        .where(batches.c.id == batch_id, batches.c.status == BatchStatus.EXPORTING)
        .values(
            export_error=reason[:MAX_EXPORT_ERROR_CHARS],
            export_attempts=batches.c.export_attempts + 1,
            export_failed_at=utcnow(),
        )
    )
    with ledger.engine.begin() as conn:
        return conn.execute(statement).rowcount == 1


def describe_state(batch: BatchRow) -> str:
    """The batch's state in words, as every surface shows it (CLI, pages, Dagster metadata)."""
    status = batch["status"]
    if status == BatchStatus.EXPORTING:
        if batch.get("export_error"):
            attempts = int(batch.get("export_attempts") or 0)
            return (
                f"export failed: {batch['export_error']} "
                f"({attempts} attempt{'s' if attempts != 1 else ''}; retried automatically, or `batch export`)"
            )
        return "exporting: every document is finished, the workbook is being written"
    return str(status)
