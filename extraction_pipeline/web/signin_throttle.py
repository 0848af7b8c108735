"""Failed sign-ins counted per client, so a token cannot be guessed at the server's speed.

After ``limit`` failures from one client within ``window_seconds``, the client is told to wait
(HTTP 429 with ``Retry-After``) until the oldest of them is a window old. A right token is told
to wait too: during the pause a guess that happens to be right gains nothing. Each failure is
logged with the client's address, never with the token. The count lives in the `ui` process's
memory (one process serves the pages): a restart forgets it. A failure the browser says another
site's page sent (``Sec-Fetch-Site: cross-site``) is logged, not counted: an image on a hostile
page must not lock the analyst out. Behind a proxy that is not ``EXTRACTION_TRUSTED_PROXIES``,
every client has the proxy's address and is counted as one.
"""

from __future__ import annotations

import ipaddress
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
MAX_CLIENTS = 10_000  # clients remembered at once (memory stays bounded whoever tries)


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
            recent = self._failures.get(client)
            if recent is None:
                return 0.0
            self._age(recent, now)
            if len(recent) < self.limit:
                return 0.0
            return max(0.0, recent[0] + self.window_seconds - now)

    def failed(self, client: str, now: float | None = None) -> int:
        """Count one failure of ``client``; returns its failures within the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._failures) >= MAX_CLIENTS:
                self._forget_idle(now)
            recent = self._failures.setdefault(client, deque())
            self._age(recent, now)
            recent.append(now)
            return len(recent)

    def _age(self, recent: deque[float], now: float) -> None:
        while recent and recent[0] <= now - self.window_seconds:
            recent.popleft()

    def _forget_idle(self, now: float) -> None:
        """Clients whose last failure is a window old count nothing any more: forget them."""
        for client in [c for c, times in self._failures.items() if not times or times[-1] <= now - self.window_seconds]:
            del self._failures[client]
        while len(self._failures) >= MAX_CLIENTS:  # all recent: the oldest go first
            del self._failures[next(iter(self._failures))]


def failures_of(request: Request) -> FailedSignins:
    """The application's count (made on first use: one per served application)."""
    state = request.app.state
    found = getattr(state, "signin_failures", None)
    if not isinstance(found, FailedSignins):
        found = FailedSignins()
        state.signin_failures = found
    return found


def client_of(request: Request, settings: Settings) -> str:
    """Who is trying: the peer's address (an IPv6 peer by its /64, what one host may rotate
    through), or behind the trusted proxy the address it forwarded: the last entry of
    ``X-Forwarded-For``, the one the proxy added (earlier ones are the client's own words)."""
    peer = request.client.host if request.client else "unknown"
    if from_trusted_proxy(request, settings):
        forwarded = request.headers.get("x-forwarded-for", "").split(",")[-1].strip()
        peer = forwarded[:100] or peer
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else address)


def counts(request: Request) -> bool:
    """Whether a failure of this request counts: not when the browser says another site's page
    sent it (an image or link on a hostile page could otherwise lock the analyst out). A guesser's
    own client says nothing of the kind, and is counted."""
    return request.headers.get("sec-fetch-site", "") not in ("cross-site", "same-site")


def too_many(request: Request, settings: Settings) -> float:
    """Seconds this request's client must still wait (0: it may try)."""
    return failures_of(request).wait_seconds(client_of(request, settings))


def count_failure(request: Request, settings: Settings) -> None:
    client = client_of(request, settings)
    if not counts(request):
        log.warning("failed sign-in from %s, sent by another site's page (not counted)", client)
        return
    recent = failures_of(request).failed(client)
    log.warning("failed sign-in from %s (%d in the last %g s)", client, recent, WINDOW_SECONDS)


def retry_after(seconds: float) -> dict[str, str]:
    return {"retry-after": str(max(1, math.ceil(seconds)))}
