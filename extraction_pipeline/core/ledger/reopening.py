"""Putting failed documents back to work inside their batch (``batch retry``).

An errored item goes back to ``pending`` in a new dispatch round; what it was (status, message,
attempts, run) is appended to ``item_history`` with who asked. The batch reopens, the dispatcher
launches a run per retried document, and the aggregator closes it again and writes a new workbook
version (the earlier one is kept). Retrying twice changes nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.id_lists import id_in
from extraction_pipeline.core.ledger.items import history_row
from extraction_pipeline.core.ledger.rows import BatchRow, item_row
from extraction_pipeline.core.ledger.schema import BatchStatus, ItemStatus, batch_items, batches, item_history
from extraction_pipeline.core.ledger.templates import latest_version


@dataclass(frozen=True)
class RetryReport:
    batch_id: int
    retried: list[int] = field(default_factory=list)  # document ids put back to pending
    not_in_error: list[int] = field(default_factory=list)  # named documents that were not in error
    reopened: bool = False


def _check_template(ledger: Ledger, batch: BatchRow, allow_superseded: bool) -> None:
    latest = latest_version(ledger, batch["project"])
    if allow_superseded or latest is None or batch["template_id"] in (None, latest.id):
        return
    raise ConfigError(
        f"batch {batch['id']} froze an older template of project {batch['project']!r} (now at v{latest.version}): "
        "retried documents would still use the batch's version; pass --allow-superseded-template to do that, "
        "or create a new batch to use the new one"
    )


def retry_failed(
    ledger: Ledger,
    batch_id: int,
    *,
    actor: str,
    document_ids: list[int] | None = None,
    allow_superseded: bool = False,
    launched_by_caller: bool = False,
) -> RetryReport:
    """Put the batch's errored items (all, or those of ``document_ids``) back to pending.

    ``launched_by_caller``: the caller is itself the run that will work on them (a re-execution
    from the Dagster UI), so they are recorded as dispatched and the dispatcher leaves them alone."""
    batch = get_batch(ledger, batch_id)
    if batch is None:
        raise ConfigError(f"unknown batch {batch_id}")
    if not actor.strip():
        raise ConfigError("a retry must name who asked for it (--user)")
    _check_template(ledger, batch, allow_superseded)
    where: list[Any] = [batch_items.c.batch_id == batch_id]
    if document_ids:
        where.append(id_in(batch_items.c.document_id, ledger.engine.dialect.name, document_ids))
    now = utcnow()
    retried: list[int] = []
    with ledger.engine.begin() as conn:
        items = [dict(row) for row in conn.execute(select(batch_items).where(*where)).mappings()]
        if document_ids:
            unknown = sorted(set(document_ids) - {item["document_id"] for item in items})
            if unknown:
                raise ConfigError(f"document(s) not in batch {batch_id}: {', '.join(map(str, unknown[:10]))}")
        for item in items:
            if item["status"] != ItemStatus.ERROR:
                continue
            moved = conn.execute(
                update(batch_items)
                .where(batch_items.c.id == item["id"], batch_items.c.status == ItemStatus.ERROR)
                .values(
                    status=ItemStatus.PENDING,
                    dispatched_at=now if launched_by_caller else None,
                    dispatched_by="run" if launched_by_caller else None,
                    dispatch_round=batch_items.c.dispatch_round + 1,
                    retry_round=batch_items.c.dispatch_round + 1,
                    failing_since=None,
                    finished_at=None,
                    message=f"retry requested by {actor[:100]}",
                    updated_at=now,
                )
            ).rowcount
            if moved:
                row = history_row(
                    item_row(item), "retry", ItemStatus.PENDING, f"retry requested by {actor}", actor, now
                )
                conn.execute(insert(item_history).values(**row))
                retried.append(item["document_id"])
        if retried:
            conn.execute(
                update(batches)
                .where(batches.c.id == batch_id)
                .values(
                    status=BatchStatus.OPEN,
                    completed_at=None,
                    export_path=None,
                    export_error=None,
                    export_attempts=0,
                    export_failed_at=None,
                )
            )
    not_in_error = [i["document_id"] for i in items if document_ids and i["document_id"] not in retried]
    return RetryReport(batch_id, retried=retried, not_in_error=not_in_error, reopened=bool(retried))
