"""Benchmark: does ``verified`` mean right? Real model answers replayed through the pipeline's checks.

The trial corpus holds the answers GPT-4, GPT-3.5 and Mistral-7B gave for its papers' outcome
comparisons (``model_answers/<model>_<binary|continuous>_outcomes.json``: each row is a gold row
plus ``output``, the model's raw YAML answer). The models gave numbers without quotes; this
replays each number as a quoting model would give it, grounds it against the parsed PDF and runs
the plausibility checks — the code a batch runs (``ground_entries`` with the ``Grounder``, then
``add_checks``), one answer per row in the template's arms: the row's intervention and comparator
declared as arms, one outcome entry per arm. A number "passes" when it comes back ``verified``
with no flag: what a reviewer relying on the statuses would import unread.

Reading the answers. The first ``intervention:`` and ``comparator:`` blocks are read (models add
prose or extra blocks after them); in each, ``events``/``group_size`` (binary) or
``mean``/``standard_deviation``/``group_size`` (continuous). A value counts as a number given when
its text starts with a number (quotes and brackets aside: ``5.1±1.6`` is 5.1, ``[39.7, 17.2]`` is
39.7); ``x`` and text (``p > 0.05``) are not given. A number is right when it equals the gold
value numerically (or the gold's value in the paper's other unit, where a correction says the
paper prints both); a number where the gold has none is wrong. The gold is read only to score.

The quote rule (the same for right and wrong numbers; it reads the model's answer, the row's
question — its outcome — and the paper's text, never the gold). Spans: each line of each page's
text, widened with the lines after it (then before) until it holds at least 30 characters (a lone
table cell "24" carries its neighbours, often the other arms' cells). A candidate span prints the
number's digits and either prints it as that kind of value, or prints another of the model's
numbers for the row (another number: the other arm's equal group size does not count), or shares a
word with the outcome (the digits alone, in a running header or a DOI, do not make a quote); no
span is taken from the reference list (from a "References" heading to the next table or figure
caption). Of the candidates, the quote is the one ranked highest by, in order:
(1) it prints the number as that kind of value beside the model's partner number — a mean before
the model's SD for that arm ("4.6 ± 2.1", "4.6 (2.1)"), an SD after the model's mean, events over
the model's group size ("11/49", "11 of 49"), a group size under the model's events; (2) it prints
the number as that kind of value beside any number (a mean before an SD, an SD after a mean,
events before "/", "of" or "(22 %", a group size after "n =" or "/"); (3) it prints the number
standalone with its sign (not the "2" of "H2"); (4) how many of the model's other numbers for the
row (both arms) it prints — both arms in one row; (5) how many of the outcome's words it shares
(a word matches on its first five letters; short and common words left out); then the first in
the document. Where both arms' equal numbers of one kind would be quoted from one span and the
paper prints the number again (the best span sharing no line with it), the two printings are
given to the arms whose words they print more ("Group H2 (n = 50)" to the H2 arm): a quoting
model quotes each arm's own printing. Without a candidate the quote is
the span sharing most of the outcome's words (the first of equals): grounding then answers that
the value is not in its quote.

Scored per model: numbers given, right and wrong, how many of each pass, the precision of the
passing numbers and the share of wrong and of right numbers that pass; for each double-extraction
pair (the first model's numbers, the second model's answer to the same row beside it, compared by
the pipeline's ``align`` and ``compare``) the same with a disagreement — or a number only the first
model gave — counted as a flag. Figures for the corpus papers split into halves by sorted PMCID
(first and second half of the papers with answers) and in total; "what stops" counts, for the
wrong numbers that do not pass, the first reason (a flag, else the grounding reason, else the
disagreement).

    .venv/bin/python -m benchmarks.real_answers [--corpus DIR] [--models gpt4 gpt35 mistral7B]
        [--json] [--list-passing-wrong] [--list-stopped-right] [--published-gold]

The gold is scored as corrected by ``benchmarks.gold_corrections`` (each correction quotes where
the paper prints the value; ``--published-gold`` scores against the gold as published).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from benchmarks.gold_corrections import corrected, in_other_unit
from extraction_pipeline.core.extraction.consensus import AGREE, align, compare
from extraction_pipeline.core.extraction.grounded import GroundedFields, add_checks, ground_entries
from extraction_pipeline.core.llm.answer_parsing import parse_answer
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.verification.grounding import EXACT, VERIFIED, Grounder, normalize, value_match
from extraction_pipeline.core.verification.number_words import number_words
from extraction_pipeline.core.verification.vocabulary import Vocabulary
from extraction_pipeline_tests.support.pdf_samples import CORPUS  # the trial corpus (EXTRACTION_CORPUS)

MODELS = ("gpt4", "gpt35", "mistral7B")
PAIRS = (("gpt4", "gpt35"), ("gpt4", "mistral7B"))
SIDES = ("intervention", "comparator")
# The answer's keys per outcome type, and the template field each fills.
KINDS = {
    "binary": {"events": "events", "group_size": "total"},
    "continuous": {"mean": "mean", "standard_deviation": "sd", "group_size": "n"},
}
TEMPLATE_TYPE = {"binary": "dichotomous", "continuous": "continuous"}
# The number each kind is printed beside, in the same arm's answer (mean ± SD, events / total).
PARTNER = {"mean": "sd", "sd": "mean", "events": "total", "total": "events", "n": None}
MIN_QUOTE_CHARS = 30
STOP_WORDS = {"the", "and", "for", "with", "from", "after", "during", "between", "number", "patients", "total"}

VALUE_START = re.compile(r"""^["'\[(]*(-?\d+(?:,\d{3})*(?:\.\d+)?)""")
NUM = r"(-?\d+(?:,\d{3})*(?:\.\d+)?)"
STANDALONE = re.compile(r"(?<![a-z0-9.,])(?<![a-z]-)-?\d+(?:,\d{3})*(?:\.\d+)?(?!\d)")
# How each kind is printed, as text around the number (normalized: lower case, "±" for "+/-").
AFTER = {"mean": re.compile(rf"^\s*(?:±|\(|\[)\s*{NUM}"), "events": re.compile(rf"^\s*(?:/|of\s)\s*{NUM}")}
BEFORE = {
    "sd": re.compile(rf"{NUM}\s*(?:±|\(|\[)\s*$"),
    "total": re.compile(rf"(?:{NUM}\s*(?:/|of\s)|\bn\s*=)\s*$"),
    "n": re.compile(rf"(?:{NUM}\s*(?:/|of\s)|\bn\s*=)\s*$"),
}
EVENTS_PERCENT = re.compile(rf"^\s*\(\s*{NUM}\s*%")
# A group's size in prose: the number, a word or two, then whom it counts ("49 patients", "ten
# healthy volunteers").
PEOPLE = re.compile(
    r"^\s+(?:[a-z-]+\s+){0,2}?(?:patients|participants|subjects|volunteers|adults|children|women|men|infants"
    r"|individuals|people|persons|students|mothers|neonates|smokers|dispensers|families|households)\b"
)


@dataclass(frozen=True)
class Replayed:
    """One number a model gave, with the quote the rule chose for it."""

    model: str
    pmcid: str
    row: int  # the row's id (the same question across models)
    arm: str  # intervention or comparator
    kind: str  # the template field: events, total, mean, sd, n
    value: Decimal
    gold: Decimal | None
    quote: str
    gold_other_unit: Decimal | None = None  # the same gold value as the paper also prints it in another unit

    @property
    def right(self) -> bool:
        return self.gold is not None and self.value in (self.gold, self.gold_other_unit)


@dataclass(frozen=True)
class Verdict:
    """The pipeline's verdict on a replayed number; ``agreement`` only within a pair."""

    number: Replayed
    status: str
    reason: str
    flags: tuple[str, ...]
    agreement: str | None = None

    @property
    def passes(self) -> bool:
        """Verified with no flag (and, within a pair, both models gave the same number)."""
        return self.status == VERIFIED and not self.flags and self.agreement in (None, AGREE)

    @property
    def stopped_by(self) -> str:
        if self.flags:
            return "flag: " + re.sub(r"-?\d+(?:\.\d+)?", "N", self.flags[0])
        if self.status != VERIFIED:
            return f"{self.status}: {self.reason}"
        return f"double extraction: {self.agreement}"


def as_decimal(text: Any) -> Decimal | None:
    if text in (None, ""):
        return None
    try:
        return Decimal(str(text).replace(",", "").strip())
    except InvalidOperation:
        return None


def read_answer(output: str, outcome_type: str) -> dict[str, dict[str, Decimal]]:
    """side -> template field -> the number the model gave (see the module's "Reading")."""
    keys = KINDS[outcome_type]
    found: dict[str, dict[str, Decimal]] = {}
    side: str | None = None
    indent = 0
    for line in output.splitlines():
        stripped = line.strip().strip("`")
        depth = len(line) - len(line.lstrip())
        head, _, rest = stripped.partition(":")
        if head in SIDES and not rest.strip() and head not in found:
            side, indent = head, depth
            found[side] = {}
        elif side and stripped and depth <= indent:
            side = None  # the block ended: later blocks ("outcome:", nested repeats) are not read
        elif side and head in keys and keys[head] not in found[side]:
            match = VALUE_START.match(rest.strip())
            if match and (number := as_decimal(match.group(1))) is not None:
                found[side][keys[head]] = number
    return found


class Paper:
    """A parsed corpus paper: its spans for quoting and its grounder (built once, reused)."""

    def __init__(self, parsed: ParsedDocument) -> None:
        self.parsed = parsed
        self.grounder = Grounder(parsed)
        # Page text only: a parsed table's text is a second rendering of the same cells, where the
        # parser can drop a decimal point ("26/402(65) ."), and grounding matches the page's first.
        # The reference list is no quote for a trial's result (a "12" in "2007;37(4):605–12").
        self.vocabulary = Vocabulary(parsed)
        widened_pages = [
            (page, widened(self.lines_outside_references(page, text)))
            for page, text in enumerate(parsed.pages_text, start=1)
        ]
        self.spans = [span for _page, spans in widened_pages for span, _lines in spans]
        # Which lines of which page each span is made of: two spans with a line in common can
        # quote the same printed number.
        self.lines = [{(page, line) for line in lines} for page, spans in widened_pages for _span, lines in spans]
        self.normalized = [normalize(span) for span in self.spans]

    def quote(
        self,
        kind: str,
        value: Decimal,
        partner: Decimal | None,
        others: list[Decimal],
        outcome: str,
        elsewhere_than: int | None = None,
    ) -> int | None:
        """The rule of the module's docstring: the index of the quoted span, None for none. With
        ``elsewhere_than``, the best span sharing no line with that one, if there is any."""
        words = outcome_words(outcome)
        avoid = self.lines[elsewhere_than] if elsewhere_than is not None else set()
        best: tuple[tuple[int, ...], int] | None = None
        for index, text in enumerate(self.normalized):
            match = value_match(str(value), text)
            if match is None or self.lines[index] & avoid:
                continue
            printed = printed_as(kind, value, text)
            beside = sum(1 for other in others if value_match(str(other), text) == EXACT)
            shared = shared_words(words, text)
            if not printed and not beside and not shared:
                continue  # the digits alone, away from the outcome and the answer (a DOI, a reference)
            with_partner = partner is not None and partner in printed
            rank = (int(with_partner), int(bool(printed)), int(match == EXACT), beside, shared)
            if best is None or rank > best[0]:  # strictly better: the first in the document wins ties
                best = (rank, index)
        return best[1] if best is not None else None

    def names(self, arm: str, index: int) -> int:
        """How many of an arm's words ("h2" of "H2 (haloperidol 2 mg)" too) the span prints."""
        words = {w for w in re.findall(r"[a-z][a-z0-9]+", arm.lower()) if w not in STOP_WORDS}
        return len(words & set(re.findall(r"[a-z][a-z0-9]+", self.normalized[index])))

    def lines_outside_references(self, page: int, text: str) -> list[str]:
        lines, offset = [], 0
        for line in text.splitlines(keepends=True):
            if line.strip() and not self.vocabulary.in_references(page, offset):
                lines.append(line.strip())
            offset += len(line)
        return lines

    def about(self, outcome: str) -> str:
        """The span sharing most of the outcome's words (the first of equals)."""
        words = outcome_words(outcome)
        return self.spans[max(range(len(self.spans)), key=lambda i: (shared_words(words, self.normalized[i]), -i))]


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def widened(lines: list[str]) -> list[tuple[str, range]]:
    """Each line, with the lines after it (then before) until it reads as a quote; with the
    indices of the lines it is made of."""
    spans = []
    for index in range(len(lines)):
        start = end = index
        span = lines[index]
        while len(span) < MIN_QUOTE_CHARS and (end + 1 < len(lines) or start > 0):
            if end + 1 < len(lines):
                end += 1
            else:
                start -= 1
            span = " ".join(lines[start : end + 1])
        spans.append((span, range(start, end + 1)))
    return spans


def printed_as(kind: str, value: Decimal, text: str) -> set[Decimal | None]:
    """The partner numbers beside which ``text`` prints ``value`` as a ``kind``; ``None`` stands
    for a form without a partner ("n = 49", "11 (22 %)"). Empty: not printed as that kind."""
    partners: set[Decimal | None] = set()
    printed = [(m.start(), m.end(), as_decimal(m.group())) for m in STANDALONE.finditer(text)]
    for start, end, number in [*printed, *number_words(text)]:
        if number != value:
            continue
        before, after = text[:start], text[end:]
        if kind in ("n", "total") and PEOPLE.match(after):
            partners.add(None)
        if kind in AFTER and (found := AFTER[kind].match(after)):
            partners.add(as_decimal(found.group(1)))
        if kind in BEFORE and (found := BEFORE[kind].search(before)):
            partners.add(as_decimal(found.group(1)) if found.group(1) else None)
        if kind == "events" and EVENTS_PERCENT.match(after):
            partners.add(None)
    return partners


def outcome_words(outcome: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]{3,}", outcome.lower()) if w not in STOP_WORDS}


def shared_words(words: set[str], text: str) -> int:
    return len(words & {w[:5] for w in re.findall(r"[a-z]{3,}", text)})


def replay_row(model: str, row: dict[str, Any], paper: Paper) -> tuple[list[Replayed], GroundedFields]:
    """The row's numbers as the model gave them, each with its quote, and the answer grounded and
    checked as a batch grounds one (outcome entry 1: the intervention, 2: the comparator)."""
    kind_of = KINDS[row["outcome_type"]]
    given = read_answer(row["output"], row["outcome_type"])
    about = paper.about(row["outcome"])
    # The span each number is quoted from, by (side, kind).
    spans: dict[tuple[str, str], int | None] = {}
    for side in SIDES:
        numbers = given.get(side, {})
        for kind, value in numbers.items():
            # The model's other numbers for the row, not the same digits again (the other arm's equal n).
            others = [n for found in given.values() for n in found.values() if n != value]
            spans[(side, kind)] = paper.quote(kind, value, numbers.get(PARTNER[kind] or ""), others, row["outcome"])
    first, second = SIDES
    for kind, value in given.get(first, {}).items():
        found = spans[(first, kind)]
        if found is None or given.get(second, {}).get(kind) != value or spans.get((second, kind)) != found:
            continue
        # Both arms' equal number quoted from one span: each arm gets its own printing where the
        # paper prints it again, the one naming it more (by its words).
        others = [n for found_ in given.values() for n in found_.values() if n != value]
        partner = given[second].get(PARTNER[kind] or "")
        again = paper.quote(kind, value, partner, others, row["outcome"], elsewhere_than=found)
        if again is None:
            continue
        swap = paper.names(row[first], again) + paper.names(row[second], found) > paper.names(
            row[first], found
        ) + paper.names(row[second], again)
        spans[(first, kind)], spans[(second, kind)] = (again, found) if swap else (found, again)
    replayed: list[Replayed] = []
    entries: list[dict[str, Any]] = []
    for side in SIDES:
        numbers = given.get(side, {})
        arm_name = row[side]
        entry: dict[str, Any] = {
            "outcome_name": {"value": row["outcome"], "quote": about},
            "outcome_type": {"value": TEMPLATE_TYPE[row["outcome_type"]], "quote": about},
            "arm": {"value": arm_name, "quote": about},
        }
        for key, kind in kind_of.items():
            if kind not in numbers:
                continue
            value = numbers[kind]
            found = spans[(side, kind)]
            quote = paper.spans[found] if found is not None else about
            gold = as_decimal(row[f"{side}_{key}"])
            other_unit = as_decimal(row.get(in_other_unit(f"{side}_{key}")))
            replayed.append(
                Replayed(model, str(row["pmcid"]), int(row["id"]), side, kind, value, gold, quote, other_unit)
            )
            entry[kind] = {"value": int(value) if value == value.to_integral_value() else float(value), "quote": quote}
        entries.append(entry)
    answer = {
        "arms": [{"arm_name": {"value": row[side], "quote": about}} for side in SIDES],
        "outcomes": entries,
    }
    fields = add_checks(
        ground_entries(RCT_TEMPLATE, parse_answer(json.dumps(answer), RCT_TEMPLATE), paper.grounder), paper.parsed
    )
    return replayed, fields


def field_path(number: Replayed) -> str:
    return f"outcomes.{SIDES.index(number.arm) + 1}.{number.kind}"


def verdicts(numbers: list[Replayed], fields: GroundedFields, other: GroundedFields | None = None) -> Iterator[Verdict]:
    agreement = compare(fields, align(fields, other)) if other is not None else {}
    for number in numbers:
        grounded = fields[field_path(number)]
        yield Verdict(
            number,
            str(grounded.status),
            grounded.reason,
            grounded.flags,
            agreement.get(field_path(number)) if other is not None else None,
        )


@dataclass(frozen=True)
class Figures:
    numbers: int
    right: int
    wrong: int
    right_passing: int
    wrong_passing: int

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> Figures:
        listed = list(verdicts)
        right = [v for v in listed if v.number.right]
        wrong = [v for v in listed if not v.number.right]
        return cls(len(listed), len(right), len(wrong), sum(v.passes for v in right), sum(v.passes for v in wrong))

    def line(self, label: str) -> str:
        passing = self.right_passing + self.wrong_passing
        return (
            f"  {label:12s} {self.numbers:7d} {self.right:6d} {pct(self.right, self.numbers):>6s} {self.wrong:6d}"
            f" {self.right_passing:6d} {pct(self.right_passing, self.right):>6s}"
            f" {self.wrong_passing:6d} {pct(self.wrong_passing, self.wrong):>6s}"
            f" {pct(self.right_passing, passing):>10s}"
        )


# "pass": verified with no flag; shares of the right and of the wrong numbers; precision: right of passing.
HEADER = f"  {'':12s} numbers {'right':>13s} {'wrong':>6s} {'right pass':>13s} {'wrong pass':>13s} {'precision':>10s}"


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the trial corpus (default: EXTRACTION_CORPUS)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="the models to replay")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--list-passing-wrong", action="store_true", help="also list every wrong number that passes, with its quote"
    )
    parser.add_argument(
        "--list-stopped-right",
        action="store_true",
        help="also list every right number that does not pass, with what stopped it (the checks' false alarms)",
    )
    parser.add_argument(
        "--published-gold",
        action="store_true",
        help="score against the gold as published, without the corrections of benchmarks/gold_corrections.py",
    )
    args = parser.parse_args()
    if not (args.corpus / "model_answers").is_dir():
        parser.error(f"no model_answers/ in {args.corpus} (the trial corpus: --corpus or EXTRACTION_CORPUS)")
    started = time.perf_counter()
    rows = {
        model: [
            row
            for outcome_type in KINDS
            for row in json.loads((args.corpus / "model_answers" / f"{model}_{outcome_type}_outcomes.json").read_text())
        ]
        for model in args.models
    }
    corrected_rows: set[tuple[str, int]] = set()
    if not args.published_gold:
        for model_rows in rows.values():
            for index, row in enumerate(model_rows):
                model_rows[index], used = corrected(row)
                if used:
                    corrected_rows.add((str(row["pmcid"]), int(row["id"])))
    gold = (
        "as published"
        if args.published_gold
        else (f"corrected where the paper says otherwise ({len(corrected_rows)} rows, benchmarks/gold_corrections.py)")
    )
    papers = sorted({str(row["pmcid"]) for model_rows in rows.values() for row in model_rows})
    halves = {"first half": set(papers[: (len(papers) + 1) // 2]), "second half": set(papers[(len(papers) + 1) // 2 :])}
    pairs = [pair for pair in PAIRS if all(model in args.models for model in pair)]
    if not args.json:
        print(
            f"real answers: models {', '.join(args.models)}; pairs {', '.join('+'.join(p) for p in pairs) or 'none'}; "
            f"{len(papers)} papers from {args.corpus}; template {RCT_TEMPLATE.base} v{RCT_TEMPLATE.base_version}; "
            f"halves by sorted PMCID ({min(halves['first half'])}..{max(halves['first half'])} | "
            f"{min(halves['second half'], default='-')}..{max(halves['second half'], default='-')}); "
            f"gold {gold}; cores={os.cpu_count()}"
        )
    by_model: dict[str, list[Verdict]] = {model: [] for model in args.models}
    by_pair: dict[str, list[Verdict]] = {"+".join(pair): [] for pair in pairs}
    for pmcid in papers:
        result = run_isolated(args.corpus / "pdf" / f"{pmcid}.pdf", timeout_seconds=300, limits=EngineOptions())
        paper = Paper(
            ParsedDocument(pmcid, result["pages_text"], [ParsedTable(**t) for t in result["tables"]], result["layout"])
        )
        replayed: dict[tuple[str, int], tuple[list[Replayed], GroundedFields]] = {}
        for model, model_rows in rows.items():
            for row in model_rows:
                if str(row["pmcid"]) == pmcid:
                    replayed[model, int(row["id"])] = replay_row(model, row, paper)
        for (model, row_id), (numbers, fields) in replayed.items():
            by_model[model] += verdicts(numbers, fields)
            for first, second in pairs:
                if model == first and (second, row_id) in replayed:
                    by_pair[f"{first}+{second}"] += verdicts(numbers, fields, replayed[second, row_id][1])
    report: dict[str, Any] = {
        "corpus": str(args.corpus),
        "models": args.models,
        "pairs": ["+".join(pair) for pair in pairs],
        "cores": os.cpu_count(),
        "split": "halves of the papers by sorted PMCID",
        "gold": gold,
        "halves": {k: sorted(v) for k, v in halves.items()},
        "figures": {},
    }
    for label, listed in [*by_model.items(), *by_pair.items()]:
        report["figures"][label] = {
            **{
                half: asdict(Figures.of(v for v in listed if v.number.pmcid in members))
                for half, members in halves.items()
            },
            "total": asdict(Figures.of(listed)),
            "wrong stopped by": Counter(
                v.stopped_by for v in listed if not v.number.right and not v.passes
            ).most_common(),
        }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for label, listed in [*by_model.items(), *by_pair.items()]:
        title = f"{label} (a number only the first model gave, or the two disagree: flagged)" if "+" in label else label
        print(f"\n{title}\n{HEADER}")
        for half, members in halves.items():
            print(Figures.of(v for v in listed if v.number.pmcid in members).line(half))
        print(Figures.of(listed).line("total"))
        print("  what stops the wrong numbers that do not pass:")
        for reason, count in report["figures"][label]["wrong stopped by"]:
            print(f"    {count:4d}  {reason}")
        if args.list_passing_wrong:
            print("  wrong numbers that pass:")
            for v in listed:
                if v.passes and not v.number.right:
                    n = v.number
                    print(f"    {n.pmcid} row {n.row} {n.arm} {n.kind}={n.value} (gold {n.gold}): {n.quote[:110]!r}")
        if args.list_stopped_right:
            print("  right numbers that do not pass:")
            for v in listed:
                if v.number.right and not v.passes:
                    n = v.number
                    print(f"    {n.pmcid} row {n.row} {n.arm} {n.kind}={n.value}: {v.stopped_by} | {n.quote[:80]!r}")
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
