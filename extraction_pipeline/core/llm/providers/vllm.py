"""vLLM's OpenAI-compatible server (``hosted_vllm``): OpenAI's shape, which litellm sends as is.

What it holds: nothing beyond the OpenAI shape. Its ``response_format`` json_schema is taken by
vLLM's guided decoding, it caches a repeated prefix unasked (automatic prefix caching), it sends no
rate headers, and its batches are not driven here (vLLM's server has no batch endpoint; litellm
runs ``hosted_vllm`` batches as ordinary calls itself). It is its own family so that what vLLM
comes to need lands here, not in a branch of the gateway.

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
