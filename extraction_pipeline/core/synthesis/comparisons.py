"""Which arms of each study are pooled against which: the analyst's comparisons.

The unit of a meta-analysis is the comparison ("haloperidol vs placebo"): in each study, some arms
are its intervention side, some its comparator side, the rest are not in it. A batch's comparisons
are the analyst's; each starts from a *proposal* read off the arm names — an arm called placebo,
saline, sham, usual care, standard care, control, vehicle or no treatment is a comparator, any
other arm an intervention (version 1's two arms: treatment and control) — and an assignment
overrides one arm's side. The batch page stores assignments in the ledger
(``core.ledger.arm_sides``); ``extraction-pipeline synthesis --arms FILE`` reads them from a
mapping file (``read_sides_file``: JSON or CSV), checked against the CSV's studies and arms so a
typo is named with its line or key instead of silently changing nothing.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.templates.arms import arm_key_of

INTERVENTION, COMPARATOR, NOT_IN = "intervention", "comparator", "none"
SIDES = (INTERVENTION, COMPARATOR, NOT_IN)
SIDE_WORDS = {"not in this comparison": NOT_IN, "-": NOT_IN, "": NOT_IN}
DEFAULT_COMPARISON = "intervention vs comparator"
COMPARATOR_WORDS = (
    "placebo",
    "saline",
    "sham",
    "usual care",
    "standard care",
    "standard of care",
    "control",
    "vehicle",
    "no treatment",
)
_COMPARATOR = re.compile(r"\b(?:" + "|".join(re.escape(word) for word in COMPARATOR_WORDS) + r")\b")
MAX_NAME = 200
MAX_MAPPING_BYTES = 5 * 1024 * 1024
# Version 1's arms are roles, not names.
V1_SIDES = {"treatment": INTERVENTION, "control": COMPARATOR}


def proposed_side(arm: str, name: str) -> str:
    """The side an arm is proposed for from its id (version 1) or its name."""
    if arm in V1_SIDES:
        return V1_SIDES[arm]
    return COMPARATOR if _COMPARATOR.search(arm_key_of(name)) else INTERVENTION


def side_of(text: object, where: str) -> str:
    """A side as typed (``intervention``, ``comparator``, ``none`` / ``not in this comparison``)."""
    word = " ".join(str(text if text is not None else "").split()).casefold()
    side = SIDE_WORDS.get(word, word)
    if side not in SIDES:
        raise ConfigError(f"{where}: side {text!r} is not one of {', '.join(SIDES)} (or 'not in this comparison')")
    return side


def comparison_name(text: object, where: str) -> str:
    name = " ".join(str(text or "").split())
    if not arm_key_of(name):
        raise ConfigError(f"{where}: a comparison needs a name with letters or digits (e.g. 'haloperidol vs placebo')")
    if len(name) > MAX_NAME:
        raise ConfigError(f"{where}: a comparison's name is at most {MAX_NAME} characters")
    return name


@dataclass(frozen=True)
class Assignment:
    """One arm's side in one comparison: ``study`` a document id or a study label, ``arm`` an arm
    id (``arms.2``) or its name; ``where`` says where it was given (a file's line or key)."""

    study: str
    arm: str
    side: str
    where: str = ""


@dataclass(frozen=True)
class ComparisonSides:
    """A comparison by name and the sides assigned in it; an arm without an assignment keeps its
    proposed side."""

    name: str
    assignments: tuple[Assignment, ...] = ()
    _index: dict[tuple[str, str], str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for assignment in self.assignments:
            self._index[(_study_key(assignment.study), arm_key_of(assignment.arm))] = assignment.side

    def side(self, studies: Iterable[str], arm: str, name: str) -> str:
        """The side of the arm ``arm`` (its id) called ``name`` of the study known as any of
        ``studies`` (its document id, its label)."""
        for study in studies:
            for key in (arm_key_of(arm), arm_key_of(name)):
                found = self._index.get((_study_key(study), key))
                if found is not None:
                    return found
        return proposed_side(arm, name)

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_COMPARISON


def _study_key(study: str) -> str:
    text = str(study).strip()
    if text.isdigit():
        return f"document {int(text)}"
    return text if text.startswith("document ") else text.casefold()


def check_assignments(comparisons: Iterable[ComparisonSides], arms: Mapping[str, Mapping[str, str]]) -> None:
    """Refuse an assignment naming a study or an arm the data do not have. ``arms``: per study key
    (``document 3`` and the study's label, casefolded), its arms' id → name."""
    for comparison in comparisons:
        for assignment in comparison.assignments:
            known = arms.get(_study_key(assignment.study))
            if known is None:
                raise ConfigError(f"{assignment.where}: no study {assignment.study!r} in the data")
            wanted = arm_key_of(assignment.arm)
            if not any(wanted in (arm_key_of(arm), arm_key_of(name)) for arm, name in known.items()):
                listed = ", ".join(f"{name} ({arm})" for arm, name in known.items())
                raise ConfigError(
                    f"{assignment.where}: study {assignment.study!r} has no arm {assignment.arm!r} (its arms: {listed})"
                )


def read_sides_file(path: Path) -> tuple[ComparisonSides, ...]:
    """The comparisons of a mapping file: JSON ``{"comparison": {"study": {"arm": "side"}}}`` or a
    CSV with the columns ``comparison, study, arm, side`` (what ``--write-arms`` writes)."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.stat().st_size > MAX_MAPPING_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_MAPPING_BYTES // (1024 * 1024)} MB, not a mapping of arms")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        return _from_json(text, path.name)
    return _from_csv(text, path.name)


def _from_json(text: str, name: str) -> tuple[ComparisonSides, ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f'{name}: expected an object {{"comparison": {{"study": {{"arm": "side"}}}}}}')
    result = []
    for key, studies in data.items():
        where = f"{name}: {key!r}"
        comparison = comparison_name(key, where)
        if not isinstance(studies, dict):
            raise ConfigError(f'{where}: expected an object {{"study": {{"arm": "side"}}}}')
        assignments = []
        for study, arms in studies.items():
            if not isinstance(arms, dict):
                raise ConfigError(f'{where} > {study!r}: expected an object {{"arm": "side"}}')
            for arm, side in arms.items():
                at = f"{where} > {study!r} > {arm!r}"
                assignments.append(Assignment(str(study), str(arm), side_of(side, at), at))
        result.append(ComparisonSides(comparison, tuple(assignments)))
    return tuple(result)


MAPPING_COLUMNS = ("comparison", "study", "arm", "side")


def _from_csv(text: str, name: str) -> tuple[ComparisonSides, ...]:
    header = text.split("\n", 1)[0]
    delimiter = max((",", ";", "\t"), key=header.count)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    columns = [cell.strip().casefold() for cell in next(reader, [])]
    missing = [column for column in MAPPING_COLUMNS if column not in columns]
    if missing:
        raise ConfigError(f"{name} line 1: no column {', '.join(missing)} (the columns: {', '.join(MAPPING_COLUMNS)})")
    by_name: dict[str, list[Assignment]] = {}
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            where = f"{name} line {reader.line_num}"
            row = dict(zip(columns, (cell.strip() for cell in cells), strict=False))
            comparison = comparison_name(row.get("comparison"), where)
            study, arm = row.get("study") or "", row.get("arm") or ""
            if not study or not arm:
                raise ConfigError(f"{where}: a study and an arm are needed")
            by_name.setdefault(comparison, []).append(Assignment(study, arm, side_of(row.get("side"), where), where))
    except csv.Error as exc:
        raise ConfigError(f"{name} line {reader.line_num}: not readable as CSV ({exc})") from None
    return tuple(ComparisonSides(comparison, tuple(found)) for comparison, found in by_name.items())


def sides_csv(rows: Iterable[tuple[str, str, str, str, str, str]]) -> str:
    """A mapping file to edit: ``(comparison, study, study label, arm id, arm name, side)`` rows;
    ``study`` and ``arm`` are what is matched (a document id and an arm id, or a label and a
    name), the other two columns say what they are."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*MAPPING_COLUMNS, "study_label", "arm_name"])
    for comparison, study, label, arm, name, side in rows:
        writer.writerow([comparison, study, arm, side, label, name])
    return buffer.getvalue()
