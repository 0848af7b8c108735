"""Loopback fakes of the LLM providers' own APIs, one module each, written from the providers'
documentation: each checks what its provider refuses, answers in its shape and reports usage,
cached tokens, rate-limit headers and errors its way (see ``base`` for what they share)."""

from extraction_pipeline_tests.support.providers.anthropic import AnthropicFake
from extraction_pipeline_tests.support.providers.azure import AzureOpenAIFake
from extraction_pipeline_tests.support.providers.base import ProviderFake, Reply
from extraction_pipeline_tests.support.providers.gemini import GeminiFake
from extraction_pipeline_tests.support.providers.ollama import OllamaFake
from extraction_pipeline_tests.support.providers.openai import OpenAIFake
from extraction_pipeline_tests.support.providers.vllm import VLLMFake

__all__ = [
    "AnthropicFake",
    "AzureOpenAIFake",
    "GeminiFake",
    "OllamaFake",
    "OpenAIFake",
    "ProviderFake",
    "Reply",
    "VLLMFake",
]
