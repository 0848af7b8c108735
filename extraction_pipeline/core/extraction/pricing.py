"""What a model's tokens cost, from litellm's bundled model map (no network), and the dollars of
a count of prompt and answer tokens at those prices, ordinary and through the provider's batch
API. The map's figures are list prices: the provider's invoice decides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PriceSource(StrEnum):
    LITELLM = "litellm"  # litellm's model map prices the model
    OFFLINE = "offline"  # the built-in extractor: costs nothing
    UNKNOWN = "unknown"  # the map has no price for the model


@dataclass(frozen=True)
class Price:
    """Dollars per token; batch prices only where the provider has a batch API
    (``input_cost_per_token_batches``)."""

    source: PriceSource
    input_per_token: float = 0.0
    output_per_token: float = 0.0
    batch_input_per_token: float | None = None
    batch_output_per_token: float | None = None
    # Prompt tokens read from the provider's cache, and written to it (only Anthropic charges for
    # the write: 1.25x; None where the map has no figure: no read is counted, a write costs input).
    cache_read_per_token: float | None = None
    cache_write_per_token: float | None = None

    @property
    def known(self) -> bool:
        return self.source is not PriceSource.UNKNOWN

    @property
    def has_batch_api(self) -> bool:
        return self.batch_input_per_token is not None and self.batch_output_per_token is not None

    def cost(self, prompt_tokens: int, answer_tokens: int) -> float | None:
        """Dollars by ordinary calls (None: no price known)."""
        if not self.known:
            return None
        return prompt_tokens * self.input_per_token + answer_tokens * self.output_per_token

    def cached_cost(self, prompt_tokens: int, answer_tokens: int, *, read: int, written: int) -> float | None:
        """Dollars by ordinary calls of which ``read`` prompt tokens come from the provider's cache
        and ``written`` are written to it, each at its own rate (None: no price known)."""
        if not self.known:
            return None
        read_rate = self.input_per_token if self.cache_read_per_token is None else self.cache_read_per_token
        write_rate = self.input_per_token if self.cache_write_per_token is None else self.cache_write_per_token
        fresh = prompt_tokens - read - written
        return (
            fresh * self.input_per_token
            + read * read_rate
            + written * write_rate
            + answer_tokens * self.output_per_token
        )

    def batch_cost(self, prompt_tokens: int, answer_tokens: int) -> float | None:
        """Dollars through the provider's batch API (None: no batch price, or no price known)."""
        if not self.known or self.batch_input_per_token is None or self.batch_output_per_token is None:
            return None
        return prompt_tokens * self.batch_input_per_token + answer_tokens * self.batch_output_per_token


def price_of(model: str) -> Price:
    """The model's prices from litellm's model map (no network: the bundled map)."""
    from extraction_pipeline.core.llm.litellm_loader import import_litellm
    from extraction_pipeline.core.llm.offline import OFFLINE_PROVIDER

    if model.startswith(f"{OFFLINE_PROVIDER}/"):
        return Price(PriceSource.OFFLINE)
    litellm = import_litellm()
    # litellm answers some unmapped models with zeros: only a model the map names has a price.
    bare = model.split("/", 1)[1] if "/" in model else model
    if model not in litellm.model_cost and bare not in litellm.model_cost:
        return Price(PriceSource.UNKNOWN)
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return Price(PriceSource.UNKNOWN)
    prompt, answer = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or answer is None:
        return Price(PriceSource.UNKNOWN)
    batch_in, batch_out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    has_batch = batch_in is not None and batch_out is not None
    read, write = info.get("cache_read_input_token_cost"), info.get("cache_creation_input_token_cost")
    return Price(
        PriceSource.LITELLM,
        float(prompt),
        float(answer),
        float(batch_in) if has_batch else None,
        float(batch_out) if has_batch else None,
        float(read) if read is not None else None,
        float(write) if write is not None else None,
    )


def supports_provider_batches(model: str) -> bool:
    """Whether `--provider-batch` can send this model's prompts to its provider's batch API (only
    those go at the batch price)."""
    from extraction_pipeline.core.llm.batch_api import supports_provider_batches as drivable

    return drivable(model)
