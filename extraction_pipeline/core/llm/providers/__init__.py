"""One adapter per provider family, and ``adapter_for``: the one place a model string is mapped to
its adapter (``base.ProviderAdapter`` says what an adapter holds)."""

from __future__ import annotations

from functools import lru_cache

from extraction_pipeline.core.llm.config import LLMConfig
from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.providers.anthropic import AnthropicAdapter
from extraction_pipeline.core.llm.providers.azure import AzureAdapter
from extraction_pipeline.core.llm.providers.base import ProviderAdapter
from extraction_pipeline.core.llm.providers.cache_marks import marks_claude
from extraction_pipeline.core.llm.providers.gemini import GeminiAdapter
from extraction_pipeline.core.llm.providers.ollama import OllamaAdapter
from extraction_pipeline.core.llm.providers.openai_compatible import OpenAICompatibleAdapter
from extraction_pipeline.core.llm.providers.vllm import VLLMAdapter

__all__ = ["FAMILIES", "ProviderAdapter", "adapter_for", "litellm_provider"]

# Every family; a provider none of them serves is OpenAI-compatible (litellm speaks OpenAI's shape to it).
FAMILIES: tuple[type[ProviderAdapter], ...] = (
    OpenAICompatibleAdapter,
    AzureAdapter,
    AnthropicAdapter,
    GeminiAdapter,
    OllamaAdapter,
    VLLMAdapter,
)
_BY_PROVIDER = {provider: family for family in FAMILIES for provider in family.serves}


def adapter_for(config: LLMConfig) -> ProviderAdapter:
    """The adapter of the config's model (the offline extractor's is the OpenAI shape: it is
    registered with litellm as a custom provider and needs nothing more)."""
    return _adapter(config.effective_model, config.api_base)


@lru_cache(maxsize=256)
def _adapter(model: str, api_base: str | None) -> ProviderAdapter:
    provider = litellm_provider(model, api_base)
    family = _BY_PROVIDER.get(provider, OpenAICompatibleAdapter)
    if marks_claude(provider, model):  # Claude on another cloud: Anthropic's cache marks too
        return family(provider=provider, model=model, cache_marks=True)
    return family(provider=provider, model=model)


def litellm_provider(model: str, api_base: str | None = None) -> str:
    """litellm's provider for the model string ("anthropic", "gemini", "azure", "ollama_chat", ...);
    for a model it cannot place, the string's prefix."""
    try:
        return str(import_litellm().get_llm_provider(model, api_base=api_base)[1])
    except Exception:
        return model.split("/", 1)[0]
