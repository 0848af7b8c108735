"""When a paper's prompt prefix is marked for the provider's cache (core/extraction/prompt_cache.py)."""

from __future__ import annotations

import time

from extraction_pipeline.core.extraction.prompt_cache import PromptCache, prefix_key
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.templates import RCT_TEMPLATE


def test_a_call_is_marked_when_a_read_is_expected_and_not_after_the_lifetime() -> None:
    cache = PromptCache(lifetime_seconds=0.5, follow_up=True)
    paper = prefix_key(build_messages(RCT_TEMPLATE, ["Page one.", "Page two."]))
    assert not cache.marks(paper, later=False)  # nothing written yet, nothing expected after it
    assert cache.marks(paper, later=True)  # the first ask, the follow-up expected after it
    cache.sent(paper, True)
    assert cache.marks(paper, later=False)  # the follow-up: it reads what was just written
    time.sleep(0.6)
    assert not cache.marks(paper, later=False)  # past the lifetime: a mark would only write again
    cache.sent(paper, False)
    assert not cache.fresh(paper)  # an unmarked call wrote nothing


def test_each_prefix_is_fresh_on_its_own() -> None:
    """A part of a long paper (its own pages) is another prefix: marking one part, or the whole
    paper's follow-up, does not make the next part's call marked."""
    cache = PromptCache(lifetime_seconds=300)
    first = prefix_key(build_messages(RCT_TEMPLATE, ["Page one."], part=(1, 2)))
    second = prefix_key(build_messages(RCT_TEMPLATE, ["Page two."], first_page=2, part=(2, 2)))
    narrowed = prefix_key(build_messages(RCT_TEMPLATE, ["Page one."], part=(1, 2), missed=["x"]))
    assert first == narrowed and first != second  # the same pages: the same prefix, whatever is asked
    cache.sent(first, True)
    assert cache.marks(first, later=False) and not cache.marks(second, later=False)
