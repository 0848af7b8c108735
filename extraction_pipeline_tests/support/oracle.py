"""An oracle "model" for real corpus papers: answers built from the hand-annotated gold outcomes
(the corpus's ``gold_outcomes.json``), each value paired with a quote copied from the PDF.

Served through the fake OpenAI-compatible server, it lets a test run real PDFs through the whole
pipeline and check that every printed gold value arrives in the workbook, the meta-analysis CSV
and ``evaluate`` under its arm and outcome, with a verified quote.

``build_answer`` answers in the RCT template's arms (version 2): the arms are declared from the
gold rows' intervention and comparator names (quoted where the PDF prints the name, else where it
describes the arm best), one outcome entry per outcome and arm with the gold's numbers, each quoted
from the PDF. An arm number two gold rows share (saline in "1 mg vs saline" and "2 mg vs saline")
is one entry's number. Where two rows give one arm name different numbers for the same outcome
(the corpus's "baseline" of smokers and of nonsmokers), they are two arms: each is named with the
arm it was compared with. ``build_answer_v1`` answers in version 1's two arms (treatment and
control), for the batches that froze it.

Gold values that are not printed in the paper (derived by the annotators, or only in a figure)
are left out of the answer and listed, so a test can say how many it checked.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from extraction_pipeline.core.evaluation.gold import SIDES, GoldOutcome, read_gold
from extraction_pipeline.core.evaluation.matching import arm_words, normalize_name
from extraction_pipeline.core.verification.claimed import PlacedNumber
from extraction_pipeline.core.verification.number_words import words_pattern
from extraction_pipeline_tests.support import pdf_samples

CORPUS = pdf_samples.CORPUS
# Small papers whose gold values are printed in the text (checked against the PDFs): the daemon's
# end-to-end test runs these; the in-process corpus test runs every paper of the gold.
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
    field: str  # version 2: events/total/mean/sd/n; version 1: events_treatment, ...
    value: int | float
    outcome_name: str = ""  # the gold outcome (version 2)
    arm: str = ""  # the name of the arm it belongs to, as the answer declares it (version 2)
    # The quote is a place that prints the number as its outcome's and arm's (version 2): False
    # when the paper prints it nowhere so (a number the annotators derived, another population).
    placed: bool = True

    @property
    def path(self) -> str:
        return f"outcomes.{self.outcome}.{self.field}"


@dataclass(frozen=True)
class GoldComparison:
    """A gold row the answer carries numbers for: its outcome, its two arms as the gold names them
    and as the answer declares them."""

    outcome_name: str
    gold_intervention: str
    gold_comparator: str
    arm: str
    comparator: str


@dataclass
class OracleAnswer:
    pmcid: str
    answer: dict[str, Any]
    gold: list[GoldValue] = field(default_factory=list)
    not_printed: list[str] = field(default_factory=list)
    fingerprint: str = ""  # a quote that identifies the paper inside a prompt
    comparisons: list[GoldComparison] = field(default_factory=list)
    gold_numbers: int = 0  # distinct gold arm numbers of the paper, printed or not (version 2)
    in_figures: int = 0  # of those, the ones only in a figure

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
    # A whole number is also printed with zero decimals ("9" as "9.0"), or in words ("ten volunteers").
    zeros = r"(?:\.0+)?" if isinstance(value, int) else ""
    digits = rf"(?<![\d.]){re.escape(text)}{zeros}(?![\d]|\.\d)"
    worded = words_pattern(value) if isinstance(value, int) else None
    return re.compile(rf"{digits}|(?i:(?<![\w-]){worded}(?![\w-]))" if worded else digits)


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


def find_quote(
    lines: list[str],
    value: int | float,
    companions: list[int | float],
    about: str = "",
    fits: Callable[[str], bool] | None = None,
) -> str | None:
    """The verbatim passage holding ``value`` that also holds most of its row's other values; of
    equals, the one nearest the words of ``about`` (its outcome: a careful reader quotes the row or
    sentence about it, not the first place the digits appear, a reference or a DOI). With ``fits``,
    the best passage it accepts (the paper prints the number there as that outcome's and arm's),
    else the best passage."""
    pattern = _token(value)
    words = _words(about)
    ranked: list[tuple[tuple[int, int, int], int, str]] = []
    for index, line in enumerate(lines):
        if not pattern.search(line):
            continue
        quote = _windows(lines, index)
        score = sum(1 for other in companions if _token(other).search(quote))
        shared = len(words & _words(" ".join(lines[max(0, index - 2) : index + 3])))
        ranked.append(((min(shared, 1), score, shared), -index, quote))
    ranked.sort(reverse=True)
    if fits is not None:
        for _rank, _index, quote in ranked:
            if fits(quote):
                return quote
    return ranked[0][2] if ranked else None


class _Reader:
    """What a careful reader checks before quoting: the paper's text and line boxes, and a
    passage accepted when the number's place there names its outcome and arm (the pipeline's
    context check)."""

    def __init__(self, pmcid: str, arms: tuple[str, ...]) -> None:
        from extraction_pipeline.core.pdf.engine import EngineOptions, parse_pdf
        from extraction_pipeline.core.pdf.model import ParsedDocument
        from extraction_pipeline.core.verification.grounding import Grounder
        from extraction_pipeline.core.verification.vocabulary import Vocabulary

        # Without tables: the oracle quotes lines of the page text, which grounding finds there
        # before any table's text, so these are the places a batch reads (and 10 s sooner).
        result = parse_pdf(CORPUS / "pdf" / f"{pmcid}.pdf", EngineOptions(table_detection="off"))
        self.parsed = ParsedDocument(pmcid, result["pages_text"], layout=result["layout"])
        self.grounder = Grounder(self.parsed)
        self.vocabulary = Vocabulary(self.parsed)
        self.arms = arms

    def fits(
        self,
        value: int | float,
        kind: str,
        outcome: str,
        arm: str,
        total: float | None = None,
        beside: tuple[PlacedNumber, ...] = (),
    ) -> Callable[[str], bool]:
        """A quote is accepted when the context check finds nothing to say about the number there,
        checked ``beside`` the other arms' numbers of the outcome already quoted (one printed
        number is not two arms')."""
        from extraction_pipeline.core.verification.context import placed_flags

        def accepted(quote: str) -> bool:
            number = self.placed(value, kind, outcome, arm, quote, total)
            return number is not None and "n" not in placed_flags(
                [*beside, number], self.arms, self.parsed, self.vocabulary
            )

        return accepted

    def placed(
        self, value: int | float, kind: str, outcome: str, arm: str, quote: str, total: float | None = None
    ) -> PlacedNumber | None:
        """The number as the checks see it where grounding finds ``quote``; None when it is not
        verified there as printed."""
        from extraction_pipeline.core.verification.grounding import EXACT, VERIFIED, normalize, value_match

        verdict = self.grounder.ground(value, quote)
        if (
            value_match(value, normalize(quote)) != EXACT
            or verdict.status != VERIFIED
            or verdict.page is None
            or verdict.start is None
            or verdict.end is None
        ):
            return None
        return PlacedNumber("n", kind, value, verdict.page, verdict.start, verdict.end, outcome, arm, total=total)


@functools.cache
def _reader(pmcid: str, arms: tuple[str, ...]) -> _Reader:
    """One parse per paper and process: several tests build the same paper's answer."""
    return _Reader(pmcid, arms)


def _words(text: str) -> set[str]:
    """A text's words of four letters or more, on their first five (word forms)."""
    return {word[:5] for word in re.findall(r"[a-z]{4,}", text.lower())}


def build_answer_v1(pmcid: str) -> OracleAnswer:
    """The answer in version 1's two arms (``*_treatment`` / ``*_control``)."""
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


@functools.cache
def _gold() -> tuple[GoldOutcome, ...]:
    return tuple(read_gold(CORPUS / "gold_outcomes.json"))


def corpus_papers() -> tuple[str, ...]:
    """Every paper the gold has rows for."""
    return tuple(sorted({row.study for row in _gold()}))


def _printed(value: float) -> int | float:
    """The gold number as the paper prints it (24, not 24.0)."""
    return int(value) if value.is_integer() else value


def find_text_quote(lines: list[str], text: str) -> str:
    """The passage that prints ``text`` (spacing and punctuation aside), else the line sharing
    most of its words: where the paper describes it."""
    wanted = skeleton(text)
    for index in range(len(lines)):
        for width in (1, 2, 3):
            window = " ".join(lines[index : index + width])
            if wanted and wanted in skeleton(window):
                return window if len(window) >= MIN_QUOTE_CHARS else _windows(lines, index)
    words = arm_words(text)
    best = max(range(len(lines)), key=lambda i: (len(words & arm_words(lines[i])), -i))
    return _windows(lines, best)


def _arm_names(rows: list[GoldOutcome]) -> dict[tuple[int, str], str]:
    """Each row side's arm as the answer declares it. One arm is one set of words (so "Dw 5% +
    quinine" is "Dw 5% with quinine"), named as first printed; an arm name that carries two
    different numbers for one field of one outcome is two arms, each named with its partner."""
    first_name: dict[frozenset[str], str] = {}
    seen: dict[tuple[str, frozenset[str], str], set[float]] = {}
    for row in rows:
        for side in SIDES:
            words = frozenset(arm_words(row.arm_name(side)))
            first_name.setdefault(words, row.arm_name(side) or side)
            for name, value in row.arm_values(side).items():
                seen.setdefault((normalize_name(row.outcome), words, name), set()).add(value)
    split = {(outcome, words) for (outcome, words, _name), values in seen.items() if len(values) > 1}
    names = {}
    for number, row in enumerate(rows):
        for side, partner in (SIDES, SIDES[::-1]):
            words = frozenset(arm_words(row.arm_name(side)))
            name = first_name[words]
            if (normalize_name(row.outcome), words) in split:
                name = f"{name} ({first_name[frozenset(arm_words(row.arm_name(partner)))]})"
            names[(number, side)] = name
    return names


def build_answer(pmcid: str) -> OracleAnswer:
    """The answer in the template's arms (version 2), from every gold row of the paper."""
    lines = pdf_lines(pmcid)
    rows = [row for row in _gold() if row.study == pmcid]
    names = _arm_names(rows)
    reader = _reader(pmcid, tuple(dict.fromkeys(names.values())))
    oracle = OracleAnswer(pmcid, {"arms": [], "outcomes": []})
    entries: dict[tuple[str, str], int] = {}  # (outcome, arm) -> 1-based entry number
    numbers: set[tuple[str, str, str]] = set()
    # (outcome, field) -> the arms' numbers of it quoted so far, as the checks see them: a careful
    # reader quotes each arm's own printing of a number two arms share, not one printing twice.
    quoted: dict[tuple[str, str], list[PlacedNumber]] = {}
    for number, row in enumerate(rows):
        companions = [_printed(v) for v in row.values.values()]
        quoted_sides = []
        for side in SIDES:
            arm = names[(number, side)]
            for name, raw in row.arm_values(side).items():
                key = (normalize_name(row.outcome), arm, name)
                if key in numbers:
                    continue  # the same arm's number in another row: one number
                numbers.add(key)
                oracle.in_figures += row.in_figure
                value = _printed(raw)
                others = [c for c in companions if c != value]
                total = row.arm_values(side).get("total")
                beside = quoted.setdefault((normalize_name(row.outcome), name), [])
                total_printed = _printed(total) if total is not None else None
                fits = reader.fits(value, name, row.outcome, arm, total_printed, tuple(beside))
                quote = None if row.in_figure else find_quote(lines, value, others, row.outcome, fits)
                if quote is None:
                    oracle.not_printed.append(f"{row.outcome}: {arm}: {name}={value}")
                    continue
                if (found := reader.placed(value, name, row.outcome, arm, quote, total_printed)) is not None:
                    beside.append(replace(found, path=f"beside {len(beside)}"))
                entry_key = (row.outcome, arm)
                if entry_key not in entries:
                    oracle.answer["outcomes"].append(
                        {
                            "outcome_name": {"value": row.outcome, "quote": find_text_quote(lines, row.outcome)},
                            "outcome_type": {"value": row.outcome_type, "quote": quote},
                            "arm": {"value": arm, "quote": quote},
                        }
                    )
                    entries[entry_key] = len(oracle.answer["outcomes"])
                index = entries[entry_key]
                oracle.answer["outcomes"][index - 1][name] = {"value": value, "quote": quote}
                oracle.gold.append(GoldValue(index, name, value, row.outcome, arm, placed=fits(quote)))
                oracle.fingerprint = oracle.fingerprint or quote
            if (row.outcome, arm) in entries:
                quoted_sides.append(arm)
        if len(quoted_sides) == 2:
            oracle.comparisons.append(GoldComparison(row.outcome, row.intervention, row.comparator, *quoted_sides))
    oracle.gold_numbers = len(numbers)
    declared = dict.fromkeys(arm for _outcome, arm in entries)
    for arm in declared:
        oracle.answer["arms"].append({"arm_name": {"value": arm, "quote": find_text_quote(lines, arm)}})
    return oracle


def skeleton(text: str) -> str:
    """Letters and digits only: how a quote is recognised inside a prompt's differently spaced text."""
    return re.sub(r"[^0-9a-z]", "", text.lower())
