"""One circuit breaker per model, kept in the ledger so every run process and the dispatcher
share it.

Workers report each transient provider failure and each success. While a breaker is open the
dispatcher launches no new extraction for that model, and running steps wait out the cooldown
instead of calling: a provider that is down is asked once per cooldown (the probe), not once per
document, so an outage does not burn every document's retry budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.backoff import BreakerPolicy
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import provider_breakers

MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class BreakerState:
    model: str
    failures: int
    failing_since: datetime | None
    open_until: datetime | None
    last_error: str | None

    def is_open(self, now: datetime | None = None) -> bool:
        return self.open_until is not None and self.open_until > (now or utcnow())

    def describe(self) -> str:
        since = self.failing_since.strftime("%Y-%m-%d %H:%M:%S UTC") if self.failing_since else "?"
        until = f"; new calls paused until {self.open_until:%H:%M:%S} UTC" if self.is_open() else ""
        last = f"{self.failures} failures, last: {self.last_error}"
        return f"waiting for the provider {self.model} since {since} ({last}){until}"


def record_failure(
    ledger: Ledger, model: str, error: str, *, policy: BreakerPolicy, retry_after: float | None = None
) -> BreakerState:
    """Count one more consecutive failure of ``model`` and open the breaker if the policy says so."""
    now = utcnow()
    error = error[:MAX_ERROR_CHARS]
    bump = (
        update(provider_breakers)
        .where(provider_breakers.c.model == model)
        .values(failures=provider_breakers.c.failures + 1, last_error=error, updated_at=now)
        .returning(provider_breakers.c.failures, provider_breakers.c.failing_since)
    )
    with ledger.engine.begin() as conn:
        row = conn.execute(bump).first()
        if row is not None:
            failures, since = int(row[0]), row[1] or now
        else:
            try:
                with conn.begin_nested():
                    conn.execute(
                        insert(provider_breakers).values(
                            model=model, failures=1, failing_since=now, last_error=error, updated_at=now
                        )
                    )
                failures, since = 1, now
            except IntegrityError:  # another worker created it first: count on top of theirs
                again = conn.execute(bump).one()
                failures, since = int(again[0]), again[1] or now
        cooldown = policy.cooldown(failures, retry_after)
        open_until = now + timedelta(seconds=cooldown) if cooldown else None
        if open_until is not None:
            conn.execute(
                update(provider_breakers)
                .where(provider_breakers.c.model == model)
                .values(open_until=open_until, failing_since=since)
            )
    return BreakerState(model, failures, since, open_until, error)


def may_call(ledger: Ledger, model: str, policy: BreakerPolicy) -> BreakerState | None:
    """None if a call to ``model`` may go ahead now; otherwise the open breaker to wait for.

    Closed (or fewer failures than the threshold): go ahead. Open: wait. Cooldown over
    (half-open): exactly one caller wins the probe — the conditional UPDATE pushes ``open_until``
    one cooldown ahead — and everyone else waits for its verdict."""
    state = breaker_state(ledger, model)
    if state is None:
        return None
    now = utcnow()
    if state.is_open(now):
        return state  # also opened by a single Retry-After
    if state.failures < policy.failures:
        return None
    cooldown = policy.cooldown(state.failures) or policy.base_cooldown_seconds
    until = now + timedelta(seconds=cooldown)
    probe = (
        update(provider_breakers)
        .where(
            provider_breakers.c.model == model,
            or_(provider_breakers.c.open_until.is_(None), provider_breakers.c.open_until <= now),
        )
        .values(open_until=until)
    )
    with ledger.engine.begin() as conn:
        won = conn.execute(probe).rowcount == 1
    return None if won else breaker_state(ledger, model)


def record_success(ledger: Ledger, model: str) -> None:
    """The provider answered: close the breaker (forget the streak)."""
    with ledger.engine.begin() as conn:
        conn.execute(delete(provider_breakers).where(provider_breakers.c.model == model))


def breaker_state(ledger: Ledger, model: str) -> BreakerState | None:
    """The model's breaker, or None when its provider is not failing."""
    with ledger.engine.connect() as conn:
        row = conn.execute(select(provider_breakers).where(provider_breakers.c.model == model)).mappings().first()
    if row is None:
        return None
    return BreakerState(row["model"], row["failures"], row["failing_since"], row["open_until"], row["last_error"])


def failing_providers(ledger: Ledger) -> list[BreakerState]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(provider_breakers).order_by(provider_breakers.c.model)).mappings().all()
    return [BreakerState(r["model"], r["failures"], r["failing_since"], r["open_until"], r["last_error"]) for r in rows]
