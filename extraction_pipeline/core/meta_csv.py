"""The long-format CSV a meta-analyst loads into R or RevMan: one row per outcome × arm.

Column names follow ``metafor::escalc``'s arm-level arguments — ``xi``/``ni`` (events / total, e.g.
``escalc(measure = "PLO", xi = xi, ni = ni)``), ``mi``/``sdi``/``ni`` (mean / SD / n, ``measure =
"MN"``) — and the study-level effect as printed (``estimate``, ``ci.lb``, ``ci.ub``, ``pval``, as
metafor names them). RevMan's import wizard maps the same columns (Study ID, Events, Total, Mean,
SD). Each number carries its verification status, so a filter keeps only verified values.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows

ARMS = ("treatment", "control")
COLUMNS = (
    "study",
    "document_id",
    "filename",
    "outcome",
    "outcome_name",
    "timepoint",
    "outcome_type",
    "group",
    "xi",
    "ni",
    "mi",
    "sdi",
    "measure",
    "estimate",
    "ci.lb",
    "ci.ub",
    "pval",
    "status_xi",
    "status_ni",
    "status_mi",
    "status_sdi",
    "status_estimate",
)
# Formula-looking text must stay text when the CSV is opened in a spreadsheet.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _value(fields: dict[str, Any], path: str) -> Any:
    entry = fields.get(path)
    return entry.get("value") if isinstance(entry, dict) else None


def _status(fields: dict[str, Any], path: str) -> str:
    entry = fields.get(path)
    return str(entry.get("status", "")) if isinstance(entry, dict) and entry.get("value") is not None else ""


def _safe(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _is_number(value):
        return "'" + value
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def meta_analysis_rows(ledger: Ledger, batch_id: int) -> list[dict[str, Any]]:
    """Rows of the long format, for every completed document's every outcome and arm."""
    rows: list[dict[str, Any]] = []
    for item in batch_item_rows(ledger, batch_id):
        if item["status"] != "completed" or not item["result_json"]:
            continue
        fields: dict[str, Any] = json.loads(item["result_json"]).get("fields", {})
        study = _value(fields, "metadata.study_id") or _value(fields, "metadata.nct_number") or item["filename"]
        outcomes = sorted({int(path.split(".")[1]) for path in fields if path.startswith("outcomes.")})
        for number in outcomes:
            prefix = f"outcomes.{number}."
            for arm in ARMS:
                dichotomous = (f"{prefix}events_{arm}", f"{prefix}total_{arm}")
                continuous = (f"{prefix}mean_{arm}", f"{prefix}sd_{arm}", f"{prefix}n_{arm}")
                if all(_value(fields, path) is None for path in (*dichotomous, *continuous)):
                    continue  # this arm reports nothing for this outcome
                total = _value(fields, f"{prefix}total_{arm}")
                n = total if total is not None else _value(fields, f"{prefix}n_{arm}")
                n_path = f"{prefix}total_{arm}" if total is not None else f"{prefix}n_{arm}"
                rows.append(
                    {
                        "study": study,
                        "document_id": item["document_id"],
                        "filename": item["filename"],
                        "outcome": number,
                        "outcome_name": _value(fields, f"{prefix}outcome_name"),
                        "timepoint": _value(fields, f"{prefix}timepoint"),
                        "outcome_type": _value(fields, f"{prefix}outcome_type"),
                        "group": arm,
                        "xi": _value(fields, f"{prefix}events_{arm}"),
                        "ni": n,
                        "mi": _value(fields, f"{prefix}mean_{arm}"),
                        "sdi": _value(fields, f"{prefix}sd_{arm}"),
                        "measure": _value(fields, f"{prefix}effect_measure"),
                        "estimate": _value(fields, f"{prefix}effect_estimate"),
                        "ci.lb": _value(fields, f"{prefix}ci_lower"),
                        "ci.ub": _value(fields, f"{prefix}ci_upper"),
                        "pval": _value(fields, f"{prefix}p_value"),
                        "status_xi": _status(fields, f"{prefix}events_{arm}"),
                        "status_ni": _status(fields, n_path),
                        "status_mi": _status(fields, f"{prefix}mean_{arm}"),
                        "status_sdi": _status(fields, f"{prefix}sd_{arm}"),
                        "status_estimate": _status(fields, f"{prefix}effect_estimate"),
                    }
                )
    return rows


def meta_analysis_csv(ledger: Ledger, batch_id: int) -> str:
    """The CSV text (UTF-8, header first, empty cells for values not reported)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in meta_analysis_rows(ledger, batch_id):
        writer.writerow({key: _safe(value) for key, value in row.items()})
    return buffer.getvalue()
