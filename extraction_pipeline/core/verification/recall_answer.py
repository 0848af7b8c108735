"""What an answer extracted, as the recall check reads it: each outcome's numbers by field and arm,
and where their quotes are.

The check compares the paper's rows and sentences with these numbers, whatever template version
answered: ``core.templates.arms.study_arms`` reads version 1 (``mean_treatment``, ``baseline.*``)
and version 2 (``arms.N``, one outcome entry per arm, ``comparisons.N``) into one view, and this
module turns that view into entries whose numbers are keyed ``(field, arm)``:

- one entry per outcome (its results for every arm, and its comparisons' numbers), so "the
  outcome read this row" and "the outcome has one arm's numbers and not another's" mean the same
  for both versions;
- one entry for the arms (version 2's ``arms.N``, version 1's ``baseline``): their group sizes are
  where an outcome without its own group size finds it;
- one entry per other module or entry (study fields, custom modules), keyed by field alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cached_property

from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.templates.arms import RESULT_FIELDS, StudyArms, arm_key_of, study_arms

# Fields that hold a group's size: an outcome's analysed participants, an arm's randomized or
# analysed number. A paper prints each once for every outcome of the arm.
SIZE_KINDS = ("total", "n", "randomized_n", "analysed_n")
ARMS_ENTRY = "arms"  # the key of the entry holding the arms' own numbers

Span = tuple[int, str, int, int]  # page, source, start, end
Number = tuple[str, str]  # (field, arm key): ("mean", "arms.2"), ("events", "treatment"); arm "" for none


@dataclass(frozen=True)
class ExtractedEntry:
    """One extracted outcome (or the arms, or one other module or entry): its name, its numbers by
    (field, arm), where their quotes are, and every place its quotes are."""

    key: str  # "outcomes.2" (an outcome: its first entry), "arms", "metadata"
    name: str
    numbers: Mapping[Number, Decimal]  # the numeric fields only
    where: Mapping[Number, Span]  # for the located quotes
    spans: tuple[Span, ...]
    outcome: bool = False  # an outcome's results: the per-arm rules apply to it

    @cached_property
    def values(self) -> frozenset[Decimal]:
        return frozenset(self.numbers.values())

    def arms(self) -> list[str]:
        """The arms it has results for (a number of ``RESULT_FIELDS``), in order of first field."""
        return list(dict.fromkeys(arm for kind, arm in self.numbers if kind in RESULT_FIELDS and arm))


@dataclass(frozen=True)
class Answer:
    """The answer as the recall check reads it."""

    study: StudyArms
    entries: list[ExtractedEntry]
    # How the check names each arm key to a reviewer: version 1 says "treatment" / "control" as it
    # always did; version 2 the arm's label. An outcome entry naming no declared arm is keyed by
    # its entry ("outcomes.5") and named as the answer named it.
    arm_names: Mapping[str, str] = field(default_factory=dict)
    interventions: Mapping[str, str] = field(default_factory=dict)  # arm key -> what it received

    @cached_property
    def sizes(self) -> frozenset[Decimal]:
        """Every arm's group size the answer has: what a printed percentage may be a share of."""
        return frozenset(v for e in self.entries for (kind, arm), v in e.numbers.items() if kind in SIZE_KINDS and arm)

    def arm_said(self, arm: str) -> str:
        return self.arm_names.get(arm, arm)

    def arm_described(self, arm: str) -> str:
        """An arm as a reviewer recognises it: its label, and what it received where the label
        does not say it ("H2 (haloperidol 2 mg)")."""
        label = self.arm_said(arm)
        received = self.interventions.get(arm, "")
        if received and arm_key_of(received) not in arm_key_of(label) and arm_key_of(label) not in arm_key_of(received):
            return f"{label} ({received})"
        return label

    def missing_arms(self, entry: ExtractedEntry) -> list[str]:
        """The declared arms (version 2) with no number for an outcome other arms have numbers
        for: the arms reported together with those (``arm_families``), and (for the first outcome
        only) the arms with no number for any outcome. Arms of subgroups (by sex, by smoking
        status) and arms of the whole trial are apart: an outcome reported for the whole trial
        only lacks nothing in the subgroups' arms, and one reported by subgroup lacks nothing in
        the whole trial's."""
        if self.study.version < 2 or not entry.outcome:
            return []
        having = set(entry.arms())
        families = self.arm_families
        expected = {arm for key in having for arm in families.get(key, ())}
        subgrouped = {arm.key: bool(arm.subgroup) for arm in self.study.arms}
        kinds = {subgrouped[key] for key in having if key in subgrouped}
        # An arm with no number for any outcome belongs to no family: it is listed once, for the
        # first outcome with numbers (listed for each, it would fill the list on its own).
        first = next((e.key for e in self.entries if e.outcome and e.arms()), None)
        return [
            arm.key
            for arm in self.study.arms
            if arm.key not in having
            and subgrouped[arm.key] in kinds
            and (arm.key in expected or (arm.key not in families and entry.key == first))
        ]

    @cached_property
    def arm_families(self) -> Mapping[str, frozenset[str]]:
        """Each declared arm with numbers -> the arms reported with it: arms with numbers for one
        outcome, or compared with each other, and so on. A paper comparing treatments in one
        partition of its patients and, say, patients with and without a diagnosis in another
        reports each outcome in one partition's arms only."""
        declared = {arm.key for arm in self.study.arms}
        linked: list[set[str]] = [set(e.arms()) & declared for e in self.entries if e.outcome]
        linked += [
            {c.arm, c.comparator}
            for outcome in self.study.outcomes
            for c in outcome.comparisons
            if c.arm and c.comparator
        ]
        families: dict[str, frozenset[str]] = {}
        for group in linked:
            merged = frozenset(group).union(*(families.get(arm, frozenset()) for arm in group))
            for arm in merged:
                families[arm] = merged
        return families


def decimal_of(printed: str) -> Decimal | None:
    """A number as the check compares it: absolute (a sign the model dropped is grounding's flag,
    not a miss), thousands separators aside."""
    try:
        return abs(Decimal(printed.replace(",", "")))
    except InvalidOperation:
        return None


def read_answer(fields: Mapping[str, GroundedValue]) -> Answer:
    """``fields`` (a result's grounded fields, path -> GroundedValue, as ``fields_of`` reads them)
    as the recall check reads them."""

    def value(path: str) -> object:
        entry = fields.get(path)
        return entry.value if entry is not None else None

    study = study_arms(fields.keys(), value)
    claimed: set[str] = set()
    entries: list[ExtractedEntry] = []
    arm_names = {arm.key: arm.key if study.version == 1 else arm.label for arm in study.arms}
    interventions: dict[str, str] = {}
    for arm in study.arms:
        received = value(arm.paths.get("intervention", ""))
        if received is not None and str(received).strip():
            interventions[arm.key] = str(received).strip()
    for outcome in study.outcomes:
        keyed: dict[str, Number] = {}  # path -> its (field, arm)
        for result in outcome.results:
            arm_key = result.arm or result.entry  # an undeclared arm is its entry's own
            if not result.arm and result.arm_name:
                arm_names[arm_key] = result.arm_name
            keyed.update({path: (kind, arm_key) for kind, path in result.paths.items() if kind in RESULT_FIELDS})
        for result in outcome.results:
            # The entry's other fields (its description, custom fields): a version 2 entry is one
            # arm's; a version 1 entry holds both arms.
            arm_key = (result.arm or result.entry) if study.version >= 2 else ""
            for path in _under(fields, result.entry):
                keyed.setdefault(path, (_field(path, fields[path]), arm_key))
        for comparison in outcome.comparisons:
            for path in _under(fields, comparison.key):
                keyed.setdefault(path, (_field(path, fields[path]), comparison.key))
        for path in outcome.paths.values():  # a comparison's outcome with no results: its own name
            if path in fields:
                keyed.setdefault(path, (_field(path, fields[path]), ""))
        present = {path: number for path, number in keyed.items() if path in fields}
        claimed.update(present)
        entries.append(_entry(outcome.key, outcome.name or "", present, fields, outcome=True))
    arm_paths = {path: (name, arm.key) for arm in study.arms for name, path in arm.paths.items() if path in fields}
    if study.version == 1:  # the baseline module's other fields
        for path in fields:
            if path.startswith("baseline."):
                arm_paths.setdefault(path, (_field(path, fields[path]), ""))
    if arm_paths:
        claimed.update(arm_paths)
        entries.append(_entry(ARMS_ENTRY, "", arm_paths, fields))
    others: dict[str, dict[str, Number]] = {}
    for path, grounded in fields.items():
        if path not in claimed:
            others.setdefault(path.rsplit(".", 1)[0], {})[path] = (_field(path, grounded), "")
    entries += [_entry(key, _name_of(paths, fields), paths, fields) for key, paths in others.items()]
    return Answer(study, entries, arm_names, interventions)


def _under(fields: Mapping[str, GroundedValue], entry: str) -> list[str]:
    return [path for path in fields if path.startswith(entry + ".") and path.count(".") == entry.count(".") + 1]


def _field(path: str, grounded: GroundedValue) -> str:
    """A value's field name (an entry stored before templates is named by its path)."""
    return (grounded.field or path).rsplit(".", 1)[-1]


def _name_of(paths: Mapping[str, Number], fields: Mapping[str, GroundedValue]) -> str:
    names = [str(fields[p].value) for p, (kind, _arm) in paths.items() if kind == "outcome_name" and fields[p].value]
    return names[0] if names else ""


def _entry(
    key: str, name: str, paths: Mapping[str, Number], fields: Mapping[str, GroundedValue], *, outcome: bool = False
) -> ExtractedEntry:
    numbers: dict[Number, Decimal] = {}
    where: dict[Number, Span] = {}
    spans: list[Span] = []
    for path, number in paths.items():
        grounded = fields[path]
        located = list(_spans(grounded))
        raw = grounded.value
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            parsed = decimal_of(str(raw))
            if parsed is not None:
                numbers[number] = parsed.normalize()
                if located:
                    where[number] = located[0]
        spans.extend(located)
    return ExtractedEntry(key, name, numbers, where, tuple(spans), outcome)


def _spans(value: GroundedValue) -> Iterator[Span]:
    if value.page is not None and value.start is not None and value.end is not None:
        yield value.page, value.source or "text", value.start, value.end
    continued = value.continued or {}
    if continued.get("page") is not None and continued.get("start") is not None:
        start = int(continued["start"])
        yield int(continued["page"]), str(continued.get("source") or "text"), start, int(continued.get("end") or start)
