"""A self-hosted vLLM server's OpenAI-compatible API (``vllm serve MODEL``: ``POST /v1/chat/completions``),
as vLLM's documentation describes it (what litellm's ``hosted_vllm/`` sends to).

Checks: the served model's name (else vLLM's 404 ``The model `x` does not exist.``); a ``Bearer``
key when the server was started with ``--api-key``; the OpenAI body rules; the prompt plus
``max_tokens`` within ``--max-model-len`` (vLLM's 400 "This model's maximum context length is N
tokens. However, you requested M tokens (P in the messages, C in the completion)..."). Errors have
vLLM's body ``{"object": "error", "message", "type", "param", "code"}``. vLLM caches prompt
prefixes by blocks of 16 tokens (automatic prefix caching) and, with
``--enable-prompt-tokens-details``, reports them as ``prompt_tokens_details.cached_tokens``.
vLLM sends no rate-limit headers; an overloaded server answers 503.
"""

from __future__ import annotations

from typing import Any

from extraction_pipeline_tests.support.providers.base import Reply, Request, SentReply
from extraction_pipeline_tests.support.providers.openai import OpenAICompatibleFake


class VLLMFake(OpenAICompatibleFake):
    name = "vllm"
    cache_min_tokens = 16  # one KV block
    cache_step_tokens = 16

    def __init__(
        self,
        served_model: str = "meta-llama/Llama-3.1-8B-Instruct",
        max_model_len: int = 131_072,
        api_key: str | None = "vllm-test-key",
    ) -> None:
        super().__init__()
        self.served_model, self.api_key = served_model, api_key
        # vLLM's default answer limit is whatever the window leaves: no separate output cap.
        self.models = {served_model: (max_model_len, 10**9)}

    def error(self, status: int, message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
        names = {
            400: "BadRequestError",
            404: "NotFoundError",
            401: "Unauthorized",
            429: "TooManyRequests",
            503: "ServiceUnavailableError",
        }
        return {"object": "error", "message": message, "type": names.get(status, kind), "param": param, "code": status}

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, {"detail": "Not Found"})

    def check_auth(self, request: Request) -> None:
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise self.refuse(401, {"error": "Unauthorized"}, "missing or wrong bearer key")

    def context_error(self, window: int, prompt: int, completion: int) -> Any:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested {prompt + completion} "
            f"tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the "
            "messages or completion."
        )
        return self.refuse(400, self.error(400, message, "BadRequestError", None), message)

    def check_response_format(self, request: Request) -> None:
        # vLLM's guided decoding takes json_object and json_schema alike, without OpenAI's "json" word rule.
        fmt = request.body.get("response_format")
        if fmt is not None and fmt.get("type") not in ("text", "json_object", "json_schema", "structural_tag"):
            raise self.bad(f"Invalid response_format type {fmt.get('type')!r}", "response_format")

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {503: "overloaded", 429: "rate_limit"}.get(reply.status, "")
        if kind == "overloaded":
            message = reply.error_message or "The server is overloaded; too many requests waiting."
            return SentReply(503, self.error(503, message, "ServiceUnavailableError", None))
        if kind == "rate_limit":  # a proxy in front of vLLM (vLLM itself has no rate limits)
            return SentReply(
                429, self.error(429, reply.error_message or "Too many requests", "", None), {"retry-after": "2"}
            )
        if kind == "context_length":
            window = self.models[self.served_model][0]
            refusal: SentReply = self.context_error(window, window + 1000, 0).error
            return refusal
        return super().error_reply(request, reply)

    answer_fields = frozenset()

    def body_extras(self) -> dict[str, Any]:
        return {"prompt_logprobs": None, "kv_transfer_params": None}
