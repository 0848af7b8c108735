"""Anthropic's Messages API (``POST /v1/messages``), as Anthropic documents it.

Checks: ``x-api-key`` and ``anthropic-version`` headers; a known model; ``max_tokens`` present,
an integer >= 1 and within the model's output limit; prompt plus ``max_tokens`` within the
context window (newer models refuse rather than truncate); ``system`` only at the top level (a
string or text blocks); ``messages`` non-empty, roles user / assistant only, alternating, the
first one user; content a non-empty string or blocks of known types, text blocks non-empty;
``cache_control`` only ``{"type": "ephemeral"}`` (``ttl`` 5m / 1h), at most 4 breakpoints;
``temperature`` in [0, 1]; ``tools`` with a name and an object ``input_schema``, ``tool_choice``
naming one of them; ``output_format`` (structured outputs) only with the
``structured-outputs-2025-11-13`` beta header, its schema as the constrained decoder takes it:
every object ``additionalProperties: false``, no numeric / string-length / array-size
constraints, at most 24 optional properties and 16 union-typed properties in all.

Answers: content blocks (a ``tool_use`` block when a tool is forced), ``stop_reason`` end_turn /
max_tokens / tool_use / refusal, usage ``input_tokens`` / ``output_tokens`` /
``cache_creation_input_tokens`` / ``cache_read_input_tokens``, and the
``anthropic-ratelimit-*`` headers. Prompt caching is Anthropic's: only a prefix ending at a block
marked ``cache_control`` is cached (tools, then system, then messages), if at least the model's
minimum (1024 tokens for Sonnet 4.5, 4096 for Haiku 4.5); a later request that repeats it reads
it. Errors: ``{"type": "error", "error": {"type": ..., "message": ...}}`` -- 429
rate_limit_error (with ``retry-after``), 529 overloaded_error, 400 invalid_request_error
("prompt is too long: N tokens > M maximum").
"""

from __future__ import annotations

import json
import math
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from extraction_pipeline_tests.support.providers.base import (
    Answered,
    ProviderFake,
    Refusal,
    Reply,
    Request,
    SentReply,
    answer_text,
    tokens,
)

# model -> (context window, most output tokens, least cacheable prefix)
ANTHROPIC_MODELS = {
    "claude-sonnet-4-5-20250929": (200_000, 64_000, 1024),
    "claude-sonnet-4-5": (200_000, 64_000, 1024),
    "claude-haiku-4-5-20251001": (200_000, 64_000, 4096),
    "claude-opus-4-1-20250805": (200_000, 32_000, 1024),
}
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
BLOCK_TYPES = frozenset({"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"})
UNSUPPORTED_SCHEMA_KEYS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "patternProperties",
        "propertyNames",
    }
)
MAX_OPTIONAL, MAX_UNION = 24, 16


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "tool_use":
        return json.dumps(block.get("input"))
    if block.get("type") == "tool_result":
        return "".join(_block_text(b) for b in _blocks(block.get("content")))
    return ""


class AnthropicMeter:
    """An account's per-minute limits as Anthropic meters them (docs.anthropic.com, rate limits):
    token buckets refilled continuously; input tokens (ITPM) counted when a call starts, output
    tokens (OTPM) estimated from its ``max_tokens`` when it starts and adjusted to what it wrote
    when it ends. A call that does not fit is refused with 429 ``rate_limit_error``, a
    ``retry-after`` and the ``anthropic-ratelimit-*`` headers, each limit named apart."""

    def __init__(self, input_per_minute: int, output_per_minute: int, requests_per_minute: int = 4000) -> None:
        self.limits = {"input": input_per_minute, "output": output_per_minute, "requests": requests_per_minute}
        self.left = {name: float(limit) for name, limit in self.limits.items()}
        self.at = time.monotonic()
        self.lock = threading.Lock()
        self.refused = 0
        self.largest_output_asked = 0

    def _refill(self) -> None:
        now = time.monotonic()
        for name, limit in self.limits.items():
            self.left[name] = min(float(limit), self.left[name] + (now - self.at) * limit / 60.0)
        self.at = now

    def admit(self, prompt: int, max_tokens: int) -> Refusal | None:
        with self.lock:
            self._refill()
            self.largest_output_asked = max(self.largest_output_asked, max_tokens)
            wanted = {"input": prompt, "output": max_tokens, "requests": 1}
            short = {name: wanted[name] - self.left[name] for name in wanted if wanted[name] > self.left[name]}
            if not short:
                for name, amount in wanted.items():
                    self.left[name] -= amount
                return None
            self.refused += 1
            name = "output" if "output" in short else next(iter(short))
            unit = {"input": "input tokens", "output": "output tokens", "requests": "requests"}[name]
            # A call larger than a whole minute's allowance never fits: "try again later" (a second).
            wait = max(short[n] * 60.0 / self.limits[n] if wanted[n] <= self.limits[n] else 1.0 for n in short)
            message = (
                f"This request would exceed the rate limit for your organization of {self.limits[name]:,} {unit} "
                "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the "
                "response headers for current usage. Please reduce the prompt length or the maximum tokens "
                "requested, or try again later."
            )
            headers = {**self._headers(), "retry-after": str(max(1, math.ceil(wait)))}
            return Refusal(SentReply(429, _error("rate_limit_error", message), headers), message, capacity=True)

    def settle(self, max_tokens: int, written: int) -> None:
        with self.lock:
            self.left["output"] = min(float(self.limits["output"]), self.left["output"] + max(0, max_tokens - written))

    def headers(self) -> dict[str, str]:
        with self.lock:
            return self._headers()

    def _headers(self) -> dict[str, str]:
        reset = (datetime.now(UTC) + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
        found: dict[str, str] = {}
        for name, header in (("input", "input-tokens"), ("output", "output-tokens"), ("requests", "requests")):
            found[f"anthropic-ratelimit-{header}-limit"] = str(self.limits[name])
            found[f"anthropic-ratelimit-{header}-remaining"] = str(max(0, int(self.left[name])))
            found[f"anthropic-ratelimit-{header}-reset"] = reset
        tight = min(("input", "output"), key=lambda n: self.left[n])  # tokens-*: the most restrictive in effect
        found["anthropic-ratelimit-tokens-limit"] = str(self.limits[tight])
        found["anthropic-ratelimit-tokens-remaining"] = str(max(0, int(self.left[tight])))
        found["anthropic-ratelimit-tokens-reset"] = reset
        return found


class AnthropicFake(ProviderFake):
    name = "anthropic"

    def __init__(self) -> None:
        super().__init__()
        self.rate_limit_headers = self.rate_limits(tokens_remaining=390_000)
        self.meter: AnthropicMeter | None = None  # the account's per-minute limits; None: unmetered

    @staticmethod
    def rate_limits(tokens_remaining: int, requests_remaining: int = 3999) -> dict[str, str]:
        reset = (datetime.now(UTC) + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "anthropic-ratelimit-requests-limit": "4000",
            "anthropic-ratelimit-requests-remaining": str(requests_remaining),
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-tokens-limit": "400000",
            "anthropic-ratelimit-tokens-remaining": str(tokens_remaining),
            "anthropic-ratelimit-tokens-reset": reset,
            "anthropic-ratelimit-input-tokens-limit": "400000",
            "anthropic-ratelimit-input-tokens-remaining": str(tokens_remaining),
            "anthropic-ratelimit-input-tokens-reset": reset,
            "anthropic-ratelimit-output-tokens-limit": "80000",
            "anthropic-ratelimit-output-tokens-remaining": "80000",
            "anthropic-ratelimit-output-tokens-reset": reset,
            "request-id": "req_fake",
        }

    def serves(self, request: Request) -> bool:
        return request.path == "/v1/messages"

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, _error("not_found_error", f"Not found: {request.path}"))

    def bad(self, message: str) -> Any:
        return self.refuse(400, _error("invalid_request_error", message), message)

    # -- the documented constraints ----------------------------------------------------------------
    def check(self, request: Request) -> None:
        headers, body = request.headers, request.body
        if not headers.get("x-api-key"):
            raise self.refuse(401, _error("authentication_error", "x-api-key header is required"), "no x-api-key")
        if not headers.get("anthropic-version"):
            raise self.bad("anthropic-version: header is required")
        model = body.get("model")
        if model not in ANTHROPIC_MODELS:
            raise self.refuse(404, _error("not_found_error", f"model: {model}"), f"unknown model {model}")
        window, most_out, _ = ANTHROPIC_MODELS[model]
        if "max_tokens" not in body:
            raise self.bad("max_tokens: Field required")
        asked = body["max_tokens"]
        if not isinstance(asked, int) or asked < 1:
            raise self.bad("max_tokens: Input should be a valid integer greater than or equal to 1")
        if asked > most_out:
            raise self.bad(
                f"max_tokens: {asked} > {most_out}, which is the maximum allowed number of output tokens for {model}"
            )
        temperature = body.get("temperature")
        if temperature is not None and not 0 <= float(temperature) <= 1:
            raise self.bad("temperature: Input should be less than or equal to 1")
        system = body.get("system")
        if system is not None and not isinstance(system, str):
            for block in _blocks(system):
                if block.get("type") != "text":
                    raise self.bad("system: only text blocks are accepted")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise self.bad("messages: at least one message is required")
        for index, message in enumerate(messages):
            role = message.get("role")
            if role == "system":
                raise self.bad(
                    'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
                    'not "system" as an input message role.'
                )
            if role not in ("user", "assistant"):
                raise self.bad(f"messages.{index}.role: Input should be 'user' or 'assistant'")
            if index == 0 and role != "user":
                raise self.bad('messages: first message must use the "user" role')
            if index and messages[index - 1].get("role") == role:
                raise self.bad('messages: roles must alternate between "user" and "assistant"')
            content = message.get("content")
            if content in ("", [], None):
                raise self.bad(f"messages.{index}: all messages must have non-empty content")
            for block in _blocks(content):
                if block.get("type") not in BLOCK_TYPES:
                    raise self.bad(f"messages.{index}.content: unknown block type {block.get('type')!r}")
                if block.get("type") == "text" and not str(block.get("text", "")).strip():
                    raise self.bad(f"messages.{index}: text content blocks must be non-empty")
        self.check_cache_marks(body)
        self.check_tools(body)
        self.check_output_format(request)
        prompt = tokens(self.prompt_text(body))
        if prompt > window:
            raise self.bad(f"prompt is too long: {prompt} tokens > {window} maximum")
        if prompt + asked > window:
            raise self.bad(
                f"input length and `max_tokens` exceed context limit: {prompt} + {asked} > {window}, decrease input "
                "length or `max_tokens` and try again"
            )
        if self.meter is not None:
            refused = self.meter.admit(prompt, int(asked))
            self.rate_limit_headers = {**self.rate_limit_headers, **self.meter.headers()}
            if refused is not None:
                raise refused

    def _all_blocks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Tools, then system, then messages: the order Anthropic builds (and caches) the prompt in."""
        found = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        system = body.get("system")
        if system is not None:
            found += _blocks(system)
        for message in body.get("messages") or []:
            found += _blocks(message.get("content"))
        return found

    def check_cache_marks(self, body: dict[str, Any]) -> None:
        marks = [b["cache_control"] for b in self._all_blocks(body) if "cache_control" in b]
        for mark in marks:
            if (
                not isinstance(mark, dict)
                or mark.get("type") != "ephemeral"
                or mark.get("ttl", "5m") not in ("5m", "1h")
            ):
                raise self.bad(f"cache_control: Input tag {mark!r} does not match the expected {{'type': 'ephemeral'}}")
        if len(marks) > 4:
            raise self.bad(f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}.")

    def check_tools(self, body: dict[str, Any]) -> None:
        names = set()
        for index, tool in enumerate(body.get("tools") or []):
            if not tool.get("name") or (tool.get("input_schema") or {}).get("type") != "object":
                raise self.bad(f"tools.{index}: a tool needs a name and an input_schema of type object")
            names.add(tool["name"])
        choice = body.get("tool_choice")
        if choice is not None and choice.get("type") == "tool" and choice.get("name") not in names:
            raise self.bad(f"tool_choice: tool {choice.get('name')!r} is not among the tools")

    def check_output_format(self, request: Request) -> None:
        fmt = request.body.get("output_format")
        if fmt is None:
            return
        if STRUCTURED_OUTPUTS_BETA not in request.headers.get("anthropic-beta", ""):
            raise self.bad("output_format: Extra inputs are not permitted")
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise self.bad("output_format: expected {'type': 'json_schema', 'schema': {...}}")
        optional = union = 0
        for node in _schema_nodes(fmt["schema"]):
            if node.get("type") == "object" or "properties" in node:
                if node.get("additionalProperties") is not False:
                    raise self.bad(
                        "output_format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false"  # noqa: E501 (the provider's message, verbatim)
                    )
                properties = node.get("properties") or {}
                optional += len(set(properties) - set(node.get("required") or []))
                union += sum(
                    1
                    for p in properties.values()
                    if isinstance(p, dict) and ("anyOf" in p or isinstance(p.get("type"), list))
                )
            for key in UNSUPPORTED_SCHEMA_KEYS & set(node):
                raise self.bad(
                    f"output_format.schema: For '{node.get('type')}' type, property '{key}' is not supported"
                )
            if node.get("minItems", 0) not in (0, 1):
                raise self.bad(
                    "output_format.schema: For 'array' type, 'minItems' values other than 0 or 1 are not supported"
                )
        if optional > MAX_OPTIONAL or union > MAX_UNION:
            raise self.bad(
                f"Schema is too complex for compilation: {optional} optional properties (at most {MAX_OPTIONAL}) and "
                f"{union} properties with union types (at most {MAX_UNION})"
            )

    # -- answering ------------------------------------------------------------------------------
    def prompt_text(self, body: dict[str, Any]) -> str:
        return "".join(self._segments(body))

    def _segments(self, body: dict[str, Any]) -> list[str]:
        """The prompt block by block, in Anthropic's order (tools, system, messages)."""
        return [json.dumps(b) if "input_schema" in b else _block_text(b) for b in self._all_blocks(body)]

    def messages_of(self, request: Request) -> list[dict[str, str]]:
        body = request.body
        found = []
        if body.get("system") is not None:
            found.append({"role": "system", "content": "".join(_block_text(b) for b in _blocks(body["system"]))})
        for message in body.get("messages") or []:
            found.append(
                {"role": message["role"], "content": "".join(_block_text(b) for b in _blocks(message.get("content")))}
            )
        return found

    def cache_use(self, body: dict[str, Any]) -> tuple[int, int]:
        """(tokens read, tokens written): prefixes ending at a cache_control mark, long enough, are
        cached; the longest one seen before is read, the last mark's prefix written if new."""
        least = ANTHROPIC_MODELS[body["model"]][2]
        blocks, segments = self._all_blocks(body), self._segments(body)
        prefixes: list[tuple[str, int]] = []  # (cache key: the model and the prefix, the prefix's tokens)
        for index, block in enumerate(blocks):
            if "cache_control" in block:
                text = "".join(segments[: index + 1])
                if tokens(text) >= least:
                    prefixes.append((f"{body['model']}\0{text}", tokens(text)))
        read = max((size for key, size in prefixes if key in self.cache), default=0)
        written = 0
        if prefixes and prefixes[-1][0] not in self.cache:
            written = prefixes[-1][1] - read
        for key, _ in prefixes:
            if key not in self.cache:
                self.cache.store(key)
        return read, written

    def answer_body(self, request: Request, reply: Reply, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
        body = request.body
        prompt = tokens(self.prompt_text(body))
        content, written, finish = answer_text(reply, int(body["max_tokens"]))
        if self.meter is not None:
            self.meter.settle(int(body["max_tokens"]), written)
        read, created = self.cache_use(body)
        self.record(Answered(request, prompt, written, read, created))
        choice = body.get("tool_choice") or {}
        blocks: list[dict[str, Any]]
        if finish == "filtered":
            blocks, stop = [], "refusal"
        elif choice.get("type") == "tool" and finish == "stop":
            blocks, stop = (
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_fake",
                        "name": choice["name"],
                        "input": json.loads(content or "{}"),
                    }
                ],
                "tool_use",
            )
        else:
            blocks, stop = [{"type": "text", "text": content}], {"stop": "end_turn", "length": "max_tokens"}[finish]
        return 200, {
            "id": f"msg_fake{len(self.answered)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt - read - created,
                "cache_creation_input_tokens": created,
                "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": created, "ephemeral_1h_input_tokens": 0},
                "output_tokens": written,
                "service_tier": "standard",
            },
        }

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {429: "rate_limit", 529: "overloaded", 400: "invalid", 401: "auth"}.get(reply.status, "")
        if kind == "rate_limit":
            message = reply.error_message or (
                "This request would exceed the rate limit for your organization of 400,000 input tokens per minute. "
                "For details, refer to: https://docs.claude.com/en/api/rate-limits."
            )
            limits = self.rate_limits(tokens_remaining=0)
            return SentReply(429, _error("rate_limit_error", message), {**limits, "retry-after": "7"})
        if kind == "overloaded":
            return SentReply(529, _error("overloaded_error", reply.error_message or "Overloaded"))
        if kind == "context_length":
            window = ANTHROPIC_MODELS.get(str(request.body.get("model")), (200_000, 0, 0))[0]
            return SentReply(
                400, _error("invalid_request_error", f"prompt is too long: {window + 1234} tokens > {window} maximum")
            )
        if kind == "auth":
            return SentReply(401, _error("authentication_error", "invalid x-api-key"))
        if kind == "insufficient_quota":
            # No credit left: a 400 invalid_request_error, in the words users report it in.
            message = (
                "Your credit balance is too low to access the Anthropic API. "
                "Please go to Plans & Billing to upgrade or purchase credits."
            )
            return SentReply(400, _error("invalid_request_error", reply.error_message or message))
        status = reply.status if reply.status != 200 else 400
        kinds = {400: "invalid_request_error", 403: "permission_error", 404: "not_found_error", 500: "api_error"}
        return SentReply(status, _error(kinds.get(status, "api_error"), reply.error_message or f"fake error {status}"))


def _schema_nodes(schema: Any) -> list[dict[str, Any]]:
    """Every sub-schema, $defs included."""
    found: list[dict[str, Any]] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(k in node for k in ("type", "properties", "anyOf", "items", "$ref", "enum")):
                found.append(node)
            for key, value in node.items():
                if key in ("properties", "$defs", "definitions"):
                    stack.extend(value.values() if isinstance(value, dict) else [])
                elif key in ("items", "anyOf", "allOf", "oneOf", "not", "additionalProperties"):
                    stack.extend(value if isinstance(value, list) else [value])
        elif isinstance(node, list):
            stack.extend(node)
    return found
