"""Anthropic: its Messages API behind litellm for ordinary calls, its Message Batches through the
official ``anthropic`` SDK (``anthropic_batches``).

What it holds:
- the schema: litellm sends a JSON Schema as ``output_format`` (constrained decoding), which
  Anthropic refuses for a schema with more than 24 optional or 16 union-typed properties ("too
  complex for compilation"); ours has a hundred of each (every field is nullable and optional).
  litellm's own check (``AnthropicConfig.native_output_schema``) says when a schema is beyond that;
  then JSON mode.
- the cache marks (``cache_marks.with_cache_marks``): its prompt cache reads only what is marked.
- the batch API (``anthropic_batches.AnthropicBatchDriver``).

Hand-written: the cache marks (what to mark is ours: the stable prefix of a paper's prompts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from extraction_pipeline.core.llm.batch_model import BatchDriver
from extraction_pipeline.core.llm.providers.anthropic_batches import AnthropicBatchDriver
from extraction_pipeline.core.llm.providers.base import ProviderAdapter


@dataclass(frozen=True)
class AnthropicAdapter(ProviderAdapter):
    family: ClassVar[str] = "Anthropic"
    serves: ClassVar[frozenset[str]] = frozenset({"anthropic"})

    cache_marks: bool = True
    # Extended thinking is off unless a call asks for it (``thinking``), and ours never do.
    thinks_unasked: ClassVar[bool] = False

    def response_schema(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        try:
            from litellm.llms.anthropic.chat.transformation import AnthropicConfig

            return schema if AnthropicConfig.native_output_schema(schema) is not None else None
        except Exception:  # litellm moved it: do not risk a refused call
            return None

    def batch_api(self) -> BatchDriver | None:
        return AnthropicBatchDriver(self)
