"""What the ledger keeps of batches asked through a provider's batch API.

A batch created with ``provider_batch`` waits in phase ``preparing`` (its documents are not
dispatched) until its prompts are submitted (``submitted``: the provider's batch id is stored the
moment it is known) and the provider's batch has ended (``ended``). Each answer the provider wrote is
stored as the answer already paid for its prompt (``model_answers``), and its cost — at the batch
price — is counted on the document's item right then; the documents are then dispatched as usual,
and each run finds its answer instead of calling. What the provider failed, let expire or never
reached is asked by the run as an ordinary call: nothing is lost, only the discount.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, or_, select, update

from extraction_pipeline.core.ledger.answers import StoredAnswer, store_answer
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.items import add_usage
from extraction_pipeline.core.ledger.rows import BatchRow, batch_row
from extraction_pipeline.core.ledger.schema import (
    BatchStatus,
    ProviderBatchPhase,
    batches,
    provider_batch_entries,
    provider_batches,
)
from extraction_pipeline.core.usage import Usage

MAX_MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class ProviderBatchRecord:
    id: int
    batch_id: int
    model: str
    provider_batch_id: str
    input_file_id: str | None
    status: str
    requests: int
    answered: int
    fallen_back: int
    message: str | None
    submitted_at: datetime
    polled_at: datetime | None
    ended_at: datetime | None

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def describe(self) -> str:
        """One line for `batch status` and the batch page."""
        if not self.ended:
            return f"provider batch {self.provider_batch_id} ({self.model}): {self.status}, {self.requests} prompts"
        return (
            f"provider batch {self.provider_batch_id} ({self.model}): {self.status}, {self.answered} of "
            f"{self.requests} answered at the batch price, {self.fallen_back} asked as ordinary calls"
        )


@dataclass(frozen=True)
class Entry:
    """One prompt of a provider batch."""

    item_id: int
    custom_id: str
    answer_key: str


@dataclass(frozen=True)
class Answered:
    """What the provider wrote for one prompt, priced at the batch price."""

    custom_id: str
    content: str
    usage: Usage


def batches_to_prepare(ledger: Ledger) -> list[BatchRow]:
    """Open batches whose prompts are still to be submitted."""
    query = select(batches).where(
        batches.c.provider_batch == ProviderBatchPhase.PREPARING, batches.c.status == BatchStatus.OPEN
    )
    with ledger.engine.connect() as conn:
        return [batch_row(row) for row in conn.execute(query.order_by(batches.c.id)).mappings()]


def record_submission(
    ledger: Ledger,
    *,
    batch_id: int,
    model: str,
    provider_batch_id: str,
    input_file_id: str | None,
    status: str,
    entries: list[Entry],
) -> int:
    """Keep the provider's batch id and its prompts (one transaction: never one without the other)."""
    with ledger.engine.begin() as conn:
        row_id = int(
            conn.execute(
                insert(provider_batches)
                .values(
                    batch_id=batch_id,
                    model=model,
                    provider_batch_id=provider_batch_id,
                    input_file_id=input_file_id,
                    status=status,
                    requests=len(entries),
                    answered=0,
                    fallen_back=0,
                    submitted_at=utcnow(),
                )
                .returning(provider_batches.c.id)
            ).scalar_one()
        )
        if entries:
            conn.execute(
                insert(provider_batch_entries),
                [
                    {
                        "provider_batch": row_id,
                        "item_id": entry.item_id,
                        "custom_id": entry.custom_id,
                        "answer_key": entry.answer_key,
                        "state": "submitted",
                    }
                    for entry in entries
                ],
            )
    return row_id


def finish_preparation(ledger: Ledger, batch_id: int, *, submitted: bool, message: str | None = None) -> bool:
    """preparing -> submitted (the provider has the prompts) or -> ended (nothing to submit, or the
    provider refused: the documents are asked by ordinary calls). ``message`` is noted on the
    batch's provider batches when there is none to carry it. False: it was not preparing."""
    phase = ProviderBatchPhase.SUBMITTED if submitted else ProviderBatchPhase.ENDED
    with ledger.engine.begin() as conn:
        changed = conn.execute(
            update(batches)
            .where(batches.c.id == batch_id, batches.c.provider_batch == ProviderBatchPhase.PREPARING)
            .values(provider_batch=phase)
        ).rowcount
        if changed and message and not submitted:
            now = utcnow()
            conn.execute(
                insert(provider_batches).values(
                    batch_id=batch_id,
                    model="",
                    provider_batch_id="(none)",
                    status="not submitted",
                    requests=0,
                    answered=0,
                    fallen_back=0,
                    message=message[:MAX_MESSAGE_CHARS],
                    submitted_at=now,
                    ended_at=now,
                )
            )
    return bool(changed)


def provider_batches_of(ledger: Ledger, batch_id: int) -> list[ProviderBatchRecord]:
    query = select(provider_batches).where(provider_batches.c.batch_id == batch_id).order_by(provider_batches.c.id)
    with ledger.engine.connect() as conn:
        return [ProviderBatchRecord(**row) for row in conn.execute(query).mappings()]


def open_provider_batches(ledger: Ledger, *, polled_before: datetime | None = None) -> list[ProviderBatchRecord]:
    """Submitted and not yet ended, oldest poll first; with ``polled_before``, only those not asked
    about since then (never asked counts as long ago)."""
    query = select(provider_batches).where(provider_batches.c.ended_at.is_(None))
    if polled_before is not None:
        query = query.where(or_(provider_batches.c.polled_at.is_(None), provider_batches.c.polled_at < polled_before))
    with ledger.engine.connect() as conn:
        rows = [ProviderBatchRecord(**row) for row in conn.execute(query).mappings()]
    return sorted(rows, key=lambda r: r.polled_at or r.submitted_at)


def entries_of(ledger: Ledger, row_id: int) -> list[Entry]:
    query = select(
        provider_batch_entries.c.item_id, provider_batch_entries.c.custom_id, provider_batch_entries.c.answer_key
    ).where(provider_batch_entries.c.provider_batch == row_id)
    with ledger.engine.connect() as conn:
        return [Entry(int(i), str(c), str(k)) for i, c, k in conn.execute(query.order_by(provider_batch_entries.c.id))]


def record_poll(ledger: Ledger, row_id: int, status: str) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(
            update(provider_batches).where(provider_batches.c.id == row_id).values(status=status, polled_at=utcnow())
        )


def record_end(
    ledger: Ledger,
    record: ProviderBatchRecord,
    *,
    status: str,
    answered: list[Answered],
    fallen_back: dict[str, str],
    message: str | None = None,
) -> bool:
    """The provider's batch has ended: store each answer as the one paid for its prompt, count its
    cost on its document's item, note why the rest will be asked as ordinary calls, and end the
    batch's waiting once none of its provider batches is open. Done once: False when another
    evaluation ended it first (nothing is stored or counted twice)."""
    now = utcnow()
    with ledger.engine.begin() as conn:
        claimed = conn.execute(
            update(provider_batches)
            .where(provider_batches.c.id == record.id, provider_batches.c.ended_at.is_(None))
            .values(
                status=status,
                polled_at=now,
                ended_at=now,
                answered=len(answered),
                fallen_back=len(fallen_back),
                message=(message or "")[:MAX_MESSAGE_CHARS] or None,
            )
        ).rowcount
    if not claimed:
        return False
    entries = {entry.custom_id: entry for entry in entries_of(ledger, record.id)}
    for answer in answered:
        entry = entries.get(answer.custom_id)
        if entry is None:
            continue  # a line the provider invented: nothing of ours to store it for
        store_answer(ledger, StoredAnswer.paid(entry.answer_key, answer.content, answer.usage, entry.item_id))
        add_usage(ledger, entry.item_id, answer.usage)
    with ledger.engine.begin() as conn:
        for answer in answered:
            conn.execute(
                update(provider_batch_entries)
                .where(
                    provider_batch_entries.c.provider_batch == record.id,
                    provider_batch_entries.c.custom_id == answer.custom_id,
                )
                .values(state="answered")
            )
        for custom_id, reason in fallen_back.items():
            conn.execute(
                update(provider_batch_entries)
                .where(
                    provider_batch_entries.c.provider_batch == record.id,
                    provider_batch_entries.c.custom_id == custom_id,
                )
                .values(state="fallen_back", reason=reason[:MAX_MESSAGE_CHARS])
            )
        still_open = conn.execute(
            select(provider_batches.c.id).where(
                provider_batches.c.batch_id == record.batch_id, provider_batches.c.ended_at.is_(None)
            )
        ).first()
        if still_open is None:
            conn.execute(
                update(batches)
                .where(batches.c.id == record.batch_id, batches.c.provider_batch == ProviderBatchPhase.SUBMITTED)
                .values(provider_batch=ProviderBatchPhase.ENDED)
            )
    return True


def describe_provider_batches(ledger: Ledger, batch: BatchRow) -> list[str]:
    """What a batch sent through the provider's batch API waits for and what that did, one line
    each (empty for a batch of ordinary calls): for `batch status` and the batch page."""
    if batch["provider_batch"] is None:
        return []
    lines = [
        record.describe() if record.provider_batch_id != "(none)" else (record.message or "")
        for record in provider_batches_of(ledger, batch["id"])
    ]
    if batch["provider_batch"] == ProviderBatchPhase.PREPARING:
        lines.insert(0, "waiting for the provider's batch API: its prompts are being prepared and submitted")
    elif batch["provider_batch"] == ProviderBatchPhase.SUBMITTED:
        lines.insert(0, "waiting for the provider's batch API to answer (within 24 h): its documents run then")
    return [line for line in lines if line]
