"""OpenAI and the servers that speak its API through litellm (``litellm_proxy``, DeepSeek, Mistral,
Groq, any gateway...): the shape every adapter starts from.

What it holds: OpenAI's batch API (``openai_batches``), for ``openai/...`` models only. The
requests, schema and rate headers are OpenAI's own shape, which litellm sends as is.

Hand-written: nothing here beyond choosing the driver; the driver's calls are litellm's
(``create_file``, ``create_batch``, ``retrieve_batch``, ``file_content``, ``cancel_batch``). An
OpenAI-compatible gateway's batches are not driven: litellm runs ``litellm_proxy`` batches as
ordinary calls itself, and another server's batch endpoint is not known to exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extraction_pipeline.core.llm.batch_model import BatchDriver
from extraction_pipeline.core.llm.providers.base import ProviderAdapter
from extraction_pipeline.core.llm.providers.openai_batches import OpenAIBatchDriver

# The provider whose batch API is OpenAI's own (the others of the family have none here).
OPENAI = "openai"


@dataclass(frozen=True)
class OpenAICompatibleAdapter(ProviderAdapter):
    family: ClassVar[str] = "OpenAI-compatible"
    serves: ClassVar[frozenset[str]] = frozenset({OPENAI})  # and every provider no other family serves

    def bills_schema_as_prompt(self) -> bool:
        # "The structured output schema serves as a prefix to the system message and can be
        # cached" (OpenAI's prompt caching guide): part of every call's prompt, billed as such.
        return self.provider == OPENAI

    def batch_api(self) -> BatchDriver | None:
        return OpenAIBatchDriver(self) if self.provider == OPENAI else None
