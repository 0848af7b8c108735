"""Anthropic's prompt-cache breakpoints (``cache_control``), for Claude wherever it is served.

Anthropic's cache reads only what the request marks; OpenAI, Azure, Gemini (implicit caching),
vLLM and DeepSeek cache a repeated prefix unasked. Claude served by Vertex AI or Bedrock takes the
same marks (litellm passes them on)."""

from __future__ import annotations

from typing import Any

from extraction_pipeline.core.extraction.markers import split_stable_prefix

# litellm's providers that serve Claude besides Anthropic itself, and take its marks.
CLAUDE_HOSTS = frozenset({"vertex_ai", "bedrock"})
_EPHEMERAL = {"type": "ephemeral"}


def marks_claude(provider: str, model: str) -> bool:
    """True for Claude served by another cloud (``CLAUDE_HOSTS``): its calls carry the marks too."""
    return provider in CLAUDE_HOSTS and "claude" in model


def with_cache_marks(messages: list[dict[str, str]], *, paper: bool = True) -> list[dict[str, Any]]:
    """A copy of ``messages`` with Anthropic's cache breakpoints: the system prompt (the rules and
    the template's fields and schema: the same for every call of a batch, so each document after
    the first reads it), and, with ``paper``, the first user message's stable prefix (the project's
    rules, the paper's text and tables) as its own marked text block, the call's own part after it
    unmarked. Every call about a paper (the first ask, the follow-up, the smaller questions after a
    cut answer, the repair, which appends to the same conversation) repeats that prefix and reads
    it from the cache. Two marks of Anthropic's four; the messages given are not changed (the
    answer key and the stored prompt use them)."""
    marked: list[dict[str, Any]] = []
    user_marked = False
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str) or not content:
            marked.append(dict(message))
            continue
        if message.get("role") == "system":
            marked.append(
                {**message, "content": [{"type": "text", "text": content, "cache_control": dict(_EPHEMERAL)}]}
            )
        elif message.get("role") == "user" and not user_marked and paper:
            user_marked = True
            prefix, tail = split_stable_prefix(content)
            blocks: list[dict[str, Any]] = [{"type": "text", "text": prefix, "cache_control": dict(_EPHEMERAL)}]
            if tail.strip():  # Anthropic refuses a text block of only whitespace
                blocks.append({"type": "text", "text": tail})
            marked.append({**message, "content": blocks})
        else:
            marked.append(dict(message))
    return marked
