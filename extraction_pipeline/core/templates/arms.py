"""A study read as arms, outcomes and comparisons, whichever template version extracted it.

Every surface that speaks in arms (the review form, the workbook, the meta-analysis CSV, pooling,
evaluation, the recall check) reads a document's fields through ``study_arms`` instead of knowing
field names:

- version 2 (``arms.N``, ``outcomes.N``, ``comparisons.N``): arms are declared once; an outcome entry
  holds one arm's numbers and names its arm; entries of the same outcome, time point and population
  are one outcome, with one result per arm; a comparison names two arms and belongs to the outcome
  of its name and time point;
- version 1 (``baseline.*_treatment``, ``outcomes.N.events_control``, ...): two arms, ``treatment``
  and ``control``, named by ``baseline.treatment_name`` / ``control_name`` where given; each outcome
  entry is one outcome with both arms' numbers and its effect as the one comparison.

The view holds *paths*, not values: a caller reads each path's final value (the reviewer's, where
one decided) through the same ``value`` function it passed in, so a reviewer who renames an outcome
or reassigns an entry to another arm changes the grouping everywhere at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extraction_pipeline.core.templates.definition import TemplateDefinition

ARM_FIELDS = ("arm_name", "intervention", "subgroup", "randomized_n", "analysed_n", "age", "male_percent")
RESULT_FIELDS = ("events", "total", "mean", "sd", "n")
EFFECT_FIELDS = ("effect_measure", "effect_estimate", "ci_lower", "ci_upper", "p_value")
DESCRIPTION_FIELDS = ("outcome_name", "outcome_type", "timepoint", "population")
V1_ARMS = ("treatment", "control")
# Version 1's baseline fields, by the arm field they stand for.
_V1_BASELINE = {
    "arm_name": "{arm}_name",
    "randomized_n": "n_{arm}",
    "age": "age_{arm}",
    "male_percent": "male_percent_{arm}",
}

Value = Callable[[str], Any]
ARMS_MODULE = "arms"


def has_arms(template: TemplateDefinition) -> bool:
    """Does the template declare arms once (the RCT base from version 2 on)?"""
    return any(module.name == ARMS_MODULE and module.repeated for module in template.modules)


def arm_key_of(name: Any) -> str:
    """How an arm's name is recognised when an entry refers to it: case, spacing and punctuation
    do not matter; words and numbers do ("Haloperidol 1 mg" is not "Haloperidol 2 mg")."""
    return " ".join(re.findall(r"[0-9a-z]+(?:[.,][0-9]+)?", str(name or "").casefold()))


@dataclass(frozen=True)
class Arm:
    """One declared arm: ``key`` identifies it in this document (``arms.2``; ``treatment`` /
    ``control`` in version 1), ``paths`` its fields by name (``randomized_n`` -> path)."""

    key: str
    name: str
    subgroup: str | None
    paths: Mapping[str, str]

    @property
    def label(self) -> str:
        """The name a reviewer reads: with its subgroup, unless the name already says it."""
        if self.subgroup and arm_key_of(self.subgroup) not in arm_key_of(self.name):
            return f"{self.name} ({self.subgroup})"
        return self.name


@dataclass(frozen=True)
class ArmResult:
    """One arm's numbers for one outcome. ``arm`` is the key of the declared arm the entry names,
    "" when it names none (``arm_name`` then says what it named)."""

    arm: str
    arm_name: str
    entry: str  # "outcomes.3"
    paths: Mapping[str, str]  # events/total/mean/sd/n (and "arm" in version 2) -> path


@dataclass(frozen=True)
class Comparison:
    """A between-arm effect as printed: intervention ``arm`` against ``comparator`` (keys of
    declared arms, "" when the name declares none)."""

    key: str  # "comparisons.2" (version 1: the outcome entry, "outcomes.3")
    arm: str
    comparator: str
    arm_name: str
    comparator_name: str
    paths: Mapping[str, str]  # effect fields (and outcome_name/timepoint/arm/comparator_arm in version 2)


@dataclass(frozen=True)
class Outcome:
    """One outcome at one time point (and analysis population): its results per arm and the
    comparisons printed for it. ``paths`` are the description fields of its first entry."""

    key: str
    name: str | None
    outcome_type: str | None
    timepoint: str | None
    population: str | None
    paths: Mapping[str, str]
    results: tuple[ArmResult, ...] = ()
    comparisons: tuple[Comparison, ...] = ()

    def result(self, arm: str) -> ArmResult | None:
        return next((result for result in self.results if result.arm == arm and arm), None)

    @property
    def entries(self) -> tuple[str, ...]:
        """The outcome entries it was read from, in order."""
        return tuple(dict.fromkeys(result.entry for result in self.results))


@dataclass(frozen=True)
class StudyArms:
    version: int
    arms: tuple[Arm, ...]
    outcomes: tuple[Outcome, ...]
    # Arm references (paths) that name no declared arm: the answer contradicts itself there.
    undeclared: tuple[str, ...] = field(default=())

    def arm(self, key: str) -> Arm | None:
        return next((arm for arm in self.arms if arm.key == key), None)

    def arm_label(self, key: str, fallback: str = "") -> str:
        arm = self.arm(key)
        return arm.label if arm else fallback


def _entries(paths: Iterable[str], module: str) -> dict[int, dict[str, str]]:
    """``{N: {field: path}}`` of a repeated module, in entry order."""
    found: dict[int, dict[str, str]] = {}
    for path in paths:
        parts = path.split(".")
        if len(parts) == 3 and parts[0] == module and parts[1].isdigit():
            found.setdefault(int(parts[1]), {})[parts[2]] = path
    return dict(sorted(found.items()))


def _text(value: Value, path: str | None) -> str | None:
    if path is None:
        return None
    raw = value(path)
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


def is_version_1(paths: Iterable[str]) -> bool:
    """Fields of the two-arm template: an outcome entry with ``*_treatment`` / ``*_control``
    numbers, or the two-arm baseline module."""
    return any(
        path.startswith("baseline.") or (path.startswith("outcomes.") and path.endswith(("_treatment", "_control")))
        for path in paths
    )


def study_arms(paths: Iterable[str], value: Value) -> StudyArms:
    """The arms-and-comparisons view of one document's fields (``paths``: every field path the
    document has, answered or not; ``value``: a path's final value)."""
    paths = list(paths)
    if is_version_1(paths):
        return _version_1(paths, value)
    return _version_2(paths, value)


def _version_2(paths: list[str], value: Value) -> StudyArms:
    arms: list[Arm] = []
    by_name: dict[str, str] = {}
    for number, fields in _entries(paths, "arms").items():
        name = _text(value, fields.get("arm_name"))
        key = f"arms.{number}"
        arm = Arm(key, name or f"arm {number}", _text(value, fields.get("subgroup")), fields)
        arms.append(arm)
        for label in (arm.name, arm.label):
            by_name.setdefault(arm_key_of(label), key)
    undeclared: list[str] = []

    def resolve(path: str | None) -> tuple[str, str]:
        name = _text(value, path) or ""
        key = by_name.get(arm_key_of(name), "") if name else ""
        if name and not key and path is not None:
            undeclared.append(path)
        return key, name

    outcomes: list[dict[str, Any]] = []
    for number, fields in _entries(paths, "outcomes").items():
        arm_key, arm_name = resolve(fields.get("arm"))
        result = ArmResult(
            arm_key, arm_name, f"outcomes.{number}", {k: v for k, v in fields.items() if k in (*RESULT_FIELDS, "arm")}
        )
        described = {name: _text(value, fields.get(name)) for name in DESCRIPTION_FIELDS}
        group_key = (
            arm_key_of(described["outcome_name"]),
            arm_key_of(described["timepoint"]),
            arm_key_of(described["population"]),
        )
        home = next(
            (
                group
                for group in outcomes
                if group["key"] == group_key
                and described["outcome_name"]
                and not any(r.arm == arm_key and r.arm_name == arm_name for r in group["results"])
            ),
            None,
        )
        if home is None:
            home = {
                "key": group_key,
                "entry": f"outcomes.{number}",
                "described": described,
                "paths": {k: v for k, v in fields.items() if k in DESCRIPTION_FIELDS},
                "results": [],
                "comparisons": [],
            }
            outcomes.append(home)
        home["results"].append(result)

    for number, fields in _entries(paths, "comparisons").items():
        arm_key, arm_name = resolve(fields.get("arm"))
        comparator, comparator_name = resolve(fields.get("comparator_arm"))
        comparison = Comparison(f"comparisons.{number}", arm_key, comparator, arm_name, comparator_name, fields)
        name, timepoint = _text(value, fields.get("outcome_name")), _text(value, fields.get("timepoint"))
        home = next(
            (g for g in outcomes if name and g["key"][:2] == (arm_key_of(name), arm_key_of(timepoint))),
            None,
        ) or next((g for g in outcomes if name and g["key"][0] == arm_key_of(name) and not timepoint), None)
        if home is None:
            home = {
                "key": (arm_key_of(name), arm_key_of(timepoint), ""),
                "entry": f"comparisons.{number}",
                "described": {"outcome_name": name, "outcome_type": None, "timepoint": timepoint, "population": None},
                "paths": {k: v for k, v in fields.items() if k in ("outcome_name", "timepoint")},
                "results": [],
                "comparisons": [],
            }
            outcomes.append(home)
        home["comparisons"].append(comparison)

    return StudyArms(
        2,
        tuple(arms),
        tuple(
            Outcome(
                group["entry"],
                group["described"]["outcome_name"],
                group["described"]["outcome_type"],
                group["described"]["timepoint"],
                group["described"]["population"],
                group["paths"],
                tuple(group["results"]),
                tuple(group["comparisons"]),
            )
            for group in outcomes
        ),
        tuple(undeclared),
    )


def _version_1(paths: list[str], value: Value) -> StudyArms:
    present = set(paths)
    arms = []
    for role in V1_ARMS:
        fields = {
            name: f"baseline.{pattern.format(arm=role)}"
            for name, pattern in _V1_BASELINE.items()
            if f"baseline.{pattern.format(arm=role)}" in present
        }
        arms.append(Arm(role, _text(value, fields.get("arm_name")) or role, None, fields))
    outcomes = []
    for number, fields in _entries(paths, "outcomes").items():
        entry = f"outcomes.{number}"
        results = tuple(
            ArmResult(
                arm.key,
                arm.name,
                entry,
                {name: fields[f"{name}_{arm.key}"] for name in RESULT_FIELDS if f"{name}_{arm.key}" in fields},
            )
            for arm in arms
        )
        effect = {name: fields[name] for name in EFFECT_FIELDS if name in fields}
        comparisons = (Comparison(entry, "treatment", "control", arms[0].name, arms[1].name, effect),) if effect else ()
        outcomes.append(
            Outcome(
                entry,
                _text(value, fields.get("outcome_name")),
                _text(value, fields.get("outcome_type")),
                _text(value, fields.get("timepoint")),
                None,
                {k: v for k, v in fields.items() if k in DESCRIPTION_FIELDS},
                results,
                comparisons,
            )
        )
    return StudyArms(1, tuple(arms), tuple(outcomes))
