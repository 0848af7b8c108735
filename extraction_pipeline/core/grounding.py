"""Quote verification, first cut: exact match after normalization, plus the value-in-quote rule.

A quote is ``verified`` only when it is found in the document *and* the extracted value appears in
it; found without the value is ``unverified`` with reason "value not in quote". Fuzzy tiers and the
numeric-aware span check build on this module.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

VERIFIED = "verified"
APPROXIMATE = "approximate"
UNVERIFIED = "unverified"
NOT_REPORTED = "not reported"

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2212"), "-")
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_DASHES)
    text = re.sub(r"-\n(?=[a-z])", "", text)  # hyphenation across line breaks
    return _SPACES.sub(" ", text).strip().lower()


@dataclass(frozen=True)
class Grounding:
    status: str
    reason: str
    page: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Effect measures are reported spelled out as often as abbreviated; either form grounds the value.
_SYNONYMS = {
    "hr": ("hazard ratio",),
    "or": ("odds ratio",),
    "rr": ("risk ratio", "relative risk", "rate ratio"),
}


def _value_in_quote(value: str | float | int, quote_norm: str) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        found = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", quote_norm.replace(",", ""))]
        return any(abs(number - x) < 1e-9 or abs(abs(number) - x) < 1e-9 for x in found)
    text = normalize(str(value))
    if re.search(rf"(?<![a-z0-9]){re.escape(text)}(?![a-z0-9])", quote_norm):
        return True
    return any(alias in quote_norm for alias in _SYNONYMS.get(text, ()))


def ground(value: str | float | int | None, quote: str | None, pages_norm: list[str]) -> Grounding:
    if value is None and not quote:
        return Grounding(NOT_REPORTED, "field not reported")
    if not quote:
        return Grounding(UNVERIFIED, "no quote given")
    quote_norm = normalize(quote)
    page = next((number for number, text in enumerate(pages_norm, start=1) if quote_norm in text), None)
    if page is None:
        return Grounding(UNVERIFIED, "quote not found in document")
    if value is not None and not _value_in_quote(value, quote_norm):
        return Grounding(UNVERIFIED, "value not in quote", page)
    return Grounding(VERIFIED, "quote found verbatim; value in quote", page)
