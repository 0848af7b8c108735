"""Google's Gemini API ``generateContent`` (``POST /v1beta/models/{model}:generateContent``), as
ai.google.dev documents it.

Checks: a key (``x-goog-api-key`` header or ``?key=``); a known model; only known top-level
fields (proto JSON: camelCase or snake_case; anything else is "Unknown name ... Cannot find
field."); ``contents`` non-empty, roles user / model, each with non-empty ``parts``;
``systemInstruction`` with parts; ``generationConfig`` fields known, ``maxOutputTokens`` within
the model's range, ``temperature`` in [0, 2], ``responseMimeType`` one of text/plain,
application/json, text/x.enum; ``responseSchema`` and ``responseJsonSchema`` not both, either
needing a JSON ``responseMimeType``; ``responseJsonSchema`` in the documented subset ($id, $defs,
$ref, $anchor, type, format, title, description, enum, items, prefixItems, minItems, maxItems,
minimum, maximum, anyOf, oneOf, properties, additionalProperties, required, propertyOrdering),
and a ``$ref`` with no sibling keys except ``$``-keys; ``responseSchema`` in the OpenAPI subset
(no ``$ref``, no ``additionalProperties``); the prompt within the input limit.

Answers: ``candidates[].content.parts``, ``finishReason`` STOP / MAX_TOKENS / SAFETY (a SAFETY
candidate has no content) / RECITATION ("the response candidate content was flagged for
recitation reasons": no content, a ``citationMetadata`` naming the sources it recited); Gemini
2.5 thinks first (``THINKING``: a default spend, or
``thinkingConfig.thinkingBudget`` within the model's range) out of ``maxOutputTokens``, billed in
``thoughtsTokenCount``, and a limit spent whole on thinking ends at MAX_TOKENS with no text;
``usageMetadata`` with ``promptTokenCount`` (cached included),
``candidatesTokenCount``, ``totalTokenCount`` and, when the implicit cache served a prefix of at
least 1024 tokens (Gemini 2.5 Flash; 4096 for 2.5 Pro), ``cachedContentTokenCount``. Errors:
``{"error": {"code", "message", "status"}}`` -- 429 RESOURCE_EXHAUSTED (with a RetryInfo
``retryDelay`` in its details, no Retry-After header), 400 INVALID_ARGUMENT, 503 UNAVAILABLE.
"""

from __future__ import annotations

import re
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

# model -> (input token limit, output token limit, least implicitly cached prefix)
GEMINI_MODELS = {
    "gemini-2.5-flash": (1_048_576, 65_536, 1024),
    "gemini-2.5-pro": (1_048_576, 65_536, 4096),
    "gemini-2.0-flash": (1_048_576, 8_192, 1_000_000_000),  # no implicit caching
}
# Gemini 2.5 thinks before it answers unless told not to, out of maxOutputTokens, and bills the
# thoughts as output (usageMetadata.thoughtsTokenCount; ai.google.dev, "Gemini thinking"). model ->
# (thinking tokens spent by default, least budget, most budget, may thinking be turned off with 0).
THINKING = {
    "gemini-2.5-flash": (1_200, 0, 24_576, True),
    "gemini-2.5-pro": (2_400, 128, 32_768, False),
}
# What the fake takes for "too many states" (see check_generation_config): a schema of a few dozen
# properties passes, the extraction's whole one (a hundred nullable properties: about 290) does not.
SCHEMA_STATE_LIMIT = 200


def _states(node: Any) -> int:
    """The fake's measure of a schema's size as Gemini compiles it."""
    if isinstance(node, list):
        return sum(_states(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = len(node.get("properties") or {}) + len(node.get("anyOf") or []) + len(node.get("oneOf") or [])
    own += len(node.get("enum") or []) + sum(4 for k in ("minimum", "maximum", "minItems", "maxItems") if k in node)
    return own + sum(_states(value) for value in node.values() if isinstance(value, (dict, list)))


_ROUTE = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")
TOP_LEVEL = {
    "contents",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
}
GENERATION_CONFIG = {
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "mediaResolution",
}
JSON_SCHEMA_KEYS = {
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
}
OPENAPI_SCHEMA_KEYS = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
}
MIME_TYPES = {"text/plain", "application/json", "text/x.enum"}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _camel_keys(value: dict[str, Any]) -> dict[str, Any]:
    return {camel(k): v for k, v in value.items()}


def _error(code: int, status: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


class GeminiFake(ProviderFake):
    name = "gemini"
    schema_state_limit = SCHEMA_STATE_LIMIT  # see _states
    _model_in_check = ""  # the model of the request being checked (its thinking limits)

    @property
    def api_base(self) -> str:
        return f"{self.origin}/v1beta"

    def serves(self, request: Request) -> bool:
        return _ROUTE.match(request.path) is not None

    def model_of(self, request: Request) -> str:
        match = _ROUTE.match(request.path)
        return match.group("model") if match else ""

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, _error(404, "NOT_FOUND", f"Requested entity was not found: {request.path}"))

    def bad(self, message: str) -> Any:
        return self.refuse(400, _error(400, "INVALID_ARGUMENT", message), message)

    def too_large(self, message: str) -> Any:
        return Refusal(SentReply(400, _error(400, "INVALID_ARGUMENT", message)), message, capacity=True)

    # -- the documented constraints ----------------------------------------------------------------
    def check(self, request: Request) -> None:
        if not request.headers.get("x-goog-api-key") and not request.query.get("key"):
            message = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."  # noqa: E501 (the provider's message, verbatim)
            raise self.refuse(403, _error(403, "PERMISSION_DENIED", message), "no API key")
        model = self.model_of(request)
        if model not in GEMINI_MODELS:
            message = f"models/{model} is not found for API version v1beta, or is not supported for generateContent."
            raise self.refuse(404, _error(404, "NOT_FOUND", message), message)
        window, most_out, _ = GEMINI_MODELS[model]
        self._model_in_check = model
        body = _camel_keys(request.body)
        for name in body:
            if name not in TOP_LEVEL:
                raise self.bad(f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise self.bad("* GenerateContentRequest.contents: contents is not specified")
        for index, content in enumerate(contents):
            if content.get("role", "user") not in ("user", "model"):
                raise self.bad(
                    f"Please use a valid role: user, model. (contents[{index}].role: {content.get('role')!r})"
                )
            if not content.get("parts"):
                raise self.bad(f"* GenerateContentRequest.contents[{index}].parts: contents.parts must not be empty.")
        system = body.get("systemInstruction")
        if system is not None and not (isinstance(system, dict) and system.get("parts")):
            raise self.bad("* GenerateContentRequest.system_instruction.parts: must not be empty")
        self.check_generation_config(_camel_keys(body.get("generationConfig") or {}), most_out)
        prompt = tokens(self.prompt_text(request))
        if prompt > window:
            raise self.bad(f"The input token count ({prompt}) exceeds the maximum number of tokens allowed ({window}).")

    def check_generation_config(self, config: dict[str, Any], most_out: int) -> None:
        for name in config:
            if name not in GENERATION_CONFIG:
                raise self.bad(
                    f"Invalid JSON payload received. Unknown name \"{name}\" at 'generation_config': Cannot find field."
                )
        asked = config.get("maxOutputTokens")
        if asked is not None and not 1 <= int(asked) <= most_out:
            raise self.bad(
                f"Unable to submit request because it has a maxOutputTokens value of {asked} but the supported range "
                f"is from 1 (inclusive) to {most_out + 1} (exclusive). Update the value and try again."
            )
        thinking = _camel_keys(config.get("thinkingConfig") or {})
        budget = thinking.get("thinkingBudget")
        if budget is not None:
            model_thinks = next((t for m, t in THINKING.items() if m == self._model_in_check), None)
            if model_thinks is None:
                raise self.bad("Thinking is not supported by this model.")
            _, least, most, may_disable = model_thinks
            if int(budget) == 0 and not may_disable:
                raise self.bad("Budget 0 is invalid. This model only works in thinking mode.")
            if int(budget) not in (-1, 0) and not least <= int(budget) <= most:
                raise self.bad(
                    f"The thinking budget {budget} is invalid. Please choose a value between {least} and {most}."
                )
        temperature = config.get("temperature")
        if temperature is not None and not 0 <= float(temperature) <= 2:
            raise self.bad("* GenerationConfig.temperature: must be between 0.0 and 2.0")
        mime = config.get("responseMimeType")
        if mime is not None and mime not in MIME_TYPES:
            raise self.bad(
                f"* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are {sorted(MIME_TYPES)}."  # noqa: E501 (the provider's message, verbatim)
            )
        schema, json_schema = config.get("responseSchema"), config.get("responseJsonSchema")
        if schema is not None and json_schema is not None:
            raise self.bad("response_schema and response_json_schema cannot both be set")
        if (schema is not None or json_schema is not None) and mime not in ("application/json", "text/x.enum"):
            raise self.bad(
                "* GenerateContentRequest.generation_config.response_mime_type: must be application/json when a response schema is set"  # noqa: E501 (the provider's message, verbatim)
            )
        if json_schema is not None:
            self.check_json_schema(json_schema, "generation_config.response_json_schema")
        if schema is not None:
            self.check_openapi_schema(schema, "generation_config.response_schema")
        given = json_schema if json_schema is not None else schema
        if given is not None and _states(given) > self.schema_state_limit:
            # Gemini compiles the schema into a state machine and refuses one too large to serve
            # (ai.google.dev, structured output, "too many states for serving"). The real limit is
            # not published: this fake counts properties, union branches, enum values and bounds.
            raise self.too_large(
                "The specified schema produces a constraint that has too many states for serving. Typical causes "
                "of this error are schemas with lots of text (for example, very long property or enum names), "
                "schemas with long array length limits (especially when nested), or schemas using complex value "
                "matchers (for example, integers or numbers with minimum/maximum bounds or strings with complex "
                "formats like date-time)"
            )

    def check_json_schema(self, node: Any, at: str) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            raise self.bad(f"Invalid JSON schema at '{at}': expected an object")
        for key in node:
            if key not in JSON_SCHEMA_KEYS:
                raise self.bad(
                    f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': unsupported JSON Schema keyword."
                )
        if "$ref" in node:
            siblings = [k for k in node if not k.startswith("$")]
            if siblings:
                raise self.bad(
                    f"Invalid JSON schema at '{at}': if $ref is set, no other properties except those starting with $ "
                    f"may be set (found {', '.join(siblings)})."
                )
        for key in ("properties", "$defs"):
            for name, sub in (node.get(key) or {}).items():
                self.check_json_schema(sub, f"{at}.{key}[{name}]")
        for key in ("anyOf", "oneOf", "prefixItems"):
            for index, sub in enumerate(node.get(key) or []):
                self.check_json_schema(sub, f"{at}.{key}[{index}]")
        for key in ("items", "additionalProperties"):
            if key in node and isinstance(node[key], dict):
                self.check_json_schema(node[key], f"{at}.{key}")
        if "enum" in node and not all(isinstance(v, (str, int, float)) for v in node["enum"]):
            raise self.bad(f"Invalid JSON schema at '{at}': enum values must be strings or numbers")

    def check_openapi_schema(self, node: Any, at: str) -> None:
        if not isinstance(node, dict):
            raise self.bad(f"Invalid JSON payload received at '{at}': expected an object")
        for key in node:
            if key not in OPENAPI_SCHEMA_KEYS:
                raise self.bad(f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field.")
        if isinstance(node.get("type"), list):
            raise self.bad(
                f"Invalid JSON payload received. Unknown name \"type\" at '{at}': Proto field is not repeating, cannot start list."  # noqa: E501 (the provider's message, verbatim)
            )
        for name, sub in (node.get("properties") or {}).items():
            self.check_openapi_schema(sub, f"{at}.properties[{name}].value")
        for index, sub in enumerate(node.get("anyOf") or []):
            self.check_openapi_schema(sub, f"{at}.any_of[{index}]")
        if "items" in node:
            self.check_openapi_schema(node["items"], f"{at}.items")

    # -- answering ------------------------------------------------------------------------------
    def _system_text(self, request: Request) -> str:
        system = _camel_keys(request.body).get("systemInstruction") or {}
        return "".join(str(p.get("text", "")) for p in system.get("parts") or [])

    def prompt_text(self, request: Request) -> str:
        body = _camel_keys(request.body)
        text = self._system_text(request)
        for content in body.get("contents") or []:
            text += f"<{content.get('role', 'user')}>" + "".join(
                str(p.get("text", "")) for p in content.get("parts") or []
            )
        return text

    def messages_of(self, request: Request) -> list[dict[str, str]]:
        found = []
        if system := self._system_text(request):
            found.append({"role": "system", "content": system})
        for content in _camel_keys(request.body).get("contents") or []:
            role = "assistant" if content.get("role") == "model" else "user"
            found.append({"role": role, "content": "".join(str(p.get("text", "")) for p in content.get("parts") or [])})
        return found

    def answer_body(self, request: Request, reply: Reply, messages: list[dict[str, str]]) -> tuple[int, dict[str, Any]]:
        model = self.model_of(request)
        config = _camel_keys(_camel_keys(request.body).get("generationConfig") or {})
        text = self.prompt_text(request)
        prompt = tokens(text)
        most = int(config.get("maxOutputTokens") or GEMINI_MODELS[model][1])
        thoughts = self.thoughts(model, config)
        spent_thinking = min(thoughts, most)  # thinking comes out of the same limit
        left = most - spent_thinking
        content, written, finish = answer_text(reply, left) if left > 0 else ("", 0, "length")
        hit = self.cache.hit(f"{model}\0{text}")  # once: an entry may expire between two looks
        shared = tokens(text[: hit - len(model) - 1]) if hit > len(model) else 0
        self.cache.store(f"{model}\0{text}")
        cached = shared if shared >= GEMINI_MODELS[model][2] else 0
        withheld = finish in ("filtered", "recitation")
        self.record(Answered(request, prompt, 0 if withheld else written, cached))
        candidate: dict[str, Any] = {"index": 0}
        if finish == "recitation":
            candidate["finishReason"] = "RECITATION"
            candidate["citationMetadata"] = {
                "citationSources": [{"startIndex": 0, "endIndex": min(len(content), 400), "uri": "https://example.org"}]
            }
            written = 0
        elif finish == "filtered":
            candidate["finishReason"] = "SAFETY"
            candidate["safetyRatings"] = [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
            ]
            written = 0
        else:
            # A limit spent whole on thinking leaves a candidate with no text at all.
            parts = [{"text": content}] if left > 0 else []
            candidate["content"] = {"parts": parts, "role": "model"} if parts else {"role": "model"}
            candidate["finishReason"] = {"stop": "STOP", "length": "MAX_TOKENS"}[finish]
        usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": written,
            "totalTokenCount": prompt + written + spent_thinking,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if spent_thinking:
            usage["thoughtsTokenCount"] = spent_thinking
        if cached:
            usage["cachedContentTokenCount"] = cached
            usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
        return 200, {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": f"fake{len(self.answered)}",
        }

    def thoughts(self, model: str, config: dict[str, Any]) -> int:
        """The thinking tokens this answer spends: the model's default, or the budget asked for."""
        if model not in THINKING:
            return 0
        default, _, _, _ = THINKING[model]
        budget = _camel_keys(config.get("thinkingConfig") or {}).get("thinkingBudget")
        if budget is None or int(budget) == -1:
            return default
        return min(default, int(budget))

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {429: "rate_limit", 503: "overloaded", 400: "invalid"}.get(reply.status, "")
        if kind == "rate_limit":
            message = reply.error_message or (
                "You exceeded your current quota, please check your plan and billing details. For more information on "
                "this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. Please retry in 17.5s."
            )
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count",  # noqa: E501 (the provider's message, verbatim)
                            "quotaId": "GenerateContentPaidTierInputTokensPerModelPerMinute",
                            "quotaValue": "1000000",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"},
            ]
            return SentReply(429, _error(429, "RESOURCE_EXHAUSTED", message, details))
        if kind == "overloaded":
            return SentReply(
                503,
                _error(503, "UNAVAILABLE", reply.error_message or "The model is overloaded. Please try again later."),
            )
        if kind == "context_length":
            window = GEMINI_MODELS.get(self.model_of(request), (1_048_576, 0, 0))[0]
            return SentReply(
                400,
                _error(
                    400,
                    "INVALID_ARGUMENT",
                    f"The input token count ({window + 1000}) exceeds the maximum number of tokens allowed ({window}).",
                ),
            )
        if kind == "auth":
            return SentReply(400, _error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."))
        status = reply.status if reply.status != 200 else 400
        names = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 500: "INTERNAL"}
        return SentReply(
            status, _error(status, names.get(status, "UNKNOWN"), reply.error_message or f"fake error {status}")
        )
