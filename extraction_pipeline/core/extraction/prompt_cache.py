"""When a paper's prompt prefix is worth marking for the provider's prompt cache.

Every call about a paper repeats one prefix (the system prompt and the paper: see
``prompts.build_messages``). Anthropic caches only what a request marks, and a marked prefix costs
1.25x the input price to write and 0.1x to read within the cache's lifetime (5 minutes after its
last use); a mark that is never read again is a 25% surcharge for nothing. So a call is marked only
when a read is expected within that lifetime:

- another call about the same prefix comes right after it (``later``): the first ask of a paper
  asked whole in a batch that asks the follow-up question, and each of the smaller questions
  after a cut answer but the last; or
- the prefix was sent marked less than the lifetime ago, so this call reads it (the follow-up
  after a fresh first answer, the next smaller question).

A paper in parts (each part its own pages), a first answer reused from the ledger or a provider
batch (nothing was cached, or long ago), and a follow-up after a long wait are sent unmarked and
paid at the ordinary price. Providers that cache without marks (OpenAI, Gemini, vLLM) ignore the
decision; their reads are counted as they come.

Pure domain: the caller gives the lifetime (``gateway.cache_lifetime``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from extraction_pipeline.core.extraction.markers import split_stable_prefix


def prefix_key(messages: list[dict[str, str]]) -> str:
    """Which prefix a prompt repeats: the system prompt and its first user message's stable part
    (the paper, or a part's pages), hashed."""
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    stable = split_stable_prefix(user)[0]
    return hashlib.sha256(f"{system}\0{stable}".encode()).hexdigest()


@dataclass
class PromptCache:
    """One model's calls about one paper, as the provider's prompt cache sees them: when each
    prefix (the whole paper, or a part's pages) was last sent marked."""

    lifetime_seconds: float
    follow_up: bool = False  # the batch asks the follow-up question: a first ask asked whole is read again
    marked_at: dict[str, float] = field(default_factory=dict)  # prefix_key -> time.monotonic

    def marks(self, prefix: str, *, later: bool) -> bool:
        """Whether the next call with this prefix is marked (``later``: another call with the same
        prefix is expected right after it)."""
        return later or self.fresh(prefix)

    def fresh(self, prefix: str) -> bool:
        """This prefix was sent marked within the cache's lifetime: the provider still holds it."""
        at = self.marked_at.get(prefix)
        return at is not None and time.monotonic() - at < self.lifetime_seconds

    def sent(self, prefix: str, marked: bool, at: float | None = None) -> None:
        """A call with this prefix was sent (``at``: when, by time.monotonic; the provider caches
        the prefix as the request arrives, not when the answer comes back); a marked one writes or
        refreshes it."""
        if marked:
            self.marked_at[prefix] = time.monotonic() if at is None else at
