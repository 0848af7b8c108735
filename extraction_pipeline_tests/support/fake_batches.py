"""A loopback fake of OpenAI's Files and Batch endpoints, for tests.

Real HTTP, the real litellm / OpenAI client: only the provider is fake. It follows OpenAI's
documented Batch API:

- ``POST /v1/files`` (multipart, ``purpose=batch``): the JSONL is checked as OpenAI documents the
  input file: every line a JSON object with a ``custom_id`` unique in the file, ``method`` POST, a
  supported ``url`` (the same on every line), a ``body`` naming one ``model`` for the whole file;
  at most ``max_requests`` lines and ``max_file_bytes`` bytes (50,000 and 200 MB). A file failing
  that is refused with 400 and OpenAI's error body naming the line.
- ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``.
- ``DELETE /v1/files/{id}``: ``{"id", "object": "file", "deleted": true}``.
- ``POST /v1/batches`` (``input_file_id``, ``endpoint`` matching the file's lines,
  ``completion_window`` "24h" only, ``metadata``: at most 16 pairs of strings, keys up to 64
  characters and values up to 512, else 400), ``GET /v1/batches/{id}``,
  ``POST /v1/batches/{id}/cancel``: batch objects with OpenAI's fields (``status``,
  ``request_counts``, ``output_file_id``, ``error_file_id``, ``errors``, ``metadata`` and the
  timestamps).
- ``GET /v1/batches?limit=&after=``: the account's batches, newest first, ``limit`` 1 to 100
  (default 20), ``after`` a batch id: ``{"object": "list", "data", "first_id", "last_id",
  "has_more"}`` (https://platform.openai.com/docs/api-reference/batch/list).

``after_create(batch)``, when set, is called once a create has been done and before its answer is
sent (outside the fake's lock): a test sleeps there past the client's timeout, or kills the
process that asked, or stops its database: the provider has the batch, the caller never hears so.
When it returns False the connection is closed unanswered (a dropped connection).

The test drives the clock: ``advance(batch_id)`` moves validating → in_progress (running no line
yet) → finalizing (after running every line; ``advance(batch_id, lines=k)`` runs k more first) →
completed; ``auto_advance`` makes every read of the batch take one step first. ``expire`` ends a
batch as expired with only the lines run so far answered; a cancel moves it to cancelling, and the
next ``advance`` to cancelled, also keeping what was run.

Each line is answered by ``answer(body) -> Reply`` (``fake_llm.Reply``): a 200 reply is written to
the output file as OpenAI does (``{"id", "custom_id", "response": {"status_code": 200,
"request_id", "body": chat.completion}, "error": null}``); any other status to the error file with
OpenAI's error body (``response.status_code`` 400, 500...). A body is checked like a real chat call
first (model set, messages present, ``max_tokens`` within ``output_limit`` when one is set: else
a 400 line), and an answer longer than ``max_tokens`` (4 characters a token) is cut there with
``finish_reason: "length"``. Requests a batch never ran (expired, cancelled) are written to the
error file with OpenAI's ``batch_expired`` / ``batch_cancelled`` codes, unless
``report_unrun`` is False (then they are in neither file).

Ordinary calls (``POST /v1/chat/completions``) are answered the same way, at once, and kept in
``chat_requests``: what a batch did not answer is asked of the same account.

``fail_next(route, Reply(status=...))`` makes the next call of a route (``upload``, ``create``,
``retrieve``, ``cancel``, ``content``) answer with that HTTP error; ``api_key``, when set, is
required as the bearer token (401 with OpenAI's body otherwise).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extraction_pipeline_tests.support.fake_llm import CHARS_PER_TOKEN, Reply
from extraction_pipeline_tests.support.http_fake import Exchange, LoopbackFake

SUPPORTED_URLS = frozenset({"/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"})
ROUTES = ("upload", "create", "retrieve", "cancel", "content", "list", "delete")
WINDOW_SECONDS = 24 * 3600


class Refused(Exception):
    """An HTTP error answer: status and OpenAI's error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


@dataclass
class FakeFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class FakeBatch:
    id: str
    input_file_id: str
    endpoint: str
    lines: list[dict[str, Any]]  # the input file's requests, in order
    created_at: int
    metadata: dict[str, str] | None = None
    status: str = "validating"
    timestamps: dict[str, int] = field(default_factory=dict)
    run: int = 0  # how many lines have been run
    done: list[dict[str, Any]] = field(default_factory=list)  # output-file lines
    failed: list[dict[str, Any]] = field(default_factory=list)  # error-file lines
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None  # batch-level validation errors (status "failed")

    def object(self) -> dict[str, Any]:
        stamps = ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + WINDOW_SECONDS,
            **{f"{name}_at": self.timestamps.get(name) for name in stamps},
            "request_counts": {"total": len(self.lines), "completed": len(self.done), "failed": len(self.failed)},
            "metadata": self.metadata,
        }


class FakeBatchServer(LoopbackFake):
    methods = ("GET", "POST", "DELETE")
    routes = ROUTES

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.files: dict[str, FakeFile] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.answer: Callable[[dict[str, Any]], Reply] = lambda body: Reply(json.dumps({}))
        self.output_limit: int | None = None  # the model's most completion tokens; None: no limit
        self.cached_tokens = 0  # prompt tokens each answer reports as read from the prompt cache
        self.report_unrun = True  # write batch_expired / batch_cancelled lines for requests never run
        self.auto_advance = False  # every read of a batch takes one lifecycle step first
        self.max_requests = 50_000
        self.max_file_bytes = 200 * 1024 * 1024
        self.api_key: str | None = None  # required bearer token; None: any
        self.calls: list[tuple[str, str]] = []  # (method, path) per request received
        self.answered: list[dict[str, Any]] = []  # the bodies of the lines run, in order
        self.chat_requests: list[dict[str, Any]] = []  # ordinary chat-completions calls, in order
        self.after_create: Callable[[FakeBatch], bool | None] | None = None
        # The organisation's enqueued-token limit for the model (None: none): prompt tokens of the
        # batches validating, in progress or finalizing, counted as the fake counts tokens.
        self.enqueued_token_limit: int | None = None
        self._ids = itertools.count(1)

    @property
    def api_base(self) -> str:
        return f"{self.origin}/v1"

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # The lifecycle, driven by the test.

    def advance(self, batch_id: str, lines: int | None = None) -> str:
        """One step of the batch's life; returns its new status. In progress, ``lines`` runs that
        many more lines and stays in progress while any is left (None: all, then finalizing)."""
        with self._lock:
            batch = self.batches[batch_id]
            if batch.status == "validating":
                problems = self._validate(batch) or self._over_enqueued_limit(batch)
                if problems:
                    batch.errors = problems
                    self._end(batch, "failed")
                else:
                    self._step(batch, "in_progress")
            elif batch.status == "in_progress":
                left = len(batch.lines) - batch.run
                self._run(batch, left if lines is None else min(lines, left))
                if batch.run == len(batch.lines):
                    self._step(batch, "finalizing")
            elif batch.status == "finalizing":
                self._end(batch, "completed")
            elif batch.status == "cancelling":
                self._end(batch, "cancelled")
            return batch.status

    def expire(self, batch_id: str) -> None:
        """The 24 hours are over: the batch ends expired with what it has run."""
        with self._lock:
            batch = self.batches[batch_id]
            assert batch.status in ("validating", "in_progress", "finalizing"), batch.status
            self._end(batch, "expired")

    def _step(self, batch: FakeBatch, status: str) -> None:
        batch.status = status
        batch.timestamps[status] = int(time.time())

    def _end(self, batch: FakeBatch, status: str) -> None:
        if status in ("expired", "cancelled") and self.report_unrun:
            code, message = {
                "expired": (
                    "batch_expired",
                    "This request could not be executed before the completion window expired.",
                ),
                "cancelled": ("batch_cancelled", "This request was not executed because the batch was cancelled."),
            }[status]
            for line in batch.lines[batch.run :]:
                batch.failed.append(self._line(line["custom_id"], None, {"code": code, "message": message}))
        if batch.done:
            batch.output_file_id = self._store("batch_output.jsonl", "batch_output", batch.done)
        if batch.failed:
            batch.error_file_id = self._store("batch_errors.jsonl", "batch_output", batch.failed)
        self._step(batch, status)

    def _store(self, filename: str, purpose: str, lines: list[dict[str, Any]]) -> str:
        data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        stored = FakeFile(self._new_id("file-"), filename, purpose, data, int(time.time()))
        self.files[stored.id] = stored
        return stored.id

    def _line(self, custom_id: str, response: dict[str, Any] | None, error: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": self._new_id("batch_req_"), "custom_id": custom_id, "response": response, "error": error}

    def _validate(self, batch: FakeBatch) -> list[dict[str, Any]]:
        """What OpenAI's validating stage finds wrong with the whole file (here: nothing beyond the
        upload's checks, except an endpoint the lines do not use)."""
        wrong = [n for n, line in enumerate(batch.lines, start=1) if line["url"] != batch.endpoint]
        return [
            {
                "code": "invalid_url",
                "line": n,
                "message": f"The URL provided for this request does not match the batch endpoint {batch.endpoint}.",
                "param": "url",
            }
            for n in wrong
        ]

    def _over_enqueued_limit(self, batch: FakeBatch) -> list[dict[str, Any]]:
        """OpenAI fails a whole batch whose prompt tokens, with those of the organisation's batches
        not yet ended for the same model, exceed its enqueued-token limit (``token_limit_exceeded``;
        https://platform.openai.com/docs/guides/batch#rate-limits)."""
        if self.enqueued_token_limit is None:
            return []
        model = batch.lines[0]["body"].get("model") if batch.lines else None

        def tokens(of: FakeBatch) -> int:
            return sum(math.ceil(len(json.dumps(line["body"]["messages"])) / CHARS_PER_TOKEN) for line in of.lines)

        queued = sum(
            tokens(other)
            for other in self.batches.values()
            if other is not batch
            and other.status in ("validating", "in_progress", "finalizing")
            and other.lines
            and other.lines[0]["body"].get("model") == model
        )
        if queued + tokens(batch) <= self.enqueued_token_limit:
            return []
        return [
            {
                "code": "token_limit_exceeded",
                "line": None,
                "param": None,
                "message": (
                    f"Enqueued token limit reached for {model} in organization org-fake. Limit: "
                    f"{self.enqueued_token_limit:,} enqueued tokens. Please try again once some in_progress "
                    "batches have been completed."
                ),
            }
        ]

    def _run(self, batch: FakeBatch, count: int) -> None:
        for line in batch.lines[batch.run : batch.run + count]:
            body = line["body"]
            self.answered.append(body)
            status, payload = self._chat(body)
            response = {"status_code": status, "request_id": self._new_id("req_"), "body": payload}
            (batch.done if status == 200 else batch.failed).append(self._line(line["custom_id"], response, None))
        batch.run += count

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One line run as a chat-completions call: (status, response body)."""
        try:
            asked = _check_chat_body(body, self.output_limit)
        except Refused as refused:
            return refused.status, refused.body
        reply = self.answer(body)
        if reply.status != 200:
            message = reply.error_message or f"fake error {reply.status}"
            return reply.status, {"error": {"message": message, "type": "fake", "param": None, "code": None}}
        content, tokens_out, finish = reply.content, reply.tokens_out, "stop"
        cap = asked if asked is not None else self.output_limit
        if cap is not None:
            tokens_out = math.ceil(len(content or "") / CHARS_PER_TOKEN)
            if tokens_out > cap:
                content, tokens_out, finish = (content or "")[: cap * CHARS_PER_TOKEN], cap, "length"
        return 200, {
            "id": self._new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": reply.tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": reply.tokens_in + tokens_out,
                "prompt_tokens_details": {"cached_tokens": min(self.cached_tokens, reply.tokens_in)},
            },
        }

    # The endpoints.

    def _upload(self, fields: dict[str, tuple[str | None, bytes]]) -> dict[str, Any]:
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields:
            raise Refused(400, "Missing required parameter: 'file'.", param="file")
        if purpose != "batch":
            raise Refused(400, f"This fake only takes files for purpose 'batch', not {purpose!r}.", param="purpose")
        filename, data = fields["file"]
        _check_batch_file(data, self.max_requests, self.max_file_bytes)
        stored = FakeFile(self._new_id("file-"), filename or "upload.jsonl", purpose, data, int(time.time()))
        self.files[stored.id] = stored
        return stored.object()

    def _create(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("completion_window") != "24h":
            raise Refused(400, "Invalid completion_window: only '24h' is supported.", param="completion_window")
        endpoint = request.get("endpoint")
        if endpoint not in SUPPORTED_URLS:
            raise Refused(400, f"Invalid endpoint: {endpoint!r}.", param="endpoint")
        stored = self.files.get(str(request.get("input_file_id")))
        if stored is None:
            raise Refused(404, f"No such File object: {request.get('input_file_id')}", param="input_file_id")
        if stored.purpose != "batch":
            raise Refused(400, "The input file must be uploaded with purpose 'batch'.", param="input_file_id")
        metadata = request.get("metadata")
        if metadata is not None:
            _check_metadata(metadata)
        lines = [json.loads(raw) for raw in stored.data.splitlines() if raw.strip()]
        batch = FakeBatch(
            self._new_id("batch_"), stored.id, str(endpoint), lines, int(time.time()), request.get("metadata")
        )
        self.batches[batch.id] = batch
        return batch.object()

    def _list(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise Refused(400, f"Invalid 'limit': {query.get('limit')!r}.", param="limit") from None
        if not 1 <= limit <= 100:
            raise Refused(400, f"Invalid 'limit': {limit}. Must be between 1 and 100.", param="limit")
        newest_first = sorted(self.batches.values(), key=lambda b: (b.created_at, b.id), reverse=True)
        after = query.get("after")
        if after:
            ids = [b.id for b in newest_first]
            if after not in ids:
                raise Refused(404, f"No batch found with id '{after}'.", param="after")
            newest_first = newest_first[ids.index(after) + 1 :]
        page = newest_first[:limit]
        return {
            "object": "list",
            "data": [b.object() for b in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": len(newest_first) > limit,
        }

    def _delete_file(self, file_id: str) -> dict[str, Any]:
        if self.files.pop(file_id, None) is None:
            raise Refused(404, f"No such File object: {file_id}")
        return {"id": file_id, "object": "file", "deleted": True}

    def _batch(self, batch_id: str) -> FakeBatch:
        if batch_id not in self.batches:
            raise Refused(404, f"No batch found with id '{batch_id}'.")
        return self.batches[batch_id]

    def _cancel(self, batch_id: str) -> dict[str, Any]:
        batch = self._batch(batch_id)
        if batch.status not in ("validating", "in_progress", "finalizing"):
            raise Refused(400, f"Cannot cancel a batch with status '{batch.status}'.")
        self._step(batch, "cancelling")
        return batch.object()

    def _route(self, exchange: Exchange) -> tuple[int, dict[str, Any] | bytes]:
        method, path, headers, raw = exchange.method, exchange.target, exchange.headers, exchange.body
        parts = path.split("?", 1)[0].rstrip("/").split("/")[1:]  # "/v1/batches/x" -> ["v1", "batches", "x"]
        if parts[:1] != ["v1"]:
            raise Refused(404, f"Unknown path {path}")
        parts = parts[1:]
        if method == "POST" and parts == ["chat", "completions"]:
            # The same account answers ordinary calls at the same base, as OpenAI does: what a
            # provider batch did not answer is asked here.
            body = json.loads(raw or b"{}")
            self.chat_requests.append(body)
            return self._chat(body)
        route = {
            ("POST", 1, "files"): "upload",
            ("POST", 1, "batches"): "create",
            ("GET", 1, "batches"): "list",
            ("DELETE", 2, "files"): "delete",
            ("GET", 2, "batches"): "retrieve",
            ("GET", 2, "files"): "retrieve",
            ("POST", 3, "batches"): "cancel",
            ("GET", 3, "files"): "content",
        }.get((method, len(parts), parts[0] if parts else ""))
        if route is None or (len(parts) == 3 and parts[2] not in ("cancel", "content")):
            raise Refused(404, f"Unknown {method} {path}")
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            sent = str(headers.get("authorization") or "").removeprefix("Bearer ")
            masked = f"{sent[:3]}***{sent[-4:]}" if len(sent) > 8 else "***"
            raise Refused(401, f"Incorrect API key provided: {masked}.", code="invalid_api_key")
        reply = self.failure(route)
        if reply is not None:
            return reply.status, {
                "error": {"message": reply.error_message or f"fake error {reply.status}", "type": "fake"}
            }
        if route == "upload":
            return 200, self._upload(_multipart(headers.get("content-type", ""), raw))
        if route == "create":
            return 200, self._create(json.loads(raw or b"{}"))
        if route == "cancel":
            return 200, self._cancel(parts[1])
        if route == "list":
            return 200, self._list(exchange.query)
        if route == "delete":
            return 200, self._delete_file(parts[1])
        if parts[0] == "batches":
            if self.auto_advance and self._batch(parts[1]).status not in (
                "completed",
                "failed",
                "expired",
                "cancelled",
            ):
                self.advance(parts[1])
            return 200, self._batch(parts[1]).object()
        stored = self.files.get(parts[1])
        if stored is None:
            raise Refused(404, f"No such File object: {parts[1]}")
        return 200, stored.data if route == "content" else stored.object()

    def serve(self, exchange: Exchange) -> None:
        with self._lock:
            self.calls.append((exchange.method, exchange.target))
            try:
                status, payload = self._route(exchange)
            except Refused as refused:
                status, payload = refused.status, refused.body
        created = exchange.method == "POST" and exchange.path.rstrip("/") == "/v1/batches" and status == 200
        hook = self.after_create if created and isinstance(payload, dict) else None
        if hook is not None and isinstance(payload, dict) and hook(self.batches[payload["id"]]) is False:
            return  # no answer: the connection closes unanswered
        exchange.send(status, payload)


def _check_metadata(metadata: Any) -> None:
    """OpenAI's rule for ``metadata``: up to 16 string pairs, keys up to 64 characters, values up
    to 512 (https://platform.openai.com/docs/api-reference/batch/create)."""
    if not isinstance(metadata, dict):
        raise Refused(400, "Invalid type for 'metadata': expected an object.", param="metadata")
    if len(metadata) > 16:
        raise Refused(400, "Invalid 'metadata': too many properties. Expected at most 16.", param="metadata")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise Refused(400, f"Invalid type for 'metadata.{key}': expected a string.", param=f"metadata.{key}")
        if len(key) > 64:
            raise Refused(400, "Invalid 'metadata': keys can be at most 64 characters long.", param="metadata")
        if len(value) > 512:
            raise Refused(400, f"Invalid 'metadata.{key}': string too long (at most 512).", param=f"metadata.{key}")


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The form's fields: name -> (filename, bytes)."""
    if not content_type.startswith("multipart/form-data"):
        raise Refused(400, "The file must be uploaded as multipart/form-data.")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _check_batch_file(data: bytes, max_requests: int, max_bytes: int) -> None:
    """OpenAI's rules for a batch input file; the first broken one is refused with 400."""
    if len(data) > max_bytes:
        raise Refused(400, f"File is too large: {len(data)} bytes, a batch input file can be at most {max_bytes}.")
    raw_lines = [raw for raw in data.splitlines() if raw.strip()]
    if not raw_lines:
        raise Refused(400, "The batch input file is empty.")
    if len(raw_lines) > max_requests:
        raise Refused(
            400, f"The batch input file has {len(raw_lines)} requests, a batch can have at most {max_requests}."
        )
    seen: set[str] = set()
    urls: set[str] = set()
    models: set[str] = set()
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = json.loads(raw)
        except ValueError:
            raise Refused(
                400, f"Line {number} of the batch input file is not valid JSON.", code="invalid_json"
            ) from None
        if not isinstance(line, dict):
            raise Refused(400, f"Line {number} of the batch input file is not a JSON object.", code="invalid_json")
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            raise Refused(400, f"Line {number}: a custom_id is required.", param="custom_id")
        if custom_id in seen:
            raise Refused(
                400, f"Line {number}: the custom_id {custom_id!r} is not unique in the file.", param="custom_id"
            )
        seen.add(custom_id)
        if line.get("method") != "POST":
            raise Refused(400, f"Line {number}: method must be 'POST'.", param="method")
        if line.get("url") not in SUPPORTED_URLS:
            raise Refused(400, f"Line {number}: unsupported url {line.get('url')!r}.", param="url")
        urls.add(line["url"])
        body = line.get("body")
        if not isinstance(body, dict):
            raise Refused(400, f"Line {number}: body must be a JSON object.", param="body")
        models.add(str(body.get("model")))
    if len(urls) > 1:
        raise Refused(400, f"All requests in a batch input file must use the same url, found {sorted(urls)}.")
    if len(models) > 1:
        raise Refused(400, f"All requests in a batch input file must use the same model, found {sorted(models)}.")


def _check_chat_body(body: dict[str, Any], output_limit: int | None) -> int | None:
    """A body checked like a real chat call; the max_tokens it asks for (or None)."""
    if not body.get("model"):
        raise Refused(400, "you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused(
            400, "Invalid 'messages': empty array. Expected an array with minimum length 1.", param="messages"
        )
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    if asked is not None and output_limit is not None and int(asked) > output_limit:
        raise Refused(
            400,
            f"max_tokens is too large: {asked}. This model supports at most {output_limit} completion tokens, "
            f"whereas you provided {asked}.",
            param="max_tokens",
            code="invalid_value",
        )
    return int(asked) if asked is not None else None
