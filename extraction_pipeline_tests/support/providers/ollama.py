"""Ollama's chat API (``POST /api/chat``, what litellm's ``ollama_chat/`` sends), as Ollama's API
docs describe it.

Checks: a pulled model (else 404 ``{"error": "model \"x\" not found, try pulling it first"}``);
``messages`` with roles system / user / assistant / tool and string content; ``stream: false``
(this fake answers whole responses only; Ollama streams by default); ``format`` either "json" or
a JSON schema object; ``options`` values of the documented types. Ollama does not refuse a prompt
longer than its context window (``options.num_ctx``, 4096 tokens when not set): it silently
keeps the last ``num_ctx`` tokens. This fake does the same (the answer callback sees the cut
prompt) and records it in ``truncated``, so a caller that forgets ``num_ctx`` loses the paper.
``num_predict`` cuts the answer (``done_reason: "length"``).

Answers: ``{"model", "created_at", "message": {"role", "content"}, "done": true, "done_reason",
"prompt_eval_count", "eval_count", ...durations}``. Errors: ``{"error": "..."}``; a server with a
full queue answers 503 "server busy, please try again.  maximum pending requests exceeded".
Ollama sends no rate-limit headers and reports no cached tokens.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from extraction_pipeline_tests.support.providers.base import (
    CHARS_PER_TOKEN,
    Answered,
    ProviderFake,
    Reply,
    Request,
    SentReply,
    answer_text,
    tokens,
)

DEFAULT_NUM_CTX = 4096
ROLES = frozenset({"system", "user", "assistant", "tool"})
OPTION_TYPES: dict[str, type | tuple[type, ...]] = {
    "num_ctx": int,
    "num_predict": int,
    "num_keep": int,
    "seed": int,
    "top_k": int,
    "num_batch": int,
    "num_gpu": int,
    "num_thread": int,
    "repeat_last_n": int,
    "temperature": (int, float),
    "top_p": (int, float),
    "min_p": (int, float),
    "repeat_penalty": (int, float),
    "presence_penalty": (int, float),
    "frequency_penalty": (int, float),
    "typical_p": (int, float),
    "stop": list,
}


class OllamaFake(ProviderFake):
    name = "ollama"

    def __init__(self, models: tuple[str, ...] = ("llama3.1", "llama3.1:8b", "qwen2.5:14b")) -> None:
        super().__init__()
        self.models = set(models)
        self.truncated: list[int] = []  # prompt tokens of each request cut to its num_ctx

    def serves(self, request: Request) -> bool:
        return request.path == "/api/chat"

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, {"error": "404 page not found"})

    def bad(self, message: str) -> Any:
        return self.refuse(400, {"error": message}, message)

    def check(self, request: Request) -> None:
        body = request.body
        model = body.get("model")
        if not model:
            raise self.bad("model is required")
        if model not in self.models:
            raise self.refuse(
                404, {"error": f'model "{model}" not found, try pulling it first'}, f"unknown model {model}"
            )
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise self.bad("messages are required")
        for message in messages:
            if message.get("role") not in ROLES:
                raise self.bad(f"invalid role: {message.get('role')}")
            if not isinstance(message.get("content", ""), str):
                raise self.bad(
                    "json: cannot unmarshal array into Go struct field Message.messages.content of type string"
                )
        if body.get("stream") is not False:
            raise self.bad("this fake answers stream: false only (Ollama streams by default)")
        fmt = body.get("format")
        if fmt is not None and fmt != "json" and fmt != "" and not isinstance(fmt, dict):
            raise self.bad(f'invalid format: "{fmt}"; expected "json" or a valid JSON Schema')
        for name, value in (body.get("options") or {}).items():
            kind = OPTION_TYPES.get(name)
            if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise self.bad(f"option {name!r} must be of type {kind}")

    def _num_ctx(self, request: Request) -> int:
        return int((request.body.get("options") or {}).get("num_ctx") or DEFAULT_NUM_CTX)

    def messages_of(self, request: Request) -> list[dict[str, str]]:
        messages = [{"role": str(m["role"]), "content": str(m.get("content", ""))} for m in request.body["messages"]]
        budget = self._num_ctx(request) * CHARS_PER_TOKEN
        total = sum(len(m["content"]) for m in messages)
        if total <= budget:
            return messages
        # Past num_ctx the runner keeps the end of the prompt: the model never sees the rest.
        self.truncated.append(tokens("".join(m["content"] for m in messages)))
        kept: list[dict[str, str]] = []
        for message in reversed(messages):
            if budget <= 0:
                break
            kept.insert(0, {**message, "content": message["content"][-budget:]})
            budget -= len(message["content"])
        return kept

    def answer_body(self, request: Request, reply: Reply, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
        body = request.body
        prompt = min(tokens("".join(m["content"] for m in body["messages"])), self._num_ctx(request))
        asked = (body.get("options") or {}).get("num_predict")
        cap = None if asked in (None, -1, -2) else int(asked)
        content, written, finish = answer_text(reply, cap)
        self.record(Answered(request, prompt, written))
        return 200, {
            "model": body["model"],
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "length" if finish == "length" else "stop",
            "total_duration": 1_000_000,
            "load_duration": 100_000,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": 500_000,
            "eval_count": written,
            "eval_duration": 400_000,
        }

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {503: "overloaded", 429: "rate_limit"}.get(reply.status, "")
        if kind == "overloaded":
            return SentReply(503, {"error": "server busy, please try again.  maximum pending requests exceeded"})
        if kind == "rate_limit":  # a proxy in front of Ollama: Ollama itself has no rate limits
            return SentReply(429, {"error": reply.error_message or "too many requests"}, {"retry-after": "2"})
        status = reply.status if reply.status != 200 else 400
        return SentReply(status, {"error": reply.error_message or f"fake error {status}"})
