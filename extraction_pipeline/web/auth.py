"""One access token for the whole server (the Dagster UI included: it can launch and cancel runs).

Required whenever the server listens beyond loopback. A browser presents it once as ``?token=…``
and keeps it in an HttpOnly cookie; scripts send ``Authorization: Bearer …``.

It is the outer gate, not who the user is (web/identity.py). So that a signed-in reviewer does not
need this token as well, the gate may be given ``accepts``: a check of the request's own proof
(a personal token, a session cookie) that lets it through too.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "extraction_token"
# Given the ASGI scope of a request or websocket handshake the instance token did not open: may it
# pass anyway? Called in a worker thread (it may ask the database).
Accepts = Callable[[Scope], bool]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class TokenGate:
    """ASGI middleware: every HTTP request must carry the token; websockets (Dagster's live
    updates) are checked by their cookie. ``accepts`` lets through what the token did not open."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        accepts: Accepts | None = None,
        secure: Callable[[HTTPConnection], bool] = lambda conn: conn.url.scheme == "https",
    ) -> None:
        self.app = app
        self.token = token
        self.accepts = accepts
        self.secure = secure  # whether the remembered token's cookie is for https only

    def _presented(self, request: HTTPConnection) -> tuple[str | None, bool]:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip(), False
        if "token" in request.query_params:
            return request.query_params["token"], True
        return request.cookies.get(COOKIE), False

    def _valid(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = HTTPConnection(scope)  # an HTTP request or a websocket handshake
        presented, from_query = self._presented(request)
        if not self._valid(presented):
            if self.accepts is not None and await run_in_threadpool(self.accepts, scope):
                await self.app(scope, receive, send)
                return
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401})
                return
            response: Response = PlainTextResponse(
                "access token required: open the link with ?token=... or send 'Authorization: Bearer ...'\n",
                status_code=401,
            )
            await response(scope, receive, send)
            return
        if from_query and scope["type"] == "http":
            # Remember it and drop it from the address bar (and from later Referer headers).
            clean = request.url.remove_query_params("token")
            redirect = Response(status_code=303, headers={"location": str(clean)})
            redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", secure=self.secure(request))
            await redirect(scope, receive, send)
            return
        await self.app(scope, receive, send)
