"""The long-format CSV a meta-analyst loads into R or RevMan: one row per outcome × arm, and one per
printed comparison.

Column names follow ``metafor::escalc``'s arm-level arguments — ``xi``/``ni`` (events / total, e.g.
``escalc(measure = "PLO", xi = xi, ni = ni)``), ``mi``/``sdi``/``ni`` (mean / SD / n, ``measure =
"MN"``) — and the effect as printed (``estimate``, ``ci.lb``, ``ci.ub``, ``pval``, as metafor names
them). RevMan's import wizard maps the same columns (Study ID, Events, Total, Mean, SD, and the
group's name). Each number carries its verification status (``status_xi``, ...), so a filter on
``verified`` keeps only verified values: a value a check flagged reads ``verified, flagged`` (any
status with a flag: ", flagged"; ``core/review/status_words.py``), never plain ``verified``.

Arms (base template version 2): ``group`` is the arm's name as the paper prints it and ``arm`` its
stable id within the study (``arms.2``), with its ``subgroup`` (an arm of the men, of the smokers)
and what it received (``intervention``); ``population`` is the outcome's analysis population (ITT,
per protocol). Rows of one study, ``outcome`` and ``population`` are one outcome at one time point,
so every pairwise comparison can be built from its arm rows (``escalc`` on two of them, or
``metafor::to.wiide``). A printed between-arm effect is a row of its own: ``comparison`` names it
(``comparisons.3``), ``group``/``arm`` is the intervention arm and ``comparator``/``comparator_arm``
the arm it was compared with; its arm columns are empty.

Batches frozen on version 1 (two arms) keep their rows as before: ``group`` treatment / control,
each carrying the outcome's effect, or one ``overall`` row for an effect without arm data; ``arm``
repeats the group and ``comparison`` names the outcome entry the effect belongs to.

After review the number columns hold the *final* values (a reviewer's correction replaces the
machine's value; "not reported" empties it); ``machine_*`` keeps what the model extracted,
``decision_*`` says who decided what, and ``review`` says whether the document is fully reviewed.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from functools import partial
from typing import Any

from extraction_pipeline.core.extraction.grounded import GroundedFields, Scalar, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.progress import review_of
from extraction_pipeline.core.review.values import Decision, decision_label, final_status
from extraction_pipeline.core.templates.arms import RESULT_FIELDS as RESULTS
from extraction_pipeline.core.templates.arms import Arm, StudyArms, study_arms

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
    # Arms and comparisons (appended: readers of earlier files find every column where it was).
    "arm",
    "subgroup",
    "intervention",
    "population",
    "comparison",
    "comparator",
    "comparator_arm",
)
# The effect columns and the template fields they read (an outcome entry's in version 1, a
# comparison's in version 2).
EFFECT_COLUMNS = {
    "estimate": "effect_estimate",
    "ci.lb": "ci_lower",
    "ci.ub": "ci_upper",
    "pval": "p_value",
}
# Formula-looking text must stay text when the CSV is opened in a spreadsheet.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _machine(fields: GroundedFields, path: str) -> Scalar:
    entry = fields.get(path)
    return entry.value if entry else None


def final_value(fields: GroundedFields, decided: dict[str, Decision], path: str) -> Any:
    """The reviewer's value where one decided, else the machine's."""
    decision = decided.get(path)
    return decision.value if decision is not None else _machine(fields, path)


def study_label(fields: GroundedFields, decided: dict[str, Decision], item: ItemListing) -> Any:
    """How a study is named in the CSV and the pictures: the form's study id ("Surname Year"),
    else its NCT number (both extracted and reviewed), else the document's first author and year
    as read from the PDF at registration (a label, not data: better than a file name), else its
    file name."""
    paper = f"{item['first_author']} {item['year']}" if item.get("first_author") and item.get("year") else ""
    return (
        final_value(fields, decided, "metadata.study_id")
        or final_value(fields, decided, "metadata.nct_number")
        or paper
        or item["filename"]
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
    """Rows of the long format for every completed document: per outcome, one row per arm with
    numbers, then (version 2) one row per printed comparison; a version-1 outcome reported only as
    an effect (hazard ratio and CI, no arm data) gets one row, group "overall"."""
    rows: list[dict[str, Any]] = []
    decided = current_decisions(ledger, batch_id)
    for item in batch_item_rows(ledger, batch_id):
        if item["status"] != "completed" or not item["result_json"]:
            continue
        fields = fields_of(json.loads(item["result_json"]))
        mine: dict[str, Decision] = {path: d for (item_id, path), d in decided.items() if item_id == item["id"]}
        identity = {
            "study": study_label(fields, mine, item),
            "document_id": item["document_id"],
            "filename": item["filename"],
        }
        review = review_of(item, decided).label
        view = study_arms(list(fields), partial(final_value, fields, mine))
        document_rows = _version_1_rows(fields, mine, view) if view.version == 1 else _arm_rows(fields, mine, view)
        rows.extend({**identity, **row, "review": review} for row in document_rows)
    return rows


def _numbers(fields: GroundedFields, decided: dict[str, Decision], paths: Mapping[str, str | None]) -> dict[str, Any]:
    """The number columns (final values), their statuses and what machine and reviewer said, for
    the paths each column reads (None: the row has no such number)."""
    row: dict[str, Any] = {}
    for column in (*REVIEWED, "pval"):
        path = paths.get(column)
        row[column] = final_value(fields, decided, path) if path else None
    for column in ("xi", "ni", "mi", "sdi", "estimate"):
        path = paths.get(column)
        row[f"status_{column}"] = _status(fields, decided, path) if path else ""
    for name in REVIEWED:
        path = paths.get(name)
        row[f"machine_{name}"] = _machine(fields, path) if path else None
        row[f"decision_{name}"] = (decision_label(decided.get(path)) or None) if path else None
    return row


def _n_path(fields: GroundedFields, decided: dict[str, Decision], total: str | None, n: str | None) -> str | None:
    """An arm's size: its events' denominator where given, else its n (means and SDs)."""
    if total is not None and final_value(fields, decided, total) is not None:
        return total
    return n if n is not None else total


def _arm_rows(fields: GroundedFields, decided: dict[str, Decision], view: StudyArms) -> list[dict[str, Any]]:
    """Version 2: per outcome, each arm's numbers, then each printed comparison naming both arms."""
    rows: list[dict[str, Any]] = []
    for number, outcome in enumerate(view.outcomes, start=1):
        described = {
            "outcome": number,
            "outcome_name": outcome.name,
            "timepoint": outcome.timepoint,
            "outcome_type": outcome.outcome_type,
            "population": outcome.population,
        }
        for result in outcome.results:
            paths = result.paths
            if not any(final_value(fields, decided, paths[name]) is not None for name in RESULTS if name in paths):
                continue  # an entry naming its arm and nothing else: no numbers to analyse
            arm = view.arm(result.arm)
            numbers = {
                "xi": paths.get("events"),
                "ni": _n_path(fields, decided, paths.get("total"), paths.get("n")),
                "mi": paths.get("mean"),
                "sdi": paths.get("sd"),
            }
            rows.append(
                {
                    **described,
                    "group": arm.name if arm else result.arm_name,
                    "arm": result.arm,
                    "subgroup": arm.subgroup if arm else None,
                    "intervention": _arm_field(fields, decided, arm, "intervention"),
                    **_numbers(fields, decided, numbers),
                    "measure": None,
                }
            )
        for comparison in outcome.comparisons:
            paths = comparison.paths
            effect = {column: paths.get(field) for column, field in EFFECT_COLUMNS.items()}
            if not any(final_value(fields, decided, path) for path in effect.values() if path):
                continue
            arm, comparator = view.arm(comparison.arm), view.arm(comparison.comparator)
            rows.append(
                {
                    **described,
                    "group": arm.name if arm else comparison.arm_name,
                    "arm": comparison.arm,
                    "subgroup": arm.subgroup if arm else None,
                    "intervention": _arm_field(fields, decided, arm, "intervention"),
                    **_numbers(fields, decided, effect),
                    "measure": final_value(fields, decided, paths["effect_measure"])
                    if "effect_measure" in paths
                    else None,
                    "comparison": comparison.key,
                    "comparator": comparator.name if comparator else comparison.comparator_name,
                    "comparator_arm": comparison.comparator,
                }
            )
    return rows


def _arm_field(fields: GroundedFields, decided: dict[str, Decision], arm: Arm | None, name: str) -> Any:
    path = arm.paths.get(name) if arm else None
    return final_value(fields, decided, path) if path else None


def _version_1_rows(fields: GroundedFields, decided: dict[str, Decision], view: StudyArms) -> list[dict[str, Any]]:
    """Version 1, as before arms were declared: per outcome entry a treatment and a control row
    (each carrying the entry's effect), or one "overall" row for an effect without arm data."""
    rows: list[dict[str, Any]] = []
    for outcome in view.outcomes:
        number = int(outcome.key.split(".")[1])
        prefix = f"{outcome.key}."
        reporting = [arm for arm in ARMS if _arm_reports(fields, decided, prefix, arm)]
        if not reporting and final_value(fields, decided, f"{prefix}effect_estimate") is not None:
            reporting = [OVERALL]  # only the effect (e.g. a hazard ratio): one row, for inverse-variance pooling
        effect = {column: f"{prefix}{field}" for column, field in EFFECT_COLUMNS.items()}
        for arm in reporting:
            total = f"{prefix}total_{arm}"
            paths = {
                "xi": f"{prefix}events_{arm}",
                "ni": total if final_value(fields, decided, total) is not None else f"{prefix}n_{arm}",
                "mi": f"{prefix}mean_{arm}",
                "sdi": f"{prefix}sd_{arm}",
                **effect,
            }
            rows.append(
                {
                    "outcome": number,
                    "outcome_name": outcome.name,
                    "timepoint": outcome.timepoint,
                    "outcome_type": outcome.outcome_type,
                    "group": arm,
                    **_numbers(fields, decided, paths),
                    "measure": final_value(fields, decided, f"{prefix}effect_measure"),
                    "arm": "" if arm == OVERALL else arm,
                    "comparison": outcome.key if outcome.comparisons else None,
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
