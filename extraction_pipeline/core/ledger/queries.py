"""Read-side queries: progress, item listings for dispatch/reconcile/export, and history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select

from extraction_pipeline.core.ledger.database import Ledger
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.rows import (
    BatchRow,
    DocumentRow,
    ItemListing,
    batch_row,
    document_row,
    item_listing,
)
from extraction_pipeline.core.ledger.schema import (
    ACTIVE_ITEM_STATUSES,
    BatchOrigin,
    BatchStatus,
    ItemStatus,
    ProviderBatchPhase,
    batch_items,
    batches,
    documents,
    templates,
)


@dataclass(frozen=True)
class Progress:
    total: int
    pending: int
    extracting: int
    completed: int
    error: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    cached_tokens: int = 0  # of tokens_in, served from the provider's prompt cache
    saved_usd: float = (
        0.0  # against ordinary uncached calls: prompt caching and batch prices (negative: unread cache writes)
    )
    abandoned_calls: int = 0  # given up on after the timeout: the provider may have billed them
    cache_written_tokens: int = 0  # of tokens_in, written to the provider's prompt cache

    @property
    def done(self) -> int:
        return self.completed + self.error

    @property
    def percent(self) -> float:
        return 100.0 if self.total == 0 else round(100.0 * self.done / self.total, 1)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "percent": self.percent}


@dataclass(frozen=True)
class TokenRate:
    """A batch's tokens against the span of its extraction (first start to last finish)."""

    model: str
    tokens: int
    seconds: float

    @property
    def per_minute(self) -> float | None:
        return self.tokens / self.seconds * 60 if self.seconds > 0 else None


def token_rates(ledger: Ledger, batch_id: int) -> list[TokenRate]:
    """Per model, what the batch's finished documents used and over how long."""
    statement = (
        select(
            batch_items.c.model,
            func.coalesce(func.sum(batch_items.c.tokens_in + batch_items.c.tokens_out), 0),
            func.min(batch_items.c.started_at),
            func.max(batch_items.c.finished_at),
        )
        .where(batch_items.c.batch_id == batch_id, batch_items.c.model.is_not(None))
        .group_by(batch_items.c.model)
        .order_by(batch_items.c.model)
    )
    with ledger.engine.connect() as conn:
        rows = conn.execute(statement).all()
    return [
        TokenRate(str(model), int(tokens), (finished - started).total_seconds() if started and finished else 0.0)
        for model, tokens, started, finished in rows
    ]


def progress(ledger: Ledger, batch_id: int) -> Progress:
    """Counts per status and summed usage, from one grouped query (workers never write totals)."""
    statement = (
        select(
            batch_items.c.status,
            func.count(),
            func.coalesce(func.sum(batch_items.c.tokens_in), 0),
            func.coalesce(func.sum(batch_items.c.tokens_out), 0),
            func.coalesce(func.sum(batch_items.c.cost_usd), 0.0),
            func.coalesce(func.sum(batch_items.c.cached_tokens), 0),
            func.coalesce(func.sum(batch_items.c.saved_usd), 0.0),
            func.coalesce(func.sum(batch_items.c.abandoned_calls), 0),
            func.coalesce(func.sum(batch_items.c.cache_written_tokens), 0),
        )
        .where(batch_items.c.batch_id == batch_id)
        .group_by(batch_items.c.status)
    )
    counts = {status.value: 0 for status in ItemStatus}
    tokens_in = tokens_out = cached = abandoned = written = 0
    cost = saved = 0.0
    with ledger.engine.connect() as conn:
        for status, count, t_in, t_out, c, t_cached, s, gone, t_written in conn.execute(statement):
            abandoned += int(gone)
            written += int(t_written)
            counts[status] = int(count)
            tokens_in += int(t_in)
            tokens_out += int(t_out)
            cost += float(c)
            cached += int(t_cached)
            saved += float(s)
    return Progress(
        total=sum(counts.values()),
        pending=counts[ItemStatus.PENDING],
        extracting=counts[ItemStatus.EXTRACTING],
        completed=counts[ItemStatus.COMPLETED],
        error=counts[ItemStatus.ERROR],
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=round(cost, 6),
        cached_tokens=cached,
        saved_usd=round(saved, 6),
        abandoned_calls=abandoned,
        cache_written_tokens=written,
    )


@dataclass(frozen=True)
class ErrorReason:
    """Why documents of a batch are in error: one message and how many documents it stopped."""

    message: str
    documents: int


def error_reasons(ledger: Ledger, batch_id: int, limit: int = 5) -> list[ErrorReason]:
    """The batch's errors grouped by message, the most frequent first (what `batch status` tells)."""
    statement = (
        select(batch_items.c.message, func.count().label("documents"))
        .where(batch_items.c.batch_id == batch_id, batch_items.c.status == ItemStatus.ERROR.value)
        .group_by(batch_items.c.message)
        .order_by(func.count().desc(), batch_items.c.message)
        .limit(limit)
    )
    with ledger.engine.connect() as conn:
        return [ErrorReason(message or "(no message)", int(count)) for message, count in conn.execute(statement)]


def _item_rows(ledger: Ledger, *where: Any, limit: int | None = None, newest_first: bool = False) -> list[ItemListing]:
    statement = (
        select(
            batch_items,
            documents.c.filename,
            documents.c.project,
            documents.c.sha256,
            documents.c.pages,
            documents.c.stored_path,
            documents.c.partition_key,
            documents.c.first_author,
            documents.c.year,
            batches.c.user,
            batches.c.origin,
            batches.c.uid.label("batch_uid"),
        )
        .join(documents, documents.c.id == batch_items.c.document_id)
        .join(batches, batches.c.id == batch_items.c.batch_id)
        .where(*where)
        .order_by(batch_items.c.id.desc() if newest_first else batch_items.c.id)
    )
    if limit is not None:
        statement = statement.limit(limit)
    with ledger.engine.connect() as conn:
        return [item_listing(row) for row in conn.execute(statement).mappings()]


def batch_item_rows(ledger: Ledger, batch_id: int) -> list[ItemListing]:
    return _item_rows(ledger, batch_items.c.batch_id == batch_id)


def undispatched_items(ledger: Ledger, limit: int) -> list[ItemListing]:
    """Pending items of open batches that the dispatcher must launch and has not yet: those of
    command-line batches, and any item put back in the queue (a later dispatch round) whatever
    launched it first."""
    return _item_rows(
        ledger,
        batch_items.c.status == ItemStatus.PENDING,
        batch_items.c.dispatched_at.is_(None),
        or_(batches.c.origin == BatchOrigin.DISPATCH, batch_items.c.dispatch_round > 0),
        batches.c.status == "open",
        # A batch asked through the provider's batch API waits for it: its runs then find the
        # answers already paid for, and ask only what it did not answer.
        or_(batches.c.provider_batch.is_(None), batches.c.provider_batch == ProviderBatchPhase.ENDED),
        limit=limit,
    )


def active_items(ledger: Ledger, batch_id: int, *, document_ids: Sequence[int] | None = None) -> list[ItemListing]:
    """The batch's pending and extracting items; only those of ``document_ids`` when given."""
    where = [batch_items.c.batch_id == batch_id, batch_items.c.status.in_(ACTIVE_ITEM_STATUSES)]
    if document_ids is None:
        return _item_rows(ledger, *where)
    if not document_ids:
        return []
    return _item_rows(ledger, *where, id_in(batch_items.c.document_id, ledger.engine.dialect.name, document_ids))


def history(
    ledger: Ledger,
    *,
    user: str | None = None,
    status: str | None = None,
    filename: str | None = None,
    batch_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 200,
) -> list[ItemListing]:
    """Items, newest first, filtered by user, status, filename substring, batch and creation date."""
    where: list[Any] = []
    if user is not None:
        where.append(batches.c.user == user)
    if status is not None:
        where.append(batch_items.c.status == status)
    if filename is not None:
        # Parameterized LIKE; escape the user's wildcards so they match literally.
        escaped = filename.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append(documents.c.filename.ilike(f"%{escaped}%", escape="\\"))
    if batch_id is not None:
        where.append(batch_items.c.batch_id == batch_id)
    if since is not None:
        where.append(batch_items.c.created_at >= since)
    if until is not None:
        where.append(batch_items.c.created_at < until)
    return _item_rows(ledger, *where, limit=limit, newest_first=True)


def extracting_count(ledger: Ledger) -> int:
    """Documents being extracted now, in every batch and run of the instance (one index range)."""
    with ledger.engine.connect() as conn:
        statement = select(func.count()).where(batch_items.c.status == ItemStatus.EXTRACTING)
        return int(conn.execute(statement).scalar_one())


def last_settling_run(ledger: Ledger, batch_id: int) -> str | None:
    """The run that settled the batch's last document (the item finished last), if a run did:
    the one that closed the batch when it did so itself, writing its workbook."""
    statement = (
        select(batch_items.c.run_id)
        .where(batch_items.c.batch_id == batch_id, batch_items.c.finished_at.is_not(None))
        .order_by(batch_items.c.finished_at.desc(), batch_items.c.id.desc())
        .limit(1)
    )
    with ledger.engine.connect() as conn:
        return conn.execute(statement).scalar_one_or_none()


def unexported_batches(ledger: Ledger, limit: int = 1000) -> list[BatchRow]:
    """Closed batches whose workbook has not been written yet (``exporting``), oldest first."""
    statement = select(batches).where(batches.c.status == BatchStatus.EXPORTING).order_by(batches.c.id).limit(limit)
    with ledger.engine.connect() as conn:
        return [batch_row(row) for row in conn.execute(statement).mappings()]


def recent_batches(ledger: Ledger, limit: int = 200) -> list[BatchRow]:
    """Batches, newest first (the batches page)."""
    statement = select(batches).order_by(batches.c.id.desc()).limit(limit)
    with ledger.engine.connect() as conn:
        return [batch_row(row) for row in conn.execute(statement).mappings()]


def projects_overview(ledger: Ledger) -> list[dict[str, Any]]:
    """Every project (it has documents or a template), with its document count and template version."""
    with ledger.engine.connect() as conn:
        counts: dict[str, int] = dict(
            conn.execute(select(documents.c.project, func.count()).group_by(documents.c.project)).all()
        )
        versions: dict[str, int] = dict(
            conn.execute(select(templates.c.project, func.max(templates.c.version)).group_by(templates.c.project)).all()
        )
    return [
        {"project": name, "documents": counts.get(name, 0), "template_version": versions.get(name)}
        for name in sorted(set(counts) | set(versions))
    ]


def project_documents(ledger: Ledger, project: str) -> list[DocumentRow]:
    """A project's documents, oldest first."""
    statement = select(documents).where(documents.c.project == project).order_by(documents.c.id)
    with ledger.engine.connect() as conn:
        return [document_row(row) for row in conn.execute(statement).mappings()]
