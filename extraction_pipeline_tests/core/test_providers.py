"""``adapter_for`` gives each model string its family's adapter (core/llm/providers), and nothing
outside that package names a provider: what differs between providers is held by the adapters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extraction_pipeline.core.llm.config import LLMConfig
from extraction_pipeline.core.llm.providers import FAMILIES, ProviderAdapter, adapter_for
from extraction_pipeline.core.llm.providers.anthropic import AnthropicAdapter
from extraction_pipeline.core.llm.providers.anthropic_batches import AnthropicBatchDriver
from extraction_pipeline.core.llm.providers.azure import AzureAdapter
from extraction_pipeline.core.llm.providers.gemini import GeminiAdapter
from extraction_pipeline.core.llm.providers.ollama import OllamaAdapter
from extraction_pipeline.core.llm.providers.openai_batches import OpenAIBatchDriver
from extraction_pipeline.core.llm.providers.openai_compatible import OpenAICompatibleAdapter
from extraction_pipeline.core.llm.providers.vllm import VLLMAdapter
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.templates.schema import output_json_schema

PACKAGE = Path(__file__).resolve().parents[2] / "extraction_pipeline"
ADAPTERS = PACKAGE / "core" / "llm" / "providers"


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("openai/gpt-4o-mini", OpenAICompatibleAdapter),
        ("gpt-4o-mini", OpenAICompatibleAdapter),
        ("deepseek/deepseek-chat", OpenAICompatibleAdapter),
        ("offline/pattern-v1", OpenAICompatibleAdapter),
        ("azure/gpt-4o-mini", AzureAdapter),
        ("anthropic/claude-sonnet-4-5-20250929", AnthropicAdapter),
        ("gemini/gemini-2.5-flash", GeminiAdapter),
        ("vertex_ai/gemini-2.5-flash", GeminiAdapter),
        ("ollama/llama3", OllamaAdapter),
        ("ollama_chat/llama3", OllamaAdapter),
        ("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", VLLMAdapter),
    ],
)
def test_each_model_string_has_its_familys_adapter(model: str, family: type[ProviderAdapter]) -> None:
    adapter = adapter_for(LLMConfig(model=model))
    assert type(adapter) is family and adapter.model == model
    assert family in FAMILIES


def test_claude_gets_the_cache_marks_wherever_it_is_served() -> None:
    assert adapter_for(LLMConfig(model="anthropic/claude-sonnet-4-5-20250929")).cache_marks
    assert adapter_for(LLMConfig(model="vertex_ai/claude-sonnet-4-5@20250929")).cache_marks
    assert adapter_for(LLMConfig(model="bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0")).cache_marks
    for model in ("openai/gpt-4o-mini", "gemini/gemini-2.5-flash", "vertex_ai/gemini-2.5-flash", "ollama/llama3"):
        assert not adapter_for(LLMConfig(model=model)).cache_marks, model
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "the paper"}]
    marked = adapter_for(LLMConfig(model="anthropic/claude-sonnet-4-5-20250929")).messages_for(messages)
    assert marked[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert adapter_for(LLMConfig(model="openai/gpt-4o-mini")).messages_for(messages) == messages


def test_only_openai_and_anthropic_have_a_batch_api_here() -> None:
    assert isinstance(adapter_for(LLMConfig(model="openai/gpt-4o-mini")).batch_api(), OpenAIBatchDriver)
    assert isinstance(adapter_for(LLMConfig(model="anthropic/claude-sonnet-4-5")).batch_api(), AnthropicBatchDriver)
    for model in ("azure/gpt-4o-mini", "gemini/gemini-2.5-flash", "ollama/llama3", "hosted_vllm/m", "deepseek/x"):
        assert adapter_for(LLMConfig(model=model)).batch_api() is None, model


def test_each_family_asks_for_the_structured_output_its_provider_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_pipeline.core.llm.providers import base

    monkeypatch.setattr(base, "_REFUSED_SCHEMAS", set())  # what another test's Gemini refused is not this one's
    schema = output_json_schema(RCT_TEMPLATE)
    config = LLMConfig(model="openai/a-model-litellm-does-not-know")
    assert adapter_for(config).response_format(config, RCT_TEMPLATE) == {"type": "json_object"}  # no schema known
    config = LLMConfig(model="openai/gpt-4o-mini")
    assert adapter_for(config).response_format(config, RCT_TEMPLATE)["json_schema"]["schema"] == schema
    config = LLMConfig(model="gemini/gemini-2.5-flash")
    reduced = adapter_for(config).response_format(config, RCT_TEMPLATE)["json_schema"]["schema"]
    assert "$defs" in schema and "$defs" not in reduced and "$ref" not in str(reduced)
    config = LLMConfig(model="anthropic/claude-sonnet-4-5-20250929")
    assert adapter_for(config).response_format(config, RCT_TEMPLATE) == {"type": "json_object"}  # too complex
    config = LLMConfig(model="ollama/llama3", context_tokens=32768)
    assert adapter_for(config).call_options(config, [{"role": "user", "content": "x"}], 1000) == {"num_ctx": 32768}


BRANCH = re.compile(r"""provider\s*(==|!=|in\s*[(\[{])|startswith\(\s*["'](anthropic|gemini|ollama|azure|openai)""")


def test_no_provider_is_named_outside_the_adapters() -> None:
    outside = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if ADAPTERS not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if BRANCH.search(line)
    ]
    assert outside == []
    inside = [path for path in ADAPTERS.rglob("*.py") if BRANCH.search(path.read_text())]
    assert inside  # the pattern does find the one branch there is (OpenAI's batch API)
