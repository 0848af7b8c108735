"""A grounded value as stored and read back: the typed form every surface uses."""

from __future__ import annotations

import json

from extraction_pipeline.core.extraction.grounded import GroundedValue, add_checks, fields_of, stored_fields
from extraction_pipeline.core.review.values import in_review_order, reviewable_values
from extraction_pipeline.core.verification.grounding import NOT_REPORTED, UNVERIFIED, VERIFIED, GroundingStatus


def _value(path: str, value: float | None, status: GroundingStatus = VERIFIED, **kw: object) -> GroundedValue:
    """A value at ``module.field`` or ``module.N.field``."""
    parts = path.split(".")
    index = int(parts[1]) if len(parts) == 3 else None
    return GroundedValue(parts[0], index, parts[-1], value, "q", status, 1.0, "r", **kw)  # type: ignore[arg-type]


def test_a_stored_value_reads_back_equal_and_keeps_its_stored_keys() -> None:
    value = GroundedValue(
        "outcomes", 2, "ci_lower", 0.61, "HR 0.72 (95% CI 0.61-0.85)", VERIFIED, 1.0, "quote found", 3, "table 1",
        10, 36, {"page": 4, "source": "text", "start": 0, "end": 12}, ("a check",),
    )  # fmt: skip
    stored = json.loads(json.dumps(stored_fields({"outcomes.2.ci_lower": value})))
    entry = stored["outcomes.2.ci_lower"]
    assert list(entry) == [
        "module", "index", "field", "value", "quote", "status", "confidence", "reason",
        "page", "source", "start", "end", "continued", "flags",
    ]  # fmt: skip
    assert entry["status"] == "verified" and entry["flags"] == ["a check"]
    assert fields_of({"fields": stored}) == {"outcomes.2.ci_lower": value}


def test_a_result_stored_before_templates_reads_as_legacy_and_an_unknown_status_as_unverified() -> None:
    old = {"fields": {"hazard_ratio": {"value": 0.72, "quote": "HR 0.72", "status": "verified", "confidence": 1.0}}}
    [legacy] = fields_of(old).values()
    assert legacy.module is None and legacy.field == "hazard_ratio" and legacy.index is None
    assert legacy.status == VERIFIED and legacy.flags == () and legacy.reason == ""
    assert "module" not in legacy.as_json()  # written back, it stays a legacy entry
    odd = fields_of({"fields": {"x.y": {"value": 1, "status": "checked by magic"}}})["x.y"]
    assert odd.status == UNVERIFIED  # never shown as more than was checked
    assert fields_of(None) == {} and fields_of({}) == {}


def test_checks_add_flags_without_changing_the_values_given() -> None:
    given = {
        "outcomes.1.effect_estimate": _value("outcomes.1.effect_estimate", 2.5),
        "outcomes.1.ci_lower": _value("outcomes.1.ci_lower", 0.6),
        "outcomes.1.ci_upper": _value("outcomes.1.ci_upper", 0.9),
    }
    checked = add_checks(given, None)
    assert checked["outcomes.1.effect_estimate"].flags and not given["outcomes.1.effect_estimate"].flags
    assert checked["outcomes.1.ci_lower"].value == 0.6


def test_review_order_puts_unverified_and_flagged_before_verified_and_skips_absent_fields() -> None:
    fields = {
        "metadata.nct_number": _value("metadata.nct_number", None, NOT_REPORTED),
        "metadata.randomized_n": _value("metadata.randomized_n", 412),
        "metadata.funding": _value("metadata.funding", 1, flags=("odd",)),
        "metadata.registry": _value("metadata.registry", 2, UNVERIFIED),
    }
    values = reviewable_values(json.dumps({"fields": stored_fields(fields)}))
    assert "metadata.nct_number" not in values  # reported as absent: nothing to decide
    assert [v.path for v in in_review_order(values)] == [
        "metadata.registry",
        "metadata.funding",
        "metadata.randomized_n",
    ]
    assert values["metadata.funding"].needs_attention and not values["metadata.randomized_n"].needs_attention
