"""Failed sign-ins counted per client, so a token cannot be guessed at the server's speed.

After ``limit`` failures from one client within ``window_seconds``, the client is told to wait
(HTTP 429 with ``Retry-After``) until the oldest of them is a window old. A right token is told
to wait too: during the pause a guess that happens to be right gains nothing. Each failure is
logged with the client's address, never with the token. The count lives in the `ui` process's
memory (one process serves the pages): a restart forgets it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from starlette.requests import Request

from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.identity import from_trusted_proxy

log = logging.getLogger(__name__)

FAILURES_ALLOWED = 5
WINDOW_SECONDS = 60.0


@dataclass
class FailedSignins:
    limit: int = FAILURES_ALLOWED
    window_seconds: float = WINDOW_SECONDS
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_seconds(self, client: str, now: float | None = None) -> float:
        """How long ``client`` must wait before its next try (0: it may try now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = self._recent(client, now)
            if len(recent) < self.limit:
                return 0.0
            return max(0.0, recent[0] + self.window_seconds - now)

    def failed(self, client: str, now: float | None = None) -> int:
        """Count one failure of ``client``; returns its failures within the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = self._recent(client, now)
            recent.append(now)
            return len(recent)

    def _recent(self, client: str, now: float) -> deque[float]:
        recent = self._failures.setdefault(client, deque())
        while recent and recent[0] <= now - self.window_seconds:
            recent.popleft()
        if len(self._failures) > 10_000:  # many clients: forget those with nothing recent
            for idle in [c for c, times in self._failures.items() if not times and c != client]:
                del self._failures[idle]
        return recent


def failures_of(request: Request) -> FailedSignins:
    """The application's count (made on first use: one per served application)."""
    state = request.app.state
    found = getattr(state, "signin_failures", None)
    if not isinstance(found, FailedSignins):
        found = FailedSignins()
        state.signin_failures = found
    return found


def client_of(request: Request, settings: Settings) -> str:
    """Who is trying: the peer's address, or behind the trusted proxy the address it forwards."""
    peer = request.client.host if request.client else "unknown"
    if from_trusted_proxy(request, settings):
        forwarded = request.headers.get("x-forwarded-for", "").split(",")[0].strip()
        return forwarded[:100] or peer
    return peer


def too_many(request: Request, settings: Settings) -> float:
    """Seconds this request's client must still wait (0: it may try)."""
    return failures_of(request).wait_seconds(client_of(request, settings))


def count_failure(request: Request, settings: Settings) -> None:
    client = client_of(request, settings)
    recent = failures_of(request).failed(client)
    log.warning("failed sign-in from %s (%d in the last %g s)", client, recent, WINDOW_SECONDS)


def retry_after(seconds: float) -> dict[str, str]:
    return {"retry-after": str(max(1, math.ceil(seconds)))}
