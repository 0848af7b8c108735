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

- **Every write** (any method but GET, HEAD and OPTIONS, on any path): an ``Origin`` other than this
  server's own (scheme, host and port: ``https://`` where it is served as ``http://`` is another
  origin; the origin of ``EXTRACTION_PUBLIC_URL`` is its own too) or ``null``, or a browser saying
  ``Sec-Fetch-Site: cross-site``, is refused. Dagster's REST writes (``report_asset_*``) also need
  ``Content-Type: application/json``: their bodiless form is a request any page can send.
- **Frames**: no page of this server may be shown inside another site's page (``X-Frame-Options:
  DENY``, ``Content-Security-Policy: frame-ancestors 'none'`` on every answer, ours and Dagster's),
  so a click on a framed page can never be the analyst's.
- **One Host header**: with two, this guard and the application could read different ones.

Our own pages refuse cross-site form posts themselves too (``forms.read_form``).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OUR_PREFIX = "/extraction"  # our pages (web/urls.py): their forms are checked by forms.read_form
# Sent with every answer: no other site may frame a page of this server (clickjacking).
FRAME_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 (recognised, not bound)
GRAPHQL_PATH = "/graphql"


def allowed_hosts(bind_host: str, public_url: str, configured: tuple[str, ...]) -> frozenset[str] | None:
    """The names requests may use for this server; None when ``*`` is configured (any name)."""
    if "*" in configured:
        return None
    names = set(LOOPBACK_NAMES) | {name.strip().lower().strip("[]") for name in configured if name.strip()}
    names.add(served_host(bind_host).lower().strip("[]"))  # the name `ui` prints for itself
    public = urlsplit(public_url).hostname
    if public:
        names.add(public.lower())
    return frozenset(names)


def served_host(bind_host: str) -> str:
    """How a URL names the server bound to ``bind_host``: every address (0.0.0.0, ::) by this
    machine's name, IPv6 in brackets."""
    import socket

    if bind_host in WILDCARD_BINDS:
        return socket.getfqdn()
    return f"[{bind_host}]" if ":" in bind_host else bind_host


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


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of a URL, lower case, without the scheme's default port (None when
    it has no scheme or host): ``https://X.org:443`` and ``https://x.org`` are one origin."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS.get(scheme)) else f"{scheme}://{host}:{port}"


class RequestGuard:
    """ASGI middleware, outermost: refuses requests other sites could have made the browser send,
    and tells browsers never to show this server's pages inside another site's."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str] | None, public_url: str = "") -> None:
        self.app = app
        self.hosts = hosts
        self.public_origin = origin_of(public_url) if public_url else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if scope["type"] == "http":
            send = _unframeable(send)
        refusal = self._refusal(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4403, "reason": refusal[1][:120]})
        else:
            await PlainTextResponse(refusal[1] + "\n", status_code=refusal[0])(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if sum(1 for name, _ in scope["headers"] if name.lower() == b"host") > 1:
            return 400, "a request must name this server in one Host header, not several"
        if sum(1 for name, _ in scope["headers"] if name.lower() == b"content-type") > 1:
            # This guard reads the last, Dagster the first: one type, or a checked request could run another.
            return 400, "a request must say its Content-Type once, not several times"
        host = host_name(headers.get("host", ""))
        if host is None:
            return 400, "a request must name this server in its Host header"
        if self.hosts is not None and host.lower() not in self.hosts:
            return 421, (
                f"this server is not served as {host!r}: add it to EXTRACTION_ALLOWED_HOSTS "
                "(or set EXTRACTION_PUBLIC_URL) if that is how users reach it"
            )
        path = scope["path"].rstrip("/")
        graphql = path == GRAPHQL_PATH
        writes = scope["type"] == "http" and scope["method"] not in SAFE_METHODS
        if not (graphql or writes):
            return None
        if self._from_another_site(scope, headers):
            what = "GraphQL requests" if graphql else f"{scope.get('method', 'websocket')} requests"
            said = origin_of(headers.get("origin", "")) or ""
            hint = (
                f" (Origin {said} is not {self._own_origin(scope, headers)}: behind a TLS proxy, set "
                f"EXTRACTION_PUBLIC_URL={said})"
                if said.startswith("https://") and self.public_origin != said
                else ""
            )
            return 403, f"{what} from another site are refused{hint}"
        if scope["type"] == "websocket":
            return None
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if writes and not graphql and not path.startswith(OUR_PREFIX) and content_type != "application/json":
            return 415, (
                "Dagster's endpoints that change something take Content-Type: application/json only "
                "(parameters in a JSON body): a request without it is one any web page can send"
            )
        if not graphql:
            return None
        method = scope["method"]
        if method == "POST":
            if content_type != "application/json":
                return 415, "GraphQL requests are accepted as POST with Content-Type: application/json only"
            return None
        if method in ("GET", "HEAD"):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("query")
            if query and any(is_mutation(text) for text in query):
                return 405, "a GraphQL mutation needs a POST with Content-Type: application/json"
        return None

    def _from_another_site(self, scope: Scope, headers: dict[str, str]) -> bool:
        """The browser says the request comes from a page of another origin: its ``Origin`` (scheme
        included) is not this server's as the request names it, nor the public URL's."""
        if headers.get("sec-fetch-site") == "cross-site":
            return True
        origin = headers.get("origin")
        if origin is None:
            return False  # not sent by a browser's cross-site request (they all carry one for writes)
        if origin == "null":
            return True
        return origin_of(origin) not in {self._own_origin(scope, headers), self.public_origin}

    @staticmethod
    def _own_origin(scope: Scope, headers: dict[str, str]) -> str | None:
        """This server's origin as the request names it (a websocket's ``ws`` is ``http``)."""
        scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
        return origin_of(f"{scheme}://{headers.get('host', '')}")


def _unframeable(send: Send) -> Send:
    """``send`` with the frame headers added to the answer's start (replacing any of the app's)."""

    async def framed(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [
                (name, value) for name, value in message.get("headers", []) if name.lower() not in (b"x-frame-options",)
            ]
            message = {**message, "headers": [*kept, *FRAME_HEADERS]}
        await send(message)

    return framed
