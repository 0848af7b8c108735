"""A reviewer's correction: the new value checked against the field's type, and a new quote
grounded again on the spot against the same parsed document the machine's quote was checked on.
A correction of an arm reference (which arm an entry's numbers belong to) must name an arm the
study declares (``arm_references``)."""

from __future__ import annotations

from typing import Any

from extraction_pipeline.core.errors import ConfigError, ExtractionRuntimeError
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import get_document
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.ledger.templates import definition_of, template_of_item
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.review import decisions
from extraction_pipeline.core.review.arm_references import is_arm_reference, item_arms, resolve_arm
from extraction_pipeline.core.review.values import CORRECT
from extraction_pipeline.core.templates.definition import FieldDef, FieldType
from extraction_pipeline.core.templates.schema import leaf_model
from extraction_pipeline.core.verification.grounding import Grounder


def field_of(ledger: Ledger, item_id: int, entry: GroundedValue) -> FieldDef:
    """The template field a stored value belongs to (text for results older than templates)."""
    definition = definition_of(template_of_item(ledger, item_id))
    found = definition.field(entry.module or "", entry.field)
    return found or FieldDef(entry.field, FieldType.TEXT, "")


def coerce(field: FieldDef, text: str) -> Any:
    """The corrected value as the field's type, by the same rules as the model's answers."""
    if not text or not text.strip():
        raise ConfigError("the corrected value is empty (mark the value as not reported instead)")
    leaf = leaf_model(field.type, field.choices).model_validate({"value": text.strip()})
    value = getattr(leaf, "value", None)
    if leaf.rejected is not None or value is None:
        kind = f"one of {', '.join(field.choices)}" if field.choices else f"a valid {field.type.value}"
        raise ConfigError(f"{text.strip()!r} is not {kind} for {field.name}")
    return value


def checked_value(ledger: Ledger, item_id: int, path: str, entry: GroundedValue, text: str) -> Any:
    """The corrected value typed as its field; an arm reference resolved to a declared arm's name."""
    value = coerce(field_of(ledger, item_id, entry), text)
    if is_arm_reference(definition_of(template_of_item(ledger, item_id)), path):
        value = resolve_arm(item_arms(ledger, item_id), str(value))
    return value


def ground_quote(
    ledger: Ledger, item_id: int, field: FieldDef, value: Any, quote: str, options: ParseOptions | None
) -> dict[str, Any]:
    item = get_item(ledger, item_id)
    document = get_document(ledger, item["document_id"]) if item else None
    if document is None:
        raise ConfigError(f"unknown item {item_id}")
    try:
        parsed = parse_document(ledger, sha256=document["sha256"], stored_path=document["stored_path"], options=options)
    except ExtractionRuntimeError as exc:
        raise ConfigError(f"the quote cannot be checked: {exc}") from exc
    return Grounder(parsed).ground(value, quote, judgement=field.judgement).as_dict()


def correct(
    ledger: Ledger,
    *,
    item_id: int,
    path: str,
    reviewer: str,
    seen_seq: int,
    value_text: str,
    quote: str | None = None,
    comment: str | None = None,
    origin: str = "browser",
    options: ParseOptions | None = None,
) -> decisions.Outcome:
    """Record a correction; with a quote, the quote is grounded (its status is stored with it)."""
    _batch, entry = decisions.machine_entry(ledger, item_id, path)
    field = field_of(ledger, item_id, entry)
    value = checked_value(ledger, item_id, path, entry, value_text)
    quote = (quote or "").strip() or None
    grounding = ground_quote(ledger, item_id, field, value, quote, options) if quote else None
    return decisions.record(
        ledger,
        item_id=item_id,
        path=path,
        action=CORRECT,
        reviewer=reviewer,
        seen_seq=seen_seq,
        value=value,
        quote=quote,
        grounding=grounding,
        comment=comment,
        origin=origin,
    )
