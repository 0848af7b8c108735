"""A model's answer grounded against the paper: every field with its verdict and its flags."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.definition import FieldType, TemplateDefinition
from extraction_pipeline.core.templates.schema import ExtractedValue, extracted_values
from extraction_pipeline.core.verification.checks import check_values
from extraction_pipeline.core.verification.grounding import (
    INSIDE_A_WORD,
    NOT_REPORTED,
    SIGN_DIFFERS,
    UNVERIFIED,
    Grounder,
    Grounding,
    normalize,
    signed_in_quote,
    value_match,
)

NUMERIC = (FieldType.INTEGER, FieldType.NUMBER)


def ground_output(template: TemplateDefinition, answer: BaseModel, parsed: ParsedDocument) -> dict[str, Any]:
    """Every field of the answer, by path, with its grounding verdict and plausibility flags."""
    return add_checks(ground_entries(template, answer, Grounder(parsed)))


def ground_entries(template: TemplateDefinition, answer: BaseModel, grounder: Grounder) -> dict[str, Any]:
    """Every field of the answer with its grounding verdict and its value flag (sign, label)."""
    grounded: dict[str, Any] = {}
    for found in extracted_values(template, answer):
        flag = _value_flag(found)
        grounded[found.path] = {
            "module": found.module,
            "index": found.index,
            "field": found.field.name,
            "value": found.value,
            "quote": found.quote,
            **_verdict(grounder, found).as_dict(),
            "flags": [flag] if flag else [],
        }
    return grounded


def add_checks(grounded: dict[str, Any]) -> dict[str, Any]:
    """The plausibility rules over the values together (an estimate outside its CI, ...)."""
    for path, reasons in check_values({path: entry["value"] for path, entry in grounded.items()}).items():
        grounded[path]["flags"] = [*reasons, *grounded[path]["flags"]]
    return grounded


def _value_flag(found: ExtractedValue) -> str | None:
    """A number whose digits are in the quote but not as printed: the sign differs (an effect's
    direction!) or the digits are only part of a label such as "H2"."""
    if found.value is None or not found.quote or found.field.judgement or found.field.type not in NUMERIC:
        return None
    quote = normalize(found.quote)
    match = value_match(found.value, quote)
    if match == SIGN_DIFFERS:
        printed = ", ".join(str(n) for n in signed_in_quote(found.value, quote))
        return f"the quote prints {printed}: the value's sign differs"
    if match == INSIDE_A_WORD:
        return "the value appears in the quote only inside a word or label (such as H2)"
    return None


def _verdict(grounder: Grounder, found: ExtractedValue) -> Grounding:
    if found.value is None and found.rejected is None:
        verdict = grounder.ground(None, found.quote)
        if verdict.status != NOT_REPORTED:  # a quote without a value: located, but nothing to verify
            return replace(verdict, status=NOT_REPORTED, reason="no value given")
        return verdict
    verdict = grounder.ground(found.value, found.quote, judgement=found.field.judgement)
    if found.rejected is not None:
        kind = f"one of {', '.join(found.field.choices)}" if found.field.choices else f"a valid {found.field.type}"
        reason = f"the model's value {found.rejected} is not {kind}; left empty"
        return replace(verdict, status=UNVERIFIED, confidence=0.0, reason=reason)
    return verdict
