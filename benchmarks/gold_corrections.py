"""Corrections to the published gold of the model-answer rows, each with the paper's own words.

The gold (Yun et al., 2024) was read from the papers by hand, and in a few places it says
something the paper does not: an arm's numbers under the other arm, a value in another unit, a
standard error given as the SD. Scoring a model against such a gold value calls the paper's
number "wrong" and the gold's "right". Each correction below names the rows and fields it
changes and quotes where the paper prints the value; ``benchmarks.real_answers`` scores against
the corrected gold unless asked for the published one (``--published-gold``) and prints which.

A correction never looks at a model's answer: it was made by reading the paper where a model's
number and the gold disagreed, and it applies to every model alike. ``None`` means the paper
prints no such value (a model number there counts as wrong).

    .venv/bin/python -m benchmarks.gold_corrections [--json]   # every correction and its evidence
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class Correction:
    pmcid: str
    rows: tuple[int, ...]
    values: dict[str, Decimal | None]  # the gold row's key ("intervention_mean") -> the paper's value
    evidence: str  # where the paper prints it


def _d(text: str) -> Decimal:
    return Decimal(text)


CORRECTIONS: tuple[Correction, ...] = (
    Correction(
        "5617873",
        (331, 334, 335, 336),
        {"intervention_group_size": _d("47"), "comparator_group_size": _d("45")},
        "'Ninety-two patients were randomized to placebo (n = 45) or aripiprazole (n = 47).'; Table 2 heads its"
        " columns 'Placebo (n = 45)' and 'Aripiprazole (n = 47)'",
    ),
    Correction(
        "5617873",
        (335,),
        {"intervention_mean": _d("-5.2"), "comparator_mean": _d("-4.7")},
        "Table 2, 'ABC-J lethargy/social withdrawal subscale': placebo −4.7 (1.1), aripiprazole −5.2 (1.0)",
    ),
    Correction(
        "5617873",
        (336,),
        {"intervention_mean": _d("-2.0"), "comparator_mean": _d("-1.3")},
        "Table 2, 'CY-BOCS (compulsion scale only)': placebo −1.3 (0.5), aripiprazole −2.0 (0.5)",
    ),
    Correction(
        "5617873",
        (331, 334, 335, 336),
        {"intervention_standard_deviation": None, "comparator_standard_deviation": None},
        "Table 2's legend: 'Data are expressed as least squares mean (standard error)': the bracket is an SE,"
        " and no SD is printed",
    ),
    Correction(
        "5617873",
        (332,),
        {"intervention_mean": _d("2.7")},
        "'... CGI-I scores greater than the placebo group [2.7 (0.1) vs 3.4 (0.1) ...]'",
    ),
    Correction(
        "5571493",
        (244, 245, 246),
        {},  # filled below: every mean and SD of these rows in mg/dl as printed (the gold gives g/L)
        "'The mean glycemic level during the 4-h infusion was 83 ± 5 mg/dl without quinine versus 74 ± 5 mg/dl"
        " with quinine ... 92 ± 7 mg/dl without quinine versus 82 ± 5 mg/dl with quinine'; the results print the"
        " same in g/l ('0.83 ± 0.05, 0.92 ± 0.07, 0.74 ± 0.05 and 0.82 ± 0.05 g/l'), so the gold's g/l stays right",
    ),
    Correction(
        "3546023",
        (75,),
        {
            "intervention_mean": _d("13.72"),
            "intervention_standard_deviation": _d("4.53"),
            "comparator_mean": _d("11.97"),
            "comparator_standard_deviation": _d("4.00"),
        },
        "Table 6, 'Non-smokers (palmvitee, n = 29)', B lymphocyte %: week 0 11.97 ± 4.00, week 24 13.72 ± 4.53"
        " (the gold gives week 0 to the treated arm and week 24 to 'baseline')",
    ),
    Correction(
        "3546023",
        (76,),
        {
            "intervention_mean": _d("14.40"),
            "intervention_standard_deviation": _d("4.03"),
            "comparator_mean": _d("14.06"),
            "comparator_standard_deviation": _d("3.81"),
        },
        "Table 6, 'Smokers (palmvitee, n = 30)', B lymphocyte %: week 0 14.06 ± 3.81, week 24 14.40 ± 4.03",
    ),
    Correction(
        "3546023",
        (73,),
        {"intervention_group_size": Decimal(20)},
        "Table 1, 'CCR, (μg/mg creatinine)': 'n = 16 n = 19 n = 21 n = 20' under nonsmokers placebo, palmvitee, smokers"
        " placebo, palmvitee (the gold gives the comparator this table's 19 but the treated arm its randomized 30)",
    ),
)
# The correction whose values depend on the row.
MG_PER_DL = 100  # the gold's g/L to the paper's mg/dl


def in_other_unit(key: str) -> str:
    """The corrected row's key for a value the paper also prints in another unit (the same quantity:
    a number equal to it is as right as one equal to the gold)."""
    return f"{key} in the paper's other unit"


def corrected(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The row with the corrections that apply to it, and their evidence."""
    fixed, used = dict(row), []
    for correction in CORRECTIONS:
        if str(row["pmcid"]) != correction.pmcid or int(row["id"]) not in correction.rows:
            continue
        values = dict(correction.values)
        if correction.pmcid == "5571493":
            for key in (
                "intervention_mean",
                "intervention_standard_deviation",
                "comparator_mean",
                "comparator_standard_deviation",
            ):
                try:
                    published = Decimal(str(row[key]).replace(",", ""))
                except (KeyError, ArithmeticError):
                    continue  # no value (or no number) in the gold: nothing to convert
                values[key] = published * MG_PER_DL
                values[in_other_unit(key)] = published
        fixed.update(values)
        used.append(correction.evidence)
    return fixed, used


def main() -> None:
    parser = argparse.ArgumentParser(
        description="the corrections to the model-answer rows' gold, with the paper's words"
    )
    parser.add_argument("--json", action="store_true", help="print them as one JSON list")
    args = parser.parse_args()
    listed = [
        {
            "pmcid": correction.pmcid,
            "rows": list(correction.rows),
            "values": {key: (None if value is None else str(value)) for key, value in correction.values.items()}
            or f"every mean and SD × {MG_PER_DL} (mg/dl as printed)",
            "evidence": correction.evidence,
        }
        for correction in CORRECTIONS
    ]
    if args.json:
        print(json.dumps(listed, indent=1, ensure_ascii=False))
        return
    for item in listed:
        print(f"{item['pmcid']} rows {', '.join(map(str, item['rows']))}: {item['values']}\n    {item['evidence']}")
    print(f"{len(listed)} corrections, {len({(i['pmcid'], r) for i in listed for r in i['rows']})} rows")


if __name__ == "__main__":
    main()
