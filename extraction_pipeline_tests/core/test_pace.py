"""How long a batch's calls take (core/extraction/pace.py): the model's per-minute budget is the
lower of the configured and the learned limit, each said with where it comes from; the minutes
are the slower of its tokens and its requests."""

from __future__ import annotations

import pytest

from extraction_pipeline.core.extraction.pace import (
    NO_BUDGET_NEEDED,
    CallBudget,
    Limit,
    LimitOrigin,
    call_budget,
    seconds_per_document,
)
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.budgets import configure, learn
from extraction_pipeline.core.llm.rate_headers import RateLimits

MODEL = "openai/gpt-4o-mini"


def test_no_budget_is_known_until_configured_or_learned(ledger: Ledger) -> None:
    budget = call_budget(ledger, MODEL, (None, None))
    assert budget == CallBudget() and not budget.known and budget.needed
    assert budget.minutes(1_000_000, 1000) is None
    assert seconds_per_document(ledger, MODEL) is None  # no finished document yet


def test_the_lower_of_configured_and_learned_limits_applies(ledger: Ledger) -> None:
    assert call_budget(ledger, MODEL, (200_000, None)).tokens == Limit(200_000, LimitOrigin.CONFIGURED)
    configure(ledger, MODEL, tokens_per_minute=150_000, requests_per_minute=500)
    learn(ledger, MODEL, RateLimits(tokens_limit=100_000, requests_limit=500))
    budget = call_budget(ledger, MODEL, (None, None))
    assert budget.tokens == Limit(100_000, LimitOrigin.LEARNED)
    assert budget.requests == Limit(500, LimitOrigin.BOTH)
    assert (budget.tokens_per_minute, budget.requests_per_minute) == (100_000, 500)
    pinned = call_budget(ledger, MODEL, (50_000, None))  # the environment's, stated by every run
    assert pinned.tokens == Limit(50_000, LimitOrigin.CONFIGURED)


def test_the_minutes_are_the_slower_of_tokens_and_requests() -> None:
    budget = CallBudget(Limit(100_000, LimitOrigin.CONFIGURED), Limit(10, LimitOrigin.LEARNED))
    assert budget.minutes(50_000, 2) == pytest.approx(0.5)  # tokens are the slower
    assert budget.minutes(50_000, 20) == pytest.approx(2.0)  # requests are the slower
    assert CallBudget(tokens=Limit(1000, LimitOrigin.CONFIGURED)).minutes(3000, 99) == pytest.approx(3.0)
    assert not NO_BUDGET_NEEDED.needed and NO_BUDGET_NEEDED.minutes(1000, 1) is None
