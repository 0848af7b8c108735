"""Who is asking: the signed-in user behind a request (the pages that sign users in and out are
web/signin.py's).

Decisions, uploads and batch launches are recorded under the user proven here, never a typed
name. A request proves its user, in this order, by

1. a single-sign-on proxy's ``X-Forwarded-User`` (else ``X-Forwarded-Email``) header, believed
   only when the request comes straight from a peer in ``EXTRACTION_TRUSTED_PROXIES`` (anyone
   else can send that header too);
2. ``Authorization: Bearer <personal token>`` (scripts);
3. the session cookie that signing in with the personal token set (browsers).

The instance's access token (web/auth.py) stays the outer gate; ``passes_gate`` lets a request
that proves its user through it as well, so a reviewer needs one token, not two. The sign-in page
itself passes the gate (with the stylesheet and scripts it loads, which hold nothing secret): it
is where a personal token is turned into a session, and it opens nothing without one.

These functions take ``ledger`` and ``settings`` explicitly: ``passes_gate`` runs in the token gate,
before any handler, and web/deps.py hands them the application's own for the handlers.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import quote

from starlette.requests import HTTPConnection, Request
from starlette.responses import RedirectResponse, Response
from starlette.types import Scope

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import User, ensure_sso_user, user_by_session, user_by_token
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.pages import message_page
from extraction_pipeline.web.urls import PREFIX

__all__ = [
    "ME_PATH",
    "SESSION_COOKIE",
    "SIGNIN_PATH",
    "SIGNOUT_PATH",
    "current_user",
    "from_trusted_proxy",
    "identify",
    "over_https",
    "passes_gate",
    "require_admin",
    "require_user",
    "sso_refused",
]

SESSION_COOKIE = "extraction_session"
SIGNIN_PATH = f"{PREFIX}/signin"
SIGNOUT_PATH = f"{PREFIX}/signout"
ME_PATH = f"{PREFIX}/me"
STATIC_PREFIX = f"{PREFIX}/static/"
SSO_HEADERS = ("x-forwarded-user", "x-forwarded-email")


@functools.lru_cache(maxsize=16)
def _networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)
    except ValueError as exc:
        raise ConfigError(f"EXTRACTION_TRUSTED_PROXIES: {exc}") from None


def from_trusted_proxy(conn: HTTPConnection, settings: Settings) -> bool:
    """Did the request come straight from a configured single-sign-on proxy? ``client.host`` is the
    address of the peer this server's socket talks to (unless uvicorn rewrote it from
    X-Forwarded-For: see docs/deployment.md)."""
    if not settings.trusted_proxies or conn.client is None:
        return False
    try:
        peer = ipaddress.ip_address(conn.client.host)
    except ValueError:
        return False  # a unix socket or a test client's name: no address to trust
    if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
        peer = peer.ipv4_mapped  # a dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d
    return any(peer in network for network in _networks(settings.trusted_proxies))


def over_https(conn: HTTPConnection, settings: Settings) -> bool:
    """Did the request come over https (to us, to the trusted proxy in front of us, or to the
    public URL users are told to use)? Then a cookie we set is sent back over https only."""
    if conn.url.scheme in ("https", "wss") or settings.public_url.lower().startswith("https://"):
        return True
    forwarded = conn.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" and from_trusted_proxy(conn, settings)


def _sso_name(conn: HTTPConnection, settings: Settings) -> str | None:
    if not from_trusted_proxy(conn, settings):
        return None
    for header in SSO_HEADERS:
        value = conn.headers.get(header, "").strip()
        if value:
            return value
    return None


def _bearer(conn: HTTPConnection) -> str | None:
    header = conn.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return None
    return header[7:].strip() or None


def identify(conn: HTTPConnection, ledger: Ledger, settings: Settings) -> User | str | None:
    """The user; or why the proxy's user is refused (disabled, an impossible name); or None."""
    sso = _sso_name(conn, settings)
    if sso is not None:
        # The proxy has authenticated this person: its word decides, with no fallback to a
        # cookie or token that might name someone else.
        try:
            return ensure_sso_user(ledger, sso)
        except ConfigError as exc:
            return str(exc)
    bearer = _bearer(conn)
    if bearer is not None:
        user = user_by_token(ledger, bearer)
        if user is not None:
            return user
        # Not a personal token (the instance's access token, say): the cookie may still sign in.
    secret = conn.cookies.get(SESSION_COOKIE)
    return user_by_session(ledger, secret) if secret else None


def current_user(request: HTTPConnection, ledger: Ledger, settings: Settings) -> User | None:
    """The signed-in user of a request or websocket handshake, or None."""
    found = identify(request, ledger, settings)
    return found if isinstance(found, User) else None


def passes_gate(scope: Scope, ledger: Ledger, settings: Settings) -> bool:
    """For TokenGate's ``accepts``: the sign-in page and its static files, or a request that proves
    its user (websocket handshakes included, by their cookie)."""
    if scope["type"] == "http":
        path = scope["path"]
        if path == SIGNIN_PATH or (path.startswith(STATIC_PREFIX) and scope["method"] in ("GET", "HEAD")):
            return True
    return current_user(HTTPConnection(scope), ledger, settings) is not None


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _sign_in_first(request: Request) -> Response:
    if request.method in ("GET", "HEAD"):
        return RedirectResponse(f"{SIGNIN_PATH}?next={quote(_here(request), safe='')}", status_code=303)
    return message_page(
        "Sign in first",
        message=f"Sign in at {SIGNIN_PATH} with your personal token, then try again.",
        error="sign in first: what you sent was not saved, because this server records it under the signed-in user",
        status_code=401,
    )


def sso_refused(reason: str) -> str:
    return f"your single sign-on is refused here: {reason}"


def require_user(request: Request, ledger: Ledger, settings: Settings) -> User | Response:
    """The signed-in user, or the response to send instead: a GET goes to the sign-in page (and
    comes back here afterwards), a POST is refused with 401 (its form cannot be replayed); a user
    the single-sign-on proxy names but this server refuses (disabled) gets 403."""
    found = identify(request, ledger, settings)
    if isinstance(found, User):
        return found
    if isinstance(found, str):
        return message_page("Not allowed", error=sso_refused(found), status_code=403)
    return _sign_in_first(request)


def require_admin(request: Request, ledger: Ledger, settings: Settings, *, action: str = "do this") -> User | Response:
    """As ``require_user``, and 403 for a signed-in user who is not an admin."""
    found = require_user(request, ledger, settings)
    if isinstance(found, User) and not found.is_admin:
        return message_page(
            "Not allowed",
            error=f"only an admin can {action} (you are signed in as {found.name}, a {found.role.value})",
            status_code=403,
            user=found,
        )
    return found
