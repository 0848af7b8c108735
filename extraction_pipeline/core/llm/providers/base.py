"""The one interface the gateway and the batch flow call for what differs between providers.

A ``ProviderAdapter`` per family (``openai_compatible``, ``azure``, ``anthropic``, ``gemini``,
``ollama``, ``vllm``) holds what that family needs beyond the OpenAI shape litellm already speaks;
``adapter_for`` (this package's ``__init__``) is the one place a model string is mapped to its
adapter. This base is the OpenAI shape itself: every method's default is "nothing to add".

- ``response_schema``: the template's JSON Schema as the provider takes it, or None for JSON mode
  (``response_format`` builds the call's format from it).
- ``messages_for``: the messages as sent (Anthropic's cache marks, when the caller expects a read
  within ``cache_ttl_seconds``; the messages given are never changed: the answer key and the stored
  prompt use them).
- ``call_options``: arguments the call needs beyond the OpenAI ones (Ollama's context window).
- ``batch_api``: the provider's batch driver (``batch_model.BatchDriver``), or None when no batch
  API is driven here.
- ``schema_refused``: whether an error is the provider refusing the schema as too complex to serve
  (Gemini's "too many states for serving"); the gateway then asks in JSON mode (``refuse_schema``).

Rate-limit headers are not here: each provider sends only its own names and
``core/llm/rate_headers.py`` reads them by name, whoever sent them (a budget knows the model, not
the adapter).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from extraction_pipeline.core.llm.batch_model import BatchDriver
from extraction_pipeline.core.llm.config import LLMConfig, supports_reasoning
from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.providers.cache_marks import with_cache_marks
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.schema import output_json_schema

JSON_MODE: dict[str, Any] = {"type": "json_object"}
# (model, schema digest) the provider refused as beyond what it serves: asked in JSON mode from then
# on in this process (the refusal costs a call's round trip, never a document).
_REFUSED_SCHEMAS: set[tuple[str, str]] = set()


def _digest(schema: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ProviderAdapter:
    """What one provider family needs beyond the OpenAI shape (the defaults: nothing)."""

    # The family's name, as docs/providers.md lists it.
    family: ClassVar[str] = "OpenAI-compatible"
    # litellm's provider names this family serves ("anthropic", "ollama_chat", ...).
    serves: ClassVar[frozenset[str]] = frozenset()

    provider: str  # litellm's provider for the model ("openai", "hosted_vllm", ...)
    model: str  # the model string of the config
    cache_marks: bool = False  # its prompt cache reads only what is marked (Claude, wherever served)
    # How long a cached prompt prefix lives after its last use. Anthropic: "the cache has a 5-minute
    # lifetime, refreshed for no additional cost each time the cached content is used" (prompt
    # caching guide; a 1-hour cache costs 2x to write and is not used here). OpenAI: "cached
    # prefixes generally remain active for 5 to 10 minutes of inactivity" (prompt caching guide).
    # Gemini's implicit cache: "send requests with similar prefix in a short amount of time", no
    # figure given. The shortest documented figure serves all.
    cache_ttl_seconds: ClassVar[float] = 300.0
    # A reasoning model of this family thinks without being asked, out of its output limit
    # (OpenAI's o-series and gpt-5: always; config.output_limit leaves room for it).
    thinks_unasked: ClassVar[bool] = True

    # A withheld answer may be the provider stopping a long verbatim quote (Gemini's RECITATION,
    # which litellm reports as content_filter like SAFETY): asked again to quote less, it may answer.
    withholds_recitation: ClassVar[bool] = False

    def bills_schema_as_prompt(self) -> bool:
        """True when the provider counts the response schema sent beside the messages as prompt
        tokens (and caches it as the prompt's first part). Only where its documentation says so."""
        return False

    def response_schema(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The template's schema as this provider takes it; None: ask for JSON mode instead."""
        return schema

    def messages_for(self, messages: list[dict[str, str]], *, cache: bool = True) -> list[dict[str, Any]]:
        """The messages as sent: with the cache marks when the provider caches only what is marked:
        the system prompt always (every document of the batch repeats it), the paper only with
        ``cache`` (the caller expects it read again within ``cache_ttl_seconds``: a mark on a
        prefix never read again costs 1.25x for nothing)."""
        return with_cache_marks(messages, paper=cache) if self.cache_marks else list(messages)

    def call_options(self, config: LLMConfig, messages: list[dict[str, str]], limit: int | None) -> dict[str, Any]:
        """Arguments of a call beyond the OpenAI ones (``limit``: the answer's output limit)."""
        return {}

    def batch_api(self) -> BatchDriver | None:
        """The provider's batch driver; None when no batch API is driven here."""
        return None

    def thinks(self, config: LLMConfig) -> bool:
        """True when the model spends thinking tokens out of its output limit without being asked
        (a reasoning model, by litellm's model info, of a family that thinks unasked): its
        ``output_limit`` leaves room for that beside the answer."""
        return self.thinks_unasked and supports_reasoning(config)

    def schema_refused(self, error: Exception) -> bool:
        """True when ``error`` is the provider refusing the response schema as too complex to serve
        (the call is then asked again in JSON mode, and so is every later one with that schema)."""
        return False

    def refuse_schema(self, config: LLMConfig, template: TemplateDefinition) -> None:
        """Remember that the provider will not serve ``template``'s schema for the config's model."""
        schema = self.response_schema(output_json_schema(template))
        if schema is not None:
            _REFUSED_SCHEMAS.add((config.effective_model, _digest(schema)))

    def response_format(self, config: LLMConfig, template: TemplateDefinition) -> dict[str, Any]:
        """JSON Schema structured output where the model supports it (litellm's
        ``supports_response_schema``) and the provider takes the schema (``response_schema``),
        JSON mode otherwise: the schema is then in the system prompt, and the answer is validated
        with pydantic either way."""
        try:
            supports_schema = bool(import_litellm().supports_response_schema(model=config.effective_model))
        except Exception:  # unknown model: litellm cannot tell
            supports_schema = False
        if not supports_schema:
            return dict(JSON_MODE)
        schema = self.response_schema(output_json_schema(template))
        if schema is None or (config.effective_model, _digest(schema)) in _REFUSED_SCHEMAS:
            return dict(JSON_MODE)
        return {"type": "json_schema", "json_schema": {"name": "trial_extraction", "schema": schema, "strict": False}}
