"""Azure OpenAI: OpenAI's shape behind a deployment name and an API version, which litellm maps.

What it holds: that its batch API is not driven here. Azure's Batch API needs a global-batch
deployment of the model and the API version in every call, which the configuration does not name:
Azure models are asked by ordinary calls.
Its content filter (``finish_reason: content_filter``) and its rate headers (only
``x-ratelimit-remaining-*``) need nothing of their own: the gateway and ``rate_headers`` read them
as OpenAI's.

Hand-written: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extraction_pipeline.core.llm.providers.base import ProviderAdapter


@dataclass(frozen=True)
class AzureAdapter(ProviderAdapter):
    family: ClassVar[str] = "Azure OpenAI"
    serves: ClassVar[frozenset[str]] = frozenset({"azure"})

    def bills_schema_as_prompt(self) -> bool:
        return True  # OpenAI's models and caching, served by Azure (its prompt caching page)
