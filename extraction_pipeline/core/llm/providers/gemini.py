"""Gemini (Google AI Studio, and Vertex AI): litellm sends a JSON Schema as ``responseJsonSchema``
unchanged, and Gemini accepts only a subset of JSON Schema (no ``default``, nothing beside a
``$ref``).

What it holds: the schema reduced to that subset (``gemini_schema``), and the sign of a schema
Gemini refuses as too complex to serve (``schema_refused``: then JSON mode). Claude on Vertex AI also
gets Anthropic's cache marks (``cache_marks.marks_claude``, decided by ``adapter_for``). Gemini's
rate limit says when to retry in its 429 body (``retryDelay``), which ``classify`` reads.

Hand-written: ``gemini_schema``. litellm 1.110 sends ``responseJsonSchema`` as given
(``vertex_ai.common_utils.build_json_schema`` returns its argument: it holds Gemini 2.0+ takes
standard JSON Schema, ``$ref`` included), and its ``_build_vertex_schema`` shapes the older
``responseSchema`` (OpenAPI types), not this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from extraction_pipeline.core.llm.providers.base import ProviderAdapter

# What Gemini's responseJsonSchema takes (ai.google.dev, GenerationConfig.responseJsonSchema).
_GEMINI_SCHEMA_KEYS = frozenset(
    {
        "type", "format", "title", "description", "enum", "items", "prefixItems", "minItems", "maxItems",
        "minimum", "maximum", "anyOf", "oneOf", "properties", "additionalProperties", "required",
        "propertyOrdering",
    }
)  # fmt: skip


@dataclass(frozen=True)
class GeminiAdapter(ProviderAdapter):
    family: ClassVar[str] = "Gemini"
    serves: ClassVar[frozenset[str]] = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
    # FinishReason RECITATION: "The response candidate content was flagged for recitation reasons"
    # (Gemini API reference, GenerateContentResponse): what quoting a paper verbatim can meet.
    # litellm maps it to content_filter, as it does SAFETY, so the two cannot be told apart here.
    withholds_recitation: ClassVar[bool] = True

    def response_schema(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        return gemini_schema(schema)

    def schema_refused(self, error: Exception) -> bool:
        # Gemini compiles a response schema into a state machine and refuses one too large to
        # serve with a 400: "The specified schema produces a constraint that has too many states
        # for serving" (ai.google.dev, structured output; the limit is not published). Ours (a
        # hundred optional, nullable properties) can be that large: then JSON mode.
        return "too many states for serving" in str(error)


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema in Gemini's subset: ``$ref`` inlined (ours are not recursive; Gemini refuses a
    ``$ref`` with a sibling such as ``description``), unsupported keywords (``default``) dropped."""
    defs = schema.get("$defs") or {}

    def reduce(node: Any, depth: int = 0) -> Any:
        if isinstance(node, list):
            return [reduce(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and depth < 32:
            target = defs.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return reduce(merged, depth + 1)
        reduced: dict[str, Any] = {}
        for key, value in node.items():
            if key not in _GEMINI_SCHEMA_KEYS:
                continue
            if key == "properties" and isinstance(value, dict):
                reduced[key] = {name: reduce(sub, depth) for name, sub in value.items()}
            elif key in ("items", "anyOf", "oneOf", "prefixItems", "additionalProperties"):
                reduced[key] = reduce(value, depth)
            else:
                reduced[key] = value
        return reduced

    result = reduce(schema)
    return result if isinstance(result, dict) else {}
