"""vLLM's OpenAI-compatible server (``hosted_vllm``): OpenAI's shape, which litellm sends as is.

What it holds: nothing beyond the OpenAI shape. Its structured output is JSON mode (litellm
reports no schema support for a served model it does not know), it caches a repeated prefix
unasked (automatic prefix caching), it sends no rate headers, and its batches are not driven here
(vLLM's batch processing is an offline mode, not its server's API). It is its own family so that
what vLLM comes to need lands here, not in a branch of the gateway.

Hand-written: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extraction_pipeline.core.llm.providers.base import ProviderAdapter


@dataclass(frozen=True)
class VLLMAdapter(ProviderAdapter):
    family: ClassVar[str] = "vLLM"
    serves: ClassVar[frozenset[str]] = frozenset({"hosted_vllm", "vllm"})
