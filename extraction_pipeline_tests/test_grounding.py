"""Grounding, first cut: found verbatim and value in quote, or says why not."""

from __future__ import annotations

from extraction_pipeline.core.grounding import ground, normalize

PAGES = [
    normalize("Intro page.\nNothing here."),
    normalize("The hazard ratio was 0.72 (95% CI 0.60\u20130.86) for de-\nath."),
]


def test_verified_needs_quote_found_and_value_inside() -> None:
    verdict = ground(0.72, "The hazard ratio was 0.72 (95% CI 0.60-0.86) for death.", PAGES)
    assert (verdict.status, verdict.page) == ("verified", 2)


def test_value_not_in_quote_is_flagged() -> None:
    verdict = ground(0.27, "The hazard ratio was 0.72 (95% CI 0.60-0.86) for death.", PAGES)
    assert (verdict.status, verdict.reason) == ("unverified", "value not in quote")


def test_quote_with_a_changed_number_is_not_found() -> None:
    verdict = ground(0.72, "The hazard ratio was 0.72 (95% CI 0.50-0.86) for death.", PAGES)
    assert (verdict.status, verdict.reason) == ("unverified", "quote not found in document")


def test_abbreviated_measure_matches_its_spelled_out_name() -> None:
    assert ground("HR", "The hazard ratio was 0.72", PAGES).status == "verified"
    assert ground("OR", "The hazard ratio was 0.72", PAGES).status == "unverified"


def test_integer_value_does_not_match_inside_a_longer_number() -> None:
    pages = [normalize("A total of 1412 patients were randomized.")]
    assert ground(412, "A total of 1412 patients were randomized.", pages).status == "unverified"
    assert ground(1412, "A total of 1412 patients were randomized.", pages).status == "verified"


def test_missing_field_and_missing_quote() -> None:
    assert ground(None, None, PAGES).status == "not reported"
    assert (ground(5, None, PAGES).status, ground(5, None, PAGES).reason) == ("unverified", "no quote given")
