"""The prompt audit log: what exactly was sent to the model for each item."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import prompt_audit


def record_prompt(ledger: Ledger, *, item_id: int, run_id: str, model: str, messages: list[dict[str, str]]) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(
            insert(prompt_audit).values(
                item_id=item_id,
                run_id=run_id,
                model=model,
                messages_json=json.dumps(messages, ensure_ascii=False),
                created_at=utcnow(),
            )
        )


def prompts_for_item(ledger: Ledger, item_id: int) -> list[dict[str, Any]]:
    statement = select(prompt_audit).where(prompt_audit.c.item_id == item_id).order_by(prompt_audit.c.id)
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(statement).mappings()]
