"""Numbers printed as words: "Twelve adults", "ten healthy volunteers", "twenty-four patients".

Style guides spell out small numbers and any number that starts a sentence, so a trial's group
size or a count is often printed only in words. A number word is a whole word (or a hyphenated
pair of tens and units); the first word of a compound adjective is not a count ("one-way",
"two-sided", "three-arm").
"""

from __future__ import annotations

import re

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
VALUES = {word: value for value, word in enumerate(_UNITS)} | {word: 10 * (i + 2) for i, word in enumerate(_TENS)}

_HYPHENS = "\\-\u2010\u2011"  # escaped: a class of its own in the patterns below
NUMBER_WORD = re.compile(
    rf"(?<![\w{_HYPHENS}])(?:(?P<tens>{'|'.join(_TENS)})(?:[{_HYPHENS} ](?P<unit>{'|'.join(_UNITS[1:10])}))?"
    rf"|(?P<small>{'|'.join(sorted(_UNITS, key=len, reverse=True))}))(?![\w{_HYPHENS}])",
    re.IGNORECASE,
)


def number_words(text: str) -> list[tuple[int, int, int]]:
    """(start, end, value) of every number printed as words in ``text``, in order."""
    found = []
    for match in NUMBER_WORD.finditer(text):
        if match.group("tens"):
            unit = match.group("unit")
            value = VALUES[match.group("tens").lower()] + (VALUES[unit.lower()] if unit else 0)
        else:
            value = VALUES[match.group("small").lower()]
        found.append((match.start(), match.end(), value))
    return found


def words_pattern(value: int) -> str | None:
    """A regex source matching whole number ``value`` spelled out ("twenty[- ]four"), or None when
    it has no spelling here (negative, or 100 and above): the inverse of ``number_words``."""
    if value in _NAMES:
        return _NAMES[value]
    tens, unit = divmod(value, 10)
    return f"{_NAMES[10 * tens]}[{_HYPHENS} ]{_NAMES[unit]}" if 2 <= tens <= 9 else None


_NAMES = {number: word for word, number in VALUES.items()}
