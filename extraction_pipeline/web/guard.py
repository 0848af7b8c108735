"""What another web site cannot make this server do.

The server hosts Dagster's GraphQL endpoint, which can launch and terminate runs, wipe assets and
change pool limits. A page on another site that the analyst happens to visit can make the browser
send requests here; the browser attaches the analyst's cookies but cannot read the answers. So:

- **Host**: a request must name this server by an allowed host (loopback names, the address it
  is bound to, the host of ``EXTRACTION_PUBLIC_URL``, ``EXTRACTION_ALLOWED_HOSTS``). A hostile
  name that resolves to 127.0.0.1 (DNS rebinding) makes the browser treat this server as that
  site's own; it is refused here.
- **GraphQL**: a mutation needs a POST with ``Content-Type: application/json`` (a type another
  site cannot send without the server's permission, which is never given); a GET may only read
  (an ``<img src=…/graphql?query=mutation…>`` ran mutations before); a POST, or a live-update
  websocket, whose ``Origin`` is another site is refused.

Our own pages refuse cross-site form posts themselves (``forms.read_form``).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 (recognised, not bound)
GRAPHQL_PATH = "/graphql"


def allowed_hosts(bind_host: str, public_url: str, configured: tuple[str, ...]) -> frozenset[str] | None:
    """The names requests may use for this server; None when ``*`` is configured (any name)."""
    if "*" in configured:
        return None
    names = set(LOOPBACK_NAMES) | {name.strip().lower().strip("[]") for name in configured if name.strip()}
    if bind_host not in WILDCARD_BINDS:
        names.add(bind_host.lower().strip("[]"))
    public = urlsplit(public_url).hostname
    if public:
        names.add(public.lower())
    return frozenset(names)


def host_name(header: str) -> str | None:
    """The host of a ``Host`` header ("example.org:3000" -> "example.org", "[::1]:3000" -> "::1")."""
    try:
        return urlsplit(f"//{header}").hostname
    except ValueError:
        return None


def is_mutation(query: str) -> bool:
    """Does the GraphQL document hold a mutation (or anything that is not a plain read)? A query
    that cannot be parsed counts as one: it is refused here rather than guessed at."""
    from graphql import OperationType, parse
    from graphql.error import GraphQLError
    from graphql.language import OperationDefinitionNode

    try:
        document = parse(query)
    except GraphQLError:
        return True
    return any(
        isinstance(node, OperationDefinitionNode) and node.operation != OperationType.QUERY
        for node in document.definitions
    )


class RequestGuard:
    """ASGI middleware, outermost: refuses requests other sites could have made the browser send."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4403, "reason": refusal[1][:120]})
        else:
            await PlainTextResponse(refusal[1] + "\n", status_code=refusal[0])(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = host_name(headers.get("host", ""))
        if host is None:
            return 400, "a request must name this server in its Host header"
        if self.hosts is not None and host.lower() not in self.hosts:
            return 421, (
                f"this server is not served as {host!r}: add it to EXTRACTION_ALLOWED_HOSTS "
                "(or set EXTRACTION_PUBLIC_URL) if that is how users reach it"
            )
        if scope["path"].rstrip("/") != GRAPHQL_PATH:
            return None
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc.lower() != headers.get("host", "").lower():
            return 403, "GraphQL requests from another site are refused"
        if origin == "null" or headers.get("sec-fetch-site") == "cross-site":
            return 403, "GraphQL requests from another site are refused"
        if scope["type"] == "websocket":
            return None
        method = scope["method"]
        if method == "POST":
            content_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if content_type != "application/json":
                return 415, "GraphQL requests are accepted as POST with Content-Type: application/json only"
            return None
        if method in ("GET", "HEAD"):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("query")
            if query and any(is_mutation(text) for text in query):
                return 405, "a GraphQL mutation needs a POST with Content-Type: application/json"
        return None
