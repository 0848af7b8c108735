"""Model answers paid for once: stored per (model, exact prompt) and reused by later batches.

Only the answer text is reused, never the grounded result: grounding and checks run again with
the current code on every reuse, so an improvement to them reaches old answers for free.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import batch_items, batches, model_answers
from extraction_pipeline.core.usage import Usage


@dataclass(frozen=True)
class StoredAnswer:
    key: str
    model: str
    content: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    item_id: int
    created_at: datetime
    cached_tokens: int = 0
    saved_usd: float = 0.0
    cache_written_tokens: int = 0

    @classmethod
    def paid(cls, key: str, content: str, usage: Usage, item_id: int) -> StoredAnswer:
        """The answer ``item_id``'s call just paid ``usage`` for."""
        return cls(
            key,
            usage.model,
            content,
            usage.tokens_in,
            usage.tokens_out,
            usage.cost_usd,
            item_id,
            utcnow(),
            usage.cached_tokens,
            usage.saved_usd,
            usage.cache_written_tokens,
        )


def answer_key(model: str, messages: list[dict[str, str]]) -> str:
    canonical = json.dumps([model, messages], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def own_answer_key(key: str, item_id: int) -> str:
    """Where an answer ``item_id`` paid for is kept when ``key`` already holds another document's
    answer (which that document's results may cite: it is never replaced by a provider batch)."""
    return hashlib.sha256(f"{key}/item/{item_id}".encode()).hexdigest()


def answer_for(ledger: Ledger, key: str, item_id: int) -> StoredAnswer | None:
    """The answer stored for ``key``: the one ``item_id`` paid for itself when there is one (kept
    under ``own_answer_key`` when another document's holds the key), else whoever's."""
    stored = stored_answer(ledger, key)
    if stored is not None and stored.item_id != item_id:
        own = stored_answer(ledger, own_answer_key(key, item_id))
        if own is not None:
            return replace(own, key=key)
    return stored


def stored_answer(ledger: Ledger, key: str) -> StoredAnswer | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(model_answers).where(model_answers.c.key == key)).mappings().first()
    return StoredAnswer(**row) if row else None


def store_answer(ledger: Ledger, answer: StoredAnswer) -> None:
    """Keep ``answer`` for its key, replacing an older one (a --fresh batch asked again)."""
    values = {**answer.__dict__, "created_at": utcnow()}
    for _ in range(2):
        try:
            with ledger.engine.begin() as conn:
                conn.execute(delete(model_answers).where(model_answers.c.key == answer.key))
                conn.execute(insert(model_answers).values(**values))
            return
        except IntegrityError:
            continue  # a concurrent run stored the same key between our delete and insert


def wants_fresh_answers(ledger: Ledger, item_id: int) -> bool:
    query = select(batches.c.fresh).join(batch_items, batch_items.c.batch_id == batches.c.id)
    with ledger.engine.connect() as conn:
        return bool(conn.execute(query.where(batch_items.c.id == item_id)).scalar())


def second_model_of(ledger: Ledger, item_id: int) -> tuple[str | None, str | None]:
    """The batch's (second model, adjudicator model) for double extraction; (None, None) without."""
    query = select(batches.c.second_model, batches.c.adjudicator_model).join(
        batch_items, batch_items.c.batch_id == batches.c.id
    )
    with ledger.engine.connect() as conn:
        row = conn.execute(query.where(batch_items.c.id == item_id)).first()
    return (row[0] or None, row[1] or None) if row else (None, None)
