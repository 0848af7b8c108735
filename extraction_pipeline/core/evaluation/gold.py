"""Gold tables: the corpus's JSON format, or a CSV (the user's own double-extraction sheet) with a
column mapping.

The corpus format (Yun et al. 2024) has one row per comparison of an outcome: ``pmcid``,
``outcome``, ``intervention`` and ``comparator`` (the two arms' names), ``outcome_type`` (binary /
continuous), ``intervention_events``, ``intervention_group_size``, ``intervention_mean``,
``intervention_standard_deviation`` and the same four for ``comparator``. A mapping file renames
columns for another sheet (the two arm-name columns are optional)::

    {"study": "Study ID", "outcome": "Outcome", "outcome_type": "Type",
     "intervention": "Arm (I)", "comparator": "Arm (C)",
     "columns": {"events_treatment": "Events (I)", "total_treatment": "N (I)", ...}}

Fields are events_/total_ (dichotomous), mean_/sd_/n_ (continuous), each ``_treatment`` (the
row's intervention arm) and ``_control`` (its comparator arm). Empty cells and "x" / "NR" / "NA"
mean "no gold value".
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import ConfigError

ARMS = {"intervention": "treatment", "comparator": "control"}
SIDES = tuple(ARMS)  # a gold row's two arms: its intervention, then its comparator
NUMBERS = ("events", "total", "mean", "sd", "n")  # an arm's numbers for one outcome
FIELDS = tuple(f"{name}_{arm}" for name in NUMBERS for arm in ("treatment", "control"))
# Annotators copy arm names out of lists ("H0, H1 and H2"): a conjunction before the name and
# punctuation after it are not part of it.
_LIST_LEFTOVERS = re.compile(r"^(?:and|or|vs\.?|versus)\s+|[\s,;:.]+$", re.IGNORECASE)
MISSING = {"", "x", "nr", "na", "n/a", "-", "none", "null"}
MAX_GOLD_BYTES = 50 * 1024 * 1024


@dataclass
class GoldOutcome:
    study: str
    outcome: str
    outcome_type: str  # "dichotomous" | "continuous" | ""
    values: dict[str, float] = field(default_factory=dict)
    in_figure: bool = False  # the corpus marks values only shown in a figure
    # The two arms compared, as the gold names them ("" where the sheet has no arm names).
    intervention: str = ""
    comparator: str = ""

    def arm_name(self, side: str) -> str:
        """The name of the row's ``side`` ("intervention" or "comparator")."""
        return self.intervention if side == "intervention" else self.comparator

    def arm_values(self, side: str) -> dict[str, float]:
        """One side's numbers by their name in an arm (events, total, mean, sd, n)."""
        suffix = f"_{ARMS[side]}"
        return {name.removesuffix(suffix): value for name, value in self.values.items() if name.endswith(suffix)}


def clean_arm_name(raw: Any) -> str:
    """A gold arm name without the list's leftovers ("and H2 (haloperidol 2 mg)" -> "H2 (...)")."""
    text = " ".join(str(raw or "").split())
    previous = None
    while previous != text:
        previous, text = text, _LIST_LEFTOVERS.sub("", text)
    return text


def _number(raw: Any, where: str) -> float | None:
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    text = str(raw).strip().replace(",", "")
    if text.lower() in MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{where}: {raw!r} is not a number") from None


def _type_of(raw: Any) -> str:
    text = str(raw or "").strip().lower()
    return {"binary": "dichotomous", "dichotomous": "dichotomous", "continuous": "continuous"}.get(text, text)


def _corpus_row(row: dict[str, Any], number: int) -> GoldOutcome:
    where = f"gold row {number}"
    kind = _type_of(row.get("outcome_type"))
    gold = GoldOutcome(
        study=str(row.get("pmcid", row.get("study", ""))).strip(),
        outcome=str(row.get("outcome", "")).strip(),
        outcome_type=kind,
        in_figure=str(row.get("is_data_in_figure_graphics", "")).strip().upper() == "TRUE",
        intervention=clean_arm_name(row.get("intervention")),
        comparator=clean_arm_name(row.get("comparator")),
    )
    for prefix, arm in ARMS.items():
        size = "total" if kind == "dichotomous" else "n"
        pairs = {
            f"events_{arm}": f"{prefix}_events",
            f"{size}_{arm}": f"{prefix}_group_size",
            f"mean_{arm}": f"{prefix}_mean",
            f"sd_{arm}": f"{prefix}_standard_deviation",
        }
        for name, column in pairs.items():
            value = _number(row.get(column), f"{where}, {column}")
            if value is not None:
                gold.values[name] = value
    return gold


def _mapped_row(row: dict[str, Any], number: int, mapping: dict[str, Any]) -> GoldOutcome:
    where = f"gold row {number}"
    gold = GoldOutcome(
        study=str(row.get(mapping["study"], "")).strip(),
        outcome=str(row.get(mapping["outcome"], "")).strip(),
        outcome_type=_type_of(row.get(mapping.get("outcome_type", ""), "")),
        intervention=clean_arm_name(row.get(mapping["intervention"])) if mapping.get("intervention") else "",
        comparator=clean_arm_name(row.get(mapping["comparator"])) if mapping.get("comparator") else "",
    )
    for name, column in mapping["columns"].items():
        value = _number(row.get(column), f"{where}, {column}")
        if value is not None:
            gold.values[name] = value
    return gold


def read_mapping(path: Path) -> dict[str, Any]:
    try:
        mapping = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable JSON mapping ({exc})") from exc
    if not isinstance(mapping, dict) or not isinstance(mapping.get("columns"), dict):
        raise ConfigError(f'{path}: a mapping needs "study", "outcome" and "columns": {{field: column}}')
    for key in ("study", "outcome"):
        if not isinstance(mapping.get(key), str):
            raise ConfigError(f"{path}: the mapping needs the column name of {key!r}")
    for key in ("outcome_type", "intervention", "comparator"):
        if key in mapping and not isinstance(mapping[key], str):
            raise ConfigError(f"{path}: {key!r} must name a column of the sheet")
    unknown = sorted(set(mapping["columns"]) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {', '.join(unknown)}; fields are {', '.join(FIELDS)}")
    return mapping


def read_gold(path: Path, mapping: dict[str, Any] | None = None) -> list[GoldOutcome]:
    """Gold outcomes from a corpus-format JSON list, or a CSV (corpus columns, or ``mapping``)."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.stat().st_size > MAX_GOLD_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_GOLD_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text") from exc
    if path.suffix.lower() == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ConfigError(f"{path}: expected a JSON list of gold rows (objects)")
    else:
        rows = list(csv.DictReader(text.splitlines()))
    if mapping is not None:
        return [_mapped_row(row, n, mapping) for n, row in enumerate(rows, start=1)]
    if rows and "outcome" not in rows[0]:
        raise ConfigError(f"{path}: no 'outcome' column: give --mapping for your sheet's column names")
    return [_corpus_row(row, n) for n, row in enumerate(rows, start=1)]
