"""Entries of repeated modules (arms, outcome results, comparisons) recognised by what they say.

Two answers about one paper number their entries independently: a second model, another part of
a long paper or the follow-up question may list the same arms, outcome results and comparisons in
another order. Wherever answers are put together (double extraction, parts, the follow-up) an
entry is therefore matched by its meaning, never by its number:

- an arm by its name (and its subgroup);
- an outcome entry by the outcome's name, the arm it belongs to, its time point and population
  (version 1's entries, which hold both arms, by name and time point: they have no arm field);
- a comparison by the outcome's name, its two arms and its time point.

Arms are referred to by name, so entries matched this way can be renumbered freely. Names are
compared as ``core.templates.arms`` recognises an arm's name: case, spacing and punctuation do not
matter, words and numbers do. Entries of any other repeated module have no identity: they are
matched by number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extraction_pipeline.core.extraction.grounded import GroundedFields, GroundedValue
from extraction_pipeline.core.templates.arms import arm_key_of

# Per module: the fields that say which entry it is (all must match), then the fields that
# qualify it (they must match too, except where ``loose`` matching lets an empty one pass).
_IDENTITY: dict[str, tuple[str, ...]] = {
    "arms": ("arm_name",),
    "outcomes": ("outcome_name", "arm"),
    "comparisons": ("outcome_name", "arm", "comparator_arm"),
}
_QUALIFIERS: dict[str, tuple[str, ...]] = {
    "arms": ("subgroup",),
    "outcomes": ("timepoint", "population"),
    "comparisons": ("timepoint",),
}

Entry = dict[str, GroundedValue]  # one entry's fields by name


@dataclass(frozen=True)
class EntryKey:
    """What an entry is about, in comparable words ("" for a field left empty)."""

    identity: tuple[str, ...]
    qualifiers: tuple[str, ...]

    @property
    def named(self) -> bool:
        """Whether the entry says what it is (its first identity field, the name, is given)."""
        return bool(self.identity and self.identity[0])

    def same(self, other: EntryKey, *, loose: bool = False) -> bool:
        """The same entry: equal identities and qualifiers; ``loose``: a qualifier only one of
        the two gives (a time point the other left empty) does not tell them apart."""
        if self.identity != other.identity:
            return False
        pairs = zip(self.qualifiers, other.qualifiers, strict=True)
        return all(a == b or (loose and (not a or not b)) for a, b in pairs)

    def core_same(self, other: EntryKey) -> bool:
        """The same name and arms, whatever the qualifiers say."""
        return self.identity == other.identity


def has_identity(module: str) -> bool:
    return module in _IDENTITY


def entry_key(module: str, entry: Mapping[str, GroundedValue]) -> EntryKey:
    def words(name: str) -> str:
        found = entry.get(name)
        return arm_key_of(found.value) if found is not None and found.value is not None else ""

    return EntryKey(
        tuple(words(name) for name in _IDENTITY.get(module, ())),
        tuple(words(name) for name in _QUALIFIERS.get(module, ())),
    )


def repeated_entries(fields: GroundedFields) -> dict[str, dict[int, Entry]]:
    """``{module: {number: {field: value}}}`` of the repeated modules' entries, in number order."""
    found: dict[str, dict[int, Entry]] = {}
    for path, value in fields.items():
        location = entry_location(path, value)
        if location is not None:
            module, index = location
            found.setdefault(module, {}).setdefault(index, {})[value.field] = value
    return {module: dict(sorted(entries.items())) for module, entries in found.items()}


def entry_location(path: str, value: GroundedValue) -> tuple[str, int] | None:
    """(module, entry number) of a repeated module's field; None for a single-valued field."""
    if value.index is None:
        return None
    return value.module or path.split(".")[0], value.index


def key_fields(module: str) -> tuple[str, ...]:
    """The fields ``entry_key`` reads for ``module``."""
    return (*_IDENTITY.get(module, ()), *_QUALIFIERS.get(module, ()))
