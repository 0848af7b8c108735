"""Who may do what through Dagster's own endpoints (its UI's GraphQL and REST writes).

Dagster has no users of its own: whoever reaches its webserver could wipe assets, set the `llm`
pool to 0, delete runs or start a backfill "by" anyone. Served by `ui`, its endpoints take the
roles of our users (web/identity.py proves who asks):

- **read** (queries, live updates, the UI's own bookkeeping: ``logTelemetry``, ``setNuxSeen``):
  anyone who passes the gate;
- **launch** (launching and re-executing runs and backfills of the project's jobs): signed-in
  reviewers and admins. The run's ``extraction/user`` tag is the signed-in user's name (a typed
  one is replaced); an admin may name another user, but only one that exists;
- **operate** (everything else: terminating and deleting runs, canceling backfills, wiping
  assets, pool limits, sensors and schedules, partitions, reporting asset events, reloading
  code, and any mutation this list does not know): admins only.

Anonymous visitors get read only, unless the instance opens Dagster to its own machine
(``EXTRACTION_OPEN_LOOPBACK=true``: an anonymous request from a loopback address may do
everything, as plain Dagster allows; off by default, since a proxy on the same machine makes
every request look local).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from enum import IntEnum
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import User, find_user
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.auth import is_loopback
from extraction_pipeline.web.identity import identify

log = logging.getLogger(__name__)

USER_TAG = "extraction/user"  # the run tag that names who launched it (defs/binding.py reads it)
GRAPHQL_PATH = "/graphql"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_GRAPHQL_BYTES = 4 * 1024 * 1024  # the UI's largest queries are tens of kilobytes


class Action(IntEnum):
    """What a request does, ordered: a request that does several is the highest of them."""

    READ = 0
    LAUNCH = 1
    OPERATE = 2


# Mutations the UI sends for its own sake, which change nothing of the instance's work.
UI_BOOKKEEPING = frozenset({"logTelemetry", "setNuxSeen"})
# Mutations that start work, and where each argument carries the run's tags (Dagster's input
# types: ExecutionParams.executionMetadata.tags, ReexecutionParams.extraTags, LaunchBackfillParams.tags).
# Re-executing or resuming a *backfill* is not here: Dagster launches it under the tags of the
# backfill it continues (another user's, maybe), so it is an admin's.
EXECUTION, REEXECUTION, BACKFILL = ("executionMetadata", "tags"), ("extraTags",), ("tags",)
LAUNCHES: dict[str, dict[str, tuple[str, ...]]] = {
    "launchPipelineExecution": {"executionParams": EXECUTION},
    "launchRun": {"executionParams": EXECUTION},
    "launchMultipleRuns": {"multipleExecutionParams": EXECUTION},
    "launchPipelineReexecution": {"executionParams": EXECUTION, "reexecutionParams": REEXECUTION},
    "launchRunReexecution": {"executionParams": EXECUTION, "reexecutionParams": REEXECUTION},
    "launchPartitionBackfill": {"backfillParams": BACKFILL},
}


def mutation_names(document: Any) -> list[str]:
    """The names of the mutations a document runs (for the log)."""
    from graphql.language import OperationDefinitionNode, OperationType

    fragments = _fragments(document)
    return [
        field.name.value
        for node in document.definitions
        if isinstance(node, OperationDefinitionNode) and node.operation == OperationType.MUTATION
        for field in _top_fields(node.selection_set, fragments, set())
    ]


def classify(document: Any) -> tuple[Action, list[Any]]:
    """The action of a parsed GraphQL document, and its launch fields (``FieldNode``s)."""
    from graphql.language import OperationDefinitionNode, OperationType

    fragments = _fragments(document)
    action, launches = Action.READ, []
    for node in document.definitions:
        if not isinstance(node, OperationDefinitionNode) or node.operation == OperationType.QUERY:
            continue
        if node.operation != OperationType.MUTATION:
            action = max(action, Action.OPERATE)  # a subscription over POST: nothing the UI sends
            continue
        for field in _top_fields(node.selection_set, fragments, set()):
            name = field.name.value
            if name in UI_BOOKKEEPING:
                continue
            if name in LAUNCHES:
                action = max(action, Action.LAUNCH)
                launches.append(field)
            else:
                action = Action.OPERATE
    return action, launches


def _fragments(document: Any) -> dict[str, Any]:
    from graphql.language import FragmentDefinitionNode

    return {node.name.value: node for node in document.definitions if isinstance(node, FragmentDefinitionNode)}


def _top_fields(selection_set: Any, fragments: dict[str, Any], seen: set[str]) -> Iterator[Any]:
    """The mutation's own fields, through fragments (``mutation { ...F }`` runs F's fields)."""
    from graphql.language import FieldNode, FragmentSpreadNode, InlineFragmentNode

    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _top_fields(selection.selection_set, fragments, seen)
        elif isinstance(selection, FragmentSpreadNode) and selection.name.value not in seen:
            seen.add(selection.name.value)
            fragment = fragments.get(selection.name.value)
            if fragment is not None:
                yield from _top_fields(fragment.selection_set, fragments, seen)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def tag_launches(launches: list[Any], variables: dict[str, Any], user: User | None, ledger: Ledger) -> None:
    """Put the launcher's name in each launch's ``extraction/user`` tag (in ``variables``, changed
    in place). A reviewer's typed name is replaced by their own; an admin (or an open loopback
    visitor, ``user`` None) may name another user, one that exists. Raises Refused."""
    from graphql.language import VariableNode

    for field in launches:
        for argument in field.arguments:
            place = LAUNCHES[field.name.value].get(argument.name.value)
            if place is None:
                continue
            value = variables.get(argument.value.name.value) if isinstance(argument.value, VariableNode) else None
            items = value if isinstance(value, list) else [value]
            checked = [params for params in items if isinstance(params, dict)]
            # Written into the query, or left to a variable's default, the parameters would pass unread.
            if not checked or len(checked) != len(items):
                raise Refused(
                    400,
                    f"pass {field.name.value}'s {argument.name.value} as a GraphQL variable with its value: "
                    f"this server sets the {USER_TAG} tag of what is launched to the signed-in user",
                )
            for params in checked:
                _tag(_tags_at(params, place), user, ledger)


def _tags_at(params: dict[str, Any], place: tuple[str, ...]) -> list[Any]:
    """The tag list at ``place`` in a launch's parameters, created where absent."""
    holder = params
    for key in place[:-1]:
        inner = holder.get(key)
        if not isinstance(inner, dict):
            inner = holder[key] = {}
        holder = inner
    tags = holder.get(place[-1])
    if not isinstance(tags, list):
        tags = holder[place[-1]] = []
    return tags


def _tag(tags: list[Any], user: User | None, ledger: Ledger) -> None:
    named = [tag for tag in tags if isinstance(tag, dict) and tag.get("key") == USER_TAG]
    may_name_another = user is None or user.is_admin
    if named and may_name_another:
        for tag in named:
            found = find_user(ledger, str(tag.get("value") or ""))
            if found is None or found.disabled:
                raise Refused(400, f"{USER_TAG}={tag.get('value')!r} names no user of this server (`users list`)")
        return
    tags[:] = [tag for tag in tags if tag not in named]
    if user is not None:
        tags.append({"key": USER_TAG, "value": user.name})


class DagsterRoles:
    """ASGI middleware around Dagster's webserver: each request's action checked against the
    signed-in user's role, and launches tagged with who launched them."""

    def __init__(self, app: ASGIApp, ledger: Ledger, settings: Settings) -> None:
        self.app, self.ledger, self.settings = app, ledger, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)  # reads; websockets only subscribe (read)
            return
        try:
            body = await _read_body(receive)
            # Parsing and the ledger's queries off the event loop: other requests go on meanwhile.
            scope, body = await run_in_threadpool(self._allowed, scope, body)
        except Refused as refused:
            client = (scope.get("client") or ("?",))[0]
            log.warning("refused a request to Dagster's %s from %s: %s", scope["path"], client, refused)
            answer = JSONResponse({"errors": [{"message": str(refused)}]}, status_code=refused.status)
            await answer(scope, _drained(), send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _allowed(self, scope: Scope, body: bytes) -> tuple[Scope, bytes]:
        """``scope`` and ``body`` to pass on (the body retagged for a launch), or Refused."""
        from graphql import GraphQLError, parse

        launches: list[Any] = []
        payload: dict[str, Any] = {}
        names = path_of(scope)
        if path_of(scope).rstrip("/") != GRAPHQL_PATH:
            action = Action.OPERATE  # Dagster's REST writes (report_asset_*)
        else:
            scope = _as_checked(scope, body)
            try:
                payload = json.loads(body)
                if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
                    raise ValueError("not one operation")
                if isinstance(payload.get("variables"), str):  # Dagster takes them as a JSON string too
                    payload["variables"] = json.loads(payload["variables"])
                document = parse(payload["query"])
                action, launches = classify(document)
                names = ", ".join(mutation_names(document))
            except (ValueError, GraphQLError, RecursionError):
                raise Refused(400, 'send one GraphQL operation as JSON: {"query": ..., "variables": ...}') from None
        if action is Action.READ:
            return scope, body  # most of what the UI sends: no need to know who asks
        found = identify(HTTPConnection(scope), self.ledger, self.settings)
        user = found if isinstance(found, User) else None
        open_door = user is None and self.settings.open_loopback and is_loopback((scope.get("client") or ("",))[0])
        what = "launch runs" if action is Action.LAUNCH else "change the instance through Dagster"
        if not open_door:
            if user is None:
                reason = found if isinstance(found, str) else "sign in first (a personal token or the sign-in page)"
                raise Refused(401 if not isinstance(found, str) else 403, f"only signed-in users may {what}: {reason}")
            if action is Action.OPERATE and not user.is_admin:
                raise Refused(403, f"only an admin may {what} (you are signed in as {user.name}, a {user.role.value})")
        if launches:
            variables = payload.get("variables")
            if not isinstance(variables, dict):
                variables = payload["variables"] = {}
            tag_launches(launches, variables, None if open_door else user, self.ledger)
            body = json.dumps(payload).encode()
            scope = _as_checked(scope, body)
        if action is Action.OPERATE:  # the instance changed by hand: said in the server's log
            log.warning("Dagster action by %s: %s", user.name if user else "an anonymous loopback client", names)
        return scope, body


def path_of(scope: Scope) -> str:
    """The request's path inside the mounted app."""
    root = scope.get("root_path", "")
    return str(scope["path"][len(root) :] if root and scope["path"].startswith(root) else scope["path"])


def _as_checked(scope: Scope, body: bytes) -> Scope:
    """A GraphQL POST exactly as checked: Dagster reads the query from the URL when it does not
    recognise the body's type (its test is case-sensitive), so the URL's query goes and the type
    is said the way Dagster reads it; the body is the one operation checked here."""
    kept = [(n, v) for n, v in scope["headers"] if n.lower() not in (b"content-type", b"content-length")]
    headers = [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {**scope, "headers": headers, "query_string": b""}


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refused(400, "the request ended before its body")
        body += message.get("body", b"")
        if len(body) > MAX_GRAPHQL_BYTES:
            raise Refused(413, f"a request to Dagster's endpoints may carry at most {MAX_GRAPHQL_BYTES} bytes")
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, then: Receive) -> Receive:
    """The body already read, as one message; then the connection's own messages (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await then()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _drained() -> Receive:
    async def receive() -> Message:
        return {"type": "http.disconnect"}

    return receive
