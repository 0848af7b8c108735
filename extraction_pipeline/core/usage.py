"""What a model call cost: tokens in and out, and dollars, for one model.

Its own module because the LLM gateway, the ledger and the extraction all count it, and adding two
of them is written once, here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    model: str
    tokens_in: int = 0  # every prompt token, cached ones included
    tokens_out: int = 0
    cost_usd: float = 0.0  # what was paid: cached prompt tokens and batch calls at their own price
    cached_tokens: int = 0  # prompt tokens the provider read from its prompt cache
    # What the same tokens would have cost as ordinary, uncached calls, less cost_usd: negative when
    # cache writes (Anthropic: 1.25x the input price) were not read back enough to pay for themselves.
    saved_usd: float = 0.0
    # Calls given up on after the timeout: the provider may still have answered them, and billed
    # them, though nothing came back (counted, never priced: their tokens are unknown).
    abandoned_calls: int = 0
    cache_written_tokens: int = 0  # prompt tokens written to the provider's cache (Anthropic bills them at 1.25x)

    def __add__(self, other: Usage | None) -> Usage:
        """The sum of two calls' costs (``None``: nothing to add); the model is the first one named."""
        if other is None:
            return self
        return Usage(
            self.model or other.model,
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost_usd + other.cost_usd,
            self.cached_tokens + other.cached_tokens,
            self.saved_usd + other.saved_usd,
            self.abandoned_calls + other.abandoned_calls,
            self.cache_written_tokens + other.cache_written_tokens,
        )
