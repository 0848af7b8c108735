"""What a provider says about its rate limits on every answer (and on a 429), read into one shape.

OpenAI (and the servers that copy it: Azure OpenAI, vLLM, most gateways) send
``x-ratelimit-limit-tokens``, ``x-ratelimit-remaining-tokens``, ``x-ratelimit-reset-tokens``
("6m0s", "1.5s", "20ms") and the same for ``-requests``. Anthropic sends
``anthropic-ratelimit-tokens-limit``, ``-remaining`` and ``-reset`` (an RFC 3339 time), and the same
for ``requests`` (and ``input-tokens`` / ``output-tokens``). Azure OpenAI sends only
``x-ratelimit-remaining-requests`` / ``-tokens``. Gemini, Ollama and vLLM send none (Gemini says
when to retry in its 429 body: see classify). litellm hands the provider's headers on with an
``llm_provider-`` prefix (and the OpenAI ones also bare); both are read.

Read here, not by litellm or an SDK: litellm only renames Anthropic's limits and remainders to
OpenAI's names (``process_anthropic_headers``: no reset times, no ``input-tokens-*``) and parses
none of them, and neither the ``openai`` nor the ``anthropic`` SDK parses them. Read by name, not
per adapter: each provider sends only its own names, and a budget knows the model, not its adapter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateLimits:
    """One answer's view of the account's limits; None where the provider said nothing."""

    tokens_limit: int | None = None  # per minute
    tokens_remaining: int | None = None
    tokens_reset_seconds: float | None = None  # until the bucket is full again
    requests_limit: int | None = None
    requests_remaining: int | None = None
    requests_reset_seconds: float | None = None
    # Anthropic meters output tokens apart (``anthropic-ratelimit-output-tokens-*``), estimated from
    # a call's ``max_tokens`` when it starts; then ``tokens_*`` above are its input tokens.
    output_tokens_limit: int | None = None
    output_tokens_remaining: int | None = None
    output_tokens_reset_seconds: float | None = None

    @property
    def empty(self) -> bool:
        return self == RateLimits()


def read_rate_limits(headers: Mapping[str, Any] | None, now: float) -> RateLimits:
    """The limits in ``headers`` (any case, bare or litellm's ``llm_provider-`` prefix)."""
    if not headers:
        return RateLimits()
    found: dict[str, str] = {}
    try:
        items = list(headers.items())
    except Exception:  # headers of an unexpected type: no hint, not a failure
        return RateLimits()
    for name, value in items:
        key = str(name).lower().removeprefix("llm_provider-")
        found.setdefault(key, str(value))

    def first(*names: str) -> str | None:
        return next((found[name] for name in names if name in found), None)

    # Anthropic meters input and output tokens apart (input-tokens-*, output-tokens-*); its
    # tokens-* (which litellm also hands on renamed x-ratelimit-*-tokens) are only the most
    # restrictive of the two in effect, so the split ones come first and tokens-* serves an answer
    # without them (some gateways pass only it).
    return RateLimits(
        tokens_limit=_int(
            first(
                "anthropic-ratelimit-input-tokens-limit", "x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit"
            )
        ),
        tokens_remaining=_int(
            first(
                "anthropic-ratelimit-input-tokens-remaining",
                "x-ratelimit-remaining-tokens",
                "anthropic-ratelimit-tokens-remaining",
            )
        ),
        tokens_reset_seconds=_reset(
            first(
                "anthropic-ratelimit-input-tokens-reset", "x-ratelimit-reset-tokens", "anthropic-ratelimit-tokens-reset"
            ),
            now,
        ),
        output_tokens_limit=_int(first("anthropic-ratelimit-output-tokens-limit")),
        output_tokens_remaining=_int(first("anthropic-ratelimit-output-tokens-remaining")),
        output_tokens_reset_seconds=_reset(first("anthropic-ratelimit-output-tokens-reset"), now),
        requests_limit=_int(first("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")),
        requests_remaining=_int(first("x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining")),
        requests_reset_seconds=_reset(first("x-ratelimit-reset-requests", "anthropic-ratelimit-requests-reset"), now),
    )


def _int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        value = int(float(raw.strip()))
    except ValueError:
        return None
    return value if value >= 0 else None


def _reset(raw: str | None, now: float) -> float | None:
    """Seconds until the reset: OpenAI's duration ("6m0s", "20ms") or Anthropic's RFC 3339 time."""
    if raw is None:
        return None
    text = raw.strip()
    parts = _DURATION.findall(text)
    if parts and _DURATION.sub("", text) == "":
        return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    try:
        return max(0.0, datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() - now)
    except ValueError:
        pass
    try:
        return max(0.0, float(text))
    except ValueError:
        return None
