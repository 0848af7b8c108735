"""Numeric-aware quote grounding.

The seeds verify a quote by edit distance, so a quote with one digit changed is still a "0.99
match" (DESIGN.md §6). Here a quote is **verified** only when (1) its text is found in the
document (page text or table text) with similarity >= 0.95, (2) the numbers in the quote are the
numbers of the matched source span, in the same order, with signs and decimal points, and
(3) the extracted value appears in the quote. Otherwise it is approximate (similarity 0.80–0.95,
numbers intact) or unverified, always with the reason.

Matching runs on a *skeleton* (NFKC, lower case, letters and digits only), which absorbs what
differs between renderings of the same words — spacing, line breaks, hyphenation, ligatures,
dashes, thin spaces. Numbers are compared on the *normalized text* (separators kept), where
"0.60–0.86" is two numbers and "−0.5" is negative.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Any

from extraction_pipeline.core.pdf.model import ParsedDocument

VERIFIED = "verified"
APPROXIMATE = "approximate"
UNVERIFIED = "unverified"
NOT_REPORTED = "not reported"
VERIFIED_AT = 0.95
APPROXIMATE_AT = 0.80

_CHAR_MAP = {
    **dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"), "-"),
    **dict.fromkeys(map(ord, "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f"), " "),
    ord("\u00b7"): ".",  # middle dot used as a decimal point in some journals
}
# A sign only where a number starts a term: "(−0.5", " -1.2", "=-3"; never in "0.60-0.86".
_NUMBER = re.compile(r"(?:(?<![\w.)\]])-)?\d+(?:,\d{3})*(?:\.\d+)?")
_SPACED_SIGN = re.compile(r"([\u2212\u2013\-])[\u2006\u2009\u200a\u202f]+(?=\d)")
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
# Effect measures are reported spelled out as often as abbreviated; either form grounds the value.
_SYNONYMS = {"hr": ("hazard ratio",), "or": ("odds ratio",), "rr": ("risk ratio", "relative risk", "rate ratio")}


def normalize(text: str) -> str:
    """NFKC (ligatures, superscripts, full-width forms), one dash, one space, hyphenation undone,
    lower case. Used for numbers and value checks."""
    # Typesetting puts hair/thin spaces between a minus and its number ("−\u200a5.3"): keep them joined.
    text = _SPACED_SIGN.sub(r"\1", text)
    text = unicodedata.normalize("NFKC", text).translate(_CHAR_MAP).replace("+/-", "±")
    text = _HYPHEN_BREAK.sub("", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def numbers(text: str) -> list[Decimal]:
    """The numbers of a normalized text, in order, with sign ("1,234" is one number)."""
    found = []
    for token in _NUMBER.findall(text):
        try:
            found.append(Decimal(token.replace(",", "")))
        except InvalidOperation:
            continue
    return found


def _in_order(source: list[Decimal], quoted: list[Decimal]) -> bool:
    """Every quoted number appears in the source, in the same order. Gaps are allowed: PDFs add
    numbers prose does not have (list markers, footnote and citation superscripts)."""
    remaining = iter(source)
    return all(any(number == candidate for candidate in remaining) for number in quoted)


@dataclass(frozen=True)
class Grounding:
    status: str
    confidence: float
    reason: str
    page: int | None = None
    source: str | None = None  # "text" or "table N"
    start: int | None = None  # offsets in that page's text or table text
    end: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Grounder:
    """Grounds quotes against one parsed document (build once per document, reuse per quote)."""

    def __init__(self, parsed: ParsedDocument) -> None:
        self.parsed = parsed
        self.text = parsed.searchable_text

    @cached_property
    def _skeleton(self) -> tuple[str, list[int]]:
        """Letters and digits of the normalized text, with each one's offset in ``self.text``."""
        chars: list[str] = []
        offsets: list[int] = []
        for index, char in enumerate(self.text):
            for piece in unicodedata.normalize("NFKC", char).lower():
                if piece.isalnum():
                    chars.append(piece)
                    offsets.append(index)
        return "".join(chars), offsets

    @staticmethod
    def skeleton(text: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isalnum())

    def _align(self, quote_skeleton: str) -> tuple[float, int, int] | None:
        """(similarity 0..1, start, end) of the best match in ``self.text``, or None."""
        from rapidfuzz import fuzz  # lazy: only processes that ground pay for it

        skeleton, offsets = self._skeleton
        if not quote_skeleton or not skeleton:
            return None
        exact = skeleton.find(quote_skeleton)
        if exact != -1:
            first, last = exact, exact + len(quote_skeleton) - 1
            return 1.0, offsets[first], offsets[last] + 1
        alignment = fuzz.partial_ratio_alignment(quote_skeleton, skeleton, score_cutoff=APPROXIMATE_AT * 100 - 10)
        if alignment is None or alignment.dest_end <= alignment.dest_start:
            return None
        return alignment.score / 100, offsets[alignment.dest_start], offsets[alignment.dest_end - 1] + 1

    def _widen_to_tokens(self, start: int, end: int) -> tuple[int, int]:
        """A fuzzy span may cut a number at its edge ("0.8" of "0.86"): widen to whole tokens."""
        text = self.text
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in ".,") and not text[start - 1].isspace():
            start -= 1
        while end < len(text) and (
            text[end].isalnum() or (text[end] in ".," and end + 1 < len(text) and text[end + 1].isdigit())
        ):
            end += 1
        return start, end

    def ground(self, value: str | float | int | None, quote: str | None, *, judgement: bool = False) -> Grounding:
        """``judgement``: the value is an assessment the quote supports (e.g. a Risk of Bias
        judgement), so the quote is verified but the value is not looked for inside it."""
        if value is None and not quote:
            return Grounding(NOT_REPORTED, 0.0, "field not reported")
        if not quote or not quote.strip():
            return Grounding(UNVERIFIED, 0.0, "no quote given")
        quote_norm = normalize(quote)
        aligned = self._align(self.skeleton(quote))
        if aligned is None or aligned[0] < APPROXIMATE_AT:
            score = round(aligned[0], 3) if aligned else 0.0
            return Grounding(UNVERIFIED, score, "quote not found in the document")
        score, start, end = aligned
        start, end = self._widen_to_tokens(start, end)
        where = self.parsed.locate(start, end)
        anchor: dict[str, Any] = (
            {"page": where.page, "source": where.source, "start": where.start, "end": where.end} if where else {}
        )
        confidence = round(score, 3)
        quoted, source = numbers(quote_norm), numbers(normalize(self.text[start:end]))
        if not _in_order(source, quoted):
            missing = [str(n) for n in quoted if n not in source]
            detail = f"not in the source span: {', '.join(missing)}" if missing else "in another order in the source"
            return Grounding(UNVERIFIED, confidence, f"numbers differ from the source ({detail})", **anchor)
        if value is not None and not judgement and not value_in_quote(value, quote_norm):
            return Grounding(UNVERIFIED, confidence, "value not in quote", **anchor)
        if score >= VERIFIED_AT:
            return Grounding(VERIFIED, confidence, "quote found; its numbers match the source", **anchor)
        return Grounding(APPROXIMATE, confidence, "quote found approximately; its numbers match the source", **anchor)


def _as_number(value: str | float | int) -> Decimal | None:
    if isinstance(value, bool):
        return None
    found = numbers(normalize(str(value))) if isinstance(value, str) else [Decimal(str(value))]
    if isinstance(value, str) and (len(found) != 1 or not re.fullmatch(r"[-+]?[\d.,]+%?", value.strip())):
        return None  # text such as "HR" or "NCT01234567" is matched as text
    return found[0] if found else None


# A number that stands alone: not the "2" of "H2" or "IL-2", not part of a longer number.
_STANDALONE = re.compile(r"(?<![a-z0-9.,])(?<![a-z]-)-?\d+(?:,\d{3})*(?:\.\d+)?(?!\d)")
EXACT, SIGN_DIFFERS, INSIDE_A_WORD = "exact", "sign differs", "inside a word"


def value_match(value: str | float | int, quote_norm: str) -> str | None:
    """How the value is printed in the quote: ``EXACT``; ``SIGN_DIFFERS`` (0.52 where the quote
    prints -0.52: the digits are there, the direction is not); ``INSIDE_A_WORD`` (2 only as the
    "2" of "H2"); None when it is not there at all. Text values match as whole words."""
    wanted = _as_number(value)
    if wanted is None:
        text = normalize(str(value))
        if re.search(rf"(?<![a-z0-9]){re.escape(text)}(?![a-z0-9])", quote_norm):
            return EXACT
        return EXACT if any(alias in quote_norm for alias in _SYNONYMS.get(text, ())) else None
    standalone = _standalone_numbers(quote_norm)
    if wanted in standalone:
        return EXACT
    if any(abs(n) == abs(wanted) for n in standalone):
        return SIGN_DIFFERS
    if any(abs(n) == abs(wanted) for n in numbers(quote_norm)):
        return INSIDE_A_WORD
    return None


def value_in_quote(value: str | float | int, quote_norm: str) -> bool:
    """The value's digits are printed in the quote. Whether its sign and standing match too is
    ``value_match``'s finer answer, which the pipeline turns into flags."""
    return value_match(value, quote_norm) is not None


def signed_in_quote(value: str | float | int, quote_norm: str) -> list[Decimal]:
    """The quote's numbers with the value's digits (to name them in a flag)."""
    wanted = _as_number(value)
    return [n for n in numbers(quote_norm) if wanted is not None and abs(n) == abs(wanted)]


def _standalone_numbers(text: str) -> list[Decimal]:
    found = []
    for match in _STANDALONE.finditer(text):  # "0.60-0.86": the lookbehind keeps 0.86 positive
        token = match.group(0)
        try:
            found.append(Decimal(token.replace(",", "")))
        except InvalidOperation:
            continue
    return found
