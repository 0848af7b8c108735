"""A loopback fake of Anthropic's Message Batches API (and of ``POST /v1/messages``), for tests.

Real HTTP; only the provider is fake. It follows Anthropic's documentation:

- ``POST /v1/messages/batches`` ``{"requests": [{"custom_id", "params"}, ...]}``: 1 to 100,000
  requests and at most 256 MB; each ``custom_id`` unique in the batch, 1-64 characters of
  ``[a-zA-Z0-9_-]``, and a ``params`` object: else the whole batch is refused with 400 and
  Anthropic's error body ``{"type": "error", "error": {"type": "invalid_request_error",
  "message": ...}}`` naming it. Each ``params`` is checked when the batch runs it, as Anthropic
  does (a valid Messages request, checked by the Messages fake ``providers/anthropic.py``: model,
  ``max_tokens``, alternating user/assistant messages starting with user, ``system`` top level
  only, cache marks, ``output_format`` with its beta header...; ``stream`` refused): a broken one
  is that request's ``errored`` result, the others run.
- ``GET /v1/messages/batches/{id}``: the batch object (``id``, ``type: "message_batch"``,
  ``processing_status``, ``request_counts``, ``created_at``, ``expires_at`` 24 h later,
  ``ended_at``, ``cancel_initiated_at``, ``archived_at``, ``results_url`` once ended).
- ``GET /v1/messages/batches/{id}/results``: JSONL once ended (404 before), one line a request,
  in reverse order of the requests (Anthropic promises no order: clients must match custom ids):
  ``{"custom_id", "result": {"type": "succeeded", "message": {...}}}`` (the Messages fake's answer:
  content, ``stop_reason`` end_turn / max_tokens / refusal, usage with the cache fields; the
  prompt cache is shared by the batch's requests), ``errored`` (``error``: Anthropic's error
  response), ``canceled`` or ``expired``.
- ``POST /v1/messages/batches/{id}/cancel``: ``canceling`` (400 once ended).
- ``GET /v1/messages/batches?limit=&after_id=``: the account's batches, most recently created
  first, ``limit`` 1 to 1000 (default 20): ``{"data", "has_more", "first_id", "last_id"}``
  (https://docs.anthropic.com/en/api/listing-message-batches). A Message Batch has no metadata.
- ``POST /v1/messages``: an ordinary call, answered at once by the same callback (what a batch
  did not answer is asked of the same account at the same base).

Every route wants the key, as ``x-api-key`` or ``Authorization: Bearer`` (how the ``anthropic``
SDK 2.x sends it) (``api_key`` when set: that one, else any: 401 authentication_error), and
``anthropic-version`` (400).

The test drives the clock: a batch is created ``in_progress`` (Anthropic starts at once);
``advance(batch_id, lines=None)`` runs that many more requests (None: all) and ends the batch once
none is left; a cancelling batch ends at the next ``advance``, its unrun requests canceled;
``expire(batch_id)`` ends it with its unrun requests expired. ``answer(params) -> Reply``
(``fake_llm.Reply``) answers each request: a non-200 reply (or an ``error`` kind) is the errored
result with the provider's error for it (529 overloaded_error, 400 invalid_request_error...).
``fail_next(route, Reply)`` makes the next call of a route (ROUTES) answer with that HTTP error.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from extraction_pipeline_tests.support.fake_llm import Reply
from extraction_pipeline_tests.support.http_fake import Exchange, LoopbackFake
from extraction_pipeline_tests.support.providers.anthropic import AnthropicFake
from extraction_pipeline_tests.support.providers.base import Refusal, Request

ROUTES = ("create", "retrieve", "results", "cancel", "messages", "list")
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _stamp(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if when else None


class Refused(Exception):
    """An HTTP error answer: status and Anthropic's error body."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.body = status, _error(kind, message)


@dataclass
class FakeMessageBatch:
    id: str
    requests: list[dict[str, Any]]  # {"custom_id", "params"}, in order
    headers: dict[str, str]  # the create call's (its anthropic-beta applies to every request)
    created_at: datetime
    processing_status: str = "in_progress"
    run: int = 0  # how many requests have been run
    results: list[dict[str, Any]] = field(default_factory=list)  # result lines, in run order
    ended_at: datetime | None = None
    cancel_initiated_at: datetime | None = None

    def counts(self) -> dict[str, int]:
        done = [r["result"]["type"] for r in self.results]
        return {
            "processing": len(self.requests) - len(self.results),
            "succeeded": done.count("succeeded"),
            "errored": done.count("errored"),
            "canceled": done.count("canceled"),
            "expired": done.count("expired"),
        }

    def object(self, origin: str) -> dict[str, Any]:
        ended = self.processing_status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.processing_status,
            "request_counts": self.counts(),
            "ended_at": _stamp(self.ended_at),
            "created_at": _stamp(self.created_at),
            "expires_at": _stamp(self.created_at + timedelta(hours=24)),
            "cancel_initiated_at": _stamp(self.cancel_initiated_at),
            "archived_at": None,
            "results_url": f"{origin}/v1/messages/batches/{self.id}/results" if ended else None,
        }


class FakeAnthropicBatchServer(LoopbackFake):
    methods = ("GET", "POST")
    routes = ROUTES

    def __init__(self) -> None:
        super().__init__()
        self.batches: dict[str, FakeMessageBatch] = {}
        self.answer: Callable[[dict[str, Any]], Reply] = lambda params: Reply(json.dumps({}))
        self.api_key: str | None = None  # the key required; None: any
        self.calls: list[tuple[str, str]] = []  # (method, path) per request received
        self.answered: list[dict[str, Any]] = []  # the params of the batch requests run, in order
        self.message_requests: list[dict[str, Any]] = []  # ordinary POST /v1/messages bodies
        self.refusals: list[str] = []  # why each refused create or call was refused
        # Checks and answers each request as an ordinary call would be (never started: only its
        # rules, answer shapes and prompt cache are used).
        self.messages_api = AnthropicFake()
        # Called once a create is done and before its answer is sent (outside the lock): the
        # provider has the batch, the caller may never hear so (a timeout, a killed process);
        # returning False closes the connection unanswered.
        self.after_create: Callable[[FakeMessageBatch], bool | None] | None = None
        self._ids = itertools.count(1)

    @property
    def api_base(self) -> str:
        """What litellm and the batch module are given: litellm posts to ``{api_base}/v1/messages``."""
        return self.origin

    def stop(self) -> None:
        super().stop()
        self.messages_api.stop()  # bound, never served

    # -- the lifecycle, driven by the test -------------------------------------------------------

    def advance(self, batch_id: str, lines: int | None = None) -> str:
        """Run ``lines`` more requests (None: all); the batch ends once none is left. A cancelling
        batch ends, its unrun requests canceled. Returns the new processing_status."""
        with self._lock:
            batch = self.batches[batch_id]
            if batch.processing_status == "in_progress":
                left = len(batch.requests) - batch.run
                self._run(batch, left if lines is None else min(lines, left))
                if batch.run == len(batch.requests):
                    self._end(batch, "")
            elif batch.processing_status == "canceling":
                self._end(batch, "canceled")
            return batch.processing_status

    def expire(self, batch_id: str) -> None:
        """The 24 hours are over: the batch ends with its unrun requests expired."""
        with self._lock:
            batch = self.batches[batch_id]
            assert batch.processing_status == "in_progress", batch.processing_status
            self._end(batch, "expired")

    def _end(self, batch: FakeMessageBatch, unrun: str) -> None:
        for request in batch.requests[batch.run :]:
            batch.results.append({"custom_id": request["custom_id"], "result": {"type": unrun}})
        batch.run = len(batch.requests)
        batch.processing_status = "ended"
        batch.ended_at = datetime.now(UTC)

    def _run(self, batch: FakeMessageBatch, count: int) -> None:
        for request in batch.requests[batch.run : batch.run + count]:
            params = request["params"]
            self.answered.append(params)
            if params.get("stream"):
                status, body = 400, _error("invalid_request_error", "stream: streaming is not supported in batches")
            else:
                # The create call's x-api-key was checked then; its anthropic-* headers apply to each request.
                status, body = self._message(params, {**batch.headers, "x-api-key": "(the batch's)"})
            result = {"type": "succeeded", "message": body} if status == 200 else {"type": "errored", "error": body}
            batch.results.append({"custom_id": request["custom_id"], "result": result})
        batch.run += count

    def _message(self, params: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """One Messages call: (status, the message or Anthropic's error response)."""
        api = self.messages_api
        request = Request("POST", "/v1/messages", {}, headers, params)
        try:
            api.check(request)
        except Refusal as refusal:
            return refusal.error.status, refusal.error.body
        reply = self.answer(params)
        if reply.status != 200 or reply.error:
            sent = api.error_reply(request, reply)
            return sent.status, sent.body
        try:
            return api.answer_body(request, reply, api.messages_of(request))
        except Refusal as refusal:
            return refusal.error.status, refusal.error.body

    def messages_of(self, params: dict[str, Any]) -> list[dict[str, str]]:
        """A request's params as plain chat messages (for answer callbacks written for those)."""
        return self.messages_api.messages_of(Request("POST", "/v1/messages", {}, {}, params))

    # -- the endpoints ---------------------------------------------------------------------------

    def _create(self, body: Any, raw_size: int, headers: dict[str, str]) -> dict[str, Any]:
        if raw_size > MAX_BYTES:
            raise Refused(413, "request_too_large", f"Request exceeds the maximum size of {MAX_BYTES} bytes")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            raise Refused(400, "invalid_request_error", "requests: List should have at least 1 item")
        if len(requests) > MAX_REQUESTS:
            raise Refused(400, "invalid_request_error", f"requests: List should have at most {MAX_REQUESTS} items")
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                raise Refused(
                    400,
                    "invalid_request_error",
                    f"requests.{index}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
                )
            if custom_id in seen:
                raise Refused(
                    400,
                    "invalid_request_error",
                    f"requests.{index}.custom_id: {custom_id!r} is not unique in the batch",
                )
            seen.add(custom_id)
            if not isinstance(entry.get("params"), dict):
                raise Refused(400, "invalid_request_error", f"requests.{index}.params: Field required")
            # Each request's params are checked when the batch runs it, not here: "validation of
            # the params object for each message request is performed asynchronously, and
            # validation errors are returned when processing of the entire batch has ended"
            # (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing).
        batch = FakeMessageBatch(
            f"msgbatch_fake{next(self._ids):06d}",
            [{"custom_id": r["custom_id"], "params": r["params"]} for r in requests],
            {k: v for k, v in headers.items() if k.startswith("anthropic-")},
            datetime.now(UTC),
        )
        self.batches[batch.id] = batch
        return batch.object(self.api_base)

    def _list(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise Refused(400, "invalid_request_error", "limit: Input should be a valid integer") from None
        if not 1 <= limit <= 1000:
            raise Refused(400, "invalid_request_error", "limit: Input should be between 1 and 1000")
        newest_first = sorted(self.batches.values(), key=lambda b: (b.created_at, b.id), reverse=True)
        after = query.get("after_id")
        if after:
            ids = [b.id for b in newest_first]
            newest_first = newest_first[ids.index(after) + 1 :] if after in ids else []
        page = newest_first[:limit]
        return {
            "data": [b.object(self.api_base) for b in page],
            "has_more": len(newest_first) > limit,
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        }

    def _batch(self, batch_id: str) -> FakeMessageBatch:
        if batch_id not in self.batches:
            raise Refused(404, "not_found_error", f"No message batch found with id '{batch_id}'")
        return self.batches[batch_id]

    def _route(self, exchange: Exchange) -> tuple[int, Any]:
        method, path, headers, raw = exchange.method, exchange.target, exchange.headers, exchange.body
        parts = path.split("?", 1)[0].rstrip("/").split("/")[1:]  # "/v1/messages/batches/x" -> [...]
        route = None
        if method == "POST" and parts == ["v1", "messages"]:
            route = "messages"
        elif parts[:3] == ["v1", "messages", "batches"]:
            route = {
                ("POST", 3): "create",
                ("GET", 3): "list",
                ("GET", 4): "retrieve",
                ("GET", 5): "results",
                ("POST", 5): "cancel",
            }.get((method, len(parts)))
            if len(parts) == 5 and parts[4] != {"GET": "results", "POST": "cancel"}.get(method):
                route = None
        if route is None:
            raise Refused(404, "not_found_error", f"Not found: {method} {path}")
        bearer = headers.get("authorization", "")
        key = headers.get("x-api-key") or (bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else "")
        if not key or (self.api_key is not None and key != self.api_key):
            raise Refused(401, "authentication_error", "invalid x-api-key")
        if not headers.get("anthropic-version"):
            raise Refused(400, "invalid_request_error", "anthropic-version: header is required")
        reply = self.failure(route)
        if reply is not None:
            sent = self.messages_api.error_reply(Request(method, path, {}, headers, {}), reply)
            return sent.status, sent.body
        try:
            body = exchange.json()
        except ValueError:
            raise Refused(400, "invalid_request_error", "The request body is not valid JSON.") from None
        if route == "messages":
            self.message_requests.append(body)
            return self._message(body, headers)
        if route == "create":
            return 200, self._create(body, len(raw), headers)
        if route == "list":
            return 200, self._list(exchange.query)
        batch = self._batch(parts[3])
        if route == "retrieve":
            return 200, batch.object(self.api_base)
        if route == "cancel":
            if batch.processing_status != "in_progress":
                raise Refused(400, "invalid_request_error", f"Cannot cancel a batch that is {batch.processing_status}")
            batch.processing_status = "canceling"
            batch.cancel_initiated_at = datetime.now(UTC)
            return 200, batch.object(self.api_base)
        if batch.processing_status != "ended":
            raise Refused(404, "not_found_error", f"Results for message batch {batch.id} are not yet available")
        lines = reversed(batch.results)  # no order promised: clients match by custom_id
        return 200, b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    def serve(self, exchange: Exchange) -> None:
        with self._lock:
            self.calls.append((exchange.method, exchange.target))
            try:
                status, payload = self._route(exchange)
            except Refused as refused:
                self.refusals.append(str(refused))
                status, payload = refused.status, refused.body
        created = exchange.method == "POST" and exchange.path.rstrip("/") == "/v1/messages/batches" and status == 200
        hook = self.after_create if created and isinstance(payload, dict) else None
        if hook is not None and isinstance(payload, dict) and hook(self.batches[payload["id"]]) is False:
            return  # no answer: the connection closes unanswered
        retry = {"retry-after": "7"} if status == 429 else None  # Anthropic's 429 says when to come back
        exchange.send(status, payload, retry, "application/binary" if isinstance(payload, bytes) else None)
