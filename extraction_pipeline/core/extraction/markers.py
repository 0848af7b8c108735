"""The prompt's section markers, and how text from outside (a PDF, a project's custom rules) is kept
from forging them.

Matching is case-insensitive and tolerant of spacing and underscores, because a model reads
``</full_text>`` or ``END  CUSTOM EXTRACTION RULES`` the same way it reads the real marker.
"""

from __future__ import annotations

import re

FULL_TEXT_OPEN, FULL_TEXT_CLOSE = "<FULL_TEXT>", "</FULL_TEXT>"
TABLES_OPEN, TABLES_CLOSE = "<HIGH_FIDELITY_TABLES>", "</HIGH_FIDELITY_TABLES>"
CUSTOM_BEGIN, CUSTOM_END = "BEGIN CUSTOM EXTRACTION RULES", "END CUSTOM EXTRACTION RULES"
MISSED_OPEN, MISSED_CLOSE = "<MISSED_OUTCOMES>", "</MISSED_OUTCOMES>"
# What one call asks (a part's pages, a follow-up's names, a narrower schema) comes last, between
# these: everything up to TABLES_CLOSE is the same for every call about a paper, so a provider's
# prompt cache can serve it (see split_stable_prefix).
THIS_CALL_OPEN, THIS_CALL_CLOSE = "<THIS_CALL>", "</THIS_CALL>"

_SEP = r"[\s_]*"
_TAG = re.compile(
    rf"<(\s*/?\s*(?:full{_SEP}text|high{_SEP}fidelity{_SEP}tables|missed{_SEP}outcomes|this{_SEP}call)\s*)>",
    re.IGNORECASE,
)
_RULES = re.compile(rf"\b(begin|end)(\s*_?\s*custom{_SEP}extraction{_SEP}rules)\b", re.IGNORECASE)


def defuse(text: str) -> str:
    """Rewrite anything that reads as one of our markers into something that does not:
    ``</full_text>`` -> ``[/full_text]``, ``END CUSTOM EXTRACTION RULES`` -> ``[quoted marker: END
    custom rules]``. ``contains_marker(defuse(text))`` is always false."""
    text = _TAG.sub(lambda m: "[" + "".join(m.group(1).split()) + "]", text)
    return _RULES.sub(lambda m: f"[quoted marker: {m.group(1)} custom rules]", text)


def contains_marker(text: str) -> bool:
    return bool(_TAG.search(text) or _RULES.search(text))


def split_stable_prefix(content: str) -> tuple[str, str]:
    """A user message as (the part every call about the paper repeats, what this call adds): the
    cut is right after TABLES_CLOSE, which a document cannot forge (``defuse``); a message without
    it is all prefix."""
    at = content.find(TABLES_CLOSE)
    if at < 0:
        return content, ""
    end = at + len(TABLES_CLOSE)
    return content[:end], content[end:]
