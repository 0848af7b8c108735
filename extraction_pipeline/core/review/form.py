"""A document's values laid out the way a reviewer reads an extraction form, arms as columns.

Study-level fields become a short form; the study's arms a table with one column per arm (name,
what it received, n, baseline characteristics); the Risk-of-Bias judgements one row of domains;
and outcomes a table with one row per outcome (at its time point and analysis population) and one
column group per arm — events/total or mean/SD/n — with the comparisons printed for the outcome
(measure, estimate, CI, p) in rows under it. Arms, outcomes and comparisons are read through
``core.templates.arms``, so a version-1 batch (two arms, ``*_treatment`` / ``*_control``) shows
the same form with two arm columns named by its baseline names, and a reviewer's decision that
reassigns an entry to another arm moves its numbers to that arm's column.

Every cell carries the value's final state — the machine's, or the reviewer's decision with its
own grounding — so the page colours each number by what is true of it now. Every value the model
gave is one cell of the form, exactly once: an outcome entry's own description (its name and time
point, which place it in the row) is shown beside its numbers when it is not the row's first
entry. Values outside the template (results stored before templates) are listed as plain fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from extraction_pipeline.core.extraction.grounded import Scalar
from extraction_pipeline.core.review.arm_references import is_arm_reference
from extraction_pipeline.core.review.values import (
    APPROVE,
    Decision,
    ReviewableValue,
    decision_label,
    final_status,
    final_value,
)
from extraction_pipeline.core.templates.arms import (
    DESCRIPTION_FIELDS,
    EFFECT_FIELDS,
    RESULT_FIELDS,
    StudyArms,
    arm_key_of,
    study_arms,
)
from extraction_pipeline.core.templates.definition import ModuleDef, TemplateDefinition

TREATMENT, CONTROL = "_treatment", "_control"
ARMS, OUTCOMES, COMPARISONS, BASELINE = "arms", "outcomes", "comparisons", "baseline"
UNDECLARED = "undeclared:"  # column key prefix of an arm name no arm of the study declares


class SectionKind(StrEnum):
    FIELDS = "fields"  # label: value, one row per field
    ARMS = "arms"  # one row per characteristic, one column per arm
    DOMAINS = "domains"  # one row of judgements (Risk of Bias)
    ROWS = "rows"  # a repeated module: one row per entry
    OUTCOMES = "outcomes"  # one row per outcome, a column group per arm, its comparisons under it


@dataclass(frozen=True)
class FormCell:
    """One field of the form: what the model found (or nothing) and the latest decision on it."""

    path: str
    field: str
    reviewable: ReviewableValue | None  # None: the model reported nothing for this field
    decision: Decision | None
    settable: bool = False  # the model left it empty: a reviewer may set it (or confirm nothing)

    @property
    def present(self) -> bool:
        """A value to show: the model's, or one a reviewer set where the model gave none."""
        return self.reviewable is not None or self.decision is not None

    @property
    def value(self) -> Scalar | Any:
        """The final value: the reviewer's correction, nothing when marked not reported, else the machine's."""
        return final_value(self.reviewable.machine if self.reviewable else None, self.decision)

    @property
    def status(self) -> str:
        return final_status(self.reviewable.machine if self.reviewable else None, self.decision)

    @property
    def decided(self) -> bool:
        return self.decision is not None

    @property
    def decision_label(self) -> str:
        return decision_label(self.decision)

    @property
    def corrected(self) -> bool:
        return self.decision is not None and self.decision.action != APPROVE

    @property
    def needs_attention(self) -> bool:
        return bool(self.reviewable and self.reviewable.needs_attention and self.decision is None)


def _undecided(cells: list[FormCell]) -> list[str]:
    return [c.path for c in cells if c.present and not c.decided]


@dataclass(frozen=True)
class FormRow:
    label: str
    cells: dict[str, FormCell]  # by field name (ARMS rows: by arm column key)
    index: int | None = None  # the entry's number in a repeated module

    def cell(self, name: str) -> FormCell | None:
        return self.cells.get(name)

    @property
    def all_cells(self) -> list[FormCell]:
        return list(self.cells.values())

    @property
    def undecided_paths(self) -> list[str]:
        return _undecided(self.all_cells)

    @property
    def present(self) -> bool:
        return any(c.present for c in self.cells.values())


@dataclass(frozen=True)
class ArmColumn:
    """One arm as a column: ``key`` is the arm's key in the document (``arms.2``; ``treatment`` in
    version 1), or ``undeclared:<name>`` for numbers naming an arm the study does not declare."""

    key: str
    label: str
    declared: bool = True


@dataclass(frozen=True)
class ArmNumbers:
    """One arm's numbers for one outcome (one outcome entry in version 2)."""

    column: str
    entry: str  # "outcomes.3"
    cells: dict[str, FormCell]  # events / total / mean / sd / n
    arm: FormCell | None = None  # the entry's arm reference (version 2): what a reviewer reassigns
    own: tuple[FormCell, ...] = ()  # the entry's description when it is not the row's first entry
    extra: tuple[FormCell, ...] = ()  # other fields of the entry (a stored template's own)

    def cell(self, name: str) -> FormCell | None:
        return self.cells.get(name)

    @property
    def dichotomous(self) -> bool:
        return any(self.cells[n].present for n in ("events", "total") if n in self.cells)

    @property
    def continuous(self) -> bool:
        return any(self.cells[n].present for n in ("mean", "sd", "n") if n in self.cells)

    @property
    def all_cells(self) -> list[FormCell]:
        return [*([self.arm] if self.arm else []), *self.cells.values(), *self.own, *self.extra]


@dataclass(frozen=True)
class ComparisonRow:
    """A between-arm effect printed for the outcome: ``label`` "A vs B" by the arms' names."""

    key: str  # "comparisons.2" (version 1: the outcome entry)
    label: str
    cells: dict[str, FormCell]  # effect_measure / effect_estimate / ci_lower / ci_upper / p_value
    arm: FormCell | None = None
    comparator: FormCell | None = None
    own: tuple[FormCell, ...] = ()  # its outcome name and time point, when not the row's
    extra: tuple[FormCell, ...] = ()

    def cell(self, name: str) -> FormCell | None:
        return self.cells.get(name)

    @property
    def all_cells(self) -> list[FormCell]:
        sides = [c for c in (self.arm, self.comparator) if c is not None]
        return [*self.own, *sides, *self.cells.values(), *self.extra]


@dataclass(frozen=True)
class OutcomeRow:
    """One outcome at one time point: its description (from its first entry), its numbers per
    arm column and the comparisons printed for it. ``key`` is the first entry (``outcomes.1``)."""

    key: str
    label: str
    cells: dict[str, FormCell]  # outcome_name / outcome_type / timepoint / population
    arms: dict[str, ArmNumbers]  # by arm column key
    comparisons: tuple[ComparisonRow, ...] = ()
    extra: tuple[FormCell, ...] = ()

    def cell(self, name: str) -> FormCell | None:
        return self.cells.get(name)

    def result(self, column: str) -> ArmNumbers | None:
        return self.arms.get(column)

    @property
    def all_cells(self) -> list[FormCell]:
        numbers = [c for arm in self.arms.values() for c in arm.all_cells]
        compared = [c for comparison in self.comparisons for c in comparison.all_cells]
        return [*self.cells.values(), *numbers, *compared, *self.extra]

    @property
    def undecided_paths(self) -> list[str]:
        """What "Approve the outcome" approves: every undecided value of the outcome, its
        comparisons included."""
        return _undecided(self.all_cells)


@dataclass(frozen=True)
class FormSection:
    module: str
    title: str
    kind: SectionKind
    fields: tuple[str, ...]  # the module's fields, in the template's order
    rows: tuple[FormRow, ...]
    columns: tuple[ArmColumn, ...] = ()  # ARMS and OUTCOMES: one per arm
    outcomes: tuple[OutcomeRow, ...] = ()  # OUTCOMES

    @property
    def cells(self) -> list[FormCell]:
        return [
            *(cell for row in self.rows for cell in row.all_cells),
            *(cell for row in self.outcomes for cell in row.all_cells),
        ]

    @property
    def shown(self) -> bool:
        return bool(self.rows or self.outcomes)


@dataclass(frozen=True)
class ArmChoice:
    name: str  # the value a reassignment records: the declared arm's name
    label: str
    selected: bool


@dataclass(frozen=True)
class ExtractionForm:
    sections: tuple[FormSection, ...]
    study: StudyArms | None = None  # the arms view the layout was read from
    arm_references: frozenset[str] = field(default_factory=frozenset)  # paths a reviewer reassigns

    def cells(self) -> list[FormCell]:
        """Every cell that holds a value, in the order the form shows them."""
        return [cell for section in self.sections for cell in section.cells if cell.present]

    def empty_cells(self) -> list[FormCell]:
        """Every cell the model left empty and no reviewer has set: each can be set."""
        return [cell for section in self.sections for cell in section.cells if cell.settable and not cell.present]

    def section(self, module: str) -> FormSection | None:
        return next((s for s in self.sections if s.module == module), None)

    def arm_choices(self, cell: FormCell) -> list[ArmChoice]:
        """For an arm reference: the study's declared arms, the one it names now selected."""
        if cell.path not in self.arm_references or self.study is None:
            return []
        now = arm_key_of(cell.value)
        return [
            ArmChoice(arm.name, arm.label, bool(now) and now in (arm_key_of(arm.name), arm_key_of(arm.label)))
            for arm in self.study.arms
        ]


CellOf = Callable[[str, str], FormCell]


def build_form(
    definition: TemplateDefinition,
    values: dict[str, ReviewableValue],
    decided: dict[str, Decision],
    empty: frozenset[str] = frozenset(),
) -> ExtractionForm:
    """The form of one document: ``values`` by path, ``decided`` the latest decision by path,
    ``empty`` the paths of the fields the model left empty (a reviewer may set them)."""

    def cell(path: str, name: str) -> FormCell:
        return FormCell(path, name, values.get(path), decided.get(path), path in empty)

    modules = {module.name: module for module in definition.all_modules()}
    study = _study(definition, modules, values, cell)
    sections: list[FormSection] = []
    placed: set[str] = set()
    for module in definition.all_modules():
        names = tuple(f.name for f in module.fields)
        if study is not None and module.name == COMPARISONS and OUTCOMES in modules:
            continue  # shown under their outcomes
        if study is not None and module.name == OUTCOMES:
            sections.append(_outcomes_section(module, modules.get(COMPARISONS), study, values, cell))
        elif study is not None and module.name == ARMS:
            sections.append(_declared_arms_section(module, study, cell))
        elif module.repeated:
            indexes = _indexes(values, module)
            rows = tuple(
                FormRow(
                    _entry_label(values, module.name, index, names),
                    {name: cell(f"{module.name}.{index}.{name}", name) for name in names},
                    index,
                )
                for index in indexes
            )
            sections.append(FormSection(module.name, module.title, SectionKind.ROWS, names, rows))
        elif module.name == "risk_of_bias":
            row = FormRow("judgement", {name: cell(f"{module.name}.{name}", name) for name in names})
            sections.append(FormSection(module.name, module.title, SectionKind.DOMAINS, names, (row,)))
        elif _has_v1_arms(module):
            sections.append(_v1_arms_section(module, study, cell))
        else:
            rows = tuple(FormRow(_label(name), {name: cell(f"{module.name}.{name}", name)}) for name in names)
            sections.append(FormSection(module.name, module.title, SectionKind.FIELDS, names, rows))
        placed.update(c.path for c in sections[-1].cells)
    # Values outside the template (results stored before templates): listed as they are.
    rest = [path for path in values if path not in placed]
    if rest:
        rows = tuple(FormRow(field_title(path), {path: cell(path, values[path].machine.field)}) for path in rest)
        sections.append(FormSection("other", "Other values", SectionKind.FIELDS, tuple(rest), rows))
    references = frozenset(
        c.path for c in (cell for s in sections for cell in s.cells) if is_arm_reference(definition, c.path)
    )
    return ExtractionForm(tuple(sections), study, references)


def _study(
    definition: TemplateDefinition, modules: dict[str, ModuleDef], values: dict[str, ReviewableValue], cell: CellOf
) -> StudyArms | None:
    """The arms view of the document, for a template whose outcomes speak in arms (declared arms,
    or version 1's treatment/control fields); None for any other template."""
    outcomes = modules.get(OUTCOMES)
    if outcomes is None or not outcomes.repeated:
        return None
    if ARMS not in modules and not _has_v1_arms(outcomes):
        return None
    paths: list[str] = []
    for module in modules.values():
        names = [f.name for f in module.fields]
        if module.repeated:
            paths += [f"{module.name}.{index}.{name}" for index in _indexes(values, module) for name in names]
        else:
            paths += [f"{module.name}.{name}" for name in names]
    return study_arms(paths, lambda path: cell(path, path.rsplit(".", 1)[-1]).value)


def _indexes(values: dict[str, ReviewableValue], module: ModuleDef) -> list[int]:
    return sorted({v.machine.index for v in values.values() if _in(v, module) and v.machine.index})


def _in(value: ReviewableValue, module: ModuleDef) -> bool:
    return value.machine.module == module.name or (
        value.machine.module is None and value.path.startswith(f"{module.name}.")
    )


def _entry_label(values: dict[str, ReviewableValue], module: str, index: int, names: tuple[str, ...]) -> str:
    named = values.get(f"{module}.{index}.{names[0]}") if names else None
    return str(named.machine.value) if named and named.machine.value not in (None, "") else f"#{index}"


def _has_v1_arms(module: ModuleDef) -> bool:
    return any(f.name.endswith(TREATMENT) for f in module.fields)


def _declared_arms_section(module: ModuleDef, study: StudyArms, cell: CellOf) -> FormSection:
    """The arms table: one column per declared arm, one row per arm field (name, n, baseline)."""
    names = tuple(f.name for f in module.fields)
    columns = tuple(ArmColumn(arm.key, arm.label) for arm in study.arms)
    rows = tuple(
        FormRow(
            "arm" if name == "arm_name" else _label(name),
            {arm.key: cell(arm.paths.get(name) or f"{arm.key}.{name}", name) for arm in study.arms},
        )
        for name in names
    )
    return FormSection(module.name, module.title, SectionKind.ARMS, names, rows, columns)


def _v1_arms_section(module: ModuleDef, study: StudyArms | None, cell: CellOf) -> FormSection:
    """Version 1's baseline: ``x_treatment`` beside ``x_control``; the arms' names as the first row."""
    names = tuple(f.name for f in module.fields)
    rows: list[FormRow] = []
    done: set[str] = set()
    for name in names:
        if name in done:
            continue
        if name.endswith(TREATMENT) or name == "treatment_name":
            stem = name[: -len(TREATMENT)] if name.endswith(TREATMENT) else "name"
            partner = f"{stem}{CONTROL}" if name.endswith(TREATMENT) else "control_name"
            pair = {"treatment": cell(f"{module.name}.{name}", name)}
            if partner in names:
                pair["control"] = cell(f"{module.name}.{partner}", partner)
                done.add(partner)
            rows.append(FormRow("arm" if stem == "name" else _label(stem), pair))
        else:
            rows.append(FormRow(_label(name), {"treatment": cell(f"{module.name}.{name}", name)}))
        done.add(name)
    columns = tuple(ArmColumn(arm.key, arm.label) for arm in study.arms) if study else _V1_COLUMNS
    return FormSection(module.name, module.title, SectionKind.ARMS, names, tuple(rows), columns)


_V1_COLUMNS = (ArmColumn("treatment", "treatment"), ArmColumn("control", "control"))


def _column_of(arm: str, arm_name: str) -> str:
    return arm or f"{UNDECLARED}{arm_key_of(arm_name)}"


def _outcomes_section(
    module: ModuleDef,
    comparisons_module: ModuleDef | None,
    study: StudyArms,
    values: dict[str, ReviewableValue],
    cell: CellOf,
) -> FormSection:
    names = tuple(f.name for f in module.fields)
    described = tuple(name for name in DESCRIPTION_FIELDS if name in names)
    columns = [ArmColumn(arm.key, arm.label) for arm in study.arms]
    # Numbers naming no declared arm get a column of their own, named as the entry named it.
    for outcome in study.outcomes:
        for result in outcome.results:
            key = _column_of(result.arm, result.arm_name)
            if not result.arm and all(c.key != key for c in columns):
                label = f"{result.arm_name} (not declared)" if result.arm_name else "no arm named"
                columns.append(ArmColumn(key, label, declared=False))
    # Every field of every entry, to show what the arms view does not place (a stored template's own fields).
    entries: dict[str, dict[str, str]] = {}
    for module_def in (module, comparisons_module):
        if module_def is None:
            continue
        for index in _indexes(values, module_def):
            entries[f"{module_def.name}.{index}"] = {
                f.name: f"{module_def.name}.{index}.{f.name}" for f in module_def.fields
            }

    def cells(paths: dict[str, str], wanted: tuple[str, ...], entry: str, suffix: str = "") -> dict[str, FormCell]:
        """By the arm-free name; each cell keeps its own field's name (``events_treatment`` in version 1)."""
        found = {name: paths.get(name) or f"{entry}.{name}{suffix}" for name in wanted}
        return {name: cell(path, path.rsplit(".", 1)[-1]) for name, path in found.items()}

    rows = []
    for outcome in study.outcomes:
        description = cells(dict(outcome.paths), described, outcome.key)
        placed = {c.path for c in description.values()}
        numbers: dict[str, ArmNumbers] = {}
        for result in outcome.results:
            paths = dict(result.paths)
            shown = cells(paths, RESULT_FIELDS, result.entry, "" if study.version == 2 else f"_{result.arm}")
            reference = cell(paths["arm"], "arm") if "arm" in paths else None
            own = tuple(
                cell(path, name)
                for name, path in entries.get(result.entry, {}).items()
                if name in DESCRIPTION_FIELDS and path not in placed and path in values
            )
            placed.update(c.path for c in (*shown.values(), *own))
            if reference is not None:
                placed.add(reference.path)
            numbers[_column_of(result.arm, result.arm_name)] = ArmNumbers(
                _column_of(result.arm, result.arm_name), result.entry, shown, reference, own
            )
        compared = []
        for comparison in outcome.comparisons:
            paths = dict(comparison.paths)
            effect = cells(paths, EFFECT_FIELDS, comparison.key)
            sides = [cell(paths[name], name) if name in paths else None for name in ("arm", "comparator_arm")]
            own = tuple(
                cell(paths[name], name)
                for name in ("outcome_name", "timepoint")
                if name in paths and paths[name] not in placed and paths[name] in values
            )
            placed.update(c.path for c in (*effect.values(), *own, *(s for s in sides if s)))
            label = (
                f"{study.arm_label(comparison.arm, comparison.arm_name or '?')} vs "
                f"{study.arm_label(comparison.comparator, comparison.comparator_name or '?')}"
            )
            compared.append(ComparisonRow(comparison.key, label, effect, sides[0], sides[1], own))
        # Fields of the outcome's entries no part above shows: kept on the row, never lost.
        mine = [*outcome.entries, outcome.key, *(c.key for c in outcome.comparisons)]
        extra = tuple(
            cell(path, name)
            for entry in dict.fromkeys(mine)
            for name, path in entries.get(entry, {}).items()
            if path not in placed and values.get(path) is not None
        )
        label = str(outcome.name) if outcome.name else f"#{outcome.key.rsplit('.', 1)[-1]}"
        rows.append(OutcomeRow(outcome.key, label, description, numbers, tuple(compared), extra))
    return FormSection(module.name, module.title, SectionKind.OUTCOMES, names, (), tuple(columns), tuple(rows))


def _label(name: str) -> str:
    return name.replace("_", " ")


def field_title(path: str) -> str:
    """A field's name in words, never its path: "outcomes.3.outcome_name" is "outcome 3 · outcome
    name", "metadata.nct_number" "metadata · nct number"."""
    parts = path.split(".")
    if len(parts) == 3 and parts[1].isdigit():
        module, index, name = parts
        entry = module[:-1] if module.endswith("s") else module
        return f"{_label(entry)} {index} · {_label(name)}"
    if len(parts) == 2 and parts[1].isdigit():  # an entry: "outcomes.3" is "outcome 3"
        return f"{_label(parts[0][:-1] if parts[0].endswith('s') else parts[0])} {parts[1]}"
    if len(parts) == 2:
        return f"{_label(parts[0])} · {_label(parts[1])}"
    return _label(path)
