"""The long-format CSV a meta-analyst loads into R or RevMan: one row per outcome × arm.

Column names follow ``metafor::escalc``'s arm-level arguments — ``xi``/``ni`` (events / total, e.g.
``escalc(measure = "PLO", xi = xi, ni = ni)``), ``mi``/``sdi``/``ni`` (mean / SD / n, ``measure =
"MN"``) — and the study-level effect as printed (``estimate``, ``ci.lb``, ``ci.ub``, ``pval``, as
metafor names them). RevMan's import wizard maps the same columns (Study ID, Events, Total, Mean,
SD). Each number carries its verification status, so a filter keeps only verified values.

After review the number columns hold the *final* values (a reviewer's correction replaces the
machine's value; "not reported" empties it); ``machine_*`` keeps what the model extracted,
``decision_*`` says who decided what, and ``review`` says whether the document is fully reviewed.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from extraction_pipeline.core.extraction.grounded import GroundedFields, Scalar, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.progress import review_of
from extraction_pipeline.core.review.values import Decision, decision_label, final_status

ARMS = ("treatment", "control")
REVIEWED = ("xi", "ni", "mi", "sdi", "estimate", "ci.lb", "ci.ub")
OVERALL = "overall"  # the group of a row that carries only the study-level effect
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
    *(f"machine_{name}" for name in REVIEWED),
    *(f"decision_{name}" for name in REVIEWED),
    "review",
)
# Formula-looking text must stay text when the CSV is opened in a spreadsheet.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _machine(fields: GroundedFields, path: str) -> Scalar:
    entry = fields.get(path)
    return entry.value if entry else None


def final_value(fields: GroundedFields, decided: dict[str, Decision], path: str) -> Any:
    """The reviewer's value where one decided, else the machine's."""
    decision = decided.get(path)
    return decision.value if decision is not None else _machine(fields, path)


def study_label(fields: GroundedFields, decided: dict[str, Decision], filename: str) -> Any:
    """How a study is named in the CSV and the pictures: "Surname Year", else its NCT number,
    else its file name."""
    return (
        final_value(fields, decided, "metadata.study_id")
        or final_value(fields, decided, "metadata.nct_number")
        or filename
    )


def _arm_reports(fields: GroundedFields, decided: dict[str, Decision], prefix: str, arm: str) -> bool:
    names = ("events", "total", "mean", "sd", "n")
    return any(final_value(fields, decided, f"{prefix}{name}_{arm}") is not None for name in names)


def _status(fields: GroundedFields, decided: dict[str, Decision], path: str) -> str:
    """The final value's status (a reviewer's correction without a grounded quote says so)."""
    entry, decision = fields.get(path), decided.get(path)
    if decision is None and not (entry and entry.found):
        return ""
    return final_status(entry, decision)


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
    """Rows of the long format, for every completed document's every outcome and arm; an outcome
    reported only as an effect (hazard ratio and CI, no arm data) gets one row, group "overall"."""
    rows: list[dict[str, Any]] = []
    decided = current_decisions(ledger, batch_id)
    for item in batch_item_rows(ledger, batch_id):
        if item["status"] != "completed" or not item["result_json"]:
            continue
        fields = fields_of(json.loads(item["result_json"]))
        mine: dict[str, Decision] = {path: d for (item_id, path), d in decided.items() if item_id == item["id"]}

        review = review_of(item, decided).label
        study = study_label(fields, mine, item["filename"])
        outcomes = sorted({int(path.split(".")[1]) for path in fields if path.startswith("outcomes.")})
        for number in outcomes:
            prefix = f"outcomes.{number}."
            reporting = [arm for arm in ARMS if _arm_reports(fields, mine, prefix, arm)]
            if not reporting and final_value(fields, mine, f"{prefix}effect_estimate") is not None:
                reporting = [OVERALL]  # only the effect (e.g. a hazard ratio): one row, for inverse-variance pooling
            for arm in reporting:
                total = final_value(fields, mine, f"{prefix}total_{arm}")
                n = total if total is not None else final_value(fields, mine, f"{prefix}n_{arm}")
                n_path = f"{prefix}total_{arm}" if total is not None else f"{prefix}n_{arm}"
                paths = {
                    "xi": f"{prefix}events_{arm}",
                    "ni": n_path,
                    "mi": f"{prefix}mean_{arm}",
                    "sdi": f"{prefix}sd_{arm}",
                    "estimate": f"{prefix}effect_estimate",
                    "ci.lb": f"{prefix}ci_lower",
                    "ci.ub": f"{prefix}ci_upper",
                }
                row = {
                    "study": study,
                    "document_id": item["document_id"],
                    "filename": item["filename"],
                    "outcome": number,
                    "outcome_name": final_value(fields, mine, f"{prefix}outcome_name"),
                    "timepoint": final_value(fields, mine, f"{prefix}timepoint"),
                    "outcome_type": final_value(fields, mine, f"{prefix}outcome_type"),
                    "group": arm,
                    "xi": final_value(fields, mine, f"{prefix}events_{arm}"),
                    "ni": n,
                    "mi": final_value(fields, mine, f"{prefix}mean_{arm}"),
                    "sdi": final_value(fields, mine, f"{prefix}sd_{arm}"),
                    "measure": final_value(fields, mine, f"{prefix}effect_measure"),
                    "estimate": final_value(fields, mine, f"{prefix}effect_estimate"),
                    "ci.lb": final_value(fields, mine, f"{prefix}ci_lower"),
                    "ci.ub": final_value(fields, mine, f"{prefix}ci_upper"),
                    "pval": final_value(fields, mine, f"{prefix}p_value"),
                    "status_xi": _status(fields, mine, f"{prefix}events_{arm}"),
                    "status_ni": _status(fields, mine, n_path),
                    "status_mi": _status(fields, mine, f"{prefix}mean_{arm}"),
                    "status_sdi": _status(fields, mine, f"{prefix}sd_{arm}"),
                    "status_estimate": _status(fields, mine, f"{prefix}effect_estimate"),
                    "review": review,
                }
                for name, path in paths.items():
                    row[f"machine_{name}"] = _machine(fields, path)
                    row[f"decision_{name}"] = decision_label(mine.get(path)) or None
                rows.append(row)
    return rows


def meta_analysis_csv(ledger: Ledger, batch_id: int) -> str:
    """The CSV text (UTF-8, header first, empty cells for values not reported)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in meta_analysis_rows(ledger, batch_id):
        writer.writerow({key: _safe(value) for key, value in row.items()})
    return buffer.getvalue()
