"""What the ledger keeps of the jobs submitted to a provider's batch API (table ``provider_batches``)
for a batch of documents, and of each job's prompts (``provider_batch_entries``).

A batch created with ``provider_batch`` waits in phase ``preparing`` (its documents are not
dispatched) until its prompts are submitted (``submitted``). Each submission is noted before the
provider is asked (``record_intent``: its prompts and the key it is tagged with, the provider id
still ``SUBMITTING``) and completed with the provider's id the moment it is known
(``record_submitted``): an attempt that dies in between (a killed process, the database gone, a
create call whose answer never came) leaves the note, and the next one looks for the key at the
provider before sending anything again. Then the provider's batch ends (``ended``). Each answer
the provider wrote is stored as the answer already paid for its prompt (``model_answers``; under
the document's own key when another document's answer holds the prompt's), and its cost — at the batch
price — is counted on the document's item right then; the documents are then dispatched as usual,
and each run finds its answer instead of calling. What the provider failed, let expire or never
reached is asked by the run as an ordinary call: nothing is lost, only the discount.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, exists, insert, or_, select, update

from extraction_pipeline.core.ledger.answers import StoredAnswer, own_answer_key
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.items import usage_increments
from extraction_pipeline.core.ledger.rows import BatchRow, batch_row
from extraction_pipeline.core.ledger.schema import (
    BatchStatus,
    ProviderBatchPhase,
    batch_items,
    batches,
    model_answers,
    provider_batch_entries,
    provider_batches,
)
from extraction_pipeline.core.llm.batch_model import BatchAnswer
from extraction_pipeline.core.usage import Usage

MAX_MESSAGE_CHARS = 2000
NOT_SUBMITTED = "(none)"  # the provider id of a note on a batch whose prompts were never submitted
SUBMITTING = "(submitting)"  # the provider id of a submission noted before the provider was asked


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
    submission_key: str | None = None

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def unresolved(self) -> bool:
        """A submission noted here whose provider id is not known (asked, or about to be)."""
        return self.provider_batch_id == SUBMITTING

    def describe(self) -> str:
        """One line for `batch status` and the batch page."""
        if self.unresolved:
            if not self.ended:
                return f"submitting {self.requests} prompts to the provider's batch API ({self.model})"
            return (
                f"{self.requests} prompts not known to have reached the provider ({self.message}): "
                "asked as ordinary calls"
            )
        if not self.ended:
            return f"provider batch {self.provider_batch_id} ({self.model}): {self.status}, {self.requests} prompts"
        said = f" (the provider said: {self.message})" if self.message else ""
        return (
            f"provider batch {self.provider_batch_id} ({self.model}): {self.status}, {self.answered} of "
            f"{self.requests} answered at the batch price, {self.fallen_back} asked as ordinary calls{said}"
        )


@dataclass(frozen=True)
class Entry:
    """One prompt of a provider batch."""

    item_id: int
    custom_id: str
    answer_key: str


def provider_batch_phase(ledger: Ledger, batch_id: int) -> ProviderBatchPhase | None:
    """Where ``batch_id`` stands with the provider's batch API (None: a batch of ordinary calls)."""
    query = select(batches.c.provider_batch).where(batches.c.id == batch_id)
    with ledger.engine.connect() as conn:
        phase = conn.execute(query).scalar()
    return ProviderBatchPhase(phase) if phase else None


WAITING_PHASES = (ProviderBatchPhase.PREPARING, ProviderBatchPhase.SUBMITTED)


def batches_to_prepare(ledger: Ledger) -> list[BatchRow]:
    """Open batches whose prompts are still to be submitted."""
    query = select(batches).where(
        batches.c.provider_batch == ProviderBatchPhase.PREPARING, batches.c.status == BatchStatus.OPEN
    )
    with ledger.engine.connect() as conn:
        return [batch_row(row) for row in conn.execute(query.order_by(batches.c.id)).mappings()]


def record_intent(ledger: Ledger, *, batch_id: int, model: str, key: str, entries: list[Entry]) -> int | None:
    """Note a submission before the provider is asked: its prompts and the ``key`` it is tagged
    with, the provider id ``SUBMITTING`` (one transaction), only while the batch is still
    preparing: None when it is not (cancelled meanwhile: nothing is to be sent)."""
    return record_submission(
        ledger,
        batch_id=batch_id,
        model=model,
        provider_batch_id=SUBMITTING,
        input_file_id=None,
        status="submitting",
        entries=entries,
        submission_key=key,
    )


def record_submitted(
    ledger: Ledger,
    row_id: int,
    *,
    provider_batch_id: str,
    input_file_id: str | None,
    created_at: datetime | None = None,
) -> bool:
    """The provider took (or has, found by its key) the noted submission ``row_id``: keep its id
    and when the provider made it. False when the note was ended meanwhile (the batch was
    cancelled: the caller cancels what it just submitted) or another note already holds that
    provider batch (two attempts found the same one: it is followed once)."""
    other = provider_batches.alias("other")  # not the row updated: any row
    held = select(other.c.id).where(other.c.provider_batch_id == provider_batch_id)
    made = created_at.astimezone(UTC).replace(tzinfo=None) if created_at and created_at.tzinfo else created_at
    with ledger.engine.begin() as conn:
        return bool(
            conn.execute(
                update(provider_batches)
                .where(
                    provider_batches.c.id == row_id,
                    provider_batches.c.provider_batch_id == SUBMITTING,
                    provider_batches.c.ended_at.is_(None),
                    ~exists(held),
                )
                .values(
                    provider_batch_id=provider_batch_id,
                    input_file_id=input_file_id,
                    status="validating",
                    submitted_at=made or utcnow(),
                )
            ).rowcount
        )


def touch_intent(ledger: Ledger, row_id: int) -> None:
    """The noted submission is about to be sent (again): a batch made of it is looked for from now."""
    with ledger.engine.begin() as conn:
        conn.execute(
            update(provider_batches)
            .where(provider_batches.c.id == row_id, provider_batches.c.provider_batch_id == SUBMITTING)
            .values(submitted_at=utcnow())
        )


def drop_intent(ledger: Ledger, row_id: int) -> bool:
    """Forget a noted submission the provider refused (it has nothing of it): its prompts go to
    ordinary calls with the batch's note, as if never noted. False when it was no longer a note
    (another attempt kept a provider id for it meanwhile: it stays)."""
    with ledger.engine.begin() as conn:
        # Claimed by a conditional update first: it takes the row's lock, so a record_submitted
        # committing meanwhile is either seen here or finds the row gone.
        claimed = conn.execute(
            update(provider_batches)
            .where(
                provider_batches.c.id == row_id,
                provider_batches.c.provider_batch_id == SUBMITTING,
                provider_batches.c.ended_at.is_(None),
            )
            .values(status="refused")
        ).rowcount
        if not claimed:
            return False
        conn.execute(delete(provider_batch_entries).where(provider_batch_entries.c.provider_batch == row_id))
        conn.execute(delete(provider_batches).where(provider_batches.c.id == row_id))
    return True


def unresolved_submissions(ledger: Ledger, batch_id: int) -> list[ProviderBatchRecord]:
    """The batch's submissions noted and not known to the provider by id (an earlier attempt died
    between asking and keeping the answer), oldest first."""
    query = select(provider_batches).where(
        provider_batches.c.batch_id == batch_id,
        provider_batches.c.provider_batch_id == SUBMITTING,
        provider_batches.c.ended_at.is_(None),
    )
    with ledger.engine.connect() as conn:
        return [ProviderBatchRecord(**row) for row in conn.execute(query.order_by(provider_batches.c.id)).mappings()]


def known_provider_batch_ids(ledger: Ledger) -> frozenset[str]:
    """Every provider batch id this ledger follows or followed (never adopted a second time)."""
    query = select(provider_batches.c.provider_batch_id).where(
        provider_batches.c.provider_batch_id.not_in((SUBMITTING, NOT_SUBMITTED))
    )
    with ledger.engine.connect() as conn:
        return frozenset(str(found) for (found,) in conn.execute(query))


def record_submission(
    ledger: Ledger,
    *,
    batch_id: int,
    model: str,
    provider_batch_id: str,
    input_file_id: str | None,
    status: str,
    entries: list[Entry],
    submission_key: str | None = None,
) -> int | None:
    """Keep a provider batch (or a noted submission) and its prompts (one transaction: never one
    without the other), only while the batch is still preparing and none of the prompts is kept
    already: None when it is not preparing (cancelled meanwhile) or another attempt has noted one
    of them (two submit runs of one batch: the second sends nothing)."""
    with ledger.engine.begin() as conn:
        # The conditional update takes the batch's row: a cancel, or another attempt's note,
        # cannot slip in between.
        still = conn.execute(
            update(batches)
            .where(batches.c.id == batch_id, batches.c.provider_batch == ProviderBatchPhase.PREPARING)
            .values(provider_batch=ProviderBatchPhase.PREPARING)
        ).rowcount
        if not still:
            return None
        kept = conn.execute(
            select(provider_batch_entries.c.custom_id)
            .join(provider_batches, provider_batches.c.id == provider_batch_entries.c.provider_batch)
            .where(
                provider_batches.c.batch_id == batch_id,
                provider_batch_entries.c.custom_id.in_([entry.custom_id for entry in entries]),
            )
            .limit(1)
        ).first()
        if kept is not None:
            return None
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
                    submission_key=submission_key,
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


def finish_preparation(ledger: Ledger, batch_id: int, *, message: str | None = None) -> bool:
    """The batch's prompts are prepared (or that was given up): preparing -> submitted while any of
    its provider batches is still open, else -> ended (its documents are dispatched; nothing was
    submitted, the provider refused, or what was submitted has ended already). ``message`` is
    noted on the batch when no provider batch carries it. False: it was not preparing."""
    with ledger.engine.begin() as conn:
        # The batch's row first (a conditional update takes its lock, as record_submission's does):
        # a submission committing meanwhile is then either seen below or waits for this decision.
        preparing = conn.execute(
            update(batches)
            .where(batches.c.id == batch_id, batches.c.provider_batch == ProviderBatchPhase.PREPARING)
            .values(provider_batch=ProviderBatchPhase.PREPARING)
        ).rowcount
        if not preparing:
            return False
        phase = _phase_after_preparation(conn, batch_id)
        changed = conn.execute(
            update(batches)
            .where(batches.c.id == batch_id, batches.c.provider_batch == ProviderBatchPhase.PREPARING)
            .values(provider_batch=phase)
        ).rowcount
        if changed and message:
            now = utcnow()
            conn.execute(
                insert(provider_batches).values(
                    batch_id=batch_id,
                    model="",
                    provider_batch_id=NOT_SUBMITTED,
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


def _phase_after_preparation(conn: Connection, batch_id: int) -> ProviderBatchPhase:
    still_open = conn.execute(
        select(provider_batches.c.id).where(
            provider_batches.c.batch_id == batch_id, provider_batches.c.ended_at.is_(None)
        )
    ).first()
    return ProviderBatchPhase.SUBMITTED if still_open is not None else ProviderBatchPhase.ENDED


def end_waiting_without_open_batches(ledger: Ledger) -> list[int]:
    """Batches left ``submitted`` with no provider batch open (whatever ended them, a crash
    included) end their waiting: their documents are dispatched. The batches ended."""
    query = select(batches.c.id).where(batches.c.provider_batch == ProviderBatchPhase.SUBMITTED)
    ended = []
    with ledger.engine.begin() as conn:
        for (batch_id,) in conn.execute(query).all():
            if _phase_after_preparation(conn, batch_id) is ProviderBatchPhase.ENDED:
                conn.execute(
                    update(batches)
                    .where(batches.c.id == batch_id, batches.c.provider_batch == ProviderBatchPhase.SUBMITTED)
                    .values(provider_batch=ProviderBatchPhase.ENDED)
                )
                ended.append(int(batch_id))
    return ended


def submitted_custom_ids(ledger: Ledger, batch_id: int) -> set[str]:
    """The prompts of ``batch_id`` already with a provider (a retried submit sends them again never)."""
    query = (
        select(provider_batch_entries.c.custom_id)
        .join(provider_batches, provider_batches.c.id == provider_batch_entries.c.provider_batch)
        .where(provider_batches.c.batch_id == batch_id)
    )
    with ledger.engine.connect() as conn:
        return {str(custom_id) for (custom_id,) in conn.execute(query)}


def provider_batches_of(ledger: Ledger, batch_id: int) -> list[ProviderBatchRecord]:
    query = select(provider_batches).where(provider_batches.c.batch_id == batch_id).order_by(provider_batches.c.id)
    with ledger.engine.connect() as conn:
        return [ProviderBatchRecord(**row) for row in conn.execute(query).mappings()]


def open_provider_batches(ledger: Ledger, *, polled_before: datetime | None = None) -> list[ProviderBatchRecord]:
    """Submitted and not yet ended, oldest poll first; with ``polled_before``, only those not asked
    about since then (never asked counts as long ago). A noted submission whose batch is still
    preparing is its submit run's to settle, not listed here."""
    query = (
        select(provider_batches)
        .join(batches, batches.c.id == provider_batches.c.batch_id)
        .where(
            provider_batches.c.ended_at.is_(None),
            or_(
                provider_batches.c.provider_batch_id != SUBMITTING,
                batches.c.provider_batch != ProviderBatchPhase.PREPARING,
            ),
        )
    )
    if polled_before is not None:
        query = query.where(or_(provider_batches.c.polled_at.is_(None), provider_batches.c.polled_at < polled_before))
    with ledger.engine.connect() as conn:
        rows = [ProviderBatchRecord(**row) for row in conn.execute(query).mappings()]
    return sorted(rows, key=lambda r: r.polled_at or r.submitted_at)


def provider_batch_record(ledger: Ledger, row_id: int) -> ProviderBatchRecord | None:
    query = select(provider_batches).where(provider_batches.c.id == row_id)
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return ProviderBatchRecord(**row) if row else None


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
    answered: Sequence[BatchAnswer],
    fallen_back: dict[str, str],
    paid: dict[str, Usage] | None = None,
    message: str | None = None,
) -> bool:
    """The provider's batch has ended: store each answer as the one paid for its prompt, count its
    cost on its document's item (and ``paid``: what unusable answers cost, by custom id), note why
    the rest will be asked as ordinary calls, and end the batch's waiting once none of its provider
    batches is open. One transaction: all of it or none (a crash leaves the record open, asked
    again next time). False when another evaluation ended it first."""
    now = utcnow()
    entries = {entry.custom_id: entry for entry in entries_of(ledger, record.id)}
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
        for answer in answered:
            entry = entries.get(answer.custom_id)
            if entry is None:
                continue  # a line the provider invented: nothing of ours to store it for
            holder = conn.execute(
                select(model_answers.c.item_id).where(model_answers.c.key == entry.answer_key)
            ).scalar()
            # Another document's answer under the key stays as it is (its results may cite it):
            # this one is kept under the document's own key, where its run looks first.
            key = (
                entry.answer_key
                if holder is None or holder == entry.item_id
                else own_answer_key(entry.answer_key, entry.item_id)
            )
            stored = StoredAnswer.paid(key, answer.content, answer.usage, entry.item_id)
            conn.execute(delete(model_answers).where(model_answers.c.key == key))
            conn.execute(insert(model_answers).values(**{**stored.__dict__, "created_at": now}))
            conn.execute(
                update(batch_items).where(batch_items.c.id == entry.item_id).values(**usage_increments(answer.usage))
            )
            _mark(conn, record.id, answer.custom_id, "answered", None)
        for custom_id, reason in fallen_back.items():
            _mark(conn, record.id, custom_id, "fallen_back", reason)
            spent = (paid or {}).get(custom_id)
            if spent is not None and custom_id in entries:
                conn.execute(
                    update(batch_items)
                    .where(batch_items.c.id == entries[custom_id].item_id)
                    .values(**usage_increments(spent))
                )
        if _phase_after_preparation(conn, record.batch_id) is ProviderBatchPhase.ENDED:
            conn.execute(
                update(batches)
                .where(batches.c.id == record.batch_id, batches.c.provider_batch == ProviderBatchPhase.SUBMITTED)
                .values(provider_batch=ProviderBatchPhase.ENDED)
            )
    return True


def _mark(conn: Connection, row_id: int, custom_id: str, state: str, reason: str | None) -> None:
    conn.execute(
        update(provider_batch_entries)
        .where(provider_batch_entries.c.provider_batch == row_id, provider_batch_entries.c.custom_id == custom_id)
        .values(state=state, reason=reason[:MAX_MESSAGE_CHARS] if reason else None)
    )


def describe_provider_batches(ledger: Ledger, batch: BatchRow) -> list[str]:
    """What a batch sent through the provider's batch API waits for and what that did, one line
    each (empty for a batch of ordinary calls): for `batch status` and the batch page."""
    if batch["provider_batch"] is None:
        return []
    lines = [
        record.describe() if record.provider_batch_id != NOT_SUBMITTED else (record.message or "")
        for record in provider_batches_of(ledger, batch["id"])
    ]
    if batch["provider_batch"] == ProviderBatchPhase.PREPARING:
        lines.insert(0, "waiting for the provider's batch API: its prompts are being prepared and submitted")
    elif batch["provider_batch"] == ProviderBatchPhase.SUBMITTED:
        lines.insert(0, "waiting for the provider's batch API to answer (within 24 h): its documents run then")
    return [line for line in lines if line]
