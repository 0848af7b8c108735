"""One token and request budget per model, kept in the ledger so that every run and every worker
on any host spends the same budget: a call is sent when it fits, instead of being refused.

Why a shared budget: hosted providers meter tokens and requests per minute per account. Runs that
each find out by being refused (429) waste their retry budgets and leave the minute's tokens
unused while they back off. Here each call first reserves what it will count against the
provider's limit (its prompt and the answer's ``max_tokens``, as OpenAI counts them) and waits
until that fits; the unused part of the answer is given back when the answer arrives.

The budget is a generic cell rate: per model, ``tokens_ready_at`` is the moment everything
reserved so far will have been replenished, at the limit's rate. A reservation moves it forward
by its cost and may go when it is at most a minute ahead of now (one minute's allowance, the
burst a provider's bucket allows). Reservations take their place at once, in order, so a call
never starves behind later ones; every change is a compare-and-set on the row, safe across
processes and hosts on SQLite and PostgreSQL.

Limits come from configuration (``configure``) and from what the provider says on every answer
(``learn``: its limit, and its remaining tokens when they are fewer than ours); the lower applies.
Before the provider has said anything, the first call goes alone (a probe) and the others wait
for its answer: five calls sent blind at a 40,000 tokens/min account were two refusals at the
start of every batch. Once the provider has answered, unknown limits (a server that sends no
rate-limit headers) mean no waiting. What it said is trusted for ``LEARNED_FRESH_SECONDS``: a
batch started within a day of the last answer starts with the pool full (the probe cost a whole
call's latency with every slot idle); after that, limits the provider may have changed (a new
tier, another client on the account) are asked again by one call.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import PermanentError, TransientError
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import provider_budgets
from extraction_pipeline.core.llm.rate_headers import RateLimits, read_rate_limits

WINDOW_SECONDS = 60.0
# A probe's claim lapses after this long (its call failed without telling, or its worker died):
# the next call probes instead. Longer than most answers, far shorter than a batch.
PROBE_SECONDS = 30.0
PROBE_POLL_SECONDS = 1.0
# What the provider said (its limits, or that it tells none) is trusted this long after it last
# said it. Every answer with rate-limit headers says it again, so only a pause this long between
# batches makes the next batch's first call a probe.
LEARNED_FRESH_SECONDS = 24 * 3600.0
# Under contention (many workers moving one model's row), a compare-and-set is retried at once a
# few times, then after short random pauses, for this long; then the call is retried later
# (TransientError): contention is other calls going ahead, never a reason to fail a document.
_AT_ONCE = 10
_LONGEST_PAUSE = 0.5
CONTENTION_SECONDS = 60.0
# What is only bookkeeping (giving back unused tokens, learning a limit) tries for this long.
BEST_EFFORT_SECONDS = 2.0


@dataclass(frozen=True)
class Budget:
    model: str
    tokens_per_minute: int | None  # the limit that applies (the lower of configured and learned)
    requests_per_minute: int | None
    configured_tokens: int | None = None
    configured_requests: int | None = None
    learned_tokens: int | None = None
    learned_requests: int | None = None
    tokens_ready_at: float = 0.0
    requests_ready_at: float = 0.0
    paused_until: float = 0.0
    probe_until: float = 0.0
    answers_seen: int = 0
    # Output tokens metered apart (Anthropic): then ``tokens_per_minute`` counts input tokens only.
    output_tokens_per_minute: int | None = None
    output_ready_at: float = 0.0
    heard_at: float = 0.0  # when the provider last said its limits (epoch seconds)

    def stale(self, now: float) -> bool:
        """Whether what the provider said is too old to trust (``LEARNED_FRESH_SECONDS``) and
        nothing configured stands in for it: with a configured limit, the lower of it and the
        learned one keeps applying (forgetting a lower learned limit would send a burst the
        provider refuses), and every answer corrects it."""
        configured = self.configured_tokens or self.configured_requests
        return not configured and self.answers_seen > 0 and self.heard_at < now - LEARNED_FRESH_SECONDS

    def forgetting_learned(self) -> Budget:
        """This budget as if the provider had never answered (``stale``: nothing configured)."""
        return replace(
            self,
            tokens_per_minute=None,
            requests_per_minute=None,
            learned_tokens=None,
            learned_requests=None,
            output_tokens_per_minute=None,
            answers_seen=0,
        )

    @property
    def known(self) -> bool:
        return bool(self.tokens_per_minute or self.requests_per_minute or self.output_tokens_per_minute)

    def tokens_in_use(self, now: float) -> int:
        """Tokens of the last minute's allowance reserved and not yet replenished."""
        if not self.tokens_per_minute:
            return 0
        ahead = min(max(0.0, self.tokens_ready_at - now), WINDOW_SECONDS)
        return round(ahead / WINDOW_SECONDS * self.tokens_per_minute)

    def describe(self, now: float) -> str:
        parts = []
        if self.tokens_per_minute:
            parts.append(f"{_k(self.tokens_in_use(now))} of {_k(self.tokens_per_minute)} tokens/min in use")
        if self.requests_per_minute:
            parts.append(f"{self.requests_per_minute} requests/min")
        return f"{self.model}'s budget: {', '.join(parts) or 'no limit known'}"


@dataclass(frozen=True)
class Reservation:
    """What one call reserved, and how long it must wait before it may be sent."""

    model: str
    tokens: int
    wait_seconds: float
    budget: Budget | None  # None: no limit known, nothing reserved
    again: bool = False  # another call is probing the provider: wait, then ask again
    probe: bool = False  # this call is the probe: its answer tells the provider's limits
    output: int = 0  # of ``tokens``, those reserved on the output budget (a provider metering them apart)


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 10_000 else str(tokens)


def _lower(a: int | None, b: int | None) -> int | None:
    known = [v for v in (a, b) if v]
    return min(known) if known else None


def _budget(row: object) -> Budget:
    r = row._mapping  # type: ignore[attr-defined]
    return Budget(
        model=r["model"],
        tokens_per_minute=_lower(r["configured_tokens_per_minute"], r["learned_tokens_per_minute"]),
        requests_per_minute=_lower(r["configured_requests_per_minute"], r["learned_requests_per_minute"]),
        configured_tokens=r["configured_tokens_per_minute"],
        configured_requests=r["configured_requests_per_minute"],
        learned_tokens=r["learned_tokens_per_minute"],
        learned_requests=r["learned_requests_per_minute"],
        tokens_ready_at=float(r["tokens_ready_at"]),
        requests_ready_at=float(r["requests_ready_at"]),
        paused_until=float(r["paused_until"] or 0.0),
        probe_until=float(r["probe_until"] or 0.0),
        answers_seen=int(r["answers_seen"] or 0),
        output_tokens_per_minute=r["learned_output_tokens_per_minute"] or None,
        output_ready_at=float(r["output_ready_at"] or 0.0),
        heard_at=float(r["heard_at"] or 0.0),
    )


def get_budget(ledger: Ledger, model: str) -> Budget | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(provider_budgets).where(provider_budgets.c.model == model)).first()
    return _budget(row) if row is not None else None


def all_budgets(ledger: Ledger) -> list[Budget]:
    """Every model's budget, by model string."""
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(provider_budgets).order_by(provider_budgets.c.model)).all()
    return [_budget(row) for row in rows]


def _ensure_row(ledger: Ledger, model: str) -> None:
    with ledger.engine.begin() as conn:
        exists = conn.execute(select(provider_budgets.c.model).where(provider_budgets.c.model == model)).first()
        if exists is not None:
            return
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(provider_budgets).values(
                        model=model,
                        tokens_ready_at=0.0,
                        requests_ready_at=0.0,
                        paused_until=0.0,
                        probe_until=0.0,
                        answers_seen=0,
                        output_ready_at=0.0,
                        heard_at=0.0,
                        updated_at=utcnow(),
                    )
                )
        except IntegrityError:  # another process created it first
            pass


def waiting_budgets(ledger: Ledger, now: float | None = None) -> list[str]:
    """What calls are waiting for right now, in words: each model whose budget has calls queued
    past this minute's allowance, or whose provider asked to wait."""
    at = time.time() if now is None else now
    said = []
    for budget in all_budgets(ledger):
        if budget.paused_until > at:
            until = time.strftime("%H:%M:%S", time.gmtime(budget.paused_until))
            said.append(f"waiting for {budget.model}: the provider asked for no calls before {until} UTC")
        elif budget.tokens_per_minute and budget.tokens_ready_at - at > WINDOW_SECONDS:
            used, limit = _k(budget.tokens_in_use(at)), _k(budget.tokens_per_minute)
            said.append(f"waiting for {budget.model}'s token budget: {used} of {limit} tokens/min in use")
        elif budget.requests_per_minute and budget.requests_ready_at - at > WINDOW_SECONDS:
            said.append(f"waiting for {budget.model}'s request budget: {budget.requests_per_minute} requests/min")
        elif budget.output_tokens_per_minute and budget.output_ready_at - at > WINDOW_SECONDS:
            said.append(
                f"waiting for {budget.model}'s output token budget: {_k(budget.output_tokens_per_minute)} tokens/min"
            )
    return said


def what_calls_wait_for(ledger: Ledger) -> list[str]:
    """What an open batch's documents wait for, in words: each failing provider (since when) and
    each budget with calls queued (``waiting_budgets``)."""
    from extraction_pipeline.core.ledger.breakers import failing_providers

    return [state.describe() for state in failing_providers(ledger)] + waiting_budgets(ledger)


def configure(ledger: Ledger, model: str, *, tokens_per_minute: int | None, requests_per_minute: int | None) -> Budget:
    """The user's limits for ``model`` (None: none of theirs; the provider's still apply)."""
    for value in (tokens_per_minute, requests_per_minute):
        if value is not None and value < 1:
            raise PermanentError(f"a budget must be at least 1 per minute, not {value}")
    _ensure_row(ledger, model)
    with ledger.engine.begin() as conn:
        conn.execute(
            update(provider_budgets)
            .where(provider_budgets.c.model == model)
            .values(
                configured_tokens_per_minute=tokens_per_minute,
                configured_requests_per_minute=requests_per_minute,
                updated_at=utcnow(),
            )
        )
    found = get_budget(ledger, model)
    assert found is not None
    return found


def _compare_and_set(
    ledger: Ledger,
    budget: Budget,
    tokens_ready_at: float,
    requests_ready_at: float,
    output_ready_at: float | None = None,
    **learned: float | None,
) -> bool:
    """Move the budget from the state ``budget`` was read in (False: another call moved it first)."""
    with ledger.engine.begin() as conn:
        moved = conn.execute(
            update(provider_budgets)
            .where(
                provider_budgets.c.model == budget.model,
                provider_budgets.c.tokens_ready_at == budget.tokens_ready_at,
                provider_budgets.c.requests_ready_at == budget.requests_ready_at,
                provider_budgets.c.output_ready_at == budget.output_ready_at,
            )
            .values(
                tokens_ready_at=tokens_ready_at,
                requests_ready_at=requests_ready_at,
                output_ready_at=budget.output_ready_at if output_ready_at is None else output_ready_at,
                updated_at=utcnow(),
                **learned,
            )
        )
    return moved.rowcount == 1


def _attempts(seconds: float | None = None) -> Iterator[int]:
    """Compare-and-set attempts: a few at once, then after growing random pauses (at most half a
    second), until ``seconds`` (``CONTENTION_SECONDS``) have passed."""
    deadline = time.monotonic() + (CONTENTION_SECONDS if seconds is None else seconds)
    attempt = 0
    while attempt < _AT_ONCE or time.monotonic() < deadline:
        if attempt >= _AT_ONCE:
            pause = min(_LONGEST_PAUSE, 0.005 * 2 ** min(attempt - _AT_ONCE, 20))
            time.sleep(random.uniform(0, pause))  # noqa: S311  (jitter)
        yield attempt
        attempt += 1


def reserve(
    ledger: Ledger, model: str, tokens: int | Callable[[], int], *, output: int = 0, now: float | None = None
) -> Reservation:
    """Reserve ``tokens`` and one request of ``model``'s budget: how long to wait before sending.
    ``tokens`` may be a callable, asked only when a limit is known. ``output``: of those, the
    answer's ``max_tokens``, reserved on the output budget where the provider meters output apart
    (then only the rest counts against ``tokens_per_minute``). A call larger than a whole minute's
    allowance can never fit and is refused with the reason."""
    for _ in _attempts():
        budget = get_budget(ledger, model)
        at = time.time() if now is None else now
        if budget is not None and budget.stale(at):
            budget = budget.forgetting_learned()
        if budget is None or (not budget.known and budget.answers_seen == 0):
            return _probe(ledger, model, budget, at)
        if not budget.known:  # the provider tells no limit: only a refusal's pause holds calls
            return Reservation(model, 0, max(0.0, budget.paused_until - at), None)
        if callable(tokens):
            tokens = tokens()
        tokens_at, requests_at, output_at = budget.tokens_ready_at, budget.requests_ready_at, budget.output_ready_at
        apart = output if budget.output_tokens_per_minute and 0 < output <= tokens else 0
        counted = tokens - apart  # what counts against tokens_per_minute
        wait = budget.paused_until - at  # the provider's Retry-After, if it refused lately
        if budget.tokens_per_minute:
            if counted > budget.tokens_per_minute:
                raise PermanentError(
                    f"one call to {model} needs about {counted} tokens, more than its whole budget of "
                    f"{budget.tokens_per_minute} tokens/min: the provider would refuse it every time "
                    "(raise the budget, lower EXTRACTION_OUTPUT_TOKENS, or use a model with a larger budget)"
                )
            tokens_at = max(tokens_at, at) + counted * WINDOW_SECONDS / budget.tokens_per_minute
            wait = max(wait, tokens_at - at - WINDOW_SECONDS)
        if apart and budget.output_tokens_per_minute:
            if apart > budget.output_tokens_per_minute:
                raise PermanentError(
                    f"one call to {model} asks for an answer of up to {apart} tokens, more than its whole output "
                    f"budget of {budget.output_tokens_per_minute} tokens/min: the provider would refuse it every "
                    "time (lower EXTRACTION_OUTPUT_TOKENS, or use an account with a larger output budget)"
                )
            output_at = max(output_at, at) + apart * WINDOW_SECONDS / budget.output_tokens_per_minute
            wait = max(wait, output_at - at - WINDOW_SECONDS)
        if budget.requests_per_minute:
            requests_at = max(requests_at, at) + WINDOW_SECONDS / budget.requests_per_minute
            wait = max(wait, requests_at - at - WINDOW_SECONDS)
        if _compare_and_set(ledger, budget, tokens_at, requests_at, output_at):
            return Reservation(model, tokens, max(0.0, wait), budget, output=apart)
    raise TransientError(
        f"could not reserve {model}'s budget for {CONTENTION_SECONDS:.0f} s: other calls kept moving it; "
        "the call is retried later"
    )


def _probe(ledger: Ledger, model: str, budget: Budget | None, at: float) -> Reservation:
    """Nothing heard from the provider yet: this call goes alone and tells its limits, unless
    another call already does (then wait for it, and ask again)."""
    _ensure_row(ledger, model)
    pause = max(0.0, budget.paused_until - at) if budget else 0.0
    with ledger.engine.begin() as conn:
        claimed = conn.execute(
            update(provider_budgets)
            .where(
                provider_budgets.c.model == model,
                or_(provider_budgets.c.answers_seen == 0, provider_budgets.c.heard_at < at - LEARNED_FRESH_SECONDS),
                provider_budgets.c.probe_until <= at,
            )
            .values(probe_until=at + pause + PROBE_SECONDS, updated_at=utcnow())
        ).rowcount
    if claimed == 1:
        return Reservation(model, 0, pause, None, probe=True)
    return Reservation(model, 0, PROBE_POLL_SECONDS, None, again=True)


def _heard(ledger: Ledger, model: str, *, spoke: bool) -> None:
    """A call came back: its probe claim is released, and when the provider said something (an
    answer, or a refusal with its limits) calls no longer wait for a probe."""
    values: dict[str, Any] = {"probe_until": 0.0, "updated_at": utcnow()}
    if spoke:
        values["answers_seen"] = provider_budgets.c.answers_seen + 1
        values["heard_at"] = time.time()
    with ledger.engine.begin() as conn:
        conn.execute(update(provider_budgets).where(provider_budgets.c.model == model).values(**values))


def settle(
    ledger: Ledger,
    reservation: Reservation,
    used_tokens: int | None,
    used_output: int | None = None,
    *,
    tokens: bool = True,
    output: bool = True,
) -> None:
    """The answer came: give back what it reserved and did not use (``used_tokens`` None: the
    call was not counted, e.g. refused before it ran, so all of it). ``used_output``: of
    ``used_tokens``, the answer's, given back to the output budget where it was reserved apart
    (as the provider adjusts its own estimate when the answer ends). ``tokens`` / ``output``:
    which of the two budgets to give back to."""
    if reservation.budget is None:
        return
    if used_tokens is None:
        unused_in, unused_out = reservation.tokens - reservation.output, reservation.output
    elif reservation.output:
        answer = used_output if used_output is not None else reservation.output
        unused_out = reservation.output - answer
        unused_in = (reservation.tokens - reservation.output) - (used_tokens - answer)
    else:
        unused_in, unused_out = reservation.tokens - used_tokens, 0
    unused_in, unused_out = (unused_in if tokens else 0), (unused_out if output else 0)
    if unused_in <= 0 and unused_out <= 0:
        return
    for _ in _attempts(BEST_EFFORT_SECONDS):
        budget = get_budget(ledger, reservation.model)
        if budget is None:
            return
        back_in = unused_in * WINDOW_SECONDS / budget.tokens_per_minute if budget.tokens_per_minute else 0.0
        otpm = budget.output_tokens_per_minute
        back_out = unused_out * WINDOW_SECONDS / otpm if otpm and unused_out > 0 else 0.0
        if back_in <= 0 and back_out <= 0:
            return
        if _compare_and_set(
            ledger,
            budget,
            budget.tokens_ready_at - max(0.0, back_in),
            budget.requests_ready_at,
            budget.output_ready_at - back_out,
        ):
            return


def learn(ledger: Ledger, model: str, limits: RateLimits, *, now: float | None = None) -> None:
    """What the provider said: its limits become the learned ones, and when it has fewer tokens
    (or requests) left than this budget thinks, the budget moves to match (another client on the
    same account, or calls this budget did not see)."""
    if limits.empty:
        return
    at = time.time() if now is None else now
    _ensure_row(ledger, model)
    for _ in _attempts(BEST_EFFORT_SECONDS):
        budget = get_budget(ledger, model)
        assert budget is not None
        learned_tokens = limits.tokens_limit or budget.learned_tokens
        learned_requests = limits.requests_limit or budget.learned_requests
        learned_output = limits.output_tokens_limit or budget.output_tokens_per_minute
        tokens_at, requests_at, output_at = budget.tokens_ready_at, budget.requests_ready_at, budget.output_ready_at
        tpm = _lower(budget.configured_tokens, learned_tokens)
        rpm = _lower(budget.configured_requests, learned_requests)
        if tpm and limits.tokens_remaining is not None and limits.tokens_limit:
            spent = max(0, limits.tokens_limit - limits.tokens_remaining)
            tokens_at = max(tokens_at, at + spent * WINDOW_SECONDS / limits.tokens_limit)
        if rpm and limits.requests_remaining is not None and limits.requests_limit:
            spent = max(0, limits.requests_limit - limits.requests_remaining)
            requests_at = max(requests_at, at + spent * WINDOW_SECONDS / limits.requests_limit)
        if learned_output and limits.output_tokens_remaining is not None and limits.output_tokens_limit:
            spent = max(0, limits.output_tokens_limit - limits.output_tokens_remaining)
            output_at = max(output_at, at + spent * WINDOW_SECONDS / limits.output_tokens_limit)
        if _compare_and_set(
            ledger,
            budget,
            tokens_at,
            requests_at,
            output_at,
            learned_tokens_per_minute=learned_tokens,
            learned_requests_per_minute=learned_requests,
            learned_output_tokens_per_minute=learned_output,
            heard_at=at,
        ):
            return


def refused(ledger: Ledger, model: str, retry_after: float | None, *, now: float | None = None) -> None:
    """The provider refused a call (429): nothing more is sent to ``model`` before its
    ``Retry-After`` (its remaining tokens, if it said, are learned separately)."""
    if not retry_after:
        return
    until = (time.time() if now is None else now) + retry_after
    _ensure_row(ledger, model)
    with ledger.engine.begin() as conn:
        conn.execute(
            update(provider_budgets)
            .where(provider_budgets.c.model == model, provider_budgets.c.paused_until < until)
            .values(paused_until=until, updated_at=utcnow())
        )
    _heard(ledger, model, spoke=True)  # the provider said when: no probe needed to learn that


def unhinted_wait(ledger: Ledger, reservation: Reservation, limits: RateLimits) -> float | None:
    """How long a rate limit that gave no ``Retry-After`` is waited out in the call (OpenAI's 429s
    often carry none): until the exhausted bucket refills, by the answer's own reset headers; else
    the time the learned budget takes to free this call's tokens (or one request). None when
    neither tells: no fixed guess is waited in the call; the step's backoff retries it."""
    resets = []
    # (A probe reserved nothing: its bucket is exhausted when nothing is left in it.)
    tokens_short = limits.tokens_remaining is None or limits.tokens_remaining < max(1, reservation.tokens)
    if limits.tokens_reset_seconds and tokens_short:
        resets.append(limits.tokens_reset_seconds)
    if limits.requests_reset_seconds and (limits.requests_remaining is None or limits.requests_remaining < 1):
        resets.append(limits.requests_reset_seconds)
    if resets:
        return min(max(resets), WINDOW_SECONDS)
    budget = get_budget(ledger, reservation.model)
    if budget is not None and budget.tokens_per_minute and reservation.tokens:
        return min(WINDOW_SECONDS, max(1.0, reservation.tokens * WINDOW_SECONDS / budget.tokens_per_minute))
    if budget is not None and budget.requests_per_minute:
        return WINDOW_SECONDS / budget.requests_per_minute
    return None


WAIT_STEP_SECONDS = 5.0  # a long wait is slept in steps, each one reported (``on_wait``)


@dataclass
class LedgerBudget:
    """The gateway's ``CallBudget`` over the ledger's budgets: what one run's calls spend.
    ``on_wait(model, seconds_left, budget)`` is told while a call waits (the run's log);
    ``on_refusal(cause, seconds)`` when a refused call waits to be sent again (the item's story)."""

    ledger: Ledger
    on_wait: Callable[[str, float, Budget | None], None] | None = None
    on_refusal: Callable[[str, float], None] | None = None
    sleep: Callable[[float], None] = time.sleep

    def before_call(self, model: str, tokens: Callable[[], int], output_tokens: int = 0) -> Reservation:
        reservation = reserve(self.ledger, model, tokens, output=output_tokens)
        while reservation.again:  # another call is asking the provider first: its answer tells the limits
            if self.on_wait is not None:
                self.on_wait(model, reservation.wait_seconds, None)
            self.sleep(reservation.wait_seconds)
            reservation = reserve(self.ledger, model, tokens, output=output_tokens)
        deadline = time.monotonic() + reservation.wait_seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.on_wait is not None:
                self.on_wait(model, left, reservation.budget)
            self.sleep(min(left, WAIT_STEP_SECONDS))
        return reservation

    def output_cap(self, model: str) -> int | None:
        """The most output tokens one call may ask for: the provider's output budget per minute,
        where it meters output apart (a larger ``max_tokens`` could never start)."""
        budget = get_budget(self.ledger, model)
        return budget.output_tokens_per_minute if budget is not None else None

    def after_call(
        self, reservation: Any, used_tokens: int | None, headers: Any, used_output: int | None = None
    ) -> None:
        used = used_tokens if used_tokens is not None else reservation.tokens
        # Tokens given back before the provider's word is learned (OpenAI counts a call's
        # max_tokens and gives nothing back: its remaining tokens then stand); output tokens after
        # (Anthropic's headers count max_tokens when the call starts and refund the rest at its end).
        settle(self.ledger, reservation, used, used_output, output=False)
        learn(self.ledger, reservation.model, read_rate_limits(headers, time.time()))
        settle(self.ledger, reservation, used, used_output, tokens=False)
        if reservation.probe:
            _heard(self.ledger, reservation.model, spoke=True)

    def after_refusal(
        self, reservation: Any, retry_after: float | None, headers: Any, *, rate_limited: bool = False
    ) -> float | None:
        settle(self.ledger, reservation, None)  # a refused call is not counted: give it all back
        limits = read_rate_limits(headers, time.time())
        learn(self.ledger, reservation.model, limits)
        if rate_limited and retry_after is None:
            retry_after = unhinted_wait(self.ledger, reservation, limits)
        refused(self.ledger, reservation.model, retry_after)
        if reservation.probe:  # a failure that said nothing (an outage): the next call probes again
            _heard(self.ledger, reservation.model, spoke=not limits.empty or retry_after is not None)
        return retry_after

    def waiting_out(self, cause: str, seconds: float) -> None:
        if self.on_refusal is not None:
            self.on_refusal(cause, seconds)
