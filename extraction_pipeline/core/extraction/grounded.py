"""A model's answer grounded against the paper: every field with its verdict and its flags.

``GroundedValue`` is one extracted field as every surface shows it (a row of the Values sheet, a
value on the review page). A document's result stores its fields as JSON, path -> value
(``"outcomes.2.events_control"``); ``fields_of`` reads them back typed, including results stored
before templates existed, whose entries have no module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.definition import FieldType, TemplateDefinition
from extraction_pipeline.core.templates.schema import ExtractedValue, extracted_values
from extraction_pipeline.core.verification.checks import check_values
from extraction_pipeline.core.verification.claimed import PLACED_KINDS, PlacedNumber
from extraction_pipeline.core.verification.context import placed_flags
from extraction_pipeline.core.verification.grounding import (
    INSIDE_A_WORD,
    NOT_REPORTED,
    SIGN_DIFFERS,
    UNVERIFIED,
    VERIFIED,
    Grounder,
    Grounding,
    GroundingStatus,
    normalize,
    signed_in_quote,
    value_match,
)

NUMERIC = (FieldType.INTEGER, FieldType.NUMBER)
# A value as the model gave it after validation against its field: JSON's scalars.
Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class GroundedValue:
    """One extracted field: the model's value and quote, grounding's verdict on them (status,
    confidence, reason, and where the quote is), and the plausibility flags raised on it."""

    module: str | None  # None: a result stored before templates (the model chose the field names)
    index: int | None  # the entry's number in a repeated module (outcome 2); None for a single field
    field: str
    value: Scalar
    quote: str | None
    status: GroundingStatus
    confidence: float
    reason: str
    page: int | None = None
    source: str | None = None  # "text" or "table N"
    start: int | None = None  # offsets in that page's text or table text
    end: int | None = None
    continued: dict[str, Any] | None = None  # an interrupted quote's second part (page, source, start, end)
    flags: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.value is not None

    @property
    def reviewable(self) -> bool:
        """Does it need a reviewer's decision? Every field the model answered (a value or at least
        a quote); a field reported as absent does not."""
        return self.status != NOT_REPORTED or self.value is not None

    @property
    def located(self) -> bool:
        return self.page is not None and self.start is not None

    def with_flags(self, reasons: list[str]) -> GroundedValue:
        return replace(self, flags=(*reasons, *self.flags))

    def as_json(self) -> dict[str, Any]:
        """The stored form (the keys every stored result has; no ``module`` for a legacy one)."""
        stored: dict[str, Any] = {} if self.module is None else {"module": self.module}
        stored.update(
            index=self.index,
            field=self.field,
            value=self.value,
            quote=self.quote,
            status=str(self.status),
            confidence=self.confidence,
            reason=self.reason,
            page=self.page,
            source=self.source,
            start=self.start,
            end=self.end,
            continued=self.continued,
            flags=list(self.flags),
        )
        return stored

    @classmethod
    def from_json(cls, path: str, stored: Mapping[str, Any]) -> GroundedValue:
        """A stored entry; missing keys (older results) take what they meant then."""
        try:
            status = GroundingStatus(str(stored.get("status")))
        except ValueError:  # a word no version wrote: never shown as anything but unverified
            status = UNVERIFIED
        return cls(
            module=stored.get("module"),
            index=stored.get("index"),
            field=str(stored.get("field") or path),
            value=stored.get("value"),
            quote=stored.get("quote"),
            status=status,
            confidence=float(stored.get("confidence") or 0.0),
            reason=str(stored.get("reason") or ""),
            page=stored.get("page"),
            source=stored.get("source"),
            start=stored.get("start"),
            end=stored.get("end"),
            continued=stored.get("continued"),
            flags=tuple(stored.get("flags") or ()),
        )


GroundedFields = dict[str, GroundedValue]


def fields_of(result: Mapping[str, Any] | None) -> GroundedFields:
    """The first model's fields of a stored result (``{}`` for a document without one)."""
    return _typed((result or {}).get("fields"))


def second_fields_of(result: Mapping[str, Any] | None) -> GroundedFields:
    """Double extraction: the second model's fields (``{}`` without a second model)."""
    return _typed(((result or {}).get("second") or {}).get("fields"))


def stored_fields(fields: GroundedFields) -> dict[str, dict[str, Any]]:
    return {path: value.as_json() for path, value in fields.items()}


def _typed(stored: Mapping[str, Any] | None) -> GroundedFields:
    return {path: GroundedValue.from_json(path, entry) for path, entry in (stored or {}).items()}


def ground_output(template: TemplateDefinition, answer: BaseModel, parsed: ParsedDocument) -> GroundedFields:
    """Every field of the answer, by path, with its grounding verdict and plausibility flags."""
    return add_checks(ground_entries(template, answer, Grounder(parsed)), parsed)


def ground_entries(template: TemplateDefinition, answer: BaseModel, grounder: Grounder) -> GroundedFields:
    """Every field of the answer with its grounding verdict and its value flag (sign, label)."""
    grounded: GroundedFields = {}
    for found in extracted_values(template, answer):
        flag = _value_flag(found)
        verdict = _verdict(grounder, found)
        grounded[found.path] = GroundedValue(
            module=found.module,
            index=found.index,
            field=found.field.name,
            value=found.value,
            quote=found.quote,
            status=verdict.status,
            confidence=verdict.confidence,
            reason=verdict.reason,
            page=verdict.page,
            source=verdict.source,
            start=verdict.start,
            end=verdict.end,
            continued=verdict.continued,
            flags=(flag,) if flag else (),
        )
    return grounded


def add_checks(grounded: GroundedFields, parsed: ParsedDocument | None) -> GroundedFields:
    """The plausibility rules over the values together (an estimate outside its CI, ...) and,
    given the paper, the context rule: each arm's number is printed where the paper says it is
    that outcome's, that arm's, at that time point (``core.verification.context``)."""
    checked = dict(grounded)
    for path, reasons in check_values({path: entry.value for path, entry in grounded.items()}).items():
        checked[path] = checked[path].with_flags(reasons)
    if parsed is not None:
        for path, reasons in context_flags(checked, parsed).items():
            checked[path] = checked[path].with_flags(reasons)
    return checked


def context_flags(grounded: GroundedFields, parsed: ParsedDocument) -> dict[str, list[str]]:
    """path -> what the place of a verified arm number names instead of its claim
    (``core.verification.context``)."""
    arms = tuple(
        str(entry.value)
        for path, entry in sorted(grounded.items())
        if entry.module == "arms" and entry.field == "arm_name" and entry.value
    )

    def described(index: int | None, name: str) -> Any:
        found = grounded.get(f"outcomes.{index}.{name}")
        return found.value if found is not None else None

    numbers = [
        PlacedNumber(
            path=path,
            kind=entry.field,
            value=entry.value,
            page=entry.page,
            start=entry.start,
            end=entry.end,
            outcome=str(described(entry.index, "outcome_name") or ""),
            arm=str(described(entry.index, "arm") or ""),
            timepoint=str(described(entry.index, "timepoint") or ""),
            total=described(entry.index, "total"),
        )
        for path, entry in grounded.items()
        if entry.module == "outcomes"
        and entry.field in PLACED_KINDS
        and entry.status == VERIFIED
        and entry.page is not None
        and entry.source == "text"
        and entry.start is not None
        and entry.end is not None
    ]
    return placed_flags(numbers, arms, parsed)


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
