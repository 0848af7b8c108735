"""Numbers printed as words, found and matched as the value of a quote."""

from __future__ import annotations

import re

from extraction_pipeline.core.verification.grounding import EXACT, normalize, value_match
from extraction_pipeline.core.verification.number_words import number_words, words_pattern


def test_number_words_are_whole_words_and_tens_join_their_units() -> None:
    text = "Twelve adults, twenty-four children and ninety nine parents; someone ran a one-way ANOVA."
    assert [value for _start, _end, value in number_words(text)] == [12, 24, 99]
    start, end, _value = number_words(text)[1]
    assert text[start:end] == "twenty-four"
    # The first word of a compound adjective counts nothing; a word holding a number's letters is no number.
    assert number_words("a two-sided test over twenty-four-hour periods; none, often, tone") == []


def test_a_value_printed_in_words_is_in_its_quote_and_another_value_is_not() -> None:
    quote = normalize("Ten healthy volunteers (8 men) were enrolled")
    assert value_match(10, quote) == EXACT
    assert value_match("10", quote) == EXACT
    assert value_match(8, quote) == EXACT
    assert value_match(11, quote) is None
    assert value_match(10.5, quote) is None


def test_words_pattern_is_the_inverse_of_number_words() -> None:
    """Every number under 100 printed as words, in any casing and with either joiner, is matched by
    its pattern, and reading the match back gives the number."""
    text = "Zero one TWO three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    text += "seventeen eighteen nineteen twenty-one thirty two forty\u2011five fifty sixty-nine ninety-nine"
    for value, _start, _end in [(value, start, end) for start, end, value in number_words(text)]:
        pattern = words_pattern(value)
        assert pattern is not None
        match = re.search(rf"(?i)(?<![\w-]){pattern}(?![\w-])", text)
        assert match is not None, value
        assert [found for _s, _e, found in number_words(match.group(0))] == [value]
    assert len(number_words(text)) == 26
    assert re.fullmatch(words_pattern(24) or "", "twenty four") and re.fullmatch(words_pattern(24) or "", "twenty-four")
    assert not re.search(rf"(?<![\w-]){words_pattern(4)}(?![\w-])", "fourteen or twenty-four")
    assert words_pattern(100) is None and words_pattern(-3) is None
