"""Numeric-aware quote grounding.

Verifying a quote by edit distance alone lets a quote with one digit changed pass as a "0.99
match" (measured on real trials: 84–90% of quotes with a forged number). Here a quote is
**verified** only when (1) its text is found in the document (page text or table text) with
similarity >= 0.95, (2) the numbers in the quote are the numbers of the matched source span, in
the same order, with signs and decimal points, and (3) the extracted value appears in the quote.
Otherwise it is approximate (similarity 0.80–0.95, numbers intact) or unverified, always with the
reason.

Matching runs on a *skeleton* (NFKC, lower case, letters and digits only), which absorbs what
differs between renderings of the same words — spacing, line breaks, hyphenation, ligatures,
dashes, thin spaces. Numbers are compared on the *normalized text* (separators kept), where
"0.60–0.86" is two numbers and "−0.5" is negative.

Signs and units: a true minus sign (U+2212) signs its number even when the PDF glues it to the
word before ("was−2.41"), a span that starts at a number takes in the minus sign before it, and
unit exponents ("kg/m2", "kg m −2", "mg·kg−1", "m²") are part of their unit, not numbers to compare.
A quote the PDF interrupts — a running header, page number or figure caption between its halves,
across a page break or a column — is found in two parts; the second part's location is kept too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, replace
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from functools import cached_property
from typing import Any

from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.number_words import number_words


def skeleton(text: str) -> str:
    """A text's letters and digits, NFKC-normalized and in lower case: what a quote is matched on
    (and what the page image's highlight and its header compare)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isalnum())


class GroundingStatus(StrEnum):
    """A value's verification status, as every surface shows it (the words are the values: they
    are stored in results and written into workbooks and CSVs)."""

    VERIFIED = "verified"
    APPROXIMATE = "approximate"
    UNVERIFIED = "unverified"
    NOT_REPORTED = "not reported"
    # A judgement (a Risk of Bias level, an outcome type, a study label) is not a number printed
    # in the paper: its quote can support it, but green "verified" would claim more than was checked.
    JUDGEMENT_SUPPORTED = "judgement: supported by a verified quote"
    JUDGEMENT_APPROXIMATE = "judgement: supported by an approximate quote"
    JUDGEMENT_NOT_FOUND = "judgement: quote not found"
    JUDGEMENT_UNSUPPORTED = "judgement: quote not verified"


VERIFIED = GroundingStatus.VERIFIED
APPROXIMATE = GroundingStatus.APPROXIMATE
UNVERIFIED = GroundingStatus.UNVERIFIED
NOT_REPORTED = GroundingStatus.NOT_REPORTED
JUDGEMENT_SUPPORTED = GroundingStatus.JUDGEMENT_SUPPORTED
JUDGEMENT_APPROXIMATE = GroundingStatus.JUDGEMENT_APPROXIMATE
JUDGEMENT_NOT_FOUND = GroundingStatus.JUDGEMENT_NOT_FOUND
JUDGEMENT_UNSUPPORTED = GroundingStatus.JUDGEMENT_UNSUPPORTED
JUDGEMENT_STATUSES = (JUDGEMENT_SUPPORTED, JUDGEMENT_APPROXIMATE, JUDGEMENT_NOT_FOUND, JUDGEMENT_UNSUPPORTED)
JUDGEMENT_NOTE = "the judgement itself is the model's: review it"
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
# A real minus sign glued to the word before it ("was−2.41"): still a sign (a hyphen is not: "IL-6").
_GLUED_MINUS = re.compile(r"(?<=[^\W\d_])\u2212(?=\d)")
# Unit exponents, after NFKC and the dash map: signed after any unit ("kg m -2", "mg.kg-1",
# "min-1"), unsigned only glued to a length ("m2", "kg/m2", "cm3"): "H2" or "S3" stay labels.
_UNIT_EXPONENT = re.compile(
    r"(?<![a-z])(?:((?:m|cm|mm|km|dm|m?g|kg|µg|μg|ng|l|dl|ml|s|min|h|mol|mmol|µmol|μmol)\s?)-\s?[1-3]"
    r"|((?:m|cm|mm|km|dm))[23])(?!\d|[.,]\d)"
)
_SIGN_CHARS = "-\u2212\u2013\u2012\ufe63\uff0d"
_THIN_SPACES = "\u2006\u2009\u200a\u202f"
# Effect measures are reported spelled out as often as abbreviated; either form grounds the value.
_SYNONYMS = {"hr": ("hazard ratio",), "or": ("odds ratio",), "rr": ("risk ratio", "relative risk", "rate ratio")}


def normalize(text: str) -> str:
    """NFKC (ligatures, superscripts, full-width forms), one dash, one space, hyphenation undone,
    lower case. Used for numbers and value checks."""
    # Typesetting puts hair/thin spaces between a minus and its number ("−\u200a5.3"): keep them joined.
    text = _SPACED_SIGN.sub(r"\1", text)
    text = _GLUED_MINUS.sub(" \u2212", text)
    text = unicodedata.normalize("NFKC", text).translate(_CHAR_MAP).replace("+/-", "±")
    text = _HYPHEN_BREAK.sub("", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def numbers(text: str, *, units: bool = False) -> list[Decimal]:
    """The numbers of a normalized text, in order, with sign ("1,234" is one number). ``units``:
    leave out unit exponents ("kg/m2" has no number 2), as a quote and its source are compared."""
    if units:
        text = _UNIT_EXPONENT.sub(lambda m: m.group(1) or m.group(2), text)
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
    status: GroundingStatus
    confidence: float
    reason: str
    page: int | None = None
    source: str | None = None  # "text" or "table N"
    start: int | None = None  # offsets in that page's text or table text
    end: int | None = None
    # A quote the PDF interrupts (page break, running header, caption): where its second part is
    # ({"page", "source", "start", "end"}); None for a quote found in one piece.
    continued: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# An interrupted quote: each part at least this many letters/digits, the interruption at most
# INTERRUPTION_MAX (a header, page number, footer, caption, or the tables parsed from the page).
PART_MIN_FIRST, PART_MIN_SECOND, INTERRUPTION_MAX = 12, 8, 6000


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

    def _interrupted(self, quote_skeleton: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """Two exact parts of the quote, the second shortly after the first with something else
        in between: ((start, end), (start, end)) in ``self.text``, or None."""
        skeleton, offsets = self._skeleton
        size = len(quote_skeleton)
        if size < PART_MIN_FIRST + PART_MIN_SECOND:
            return None
        head = quote_skeleton[:PART_MIN_FIRST]
        best: tuple[int, int, int, int] | None = None  # (gap, first start, split, second start)
        at = skeleton.find(head)
        for _ in range(200):  # a common opening ("the primary outcome") may occur many times
            if at == -1:
                break
            matched = PART_MIN_FIRST
            while matched < size and at + matched < len(skeleton) and skeleton[at + matched] == quote_skeleton[matched]:
                matched += 1
            # The first part may run on by a few letters that the interruption happens to share.
            for split in range(matched, max(PART_MIN_FIRST, matched - 6) - 1, -1):
                rest = quote_skeleton[split:]
                if len(rest) < PART_MIN_SECOND:
                    continue
                second = skeleton.find(rest, at + split + 1, at + split + 1 + INTERRUPTION_MAX + len(rest))
                if second != -1 and (best is None or second - (at + split) < best[0]):
                    best = (second - (at + split), at, split, second)
            at = skeleton.find(head, at + 1)
        if best is None:
            return None
        _gap, at, split, second = best  # the closest pair: the interruption is as short as possible
        rest_end = second + size - split - 1
        return (offsets[at], offsets[at + split - 1] + 1), (offsets[second], offsets[rest_end] + 1)

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

    def _anchor(self, start: int, end: int) -> dict[str, Any]:
        where = self.parsed.locate(start, end)
        return {"page": where.page, "source": where.source, "start": where.start, "end": where.end} if where else {}

    def _widen_to_tokens(self, start: int, end: int) -> tuple[int, int]:
        """A fuzzy span may cut a number at its edge ("0.8" of "0.86"): widen to whole tokens."""
        text = self.text
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in ".,") and not text[start - 1].isspace():
            start -= 1
        while end < len(text) and (
            text[end].isalnum() or (text[end] in ".," and end + 1 < len(text) and text[end + 1].isdigit())
        ):
            end += 1
        return self._take_leading_sign(start), end

    def _take_leading_sign(self, start: int) -> int:
        """A span that starts at a number takes in the minus sign before it ("−1.42 (−2.10; …"):
        the skeleton has no signs, so without this a quote starting with a negative number would
        be compared with the unsigned one. A dash between two numbers ("0.60–0.86") is a range."""
        text = self.text
        if start >= len(text) or not text[start].isdigit():
            return start
        at = start - 1
        while at >= 0 and text[at] in _THIN_SPACES:
            at -= 1
        if at < 0 or text[at] not in _SIGN_CHARS:
            return start
        before = text[at - 1] if at > 0 else " "
        return at if before.isspace() or before in "([{=:;,<>\u2264\u2265" else start

    def ground(self, value: str | float | int | None, quote: str | None, *, judgement: bool = False) -> Grounding:
        """``judgement``: the value is an assessment the quote supports (e.g. a Risk of Bias
        judgement), so the quote is checked but the value is not looked for inside it, and the
        verdict carries a judgement status (never plain "verified")."""
        verdict = self._ground(value, quote, judgement=judgement)
        return as_judgement(verdict) if judgement and value is not None else verdict

    def _ground(self, value: str | float | int | None, quote: str | None, *, judgement: bool) -> Grounding:
        if value is None and not quote:
            return Grounding(NOT_REPORTED, 0.0, "field not reported")
        if not quote or not quote.strip():
            return Grounding(UNVERIFIED, 0.0, "no quote given")
        quote_norm = normalize(quote)
        quote_skeleton = skeleton(quote)
        aligned = self._align(quote_skeleton)
        spans: list[tuple[int, int]] = []
        score = aligned[0] if aligned else 0.0
        if aligned is not None and score >= APPROXIMATE_AT:
            spans = [(aligned[1], aligned[2])]
        if score < VERIFIED_AT and (parts := self._interrupted(quote_skeleton)):
            score, spans = 1.0, list(parts)
        if not spans:
            return Grounding(UNVERIFIED, round(score, 3), "quote not found in the document")
        spans = [self._widen_to_tokens(start, end) for start, end in spans]
        anchor = self._anchor(*spans[0])
        if len(spans) == 2:
            anchor["continued"] = self._anchor(*spans[1]) or None
        confidence = round(score, 3)
        quoted = numbers(quote_norm, units=True)
        source = [n for start, end in spans for n in numbers(normalize(self.text[start:end]), units=True)]
        if not _in_order(source, quoted):
            missing = [str(n) for n in quoted if n not in source]
            detail = f"not in the source span: {', '.join(missing)}" if missing else "in another order in the source"
            return Grounding(UNVERIFIED, confidence, f"numbers differ from the source ({detail})", **anchor)
        if value is not None and not judgement and not value_in_quote(value, quote_norm):
            return Grounding(UNVERIFIED, confidence, "value not in quote", **anchor)
        if score >= VERIFIED_AT and len(spans) == 2:
            pages = f"pages {anchor.get('page')} and {(anchor.get('continued') or {}).get('page')}"
            reason = f"quote found in two parts ({pages}: the PDF interrupts it); its numbers match the source"
            return Grounding(VERIFIED, confidence, reason, **anchor)
        if score >= VERIFIED_AT:
            return Grounding(VERIFIED, confidence, "quote found; its numbers match the source", **anchor)
        return Grounding(APPROXIMATE, confidence, "quote found approximately; its numbers match the source", **anchor)


def as_judgement(verdict: Grounding) -> Grounding:
    """The judgement status for a quote's verdict (what the quote supports, not what was checked)."""
    if verdict.status == VERIFIED:
        return replace(verdict, status=JUDGEMENT_SUPPORTED, reason=f"{verdict.reason}; {JUDGEMENT_NOTE}")
    if verdict.status == APPROXIMATE:
        return replace(verdict, status=JUDGEMENT_APPROXIMATE, reason=f"{verdict.reason}; {JUDGEMENT_NOTE}")
    if verdict.status == UNVERIFIED:
        return replace(verdict, status=JUDGEMENT_NOT_FOUND if verdict.page is None else JUDGEMENT_UNSUPPORTED)
    return verdict


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
    if wanted in standalone or wanted in _worded(quote_norm):
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


def _worded(text: str) -> set[Decimal]:
    """The numbers the text prints as words ("twelve adults")."""
    return {Decimal(value) for _start, _end, value in number_words(text)}


def _standalone_numbers(text: str) -> list[Decimal]:
    found = []
    for match in _STANDALONE.finditer(text):  # "0.60-0.86": the lookbehind keeps 0.86 positive
        token = match.group(0)
        try:
            found.append(Decimal(token.replace(",", "")))
        except InvalidOperation:
            continue
    return found
