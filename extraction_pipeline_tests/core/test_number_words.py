"""Numbers printed as words, found and matched as the value of a quote."""

from __future__ import annotations

from extraction_pipeline.core.verification.grounding import EXACT, normalize, value_match
from extraction_pipeline.core.verification.number_words import number_words


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
