"""A document's values laid out the way a reviewer reads an extraction form.

Study-level fields become a short form, baseline characteristics a treatment/control table, the
Risk-of-Bias judgements one row of domains, and outcomes a table with one row per outcome (its
arms' numbers, the estimate with its CI, p). Every cell carries the value's final state — the
machine's, or the reviewer's decision with its own grounding — so the page colours each number by
what is true of it now. The layout follows the batch's frozen template; values of results stored
before templates (no module) are listed as plain fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from extraction_pipeline.core.extraction.grounded import Scalar
from extraction_pipeline.core.review.values import (
    APPROVE,
    CORRECT,
    MARK_NOT_REPORTED,
    Decision,
    ReviewableValue,
    decision_label,
    final_status,
)
from extraction_pipeline.core.templates.definition import ModuleDef, TemplateDefinition

TREATMENT, CONTROL = "_treatment", "_control"


class SectionKind(StrEnum):
    FIELDS = "fields"  # label: value, one row per field
    ARMS = "arms"  # one row per characteristic, a treatment and a control column
    DOMAINS = "domains"  # one row of judgements (Risk of Bias)
    ROWS = "rows"  # a repeated module: one row per entry (outcomes)


@dataclass(frozen=True)
class FormCell:
    """One field of the form: what the model found (or nothing) and the latest decision on it."""

    path: str
    field: str
    reviewable: ReviewableValue | None  # None: the model reported nothing for this field
    decision: Decision | None

    @property
    def present(self) -> bool:
        return self.reviewable is not None

    @property
    def value(self) -> Scalar | Any:
        """The final value: the reviewer's correction, nothing when marked not reported, else the machine's."""
        if self.decision is not None and self.decision.action == CORRECT:
            return self.decision.value
        if self.decision is not None and self.decision.action == MARK_NOT_REPORTED:
            return None
        return self.reviewable.machine.value if self.reviewable else None

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


@dataclass(frozen=True)
class FormRow:
    label: str
    cells: dict[str, FormCell]  # by field name (ARMS rows: "treatment" and "control")
    index: int | None = None  # the entry's number in a repeated module

    def cell(self, name: str) -> FormCell | None:
        return self.cells.get(name)

    @property
    def undecided_paths(self) -> list[str]:
        return [c.path for c in self.cells.values() if c.present and not c.decided]

    @property
    def present(self) -> bool:
        return any(c.present for c in self.cells.values())


@dataclass(frozen=True)
class FormSection:
    module: str
    title: str
    kind: SectionKind
    fields: tuple[str, ...]  # the module's fields, in the template's order
    rows: tuple[FormRow, ...]

    @property
    def cells(self) -> list[FormCell]:
        return [cell for row in self.rows for cell in row.cells.values()]


@dataclass(frozen=True)
class ExtractionForm:
    sections: tuple[FormSection, ...]

    def cells(self) -> list[FormCell]:
        """Every cell that holds a value, in the order the form shows them."""
        return [cell for section in self.sections for cell in section.cells if cell.present]

    def section(self, module: str) -> FormSection | None:
        return next((s for s in self.sections if s.module == module), None)


def build_form(
    definition: TemplateDefinition,
    values: dict[str, ReviewableValue],
    decided: dict[str, Decision],
) -> ExtractionForm:
    """The form of one document: ``values`` by path, ``decided`` the latest decision by path."""

    def cell(path: str, field: str) -> FormCell:
        return FormCell(path, field, values.get(path), decided.get(path))

    sections: list[FormSection] = []
    placed: set[str] = set()
    for module in definition.all_modules():
        names = tuple(f.name for f in module.fields)
        if module.repeated:
            indexes = sorted({v.machine.index for v in values.values() if _in(v, module) and v.machine.index})
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
        elif _has_arms(module):
            sections.append(_arms_section(module, cell))
        else:
            rows = tuple(FormRow(_label(name), {name: cell(f"{module.name}.{name}", name)}) for name in names)
            sections.append(FormSection(module.name, module.title, SectionKind.FIELDS, names, rows))
        placed.update(c.path for c in sections[-1].cells)
    # Values outside the template (results stored before templates): listed as they are.
    rest = [path for path in values if path not in placed]
    if rest:
        rows = tuple(FormRow(path, {path: cell(path, values[path].machine.field)}) for path in rest)
        sections.append(FormSection("other", "Other values", SectionKind.FIELDS, tuple(rest), rows))
    return ExtractionForm(tuple(sections))


def _in(value: ReviewableValue, module: ModuleDef) -> bool:
    return value.machine.module == module.name or (
        value.machine.module is None and value.path.startswith(f"{module.name}.")
    )


def _entry_label(values: dict[str, ReviewableValue], module: str, index: int, names: tuple[str, ...]) -> str:
    named = values.get(f"{module}.{index}.{names[0]}") if names else None
    return str(named.machine.value) if named and named.machine.value not in (None, "") else f"#{index}"


def _has_arms(module: ModuleDef) -> bool:
    return any(f.name.endswith(TREATMENT) for f in module.fields)


def _arms_section(module: ModuleDef, cell: Any) -> FormSection:
    """Baseline: ``x_treatment`` beside ``x_control``; the arms' names as the first row."""
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
    return FormSection(module.name, module.title, SectionKind.ARMS, names, tuple(rows))


def _label(name: str) -> str:
    return name.replace("_", " ")
