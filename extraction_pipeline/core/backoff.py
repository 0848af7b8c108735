"""How long to wait before retrying a transient failure, and when to give up.

The budget is measured in time since the failures began (default 30 minutes: a provider outage or
a database restart lasts minutes, not three quick attempts). Waits grow exponentially with jitter
(so a hundred documents do not retry in the same second), never shorter than the provider's
``Retry-After``, never longer than the cap, and the last one ends when the budget does.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

_RNG = random.Random()  # noqa: S311  (jitter spreads retries; nothing secret depends on it)
# Run workers are forked from one process that imported this module (defs/run_workers.py): without
# a new seed each, they would all draw the same jitter and retry in the same second.
os.register_at_fork(after_in_child=_RNG.seed)


@dataclass(frozen=True)
class RetrySchedule:
    budget_seconds: float = 1800.0
    base_seconds: float = 10.0
    max_delay_seconds: float = 300.0
    jitter: float = 0.25  # each wait is scaled by a random factor in [1 - jitter, 1 + jitter]

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The backoff before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        raw = min(self.max_delay_seconds, self.base_seconds * (2 ** min(attempt, 30)))
        factor = 1.0 + (rng or _RNG).uniform(-self.jitter, self.jitter)
        return max(0.5, float(raw * factor))

    def next_wait(
        self, *, attempt: int, failing_for: float, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float | None:
        """Seconds to wait before the next attempt, or None when the budget is spent."""
        remaining = self.budget_seconds - failing_for
        if remaining <= 0:
            return None
        wait = max(self.delay(attempt, rng), retry_after or 0.0)
        return max(0.5, min(wait, remaining))


# A failing provider is probed at least this often, however long it has failed: a probe is one
# call per model, and a provider back after an outage should be found within half a minute, not
# after a five-minute cooldown.
PROBE_AT_LEAST_EVERY_SECONDS = 30.0
# A document whose call failed at the provider is retried at least this often (or at its
# Retry-After): the breaker, not the document's backoff, spares a failing provider (after a few
# failures only its probe calls), and a long backoff would keep the document idle after the
# provider is back.
PROVIDER_RETRY_AT_LEAST_EVERY_SECONDS = 20.0


@dataclass(frozen=True)
class BreakerPolicy:
    """A model's circuit breaker opens after ``failures`` consecutive transient provider errors
    (or at once when the provider names a ``Retry-After``) for a cooldown that doubles with each
    further failure, up to ``max_cooldown_seconds``. The first call after the cooldown is the probe:
    success closes the breaker, failure re-opens it for longer."""

    failures: int = 3
    base_cooldown_seconds: float = 10.0
    max_cooldown_seconds: float = 300.0

    def cooldown(self, consecutive_failures: int, retry_after: float | None = None) -> float | None:
        """Seconds the breaker stays open after this failure, or None if it stays closed."""
        if consecutive_failures < self.failures and not retry_after:
            return None
        over = max(0, consecutive_failures - self.failures)
        cooldown = min(self.max_cooldown_seconds, self.base_cooldown_seconds * (2 ** min(over, 30)))
        return max(cooldown if consecutive_failures >= self.failures else 0.0, retry_after or 0.0)
