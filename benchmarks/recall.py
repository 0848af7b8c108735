"""The recall check on the real corpus, with a model that forgets: does ``possibly_missed`` list
what the extraction left out, in few enough items for a reviewer to read?

The "model" is the oracle (the gold outcomes' printed values, each with a quote copied from the
PDF; see extraction_pipeline_tests/support/oracle.py), named with the gold outcome names, made to
forget; it answers in the template's arms (version 2): the paper's arms declared (every gold
row's intervention and comparator, forgotten or not), one outcome entry per outcome and arm. The
unit forgotten and counted is a gold row (an outcome compared between two arms; an arm's numbers
two rows share are given once): a share of its outcomes, chosen reproducibly (--seed), is dropped whole, then a share of
the remaining arm numbers (events, totals, means, SDs, group sizes). The answer is grounded
against the parsed PDF as the pipeline grounds a model's answer, and the check runs on the
grounded fields.

Counting rules (what "listed" means), strict:
- a dropped outcome is listed when an OUTCOME item's label names it by ``label_names``
  (core/evaluation/matching.py): like its gold name, holding a word that sets it apart from each of
  the paper's other gold names it shares a word with, and not holding all that sets a more specific
  one apart ("Systolic" is not "Diastolic blood pressure"; "Mortality" and "Mortality at 28 days"
  are told apart when the paper has both); an item for a table's unread rows names each row, its
  label's parts between "; "; a label saying arms have no numbers for an outcome ("PONV: no
  numbers for H1 (haloperidol 1 mg)") names it only for a gold row of one of those arms (two rows
  of one name, two comparisons, are told apart by their arms); or when an item's numbers show at
  least two of its printed values other than group sizes;
- a dropped number is listed when an item's numbers hold it and that item is about its outcome
  (its excerpt prints another of the outcome's values, or its label names the outcome, for a
  label saying arms have no numbers: the number's arm among them), or when an OUTCOME item names
  its outcome so;
- a dropped outcome the gold gives no printed value for but its group sizes ("No numerical values
  are given") can be listed by its name only; it counts like the rest, and the printout says how
  many there are;
- the list's length is counted as a reviewer reads it: an item naming several rows counts once per
  row;
- precision: each listed item lists a result the answer lacks (a dropped outcome or number, by the
  rules above), a gold result the answer has, or a result the gold set does not include.

Goals, on each half of the papers (sorted by PMCID, the first ceil(n/2) and the rest): at least 80%
of the dropped items listed; at most 10 listed rows per paper on average; gold recall after the
follow-up at least 95%. The oracle answers only the gold outcomes, while papers report many more,
so "with nothing dropped" shows how many rows list outcomes the gold set leaves out.

Gold recall and the follow-up. "Gold recall" is the share of the printed gold values (arm numbers,
group sizes included) found in the grounded fields, in the field the oracle answers them in, under
an entry naming their arm that identifies their outcome: by name (``label_names``) or by holding
two of its printed values other than group sizes. "Before" is the forgetful answer's fields;
"after" is what ``check_recall`` (core/extraction/follow_up.py) returns with the follow-up asked,
the paper asked whole. The follow-up "model" is the same oracle answering only what the asked
text identifies, in the paper's words (the asked label as the outcome's name, never the gold's):
the prompt asks for each outcome on one line, its label and, for a place of the paper, its page
and what the paper prints there (a table row's own cells, a sentence), and the oracle reads only
those lines. A forgotten outcome (dropped whole, or kept with some numbers dropped) is identified
by a line when its label names it by ``label_names``, or when the line's excerpt shows two of its
printed values other than group sizes; it is then answered whole, as the question asks ("each
completely"), group sizes included. With ``--shown-only`` an outcome identified by its values is
answered with the values the excerpt shows only (a model that reads nothing beyond the asked
line: the lower bound). A forgotten number of an outcome whose row the check does not list is
never asked for and stays missing. A follow-up call is counted for each paper whose list has at
least one item; an asked label "led to an outcome" when the oracle answered at least one outcome
for it. With ``--no-follow-up`` no second question is asked and only
"before" is measured.

    .venv/bin/python -m benchmarks.recall [--corpus DIR] [--drop-outcomes 0.3] [--drop-numbers 0.1]
        [--seed N] [--papers PMCID ...] [--limit N] [--items] [--no-follow-up] [--shown-only]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from extraction_pipeline.core.evaluation.matching import label_names
from extraction_pipeline.core.extraction.follow_up import check_recall
from extraction_pipeline.core.extraction.grounded import GroundedFields, ground_output
from extraction_pipeline.core.extraction.markers import MISSED_CLOSE, MISSED_OPEN
from extraction_pipeline.core.llm.gateway import LLMResult, parse_answer
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.arms import arm_key_of
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.recall import (
    DEFAULT_LIMIT,
    LABEL_SEPARATOR,
    MissedKind,
    PossiblyMissed,
    possibly_missed,
)
from extraction_pipeline.core.verification.recall_ranking import NO_NUMBERS_FOR
from extraction_pipeline_tests.support import oracle

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
# The oracle's numbers are named as version 1 names them (the unit dropped and counted: one gold
# row, two arms); the answer sent is version 2's (``answer_json``).
SIZE_FIELDS = ("total_treatment", "total_control", "n_treatment", "n_control")
ARM_FIELDS = ("events", "total", "mean", "sd", "n")
SIDES = ("_treatment", "_control")
UNCAPPED = 1_000_000  # the whole list, to show what the cap costs
VALUES_SHOWN = 2  # an item lists an outcome by its printed values when it shows this many of them


@dataclass
class Outcome:
    """One outcome of the oracle's answer with the gold row it came from: its numbers named as
    version 1 names them (``events_treatment``: the row's intervention arm; ``_control``: its
    comparator), the two arms as the gold names them."""

    name: str
    entry: dict[str, Any]  # field -> {"value", "quote"}
    arms: tuple[str, str] = ("treatment", "control")  # the row's intervention and comparator

    @property
    def printed(self) -> dict[str, Decimal]:
        return {name: _decimal(pair["value"]) for name, pair in self.entry.items() if name.split("_")[0] in ARM_FIELDS}

    @property
    def identifying(self) -> set[Decimal]:
        """Its printed values other than group sizes (which a paper prints once for every outcome)."""
        return {value for name, value in self.printed.items() if name not in SIZE_FIELDS}


@dataclass
class PaperResult:
    pmcid: str
    outcomes: int
    dropped_outcomes: list[tuple[Outcome, bool]] = field(default_factory=list)
    dropped_numbers: list[tuple[Outcome, str, Decimal, bool]] = field(default_factory=list)
    items: list[PossiblyMissed] = field(default_factory=list)
    rows: int = 0  # the list's length counted per row (an item naming several rows counts each)
    verdicts: tuple[int, int, int] = (0, 0, 0)  # items: a real omission, a gold result answered, not gold
    items_nothing_dropped: int = 0
    uncapped_items: int = 0
    uncapped_listed: int = 0  # dropped items listed when the list is not capped
    gold_values: int = 0
    gold_values_kept: int = 0  # in the forgetful answer's grounded fields
    follow_up: FollowUp | None = None  # None: not measured (--no-follow-up)
    seconds: float = 0.0


@dataclass
class FollowUp:
    """What the follow-up question did for one paper."""

    asked: list[str] = field(default_factory=list)  # the OUTCOME labels asked for (none: no call)
    answering: list[str] = field(default_factory=list)  # the asked labels the oracle answered an outcome for
    answered: list[str] = field(default_factory=list)  # gold names of the outcomes it answered
    gold_values_after: int = 0
    items_after: int = 0  # the list after the follow-up

    @property
    def called(self) -> bool:
        return bool(self.asked)


def _decimal(value: Any) -> Decimal:
    try:
        return abs(Decimal(str(value).replace(",", "")))
    except InvalidOperation:
        return Decimal(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--drop-outcomes", type=float, default=0.3, help="share of the outcomes dropped whole")
    parser.add_argument("--drop-numbers", type=float, default=0.1, help="share of the remaining arm numbers dropped")
    parser.add_argument("--seed", type=int, default=1, help="which outcomes and numbers are forgotten")
    parser.add_argument("--papers", nargs="*", help="PMC ids (default: every corpus paper with gold outcomes)")
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="rows listed per paper at most (an item naming several outcomes counts each)",
    )
    parser.add_argument("--items", action="store_true", help="print every listed item")
    parser.add_argument(
        "--no-follow-up", dest="follow_up", action="store_false", help="do not ask the follow-up question"
    )
    parser.add_argument(
        "--shown-only",
        action="store_true",
        help="the follow-up model answers an outcome it finds by printed values with those values only",
    )
    args = parser.parse_args()
    if args.shown_only and not args.follow_up:
        parser.error("--shown-only is how the follow-up is answered: it needs the follow-up (drop --no-follow-up)")
    oracle.CORPUS = args.corpus  # the oracle reads the gold values and PDFs from here
    gold_rows = json.loads((args.corpus / "gold_outcomes.json").read_text())
    pmcids = args.papers or sorted({str(row["pmcid"]) for row in gold_rows})
    print(
        f"recall check: drop {args.drop_outcomes:.0%} of outcomes, {args.drop_numbers:.0%} of remaining arm numbers, "
        f"seed {args.seed}, limit {args.limit} rows per paper; "
        f"follow-up {'asked' if args.follow_up else 'not asked'}"
        f"{' (outcomes found by printed values answered with those values only)' if args.shown_only else ''}; "
        f"parse: plain PyMuPDF text + ruled tables; cores={os.cpu_count()}"
    )
    results = []
    for pmcid in pmcids:
        pdf = args.corpus / "pdf" / f"{pmcid}.pdf"
        if not pdf.is_file():
            print(f"  {pmcid}: no PDF in the corpus, skipped")
            continue
        result = run_paper(
            pmcid,
            parse(pdf),
            args.drop_outcomes,
            args.drop_numbers,
            args.seed,
            args.limit,
            follow=args.follow_up,
            shown_only=args.shown_only,
        )
        if result is None:
            print(f"  {pmcid}: the oracle has no printed gold value for it, skipped")
            continue
        results.append(result)
        report_paper(result, show_items=args.items)
    report_totals(results)


def parse(pdf: Path) -> ParsedDocument:
    """The pipeline's default parse (plain text, ruled tables), isolated as the pipeline runs it."""
    result = run_isolated(pdf, timeout_seconds=300, limits=EngineOptions())
    tables = [ParsedTable(**t) for t in result["tables"]]
    return ParsedDocument(pdf.name, result["pages_text"], tables, layout=result.get("layout", []))


def oracle_outcomes(pmcid: str) -> list[Outcome]:
    """The oracle's outcomes, each named by the gold row it answers, with that row's arms."""
    answer = oracle.build_answer_v1(pmcid)  # one entry per gold row: the unit dropped and counted
    rows = [row for row in oracle.gold_rows(pmcid) if row["is_data_in_figure_graphics"] != "TRUE"]
    outcomes: list[Outcome] = []
    for entry in answer.answer["outcomes"]:
        values = {name: pair["value"] for name, pair in entry.items() if name != "outcome_type"}
        while rows:
            row = rows.pop(0)
            printed = {str(v) for k, v in row.items() if k.startswith(("intervention_", "comparator_")) and v != ""}
            if {str(v) for v in values.values()} <= printed:
                arms = (str(row["intervention"]).strip() or "treatment", str(row["comparator"]).strip() or "control")
                outcomes.append(Outcome(str(row["outcome"]).strip(), entry, arms))
                break
    return outcomes


def answer_json(outcomes: list[Outcome], arms: list[str] | None = None) -> str:
    """The answer in the template's arms (version 2): ``arms`` declared (the paper's, whatever the
    model forgot; None: no arms module, as the follow-up answers), one outcome entry per outcome
    and arm with that arm's numbers. Rows sharing an arm (saline in "1 mg vs saline" and "2 mg vs
    saline") give its numbers once."""
    entries: list[dict[str, Any]] = []
    seen: set[tuple[str, str, frozenset[tuple[str, str]]]] = set()
    for outcome in outcomes:
        quote = next(iter(outcome.entry.values()))["quote"]
        for suffix, arm in zip(SIDES, outcome.arms, strict=True):
            numbers = {name.removesuffix(suffix): pair for name, pair in outcome.entry.items() if name.endswith(suffix)}
            key = (outcome.name, arm_key_of(arm), frozenset((n, str(p["value"])) for n, p in numbers.items()))
            if not numbers or key in seen:
                continue
            seen.add(key)
            described = {name: pair for name, pair in outcome.entry.items() if name.split("_")[0] not in ARM_FIELDS}
            entries.append(
                {
                    "outcome_name": {"value": outcome.name, "quote": quote},
                    **described,
                    "arm": {"value": arm, "quote": quote},
                    **numbers,
                }
            )
    answer: dict[str, Any] = {"outcomes": entries}
    if arms is not None:
        answer["arms"] = [{"arm_name": {"value": arm, "quote": arm}} for arm in arms]
    return json.dumps(answer)


def paper_arms(outcomes: list[Outcome]) -> list[str]:
    """The arms the paper's gold rows name, each once (spelling aside)."""
    named: dict[str, str] = {}
    for outcome in outcomes:
        for arm in outcome.arms:
            named.setdefault(arm_key_of(arm), arm)
    return list(named.values())


def ground(parsed: ParsedDocument, outcomes: list[Outcome], arms: list[str]) -> GroundedFields:
    """The answer grounded as the pipeline grounds a model's answer."""
    return ground_output(RCT_TEMPLATE, parse_answer(answer_json(outcomes, arms), RCT_TEMPLATE), parsed)


def forget(
    outcomes: list[Outcome], drop_outcomes: float, drop_numbers: float, seed: int
) -> tuple[list[Outcome], list[Outcome], list[tuple[Outcome, str, Decimal]]]:
    """(what the forgetful model answers, the outcomes it dropped, the numbers it dropped)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible choice, not a secret
    dropped = set(rng.sample(range(len(outcomes)), round(drop_outcomes * len(outcomes))))
    kept = [o for i, o in enumerate(outcomes) if i not in dropped]
    numbers = [(i, name) for i, o in enumerate(kept) for name in o.printed]
    lost = set(rng.sample(numbers, round(drop_numbers * len(numbers))))
    answered: list[Outcome] = []
    lost_numbers: list[tuple[Outcome, str, Decimal]] = []
    for i, outcome in enumerate(kept):
        entry = {name: pair for name, pair in outcome.entry.items() if (i, name) not in lost}
        lost_numbers.extend((outcome, name, outcome.printed[name]) for name in outcome.entry if (i, name) in lost)
        if any(name.split("_")[0] in ARM_FIELDS for name in entry):
            answered.append(Outcome(outcome.name, entry, outcome.arms))
    return answered, [o for i, o in enumerate(outcomes) if i in dropped], lost_numbers


def _numbers(item: PossiblyMissed) -> set[Decimal]:
    return {_decimal(n) for n in item.numbers}


_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+")


def _printed(item: PossiblyMissed) -> set[Decimal]:
    """Every number of the item's excerpt (a row or sentence), read or not."""
    return {_decimal(n) for n in _NUMBER.findall(item.text)}


def _labels(item: PossiblyMissed) -> list[str]:
    """The outcomes an item names: one label, or several ("; ") for a table's unread rows."""
    return [part.strip() for part in item.label.split(LABEL_SEPARATOR) if part.strip()]


def _names(item: PossiblyMissed, outcome: Outcome, names: list[str], arms: tuple[str, ...] = ()) -> bool:
    """An item's label names the outcome by the strict rule (``label_names``): among the paper's
    outcome names ``names``, "Systolic" is not "Diastolic blood pressure", "Mortality" not
    "Mortality at 28 days". A label saying arms have no numbers for it ("PONV: no numbers for H1
    (haloperidol 1 mg)") names it only for those arms: one of ``arms`` (default: the gold row's
    two) must be among them, so two rows of one name (two comparisons) are told apart."""
    return any(_label_names(label, outcome, names, arms) for label in _labels(item))


def _label_names(label: str, outcome: Outcome, names: list[str], arms: tuple[str, ...] = ()) -> bool:
    """One label names the outcome (``_names``' rule)."""
    _name, says, absent = label.partition(_NO_NUMBERS_FOR)
    if says and not any(_arm_said(arm, absent) for arm in arms or outcome.arms):
        return False
    return label_names(label, outcome.name, names)


_NO_NUMBERS_FOR = f": {NO_NUMBERS_FOR}"


def _arm_said(arm: str, said: str) -> bool:
    """Is the gold arm among the arms an item says ("H1 (haloperidol 1 mg), placebo")?"""
    key = arm_key_of(arm)
    return bool(key) and f" {key} " in f" {arm_key_of(said)} "


def _arm_of(outcome: Outcome, field_name: str) -> tuple[str, ...]:
    """The arm a gold row's number is of (``mean_control``: the row's comparator)."""
    return (outcome.arms[SIDES.index(f"_{field_name.rsplit('_', 1)[1]}")],)


def _shows(item: PossiblyMissed, outcome: Outcome) -> bool:
    """The item shows at least two of the outcome's printed values other than group sizes."""
    return len(outcome.identifying & _numbers(item)) >= VALUES_SHOWN


def outcome_listed(outcome: Outcome, items: list[PossiblyMissed], names: list[str]) -> bool:
    return any(
        (item.kind == MissedKind.OUTCOME and _names(item, outcome, names)) or _shows(item, outcome) for item in items
    )


def number_listed(
    outcome: Outcome, value: Decimal, items: list[PossiblyMissed], names: list[str], arm: tuple[str, ...] = ()
) -> bool:
    others = set(outcome.printed.values()) - {value}
    for item in items:
        if item.kind == MissedKind.OUTCOME and _names(item, outcome, names, arm):
            return True
        if value in _numbers(item) and (_printed(item) & others or _names(item, outcome, names, arm)):
            return True
    return False


def item_rows(items: list[PossiblyMissed]) -> int:
    """The list's length as a reviewer reads it: an item naming several rows counts once per row."""
    return sum(max(1, len(_labels(item))) for item in items)


def item_verdicts(
    items: list[PossiblyMissed],
    dropped: list[Outcome],
    lost: list[tuple[Outcome, str, Decimal]],
    answered: list[Outcome],
    names: list[str],
) -> tuple[int, int, int]:
    """(items listing something the answer lacks, items listing a gold result the answer has,
    items listing a result the gold set does not include): what share of the list is a real omission."""
    omitted = answered_too = other = 0
    lacking = [*dropped, *(o for o, _n, _v in lost)]
    for item in items:
        if any(_names(item, o, names) or _shows(item, o) for o in dropped) or any(
            value in _numbers(item)
            and (_printed(item) & (set(o.printed.values()) - {value}) or _names(item, o, names, _arm_of(o, name)))
            for o, name, value in lost
        ):
            omitted += 1
        elif any(_names(item, o, names) or _shows(item, o) for o in answered if o not in lacking):
            answered_too += 1
        else:
            other += 1
    return omitted, answered_too, other


def gold_found(outcomes: list[Outcome], fields: GroundedFields) -> int:
    """How many of the outcomes' printed values ``fields`` has: in the same field, with the same
    value, under an entry naming the value's arm and identifying the outcome, by its name (the
    strict rule, among the paper's outcome names) or by holding two of its printed values other
    than group sizes (a follow-up answer names an outcome in the paper's words, not the gold's)."""
    names = [outcome.name for outcome in outcomes]
    entries: dict[str, dict[str, Any]] = {}
    for path, entry in fields.items():
        if entry.index is not None and path.startswith("outcomes."):
            entries.setdefault(path.rsplit(".", 1)[0], {})[entry.field] = entry.value
    found: dict[tuple[str, str], set[tuple[str, Decimal]]] = {}  # (entry name, arm) -> (field, value)
    for values in entries.values():
        key = (" ".join(str(values.get("outcome_name") or "").split()), arm_key_of(values.get("arm")))
        for name, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.setdefault(key, set()).add((name, _decimal(value)))
    by_name: dict[str, set[tuple[str, Decimal]]] = {}  # every arm's values of an entry name
    for (entry_name, _arm), held in found.items():
        by_name.setdefault(entry_name, set()).update(held)
    count = 0
    for outcome in outcomes:
        identified = [
            entry_name
            for entry_name, held in by_name.items()
            if label_names(entry_name, outcome.name, names)
            or len(outcome.identifying & {value for _field, value in held}) >= VALUES_SHOWN
        ]
        for field_name, value in outcome.printed.items():
            kind, side = field_name.rsplit("_", 1)
            arm = arm_key_of(outcome.arms[SIDES.index(f"_{side}")])
            count += any((kind, value) in found.get((entry_name, arm), set()) for entry_name in identified)
    return count


_ASKED_PLACE = re.compile(r'^(?P<label>.*?) \(page \d+: "(?P<excerpt>.*)"\)$')


def _asked(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """What a follow-up prompt asks for: (label, the excerpt shown with it, or "") for each
    "- label (page N: "excerpt")" line between the markers."""
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    # The instruction names the markers too: the list is after the last opening one.
    block = user.rsplit(MISSED_OPEN, 1)[1].split(MISSED_CLOSE, 1)[0] if MISSED_OPEN in user else ""
    asked = []
    for line in block.splitlines():
        if line.startswith("- "):
            placed = _ASKED_PLACE.match(line[2:].strip())
            asked.append((placed["label"], placed["excerpt"]) if placed else (line[2:].strip(), ""))
    return asked


def follow_up_oracle(
    dropped: list[Outcome],
    partly: list[Outcome],
    names: list[str],
    record: FollowUp,
    *,
    shown_only: bool = False,
) -> Callable[[list[dict[str, str]], TemplateDefinition], tuple[LLMResult, None]]:
    """The follow-up "model": the oracle answering only what the asked text identifies, in the
    paper's words (the asked label as the outcome's name): a forgotten outcome (whole, or some of
    its numbers) that an asked label names by the strict rule, or whose printed values (two of
    them, group sizes aside) the excerpt asked with it shows, is answered whole, as the question
    asks ("each completely"); with ``shown_only``, one identified by its values is answered with
    the values shown only. Nothing else: no gold name, no outcome the asked text does not lead to."""
    dropped_whole = list(dropped)
    candidates = dropped_whole + [o for i, o in enumerate(partly) if all(o is not other for other in partly[:i])]

    def ask(messages: list[dict[str, str]], template: TemplateDefinition) -> tuple[LLMResult, None]:
        asked = _asked(messages)
        record.asked = [label for label, _excerpt in asked]
        answer: list[Outcome] = []
        answered: list[Outcome] = []
        for label, excerpt in asked:
            printed = excerpt[len(label) :] if excerpt.startswith(label) else excerpt  # "HbA1c" shows no 1
            shown = {_decimal(n) for n in _NUMBER.findall(printed)}
            led = False
            for outcome in candidates:
                if _label_names(label, outcome, names):
                    entry = dict(outcome.entry)  # named: the model reads the outcome whole
                elif len(outcome.identifying & shown) >= VALUES_SHOWN:
                    entry = {
                        name: pair
                        for name, pair in outcome.entry.items()
                        if not shown_only or name.split("_")[0] not in ARM_FIELDS or _decimal(pair["value"]) in shown
                    }
                else:
                    continue
                led = True
                answer.append(Outcome(label, entry, outcome.arms))
                if outcome not in answered:
                    answered.append(outcome)
            if led:
                record.answering.append(label)
        record.answered = [o.name for o in answered if o in dropped_whole]
        text = answer_json(answer)  # outcome entries only: the follow-up asks the outcomes module
        reply = LLMResult(parse_answer(text, template), Usage("oracle"), repaired=False, content=text)
        return reply, None

    return ask


def run_paper(
    pmcid: str,
    parsed: ParsedDocument,
    drop_outcomes: float,
    drop_numbers: float,
    seed: int,
    limit: int,
    *,
    follow: bool = True,
    shown_only: bool = False,
) -> PaperResult | None:
    outcomes = oracle_outcomes(pmcid)
    if not outcomes:
        return None
    answered, dropped, lost = forget(outcomes, drop_outcomes, drop_numbers, seed)
    arms = paper_arms(outcomes)  # a model that forgets an outcome still declares the paper's arms
    fields = ground(parsed, answered, arms)
    started = time.perf_counter()
    items = possibly_missed(parsed, fields, limit=limit)
    seconds = time.perf_counter() - started
    names = [outcome.name for outcome in outcomes]
    result = PaperResult(pmcid, len(outcomes), items=items, seconds=seconds)
    result.rows = item_rows(items)
    result.verdicts = item_verdicts(items, dropped, lost, answered, names)
    result.dropped_outcomes = [(o, outcome_listed(o, items, names)) for o in dropped]
    result.dropped_numbers = [
        (o, name, value, number_listed(o, value, items, names, _arm_of(o, name))) for o, name, value in lost
    ]
    result.items_nothing_dropped = item_rows(possibly_missed(parsed, ground(parsed, outcomes, arms), limit=limit))
    uncapped = possibly_missed(parsed, fields, limit=UNCAPPED)
    result.uncapped_items = item_rows(uncapped)
    result.uncapped_listed = sum(1 for o in dropped if outcome_listed(o, uncapped, names)) + sum(
        1 for o, name, value in lost if number_listed(o, value, uncapped, names, _arm_of(o, name))
    )
    result.gold_values = sum(len(o.printed) for o in outcomes)
    result.gold_values_kept = gold_found(outcomes, fields)
    if follow:
        # check_recall lists with the pipeline's own cap; the oracle matches the asked labels to those items.
        record = FollowUp()
        partly = [outcome for outcome, _name, _value in lost]  # kept, some numbers forgotten
        ask = follow_up_oracle(dropped, partly, names, record, shown_only=shown_only)
        checked = check_recall(fields, parsed, RCT_TEMPLATE, follow_up=True, whole_paper_fits=True, ask=ask)
        record.gold_values_after = gold_found(outcomes, checked.fields)
        record.items_after = item_rows(checked.missed or [])
        result.follow_up = record
    return result


def report_paper(result: PaperResult, *, show_items: bool) -> None:
    outcomes_listed = sum(1 for _o, listed in result.dropped_outcomes if listed)
    numbers_listed = sum(1 for *_rest, listed in result.dropped_numbers if listed)
    print(
        f"  {result.pmcid:8s} {result.outcomes:3d} outcomes; dropped {len(result.dropped_outcomes)} outcome(s), "
        f"{outcomes_listed} listed; dropped {len(result.dropped_numbers)} number(s), {numbers_listed} listed; "
        f"{len(result.items)} item(s) listed, {result.rows} row(s) ({result.items_nothing_dropped} rows with nothing "
        f"dropped); {result.verdicts[0]} list a result the answer lacks, {result.verdicts[2]} one the gold lacks, "
        f"{result.seconds * 1000:.0f} ms"
    )
    recall = f"      gold recall before {result.gold_values_kept}/{result.gold_values}"
    if (follow := result.follow_up) is not None:
        recall += f", after follow-up {follow.gold_values_after}/{result.gold_values}; " + (
            f"follow-up asked {len(follow.asked)} label(s), {len(follow.answering)} led to an outcome "
            f"({len(follow.answered)} outcome(s) answered); {follow.items_after} item(s) listed after"
            if follow.called
            else "no follow-up call (no OUTCOME item)"
        )
    print(recall)
    for outcome, listed in result.dropped_outcomes:
        print(f"      {'listed' if listed else 'MISSED'} outcome {outcome.name!r}")
    for outcome, name, value, listed in result.dropped_numbers:
        print(f"      {'listed' if listed else 'MISSED'} number {name}={value} of {outcome.name!r}")
    if show_items:
        for item in result.items:
            numbers = ", ".join(item.numbers[:8]) + (" ..." if len(item.numbers) > 8 else "")
            print(f"      item p{item.page} {item.source} [{item.kind}] {item.label[:60]!r}: {numbers}")


def halves(results: list[PaperResult]) -> dict[str, list[PaperResult]]:
    """The papers split by a fixed rule: sorted by PMCID, the first half (the larger when odd) and
    the rest. The check was built on all of them; the two halves show how much one set of papers'
    figures says about another's."""
    ordered = sorted(results, key=lambda r: r.pmcid)
    middle = (len(ordered) + 1) // 2
    return {"all papers": ordered, "first half": ordered[:middle], "second half": ordered[middle:]}


def report_totals(results: list[PaperResult]) -> None:
    if not results:
        print("no paper of the corpus could be answered")
        return
    print(f"papers answered by the oracle: {len(results)} ({', '.join(r.pmcid for r in results)})")
    for name, part in halves(results).items():
        if part:
            print(f"{name} ({part[0].pmcid}..{part[-1].pmcid}, {len(part)} papers):")
            report_part(part)


def report_part(results: list[PaperResult]) -> None:
    dropped = sum(len(r.dropped_outcomes) + len(r.dropped_numbers) for r in results)
    listed = sum(
        sum(1 for *_o, hit in r.dropped_outcomes if hit) + sum(1 for *_n, hit in r.dropped_numbers if hit)
        for r in results
    )
    outcomes = sum(len(r.dropped_outcomes) for r in results)
    outcomes_hit = sum(sum(1 for *_o, hit in r.dropped_outcomes if hit) for r in results)
    numbers = sum(len(r.dropped_numbers) for r in results)
    numbers_hit = sum(sum(1 for *_n, hit in r.dropped_numbers if hit) for r in results)
    rows = [r.rows for r in results]
    gold = sum(r.gold_values for r in results)
    before = sum(r.gold_values_kept for r in results) / max(1, gold)
    print(
        f"  dropped items listed: {listed}/{dropped} = {listed / max(1, dropped):.0%} (goal >= 80%); "
        f"outcomes {outcomes_hit}/{outcomes}, numbers {numbers_hit}/{numbers}"
    )
    # An outcome the gold gives no printed value for but its group sizes ("No numerical values are
    # given") can be listed by its name only: counted like the rest, shown apart.
    sizes_only = [(o, hit) for r in results for o, hit in r.dropped_outcomes if not o.identifying]
    print(
        f"  of the dropped outcomes, {len(sizes_only)} have no printed gold value but group sizes "
        f"({sum(1 for _o, hit in sizes_only if hit)} listed, by name)"
    )
    print(
        f"  listed items per paper, a row each: mean {statistics.mean(rows):.1f} (goal <= 10), "
        f"median {statistics.median(rows):g}, max {max(rows)} ({statistics.mean(len(r.items) for r in results):.1f} "
        f"items before counting rows); with nothing dropped: mean "
        f"{statistics.mean(r.items_nothing_dropped for r in results):.1f}"
    )
    omitted, answered, other = (sum(r.verdicts[i] for r in results) for i in range(3))
    total = max(1, omitted + answered + other)
    print(
        f"  precision: of {omitted + answered + other} listed items, {omitted} ({omitted / total:.0%}) list a result "
        f"the answer lacks, {answered} ({answered / total:.0%}) a gold result the answer has, "
        f"{other} ({other / total:.0%}) a result the gold set does not include"
    )
    uncapped = sum(r.uncapped_listed for r in results)
    print(
        f"  without the cap: {uncapped}/{dropped} = {uncapped / max(1, dropped):.0%} listed, "
        f"mean {statistics.mean(r.uncapped_items for r in results):.1f} items per paper (a row each)"
    )
    kept = sum(r.gold_values_kept for r in results)
    print(
        f"  gold recall before follow-up (printed gold values the forgetful answer has): {kept}/{gold} = {before:.0%}"
    )
    followed = [r.follow_up for r in results if r.follow_up is not None]
    if followed:
        after = sum(f.gold_values_after for f in followed)
        asked = sum(len(f.asked) for f in followed)
        answering = sum(len(f.answering) for f in followed)
        answered_outcomes = sum(len(f.answered) for f in followed)
        in_kept = sum(len(r.dropped_numbers) for r in results)
        print(
            f"  gold recall after follow-up: {after}/{gold} = {after / max(1, gold):.1%} (goal >= 95%); "
            f"{in_kept} number(s) had been dropped inside kept outcomes"
        )
        print(
            f"  follow-up calls: {sum(1 for f in followed if f.called)} of {len(followed)} papers; asked labels "
            f"{asked}, {answering} led to an outcome; {answered_outcomes} dropped outcome(s) answered of "
            f"{outcomes}; items listed after: mean {statistics.mean(f.items_after for f in followed):.1f}"
        )
    seconds = sorted(r.seconds for r in results)
    print(
        f"  check time per paper: median {statistics.median(seconds) * 1000:.0f} ms, "
        f"max {seconds[-1] * 1000:.0f} ms (goal < 200 ms)"
    )


if __name__ == "__main__":
    main()
