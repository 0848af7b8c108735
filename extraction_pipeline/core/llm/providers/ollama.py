"""Ollama (``ollama``, ``ollama_chat``): a local server whose context window is 4096 tokens unless
the request asks (``num_ctx``), and which drops what does not fit without a word: the paper would
silently lose its beginning.

What it holds: the window to ask for (``call_options``). Its structured output is JSON mode
(``format: "json"``): litellm does not report schema support for Ollama's models, and its
grammar-constrained schemas do not take every construct of ours. No rate headers, no batch API.

Hand-written: the window. litellm passes ``num_ctx`` on but never sets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from extraction_pipeline.core.llm.config import LLMConfig, count_tokens, model_info
from extraction_pipeline.core.llm.providers.base import ProviderAdapter


@dataclass(frozen=True)
class OllamaAdapter(ProviderAdapter):
    family: ClassVar[str] = "Ollama"
    serves: ClassVar[frozenset[str]] = frozenset({"ollama", "ollama_chat"})

    def call_options(self, config: LLMConfig, messages: list[dict[str, str]], limit: int | None) -> dict[str, Any]:
        return {"num_ctx": ollama_window(config, messages, limit)}


def ollama_window(config: LLMConfig, messages: list[dict[str, str]], limit: int | None) -> int:
    """The context to ask Ollama for: the configured window, else litellm's figure for the model,
    else what this prompt and its answer need (counted, with a margin)."""
    if config.context_tokens:
        return int(config.context_tokens)
    known = (model_info(config) or {}).get("max_input_tokens")
    if known:
        return int(known)
    needed = max(count_tokens(config, messages), -(-sum(len(str(m.get("content") or "")) for m in messages) // 3))
    return int(needed * 1.1) + (limit or 8192)
