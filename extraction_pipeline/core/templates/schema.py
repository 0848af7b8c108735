"""From a template to the pydantic model (and JSON Schema) the LLM answers in, and back to a flat
list of (path, value, quote) that grounding, checks and the workbook work on.

Every field is an object ``{"value": ..., "quote": ...}``: a value without its verbatim quote
cannot be verified. Validation is lenient where a model's formatting differs harmlessly ("1,250",
"−0.5", "Some Concerns") and strict where the meaning differs (2.5 for a count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from extraction_pipeline.core.templates.definition import FieldDef, FieldType, ModuleDef, TemplateDefinition

QUOTE_DESCRIPTION = "the sentence or table row, copied verbatim from the document, that contains the value"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_MINUSES = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-"})


def _blank_to_none(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _numeric(value: Any) -> Any:
    value = _blank_to_none(value)
    if isinstance(value, str):
        text = _THOUSANDS.sub("", value.strip().translate(_MINUSES)).replace("\u2009", "").replace(" ", "")
        return text.removesuffix("%")
    return value


def _integer(value: Any) -> Any:
    value = _numeric(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _text(value: Any) -> Any:
    value = _blank_to_none(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _choice_normalizer(choices: tuple[str, ...]) -> Any:
    canonical = {" ".join(c.lower().split()): c for c in choices}

    def normalize(value: Any) -> Any:
        value = _blank_to_none(value)
        if isinstance(value, str):
            return canonical.get(" ".join(value.lower().replace("_", " ").split()), value)
        return value

    return normalize


@lru_cache(maxsize=64)
def _leaf_model(kind: FieldType, choices: tuple[str, ...]) -> type[BaseModel]:
    """One shared model per (type, choices), so the JSON Schema stays small."""
    value_type: Any
    if kind == FieldType.INTEGER:
        value_type, before, name = int, _integer, "GroundedInteger"
    elif kind == FieldType.NUMBER:
        value_type, before, name = float, _numeric, "GroundedNumber"
    elif kind == FieldType.CHOICE:
        value_type, before = Literal[choices], _choice_normalizer(choices)
        name = "GroundedChoice_" + "_".join(re.sub(r"\W+", "", c).lower() for c in choices)
    else:
        value_type, before, name = str, _text, "GroundedText"
    return create_model(
        name,
        __config__=ConfigDict(extra="ignore"),
        value=(Annotated[value_type | None, BeforeValidator(before)], Field(default=None)),
        quote=(str | None, Field(default=None, description=QUOTE_DESCRIPTION)),
    )


def _module_model(module: ModuleDef) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for spec in module.fields:
        leaf = _leaf_model(spec.type, spec.choices)
        fields[spec.name] = (leaf, Field(default_factory=leaf, description=spec.instruction))
    model_name = "".join(part.title() for part in module.name.split("_"))
    return create_model(model_name, __config__=ConfigDict(extra="ignore"), **fields)


@lru_cache(maxsize=32)
def output_model(template: TemplateDefinition) -> type[BaseModel]:
    """The pydantic model of a complete answer for ``template``."""
    fields: dict[str, Any] = {}
    for module in template.all_modules():
        model = _module_model(module)
        description = module.title + (f": {module.instruction}" if module.instruction else "")
        if module.repeated:
            fields[module.name] = (list[model], Field(default_factory=list, description=description))  # type: ignore[valid-type]
        else:
            fields[module.name] = (model, Field(default_factory=model, description=description))
    return create_model("TrialExtraction", __config__=ConfigDict(extra="ignore"), **fields)


def output_json_schema(template: TemplateDefinition) -> dict[str, Any]:
    return output_model(template).model_json_schema()


@dataclass(frozen=True)
class ExtractedValue:
    """One field of one answer. ``index`` numbers the entries of a repeated module from 1."""

    path: str
    module: str
    index: int | None
    field: FieldDef
    value: str | int | float | None
    quote: str | None


def extracted_values(template: TemplateDefinition, answer: BaseModel) -> list[ExtractedValue]:
    """Every field of the template, in template order; a repeated module once per entry."""
    found: list[ExtractedValue] = []
    for module in template.all_modules():
        part = getattr(answer, module.name)
        entries = list(enumerate(part, start=1)) if module.repeated else [(None, part)]
        for index, entry in entries:
            prefix = f"{module.name}.{index}" if index is not None else module.name
            for spec in module.fields:
                leaf = getattr(entry, spec.name)
                found.append(ExtractedValue(f"{prefix}.{spec.name}", module.name, index, spec, leaf.value, leaf.quote))
    return found
