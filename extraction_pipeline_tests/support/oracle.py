"""An oracle "model" for real corpus papers: answers built from the hand-annotated gold outcomes
(the corpus's ``gold_outcomes.json``), each value paired with a quote copied from the PDF.

Served through the fake OpenAI-compatible server, it lets a test run real PDFs through the whole
pipeline and check that every printed gold value arrives in the workbook with a verified quote.
Gold values that are not printed in the paper (derived by the annotators, or only in a figure)
are left out of the answer and listed, so a test can say how many it checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from extraction_pipeline_tests.support import pdf_samples

CORPUS = pdf_samples.CORPUS
# Small papers whose gold values are printed in the text (checked against the PDFs).
ORACLE_PAPERS = ("3321528", "3929816", "4493951", "4830045", "4928400", "5571493")
_GOLD_TO_FIELD = {
    "binary": {
        "intervention_events": "events_treatment",
        "intervention_group_size": "total_treatment",
        "comparator_events": "events_control",
        "comparator_group_size": "total_control",
    },
    "continuous": {
        "intervention_mean": "mean_treatment",
        "intervention_standard_deviation": "sd_treatment",
        "intervention_group_size": "n_treatment",
        "comparator_mean": "mean_control",
        "comparator_standard_deviation": "sd_control",
        "comparator_group_size": "n_control",
    },
}
_TEMPLATE_TYPE = {"binary": "dichotomous", "continuous": "continuous"}
MIN_QUOTE_CHARS = 30


@dataclass(frozen=True)
class GoldValue:
    outcome: int  # 1-based index of the outcome entry in the answer
    field: str
    value: int | float


@dataclass
class OracleAnswer:
    pmcid: str
    answer: dict[str, Any]
    gold: list[GoldValue] = field(default_factory=list)
    not_printed: list[str] = field(default_factory=list)
    fingerprint: str = ""  # a quote that identifies the paper inside a prompt

    def as_json(self) -> str:
        return json.dumps(self.answer)


def gold_rows(pmcid: str) -> list[dict[str, Any]]:
    rows = json.loads((CORPUS / "gold_outcomes.json").read_text())
    return [row for row in rows if str(row["pmcid"]) == pmcid]


def pdf_lines(pmcid: str) -> list[str]:
    """The PDF's text lines, as PyMuPDF reads them (the fake model "reads" the PDF itself)."""
    import pymupdf

    with pymupdf.open(CORPUS / "pdf" / f"{pmcid}.pdf") as document:
        return [line.strip() for page in document for line in page.get_text().splitlines() if line.strip()]


def _token(value: int | float) -> re.Pattern[str]:
    text = str(value)
    return re.compile(rf"(?<![\d.]){re.escape(text)}(?![\d]|\.\d)")


def _windows(lines: list[str], index: int) -> str:
    """The line holding a value, widened with following (then preceding) lines until it reads as
    a quote of at least MIN_QUOTE_CHARS characters: a lone table cell "24" says nothing."""
    start = end = index
    quote = lines[index]
    while len(quote) < MIN_QUOTE_CHARS and (end + 1 < len(lines) or start > 0):
        if end + 1 < len(lines):
            end += 1
        else:
            start -= 1
        quote = " ".join(lines[start : end + 1])
    return quote


def find_quote(lines: list[str], value: int | float, companions: list[int | float]) -> str | None:
    """The verbatim passage holding ``value`` that also holds most of its row's other values."""
    pattern = _token(value)
    best: tuple[int, str] | None = None
    for index, line in enumerate(lines):
        if not pattern.search(line):
            continue
        quote = _windows(lines, index)
        score = sum(1 for other in companions if _token(other).search(quote))
        if best is None or score > best[0]:
            best = (score, quote)
    return best[1] if best else None


def build_answer(pmcid: str) -> OracleAnswer:
    lines = pdf_lines(pmcid)
    oracle = OracleAnswer(pmcid, {"outcomes": []})
    for row in gold_rows(pmcid):
        mapping = _GOLD_TO_FIELD[row["outcome_type"]]
        printed = {key: row[key] for key in mapping if row[key] not in ("", None)}
        if row["is_data_in_figure_graphics"] == "TRUE" or not printed:
            oracle.not_printed.extend(f"{row['outcome']}: {key}" for key in printed)
            continue
        entry: dict[str, Any] = {}
        index = len(oracle.answer["outcomes"]) + 1
        for key, value in printed.items():
            quote = find_quote(lines, value, [v for k, v in printed.items() if k != key])
            if quote is None:
                oracle.not_printed.append(f"{row['outcome']}: {key}={value}")
                continue
            entry[mapping[key]] = {"value": value, "quote": quote}
            oracle.gold.append(GoldValue(index, mapping[key], value))
        if not entry:
            continue
        first_quote = next(iter(entry.values()))["quote"]
        entry["outcome_type"] = {"value": _TEMPLATE_TYPE[row["outcome_type"]], "quote": first_quote}
        oracle.answer["outcomes"].append(entry)
        oracle.fingerprint = oracle.fingerprint or first_quote
    return oracle


def skeleton(text: str) -> str:
    """Letters and digits only: how a quote is recognised inside a prompt's differently spaced text."""
    return re.sub(r"[^0-9a-z]", "", text.lower())
