"""When a paper's prompt prefix is marked for the provider's cache (core/extraction/prompt_cache.py)."""

from __future__ import annotations

import time

from extraction_pipeline.core.extraction.prompt_cache import PromptCache


def test_a_call_is_marked_when_a_read_is_expected_and_not_after_the_lifetime() -> None:
    cache = PromptCache(lifetime_seconds=0.5, follow_up=True)
    assert not cache.marks(later=False)  # nothing written yet, nothing expected after it
    assert cache.marks(later=True)  # the first ask, the follow-up expected after it
    cache.sent(True)
    assert cache.marks(later=False)  # the follow-up: it reads what was just written
    time.sleep(0.6)
    assert not cache.marks(later=False)  # past the lifetime: a mark would only write again
    cache.sent(False)
    assert not cache.fresh()  # an unmarked call wrote nothing


def test_an_unmarked_call_does_not_make_the_prefix_fresh() -> None:
    cache = PromptCache(lifetime_seconds=300)
    cache.sent(False)
    assert not cache.marks(later=False)
