"""A model's prices from litellm's bundled map (core/extraction/pricing.py): a mapped model's
ordinary and batch prices, the offline extractor free, a model the map does not name unpriced
(never litellm's zeros), and the dollars of a count of tokens at those prices."""

from __future__ import annotations

import pytest

from extraction_pipeline.core.extraction.pricing import Price, PriceSource, price_of, supports_provider_batches
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL


def test_a_mapped_model_has_its_prices_and_half_price_through_the_batch_api() -> None:
    price = price_of("openai/gpt-4o-mini")
    assert price.source is PriceSource.LITELLM and price.known and price.has_batch_api
    assert price.input_per_token > 0 and price.output_per_token > price.input_per_token
    assert price.batch_input_per_token == pytest.approx(price.input_per_token / 2)
    assert price.cost(1000, 100) == pytest.approx(1000 * price.input_per_token + 100 * price.output_per_token)
    assert price.batch_cost(1000, 100) == pytest.approx((price.cost(1000, 100) or 0) / 2)
    assert supports_provider_batches("openai/gpt-4o-mini")


def test_a_model_without_a_batch_api_is_priced_by_ordinary_calls_only() -> None:
    price = price_of("mistral/mistral-small-latest")
    assert price.known and not price.has_batch_api
    assert price.cost(10, 10) is not None and price.batch_cost(10, 10) is None


def test_the_offline_extractor_is_free_and_an_unmapped_model_has_no_price() -> None:
    offline = price_of(OFFLINE_MODEL)
    assert offline.source is PriceSource.OFFLINE and offline.cost(5000, 1000) == 0.0
    unknown = price_of("openai/not-a-model-in-the-map")
    assert unknown == Price(PriceSource.UNKNOWN) and not unknown.known
    assert unknown.cost(5000, 1000) is None and unknown.batch_cost(5000, 1000) is None
