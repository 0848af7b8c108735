"""What a template is: modules of typed fields, each answered as a (value, quote) pair.

A template is plain data (JSON-serializable), so the exact definition a batch used is stored in
the ledger with the batch and never depends on the code that is running later.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.extraction.markers import contains_marker

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
# Choices are enum values in the JSON Schema, which sits in the system prompt: keep them plain.
_CHOICE = re.compile(r"^[\w][\w .,%+/()'-]{0,59}$")
MAX_CHOICES = 20
MAX_INSTRUCTION_CHARS = 500
MAX_CUSTOM_FIELDS = 50
MAX_PROJECT_INSTRUCTIONS_CHARS = 2000
CUSTOM_MODULE = "custom"


class FieldType(StrEnum):
    TEXT = "text"
    INTEGER = "integer"
    NUMBER = "number"
    CHOICE = "choice"


def choice_key(text: str) -> str:
    """How a choice is recognised in an answer: case, spacing and '_' do not matter."""
    return " ".join(text.lower().replace("_", " ").split())


@dataclass(frozen=True)
class FieldDef:
    """One field. ``judgement``: the value is an assessment or label the quote supports (a Risk of
    Bias judgement, an outcome type), not a string printed in the paper, so grounding checks the
    quote but does not look for the value inside it."""

    name: str
    type: FieldType
    instruction: str
    choices: tuple[str, ...] = ()
    judgement: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "type": self.type.value, "instruction": self.instruction}
        if self.choices:
            data["choices"] = list(self.choices)
        if self.judgement:
            data["judgement"] = True
        return data

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> FieldDef:
        """A field as saved in the ledger: trusted as it was validated when saved, so a stricter
        rule in a later release never breaks the batches that froze it."""
        choices = tuple(data.get("choices", ()))
        return cls(data["name"], FieldType(data["type"]), data["instruction"], choices, bool(data.get("judgement")))

    @classmethod
    def from_json(cls, data: Any, *, where: str) -> FieldDef:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: a field must be an object with name, type and instruction")
        unknown = set(data) - {"name", "type", "instruction", "choices", "judgement"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        name = data.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(
                f"{where}: field name {name!r} must be lower-case letters, digits and '_', "
                "starting with a letter, at most 48 characters"
            )
        where = f"{where} ({name})"
        try:
            kind = FieldType(str(data.get("type")))
        except ValueError:
            allowed = ", ".join(t.value for t in FieldType)
            raise ConfigError(f"{where}: type {data.get('type')!r} is not one of {allowed}") from None
        instruction = data.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            raise ConfigError(f"{where}: instruction must be a non-empty text")
        if len(instruction) > MAX_INSTRUCTION_CHARS:
            raise ConfigError(f"{where}: instruction is longer than {MAX_INSTRUCTION_CHARS} characters")
        choices = data.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) and _CHOICE.match(c.strip()) for c in choices):
            raise ConfigError(
                f"{where}: choices must be a list of short texts (letters, digits, spaces and . , % + / ( ) ' -; "
                "at most 60 characters each)"
            )
        if len(choices) > MAX_CHOICES:
            raise ConfigError(f"{where}: at most {MAX_CHOICES} choices are allowed")
        if len({choice_key(c) for c in choices}) != len(choices):
            raise ConfigError(f"{where}: choices must be distinct (ignoring case, spaces and '_')")
        if any(contains_marker(text) for text in (instruction, *choices)):
            raise ConfigError(f"{where}: must not contain the prompt's section markers")
        if (kind == FieldType.CHOICE) != bool(choices):
            raise ConfigError(f"{where}: choices are required for type 'choice' and only for it")
        judgement = data.get("judgement", False)
        if not isinstance(judgement, bool):
            raise ConfigError(f"{where}: judgement must be true or false")
        return cls(name, kind, instruction.strip(), tuple(c.strip() for c in choices), judgement)


@dataclass(frozen=True)
class ModuleDef:
    """A group of fields. ``repeated``: the paper may report it any number of times (outcomes)."""

    name: str
    title: str
    fields: tuple[FieldDef, ...]
    repeated: bool = False
    instruction: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "repeated": self.repeated,
            "instruction": self.instruction,
            "fields": [f.to_json() for f in self.fields],
        }

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> ModuleDef:
        fields = tuple(FieldDef.from_stored(f) for f in data.get("fields", []))
        return cls(data["name"], data["title"], fields, bool(data.get("repeated")), data.get("instruction", ""))


@dataclass(frozen=True)
class TemplateDefinition:
    """A base template's modules plus a project's custom fields (in the ``custom`` module) and
    free-text extraction rules (``instructions``, e.g. "outcomes are in Table 2")."""

    base: str
    base_version: int
    modules: tuple[ModuleDef, ...]
    custom_fields: tuple[FieldDef, ...] = field(default=())
    instructions: str = ""

    def all_modules(self) -> tuple[ModuleDef, ...]:
        if not self.custom_fields:
            return self.modules
        custom = ModuleDef(CUSTOM_MODULE, "Project-specific fields", self.custom_fields)
        return (*self.modules, custom)

    def only(self, module: str) -> TemplateDefinition:
        """The same template asked for one module alone (an answer too long for one call is
        asked for module by module); the project's rules still apply."""
        if module == CUSTOM_MODULE:
            return replace(self, modules=())
        return replace(self, modules=tuple(m for m in self.modules if m.name == module), custom_fields=())

    def field(self, module: str, name: str) -> FieldDef | None:
        for candidate in self.all_modules():
            if candidate.name == module:
                return next((f for f in candidate.fields if f.name == name), None)
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "base_version": self.base_version,
            "modules": [m.to_json() for m in self.modules],
            "custom_fields": [f.to_json() for f in self.custom_fields],
            "instructions": self.instructions,
        }

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> TemplateDefinition:
        """A definition as saved in the ledger (see ``FieldDef.from_stored``)."""
        return cls(
            base=data["base"],
            base_version=int(data["base_version"]),
            modules=tuple(ModuleDef.from_stored(m) for m in data["modules"]),
            custom_fields=tuple(FieldDef.from_stored(f) for f in data.get("custom_fields", [])),
            instructions=data.get("instructions", ""),
        )

    def canonical_json(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        """Identifies the content: two definitions with the same digest extract the same way."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def parse_custom_fields(data: Any) -> tuple[FieldDef, ...]:
    """Validate a project's custom-field list (from a user's JSON file)."""
    if not isinstance(data, list):
        raise ConfigError("custom_fields must be a list of {name, type, instruction} objects")
    if len(data) > MAX_CUSTOM_FIELDS:
        raise ConfigError(f"at most {MAX_CUSTOM_FIELDS} custom fields are allowed, got {len(data)}")
    fields = tuple(FieldDef.from_json(item, where=f"custom field {n}") for n, item in enumerate(data, start=1))
    seen: set[str] = set()
    for spec in fields:
        if spec.name in seen:
            raise ConfigError(f"custom field {spec.name!r} is defined twice")
        seen.add(spec.name)
    return fields


def parse_instructions(data: Any) -> str:
    """A project's free-text extraction rules (they end up inside the prompt's guarded block)."""
    if not isinstance(data, str):
        raise ConfigError("instructions must be a text")
    if len(data) > MAX_PROJECT_INSTRUCTIONS_CHARS:
        raise ConfigError(f"instructions are longer than {MAX_PROJECT_INSTRUCTIONS_CHARS} characters")
    if contains_marker(data):
        raise ConfigError("instructions must not contain the prompt's section markers")
    return data.strip()
