"""From a template to the pydantic model (and JSON Schema) the LLM answers in, and back to a flat
list of (path, value, quote) that grounding, checks and the workbook work on.

Every field is an object ``{"value": ..., "quote": ...}``: a value without its verbatim quote
cannot be verified. Validation is lenient where a model's formatting differs harmlessly ("1,250",
"−0.5", "Some Concerns") and strict where the meaning differs (2.5 for a count).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    create_model,
    model_validator,
)

from extraction_pipeline.core.templates.definition import (
    CUSTOM_MODULE,
    FieldDef,
    FieldType,
    ModuleDef,
    TemplateDefinition,
    choice_key,
)
from extraction_pipeline.core.verification.grounding import normalize

CUSTOM_FIELD_DESCRIPTION = "a project field: see the custom extraction rules"
QUOTE_DESCRIPTION = "the sentence or table row, copied verbatim from the document, that contains the value"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


MAX_COUNT = 10**9  # no trial randomizes a billion people: a bigger "count" is a misread
_COMPARATOR = re.compile(r"^(?:p\s*)?[<\u2264=]\s*", re.IGNORECASE)


def _blank_to_none(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _numeric(value: Any) -> Any:
    value = _blank_to_none(value)
    if isinstance(value, bool):
        raise ValueError("a yes/no is not a number")
    if isinstance(value, str):
        # The grounding normalizer: the same dashes, minus signs and thin spaces as in quotes.
        text = _THOUSANDS.sub("", normalize(value)).replace(" ", "")
        return _COMPARATOR.sub("", text).removesuffix("%")  # "p<0.001" -> 0.001, as the prompt asks
    return value


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _integer(value: Any) -> Any:
    value = _numeric(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _bounded(value: int | None) -> int | None:
    if value is not None and abs(value) > MAX_COUNT:
        raise ValueError(f"larger than {MAX_COUNT}")
    return value


def _text(value: Any) -> Any:
    value = _blank_to_none(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _quote(value: Any) -> Any:
    """Quotes come as text; a list of fragments is joined, a number is its text."""
    value = _blank_to_none(value)
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return " ".join(value) or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _choice_normalizer(choices: tuple[str, ...]) -> Any:
    canonical = {choice_key(c): c for c in choices}

    def to_choice(value: Any) -> Any:
        value = _blank_to_none(value)
        if isinstance(value, str):
            return canonical.get(choice_key(value), value)
        return value

    return to_choice


def _shorten(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Leaf(BaseModel):
    """Base of every (value, quote) pair. A value wrong in form ("NR" for a number, "unclear" for
    a Risk of Bias judgement, NaN) does not fail the whole answer and lose the paper: it is left
    out and kept in ``rejected``, which grounding reports on that field as unverified."""

    model_config = ConfigDict(extra="ignore")
    _rejected: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _salvage(cls, data: Any, handler: ModelWrapValidatorHandler[_Leaf]) -> _Leaf:
        if data is None:
            data = {}  # a field answered as null: not reported
        elif not isinstance(data, dict):
            data = {"value": data}  # a bare value, without its quote
        try:
            return handler(data)
        except ValidationError as exc:
            bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
            leaf = handler({key: item for key, item in data.items() if key not in bad})
            if "value" in bad:
                leaf._rejected = _shorten(data.get("value"))
            return leaf

    @property
    def rejected(self) -> str | None:
        return self._rejected


class _Module(BaseModel):
    """One module's fields (a null field is handled by ``_Leaf``, a null module by ``_Answer``)."""

    model_config = ConfigDict(extra="ignore")


class _Answer(BaseModel):
    """The whole answer. A repeated module given as one object is a list of one; entries that are
    not objects are dropped; a single module that is not an object counts as not reported."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _normalize_modules(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # not an object at all: invalid output, worth the repair attempt
        shaped: dict[str, Any] = {}
        for name, value in data.items():
            info = cls.model_fields.get(name)
            if info is None or value is None:
                continue
            if get_origin(info.annotation) is list:
                entries = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
                shaped[name] = [entry for entry in entries if isinstance(entry, dict)]
            elif isinstance(value, dict):
                shaped[name] = value
        return shaped


@lru_cache(maxsize=64)
def leaf_model(kind: FieldType, choices: tuple[str, ...]) -> type[_Leaf]:
    """One shared model per (type, choices), so the JSON Schema stays small."""
    value_type: Any
    if kind == FieldType.INTEGER:
        value_type = Annotated[int | None, BeforeValidator(_integer), AfterValidator(_bounded)]
        name = "GroundedInteger"
    elif kind == FieldType.NUMBER:
        value_type = Annotated[float | None, BeforeValidator(_numeric), AfterValidator(_finite)]
        name = "GroundedNumber"
    elif kind == FieldType.CHOICE:
        value_type = Annotated[Literal[choices] | None, BeforeValidator(_choice_normalizer(choices))]
        name = "GroundedChoice_" + "_".join(re.sub(r"\W+", "", c).lower() for c in choices)
    else:
        value_type, name = Annotated[str | None, BeforeValidator(_text)], "GroundedText"
    return create_model(
        name,
        __base__=_Leaf,
        value=(value_type, Field(default=None)),
        quote=(Annotated[str | None, BeforeValidator(_quote)], Field(default=None, description=QUOTE_DESCRIPTION)),
    )


def _module_model(module: ModuleDef) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for spec in module.fields:
        leaf = leaf_model(spec.type, spec.choices)
        # A project's own instructions are user text: they reach the model only inside the
        # prompt's guarded custom-rules block, never in the schema (which sits in the system prompt).
        description = CUSTOM_FIELD_DESCRIPTION if module.name == CUSTOM_MODULE else spec.instruction
        fields[spec.name] = (leaf, Field(default_factory=leaf, description=description))
    model_name = "".join(part.title() for part in module.name.split("_"))
    return create_model(model_name, __base__=_Module, **fields)


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
    return create_model("TrialExtraction", __base__=_Answer, **fields)


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
    rejected: str | None = None  # the model's value when it was not usable (e.g. 'NR' for a number)


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
                path = f"{prefix}.{spec.name}"
                found.append(ExtractedValue(path, module.name, index, spec, leaf.value, leaf.quote, leaf.rejected))
    return found
