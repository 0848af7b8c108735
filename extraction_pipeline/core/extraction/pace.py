"""How long a batch's calls take: the model's per-minute budget (the provider's tokens and
requests per minute, core/ledger/budgets.py) and the time the pool's documents took so far."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import desc, select

from extraction_pipeline.core.extraction.token_counts import HISTORY
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.budgets import get_budget
from extraction_pipeline.core.ledger.schema import batch_items


class LimitOrigin(StrEnum):
    CONFIGURED = "configured"  # the environment's (which every run states again), else the project page's
    LEARNED = "learned"  # from the provider's rate-limit headers
    BOTH = "both"  # configured, and the provider says the same


@dataclass(frozen=True)
class Limit:
    per_minute: int
    origin: LimitOrigin


@dataclass(frozen=True)
class CallBudget:
    """What a model's calls may spend per minute (None: not known). ``needed`` is False for the
    offline extractor, which waits for no provider."""

    tokens: Limit | None = None
    requests: Limit | None = None
    needed: bool = True

    @property
    def known(self) -> bool:
        return self.tokens is not None or self.requests is not None

    @property
    def tokens_per_minute(self) -> int | None:
        return self.tokens.per_minute if self.tokens else None

    @property
    def requests_per_minute(self) -> int | None:
        return self.requests.per_minute if self.requests else None

    def minutes(self, tokens: int, calls: int) -> float | None:
        """How long ``calls`` spending ``tokens`` (prompt and answer written: the rest of
        max_tokens is given back when the answer arrives, core/ledger/budgets.py) keep the budget
        busy; None when no budget is known."""
        tpm, rpm = self.tokens_per_minute, self.requests_per_minute
        if not tpm and not rpm:
            return None
        return max(tokens / tpm if tpm else 0.0, calls / rpm if rpm else 0.0)


NO_BUDGET_NEEDED = CallBudget(needed=False)


def call_budget(ledger: Ledger, model: str, pinned: tuple[int | None, int | None]) -> CallBudget:
    """The lower of the configured limit (``pinned``: the environment's, which every run states
    again, else the project page's) and the learned one, for tokens and for requests."""
    budget = get_budget(ledger, model)
    configured_tokens = pinned[0] or (budget.configured_tokens if budget else None)
    configured_requests = pinned[1] or (budget.configured_requests if budget else None)
    learned_tokens = budget.learned_tokens if budget else None
    learned_requests = budget.learned_requests if budget else None
    return CallBudget(
        tokens=_lower(configured_tokens, learned_tokens), requests=_lower(configured_requests, learned_requests)
    )


def _lower(configured: int | None, learned: int | None) -> Limit | None:
    value = min([v for v in (configured, learned) if v], default=None)
    if not value:
        return None
    if value == configured:
        return Limit(value, LimitOrigin.BOTH if value == learned else LimitOrigin.CONFIGURED)
    return Limit(value, LimitOrigin.LEARNED)


def seconds_per_document(ledger: Ledger, model: str) -> float | None:
    """The median time a document of this model took, claim to finish, over its latest finished
    documents (None: none yet): with the pool's slots, how long the calls keep the pool busy."""
    statement = (
        select(batch_items.c.started_at, batch_items.c.finished_at)
        .where(
            batch_items.c.model == model,
            batch_items.c.status == "completed",
            batch_items.c.started_at.is_not(None),
            batch_items.c.finished_at.is_not(None),
        )
        .order_by(desc(batch_items.c.finished_at))
        .limit(HISTORY)
    )
    with ledger.engine.connect() as conn:
        spans = [(finished - started).total_seconds() for started, finished in conn.execute(statement)]
    spans = [s for s in spans if s > 0]
    return float(statistics.median(spans)) if spans else None
