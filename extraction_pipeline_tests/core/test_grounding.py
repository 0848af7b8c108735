"""Numeric-aware grounding: a quote is verified only if found and its numbers are the source's."""

from __future__ import annotations

import pytest

from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.verification.grounding import Grounder, normalize, numbers

PAGES = [
    "Intro page.\nNothing here.",
    "Mortality was lower with the drug (hazard ratio 0.72; 95% CI 0.60\u20130.86) over 2 years, and the\n"
    "difference in weight was \u2212\u200a1.5 kg (95% CI \u22122.9 to \u22120.1). The ef\ufb01cacy of treat-\n"
    "ment persisted.",
]
TABLE = ParsedTable(page=2, html="<table></table>", text="Age, years\t55\u00b120\t59\u00b121")
GROUNDER = Grounder(ParsedDocument("sha", PAGES, [TABLE]))
TRUE_QUOTE = "Mortality was lower with the drug (hazard ratio 0.72; 95% CI 0.60-0.86) over 2 years"


def test_verbatim_quote_is_verified_with_its_location() -> None:
    verdict = GROUNDER.ground(0.72, TRUE_QUOTE)
    assert (verdict.status, verdict.confidence, verdict.page, verdict.source) == ("verified", 1.0, 2, "text")
    assert verdict.start is not None and verdict.end is not None
    assert PAGES[1][verdict.start : verdict.end].startswith("Mortality was lower")


def test_rendering_differences_are_absorbed() -> None:
    # Ligature (ﬁ), hyphenation across a line break, Unicode minus with a hair space, en dash.
    quote = "The difference in weight was -1.5 kg (95% CI -2.9 to -0.1). The efficacy of treatment persisted."
    assert GROUNDER.ground(-1.5, quote).status == "verified"


@pytest.mark.parametrize(
    ("forged", "missing"),
    [
        (TRUE_QUOTE.replace("0.60", "0.61"), "0.61"),  # one digit changed
        (TRUE_QUOTE.replace("0.72", "7.2"), "7.2"),  # decimal point moved
        (TRUE_QUOTE.replace("2 years", "3 years"), "3"),  # a digit anywhere
    ],
)
def test_changed_numbers_are_never_verified(forged: str, missing: str) -> None:
    verdict = GROUNDER.ground(None, forged)
    assert verdict.status == "unverified" and verdict.confidence > 0.95  # the text still matches...
    assert verdict.reason == f"numbers differ from the source (not in the source span: {missing})"


def test_swapped_numbers_and_dropped_signs_are_never_verified() -> None:
    swapped = TRUE_QUOTE.replace("0.60-0.86", "0.86-0.60")
    assert GROUNDER.ground(None, swapped).reason == "numbers differ from the source (in another order in the source)"
    unsigned = "The difference in weight was 1.5 kg (95% CI -2.9 to -0.1)."
    verdict = GROUNDER.ground(None, unsigned)
    assert verdict.status == "unverified" and "1.5" in verdict.reason


def test_value_must_appear_in_its_quote() -> None:
    verdict = GROUNDER.ground(0.27, TRUE_QUOTE)
    assert (verdict.status, verdict.reason) == ("unverified", "value not in quote")
    assert GROUNDER.ground("HR", TRUE_QUOTE).status == "verified"  # abbreviation of "hazard ratio"
    assert GROUNDER.ground("0.72", TRUE_QUOTE).status == "verified"  # numbers given as text


def test_tables_are_in_scope() -> None:
    verdict = GROUNDER.ground(55, "Age, years 55±20 59±21")
    assert (verdict.status, verdict.page, verdict.source) == ("verified", 2, "table 1")


def test_tiers_and_absent_quotes() -> None:
    approximate = GROUNDER.ground(
        0.72, "Mortality was much lower with the new drug (hazard ratio 0.72; 95% CI 0.60-0.86)"
    )
    assert approximate.status == "approximate" and 0.80 <= approximate.confidence < 0.95
    assert GROUNDER.ground(None, "A sentence that is nowhere in this paper at all.").status == "unverified"
    assert GROUNDER.ground(None, None).status == "not reported"
    assert GROUNDER.ground(5, None).reason == "no quote given"


def test_number_tokens() -> None:
    assert numbers(normalize("CI 0.60\u20130.86, n = 1,234, change \u22125.3")) == [
        *map(__import__("decimal").Decimal, ["0.60", "0.86", "1234", "-5.3"])
    ]


def test_value_match_tells_a_flipped_sign_and_a_label_from_the_printed_value() -> None:
    from extraction_pipeline.core.verification.grounding import (
        EXACT,
        INSIDE_A_WORD,
        SIGN_DIFFERS,
        normalize,
        value_match,
    )

    quote = normalize("The mean difference was \u22120.52 (95% CI \u22120.80 to \u22120.24; p=0.002) in group H2.")
    assert value_match(-0.52, quote) == EXACT and value_match("0.002", quote) == EXACT
    assert value_match(0.52, quote) == SIGN_DIFFERS and value_match(0.8, quote) == SIGN_DIFFERS
    assert value_match(2, quote) == INSIDE_A_WORD
    assert value_match(7, quote) is None
    assert value_match(0.86, normalize("95% CI 0.60-0.86")) == EXACT  # a range, not a negative number
    assert value_match(6, normalize("IL-6 was unchanged")) == INSIDE_A_WORD
    assert value_match(1250, normalize("1,250 participants")) == EXACT
