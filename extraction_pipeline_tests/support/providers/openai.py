"""OpenAI's Chat Completions API (``POST /v1/chat/completions``), as its API reference documents it.

Checks: a ``Bearer`` key; a known model; ``messages`` non-empty with roles system / developer /
user / assistant / tool and string or text-part content; ``max_tokens`` / ``max_completion_tokens``
(not both) within the model's output limit; ``temperature`` in [0, 2]; reasoning models (o-series,
gpt-5) as ``REASONING_EFFORTS`` says; ``response_format`` of type
text / json_object / json_schema (json_schema needs ``name`` and ``schema``; json_object needs the
word "json" somewhere in the messages); the prompt plus the answer's limit within the context
window (``context_length_exceeded``). Answers carry ``usage.prompt_tokens_details.cached_tokens``:
OpenAI caches a prompt prefix of at least 1024 tokens, served in steps of 128 tokens.

The Azure OpenAI and vLLM fakes are this one with their own routes, headers and error bodies.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

from extraction_pipeline_tests.support.providers.base import (
    Answered,
    ProviderFake,
    Reply,
    Request,
    SentReply,
    answer_text,
    tokens,
)

# model -> (context window, most output tokens), as the providers' model pages give them.
OPENAI_MODELS = {
    "gpt-4o-mini": (128_000, 16_384),
    "gpt-4o": (128_000, 16_384),
    "gpt-4.1-mini": (1_047_576, 32_768),
    "gpt-5-mini": (400_000, 128_000),
    "o4-mini": (200_000, 100_000),
}
# Reasoning models and the efforts they take (OpenAI's reasoning guide: gpt-5 adds "minimal").
# They take ``max_completion_tokens`` only, and only the default temperature (1): anything else is
# a 400 ``unsupported_parameter`` / ``unsupported_value``. Their reasoning tokens are billed as
# output, counted in ``completion_tokens`` (``completion_tokens_details.reasoning_tokens``) and
# spent out of ``max_completion_tokens``: a limit they use up ends the answer at ``length`` with
# no visible text.
REASONING_EFFORTS = {
    "gpt-5-mini": ("minimal", "low", "medium", "high"),
    "o4-mini": ("low", "medium", "high"),
}
DEFAULT_EFFORT = "medium"
# The fake's reasoning, per effort (a real model's varies with the question).
REASONING_TOKENS = {"minimal": 0, "low": 256, "medium": 1024, "high": 4096}
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def text_of(content: Any) -> str:
    """A message's content as text (a string, or the text of its parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class OpenAICompatibleFake(ProviderFake):
    """The chat-completions wire format; subclasses change routes, auth and error bodies."""

    name = "openai"
    models: dict[str, tuple[int, int]]
    cache_min_tokens = 1024  # OpenAI: prompts of 1024 tokens or more are cached ...
    cache_step_tokens = 128  # ... and hits grow in steps of 128 tokens
    finish_words: ClassVar[dict[str, str]] = {"stop": "stop", "length": "length", "filtered": "content_filter"}

    @property
    def api_base(self) -> str:
        return f"{self.origin}/v1"

    def __init__(self) -> None:
        super().__init__()
        self.models = dict(OPENAI_MODELS)

    def serves(self, request: Request) -> bool:
        return request.path == "/v1/chat/completions"

    def model_of(self, request: Request) -> str:
        return str(request.body.get("model", ""))

    # -- errors in this provider's words ---------------------------------------------------------
    def error(self, status: int, message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}

    def bad(self, message: str, param: str | None = None, code: str | None = None) -> Any:
        return self.refuse(400, self.error(400, message, "invalid_request_error", code, param), message)

    def check_auth(self, request: Request) -> None:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            message = "You didn't provide an API key."
            raise self.refuse(401, self.error(401, message, "invalid_request_error", None), message)

    def check_model(self, request: Request) -> tuple[int, int]:
        model = self.model_of(request)
        if model not in self.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            raise self.refuse(404, self.error(404, message, "invalid_request_error", "model_not_found"), message)
        return self.models[model]

    def context_error(self, window: int, prompt: int, completion: int) -> Any:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{prompt + completion} tokens. Please reduce the length of the messages."
        )
        return self.refuse(400, self.error(400, message, "invalid_request_error", "context_length_exceeded"), message)

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {429: "rate_limit", 400: "invalid", 503: "overloaded"}.get(reply.status, "")
        model = self.model_of(request)
        if kind == "rate_limit":
            message = reply.error_message or (
                f"Rate limit reached for {model} in organization org-fake on tokens per min (TPM): Limit 200000, "
                "Used 199000, Requested 9000. Please try again in 2.7s."
            )
            return SentReply(
                429,
                self.error(429, message, "tokens", "rate_limit_exceeded"),
                {"retry-after": "3", "retry-after-ms": "2700"},
            )
        if kind == "rate_limit_unhinted":
            # Many real 429s carry no Retry-After, only the x-ratelimit-* headers saying when the
            # exhausted bucket refills (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
            message = reply.error_message or (
                f"Rate limit reached for {model} in organization org-fake on tokens per min (TPM): Limit 200000, "
                "Used 200000, Requested 9000."
            )
            return SentReply(
                429,
                self.error(429, message, "tokens", "rate_limit_exceeded"),
                {
                    "x-ratelimit-limit-tokens": "200000",
                    "x-ratelimit-remaining-tokens": "0",
                    "x-ratelimit-reset-tokens": "4.2s",
                    "x-ratelimit-limit-requests": "5000",
                    "x-ratelimit-remaining-requests": "4990",
                    "x-ratelimit-reset-requests": "120ms",
                },
            )
        if kind == "insufficient_quota":
            # No credit left: a 429 with no Retry-After (OpenAI's error-codes guide: "You exceeded
            # your current quota, please check your plan and billing details").
            message = reply.error_message or (
                "You exceeded your current quota, please check your plan and billing details. For more "
                "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
            )
            return SentReply(429, self.error(429, message, "insufficient_quota", "insufficient_quota"))
        if kind == "context_length":
            window, _ = self.models.get(model, (128_000, 0))
            refusal: SentReply = self.context_error(window, window + 1000, 0).error
            return refusal
        if kind == "filtered":
            message = (
                reply.error_message
                or "Invalid prompt: your prompt was flagged as potentially violating our usage policy."
            )
            return SentReply(400, self.error(400, message, "invalid_request_error", "invalid_prompt"))
        if kind == "overloaded":
            message = reply.error_message or "The server is overloaded or not ready yet."
            return SentReply(503, self.error(503, message, "server_error", None))
        status = reply.status if reply.status != 200 else 400
        message = reply.error_message or f"fake error {status}"
        return SentReply(status, self.error(status, message, "invalid_request_error", None))

    # -- the documented constraints ------------------------------------------------------------
    def check(self, request: Request) -> None:
        body = request.body
        self.check_auth(request)
        window, most_out = self.check_model(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise self.bad("[] is too short - 'messages'", "messages")
        for index, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ROLES:
                raise self.bad(
                    f"Invalid value: '{role}'. Supported values are: {sorted(ROLES)}.", f"messages[{index}].role"
                )
            content = message.get("content")
            if content is None and role != "assistant":
                raise self.bad(
                    "Invalid value for 'content': expected a string, got null.", f"messages[{index}].content"
                )
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, dict) or part.get("type") not in (
                        "text",
                        "image_url",
                        "input_audio",
                        "file",
                    ):
                        raise self.bad("Invalid content part type.", f"messages[{index}].content")
        self.check_reasoning(request)
        if "max_tokens" in body and "max_completion_tokens" in body:
            raise self.bad("max_tokens and max_completion_tokens cannot both be set", "max_tokens")
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if asked is not None:
            if not isinstance(asked, int) or asked < 1:
                raise self.bad(
                    f"Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got {asked} instead.",  # noqa: E501 (the provider's message, verbatim)
                    "max_tokens",
                )
            if asked > most_out:
                raise self.bad(
                    f"max_tokens is too large: {asked}. This model supports at most {most_out} completion tokens, "
                    f"whereas you provided {asked}.",
                    "max_tokens",
                    "invalid_value",
                )
        temperature = body.get("temperature")
        if temperature is not None and not 0 <= float(temperature) <= 2:
            raise self.bad(
                f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {temperature} instead.",  # noqa: E501 (the provider's message, verbatim)
                "temperature",
            )
        self.check_response_format(request)
        prompt = tokens(self.prompt_text(request))
        if prompt + int(asked or 0) > window:
            raise self.context_error(window, prompt, int(asked or 0))

    def check_reasoning(self, request: Request) -> None:
        """What a reasoning model refuses, in OpenAI's words, and ``reasoning_effort`` elsewhere."""
        body, model = request.body, self.model_of(request)
        efforts = REASONING_EFFORTS.get(model)
        effort = body.get("reasoning_effort")
        if efforts is None:
            if effort is not None:
                raise self.bad(
                    "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                    "reasoning_effort",
                    "unsupported_parameter",
                )
            return
        if "max_tokens" in body:
            raise self.bad(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        temperature = body.get("temperature")
        if temperature is not None and float(temperature) != 1:
            raise self.bad(
                f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
        if effort is not None and effort not in efforts:
            raise self.bad(
                f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this model. "
                f"Supported values are: {', '.join(repr(e) for e in efforts)}.",
                "reasoning_effort",
                "unsupported_value",
            )

    def reasoning_of(self, request: Request) -> int:
        """The reasoning tokens the answer spends (0 for a model that does not reason)."""
        if self.model_of(request) not in REASONING_EFFORTS:
            return 0
        return REASONING_TOKENS[str(request.body.get("reasoning_effort") or DEFAULT_EFFORT)]

    def check_response_format(self, request: Request) -> None:
        fmt = request.body.get("response_format")
        if fmt is None:
            return
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind not in ("text", "json_object", "json_schema"):
            raise self.bad(
                f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object' and 'json_schema'.",
                "response_format.type",
            )
        if kind == "json_schema":
            spec = fmt.get("json_schema")
            if not isinstance(spec, dict) or not spec.get("name"):
                raise self.bad(
                    "Missing required parameter: 'response_format.json_schema.name'.",
                    "response_format.json_schema.name",
                )
            if not isinstance(spec.get("schema"), dict):
                raise self.bad(
                    "Missing required parameter: 'response_format.json_schema.schema'.",
                    "response_format.json_schema.schema",
                )
        if kind == "json_object" and "json" not in self.prompt_text(request).lower():
            raise self.bad(
                "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
                "messages",
            )

    # -- answering -------------------------------------------------------------------------------------
    def prompt_text(self, request: Request) -> str:
        """The prompt as the provider tokenizes it, in order (what its prefix cache matches). "The
        structured output schema serves as a prefix to the system message and can be cached"
        (prompt caching guide): a call with another schema shares no prefix with this one."""
        fmt = request.body.get("response_format")
        schema = (
            json.dumps(fmt.get("json_schema"), sort_keys=True)
            if isinstance(fmt, dict) and fmt.get("type") == "json_schema"
            else ""
        )
        return schema + "".join(
            f"<|{m.get('role')}|>{text_of(m.get('content'))}"
            for m in request.body.get("messages", [])
            if isinstance(m, dict)
        )

    def messages_of(self, request: Request) -> list[dict[str, str]]:
        return [
            {"role": str(m.get("role")), "content": text_of(m.get("content"))} for m in request.body.get("messages", [])
        ]

    def cached(self, text: str) -> int:
        """Prompt tokens the prefix cache serves: the shared prefix, when long enough, in whole steps."""
        hit = tokens(text[: self.cache.hit(text)]) if text else 0
        self.cache.store(text)
        if hit < self.cache_min_tokens:
            return 0
        return hit - hit % self.cache_step_tokens

    def choice_extras(self, finish: str) -> dict[str, Any]:
        return {}

    def body_extras(self) -> dict[str, Any]:
        return {}

    def answer_body(self, request: Request, reply: Reply, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
        body = request.body
        text = self.prompt_text(request)
        prompt = tokens(text)
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        cap = int(asked) if asked is not None else self.models[self.model_of(request)][1]
        reasoning = min(self.reasoning_of(request), cap)  # thought first, out of the same limit
        content, written, finish = answer_text(reply, cap - reasoning)
        if reasoning == cap and finish == "stop" and reply.content:
            content, written, finish = "", 0, "length"  # the limit went to reasoning: no visible text
        cached = self.cached(text)
        self.record(Answered(request, prompt, written + reasoning, cached))
        message: dict[str, Any] = {"role": "assistant", "content": None if finish == "filtered" else content}
        if "refusal" in self.answer_fields:
            message["refusal"] = None
        if reply.finish == "refused" and "refusal" in self.answer_fields:
            # Structured Outputs: a refusal comes as ``message.refusal`` with no content, and stops
            # normally (OpenAI's structured-outputs guide, "Refusals with Structured Outputs").
            message.update(content=None, refusal=reply.content or "I'm sorry, I can't help with that.")
            finish = "stop"
        # "no_choices": as some gateways and filtered answers send it, a 200 with nothing in it.
        choices = (
            []
            if reply.finish == "no_choices"
            else [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_words[finish],
                    **self.choice_extras(finish),
                }
            ]
        )
        return 200, {
            "id": f"chatcmpl-{len(self.answered)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_of(request),
            "choices": choices,
            "usage": self.usage(prompt, written, cached, reasoning),
            **self.body_extras(),
        }

    answer_fields = frozenset({"refusal"})

    def usage(self, prompt: int, written: int, cached: int, reasoning: int = 0) -> dict[str, Any]:
        return {
            "prompt_tokens": prompt,
            "completion_tokens": written + reasoning,
            "total_tokens": prompt + written + reasoning,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        }


class OpenAIFake(OpenAICompatibleFake):
    """api.openai.com: its ``x-ratelimit-*`` headers on every answer."""

    def __init__(self) -> None:
        super().__init__()
        self.rate_limit_headers = {
            "x-ratelimit-limit-requests": "5000",
            "x-ratelimit-remaining-requests": "4999",
            "x-ratelimit-reset-requests": "12ms",
            "x-ratelimit-limit-tokens": "4000000",
            "x-ratelimit-remaining-tokens": "3990000",
            "x-ratelimit-reset-tokens": "150ms",
        }
