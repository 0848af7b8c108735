"""Anyone's numbers checked as a batch checks a model's: claims that carry their context.

A claim is one number with the quote it was read from and what it is about, one JSON object per
line (a colleague's extraction sheet, another tool's output)::

    {"quote": "...", "value": 12, "kind": "events", "outcome": "...", "arm": "...", "versus": "...",
     "timepoint": "...", "page": 3, "entry": "1"}

``kind`` is ``events`` or ``total`` (a dichotomous outcome) or ``mean``, ``sd`` or ``n`` (a
continuous one); ``versus`` is the other arm of the comparison; ``timepoint``, ``page`` and
``entry`` are optional. Claims with the same ``entry`` are one outcome comparison (the same
outcome and time point, the same two arms) and are checked together; claims without ``entry``
are grouped by outcome, time point and the two arms.

The claims become the answer a model would have given under the RCT template (version 2): the
arms declared once, one outcome entry per comparison and arm holding that arm's numbers, each with
its quote, and one comparison per entry naming its two arms (no effect numbers). That answer goes
through ``ground_output``, the batch's own grounding and checks, and each claim reads its verdict
off its field: status, flags, page, reason.

What the claims do not give has no quote (outcome name, arm, time point): those fields are context
for the checks, not claims, and their own verdicts are not reported; a flag the checks attach to
them is reported on every claim of that outcome entry.

A line is read strictly, so that a typo never checks something else than was meant: every problem
of every line is reported (``line N: ...``) and then nothing is checked (``ClaimsError``). Fields
other than the ones above are refused; ``value`` is a JSON number (a count, ``events``, ``total``
and ``n``, a whole one). When a claim names its ``page`` and grounding finds the quote elsewhere,
the claim gets a flag saying where the quote is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from extraction_pipeline.core.extraction.grounded import GroundedFields, GroundedValue, ground_output
from extraction_pipeline.core.llm.answer_parsing import parse_answer
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.arms import arm_key_of
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.templates.schema import MAX_COUNT
from extraction_pipeline.core.verification.grounding import APPROXIMATE, UNVERIFIED, VERIFIED

DICHOTOMOUS_KINDS = ("events", "total")
CONTINUOUS_KINDS = ("mean", "sd", "n")
KINDS = (*DICHOTOMOUS_KINDS, *CONTINUOUS_KINDS)
COUNT_KINDS = ("events", "total", "n")
REQUIRED = ("quote", "value", "kind", "outcome", "arm", "versus")
OPTIONAL = ("timepoint", "page", "entry")
FIELDS = (*REQUIRED, *OPTIONAL)
STATUSES = (str(VERIFIED), str(APPROXIMATE), str(UNVERIFIED))
# The outcome entry's context fields: a flag on one of them concerns every claim of the entry.
CONTEXT_FIELDS = ("outcome_name", "outcome_type", "timepoint", "arm")


@dataclass(frozen=True)
class Claim:
    """One number with its quote and its context; ``line`` is its line in the file (from 1)."""

    line: int
    quote: str
    value: int | float
    kind: str
    outcome: str
    arm: str
    versus: str
    timepoint: str | None = None
    page: int | None = None
    entry: str | None = None

    @property
    def outcome_type(self) -> str:
        return "dichotomous" if self.kind in DICHOTOMOUS_KINDS else "continuous"

    @property
    def comparison_key(self) -> tuple[str, ...]:
        """The outcome comparison it belongs to: its ``entry``; without one, its outcome, time
        point and two arms (in either order)."""
        if self.entry is not None:
            return ("entry", self.entry)
        pair = sorted((arm_key_of(self.arm), arm_key_of(self.versus)))
        return ("claim", _text_key(self.outcome), _text_key(self.timepoint), *pair)

    @property
    def group_key(self) -> tuple[str, ...]:
        """The outcome entry that holds it: one per comparison and arm."""
        return (*self.comparison_key, arm_key_of(self.arm))


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim's verdict as grounding and the checks gave it to its field (``outcomes.N.kind``)."""

    claim: Claim
    field: str
    status: str
    flags: tuple[str, ...]
    page: int | None
    reason: str
    source: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.claim.line,
            "status": self.status,
            "flags": list(self.flags),
            "page": self.page,
            "reason": self.reason,
            "field": self.field,
        }


@dataclass
class ClaimsError(ValueError):
    """Lines that are not claims: ``(line number, problem)`` each, in order."""

    problems: list[tuple[int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(f"line {line}: {problem}" for line, problem in self.problems)


def _text_key(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


def read_claims(lines: Iterable[str]) -> list[Claim]:
    """The claims of a JSON-lines text (blank lines skipped, numbered as in the file). Raises
    ``ClaimsError`` with every problem of every line: then nothing is to be checked."""
    claims: list[Claim] = []
    problems: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        claim, problem = _read_line(number, line)
        if problem is not None:
            problems.append((number, problem))
        elif claim is not None:
            claims.append(claim)
    problems.extend(_grouping_problems(claims))
    if problems:
        raise ClaimsError(sorted(problems, key=lambda item: item[0]))
    return claims


def _read_line(number: int, line: str) -> tuple[Claim | None, str | None]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not a JSON line ({exc.msg})"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    problems: list[str] = []
    unknown = [name for name in record if name not in FIELDS]
    if unknown:
        problems.append(f"unknown field(s) {', '.join(map(repr, unknown))} (a claim has {', '.join(FIELDS)})")
    missing = [name for name in REQUIRED if record.get(name) is None]
    if missing:
        problems.append(f"missing required field(s) {', '.join(map(repr, missing))}")
    for name in ("quote", "outcome", "arm", "versus", "timepoint"):
        given = record.get(name)
        if given is not None and (not isinstance(given, str) or not given.strip()):
            problems.append(f"'{name}' must be a non-empty string, got {json.dumps(given)}")
    for name in ("arm", "versus"):
        given = record.get(name)
        if isinstance(given, str) and given.strip() and not arm_key_of(given):
            problems.append(f"'{name}' names no arm (no letter or digit): {json.dumps(given)}")
    kind = record.get("kind")
    if kind is not None and kind not in KINDS:
        problems.append(f"unknown kind {json.dumps(kind)} (one of {', '.join(KINDS)})")
    value = record.get("value")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            problems.append(f"'value' must be a number, got {json.dumps(value)}")
        elif kind in COUNT_KINDS and not float(value).is_integer():
            problems.append(f"'value' of a count ({kind}) must be a whole number, got {json.dumps(value)}")
        elif kind in COUNT_KINDS and abs(value) > MAX_COUNT:
            problems.append(f"'value' of a count ({kind}) is larger than {MAX_COUNT}")
    page = record.get("page")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        problems.append(f"'page' must be a page number (1 or more), got {json.dumps(page)}")
    entry = record.get("entry")
    if entry is not None and (isinstance(entry, bool) or not isinstance(entry, str | int) or not str(entry).strip()):
        problems.append(f"'entry' must be a non-empty string or an integer, got {json.dumps(entry)}")
    if not problems and arm_key_of(record["arm"]) == arm_key_of(record["versus"]):
        problems.append(f"'versus' names the same arm as 'arm' ({json.dumps(record['arm'])})")
    if problems:
        return None, "; ".join(problems)
    return (
        Claim(
            line=number,
            quote=record["quote"],
            value=int(record["value"]) if kind in COUNT_KINDS else record["value"],
            kind=record["kind"],
            outcome=record["outcome"].strip(),
            arm=record["arm"].strip(),
            versus=record["versus"].strip(),
            timepoint=record["timepoint"].strip() if record.get("timepoint") is not None else None,
            page=page,
            entry=str(entry).strip() if entry is not None else None,
        ),
        None,
    )


def _grouping_problems(claims: list[Claim]) -> list[tuple[int, str]]:
    """Claims that cannot be one outcome comparison with the claims before them: an entry's
    claims about another outcome, time point or pair of arms, an outcome type that changes, or a
    second number of the same kind for the same arm."""
    problems: list[tuple[int, str]] = []
    first_of: dict[tuple[str, ...], Claim] = {}
    kinds: dict[tuple[tuple[str, ...], str], Claim] = {}
    for claim in claims:
        first = first_of.setdefault(claim.comparison_key, claim)
        said: list[str] = []
        if first is not claim:
            where = f"entry {json.dumps(claim.entry)} (line {first.line})" if claim.entry else f"line {first.line}"
            if _text_key(claim.outcome) != _text_key(first.outcome):
                said.append(
                    f"{where} is about the outcome {json.dumps(first.outcome)}, not {json.dumps(claim.outcome)}"
                )
            if _text_key(claim.timepoint) != _text_key(first.timepoint):
                said.append(
                    f"{where} is at the time point {json.dumps(first.timepoint)}, not {json.dumps(claim.timepoint)}"
                )
            pair = {arm_key_of(first.arm), arm_key_of(first.versus)}
            if {arm_key_of(claim.arm), arm_key_of(claim.versus)} != pair:
                said.append(
                    f"{where} compares {json.dumps(first.arm)} with {json.dumps(first.versus)}, "
                    f"not {json.dumps(claim.arm)} with {json.dumps(claim.versus)}"
                )
            if claim.outcome_type != first.outcome_type:
                said.append(
                    f"kind {json.dumps(claim.kind)} is {claim.outcome_type}, but {where} is "
                    f"{first.outcome_type} ({json.dumps(first.kind)})"
                )
        earlier = kinds.setdefault((claim.group_key, claim.kind), claim)
        if earlier is not claim:
            said.append(
                f"a second {json.dumps(claim.kind)} for the arm {json.dumps(claim.arm)} (first on line {earlier.line})"
            )
        if said:
            problems.append((claim.line, "; ".join(said)))
    return problems


@dataclass(frozen=True)
class _Plan:
    answer: dict[str, Any]
    paths: list[str]  # each claim's field, in the claims' order


def _plan(claims: list[Claim]) -> _Plan:
    problems = _grouping_problems(claims)
    if problems:
        raise ClaimsError(problems)
    arms: dict[str, str] = {}
    for claim in claims:
        for name in (claim.arm, claim.versus):
            arms.setdefault(arm_key_of(name), name)
    entries: dict[tuple[str, ...], dict[str, Any]] = {}
    comparisons: dict[tuple[str, ...], dict[str, Any]] = {}
    paths = []
    for claim in claims:
        entry = entries.get(claim.group_key)
        if entry is None:
            entry = {
                "outcome_name": {"value": claim.outcome},
                "outcome_type": {"value": claim.outcome_type},
                "arm": {"value": claim.arm},
            }
            if claim.timepoint is not None:
                entry["timepoint"] = {"value": claim.timepoint}
            entries[claim.group_key] = entry
        entry[claim.kind] = {"value": claim.value, "quote": claim.quote}
        paths.append(f"outcomes.{list(entries).index(claim.group_key) + 1}.{claim.kind}")
        if claim.comparison_key not in comparisons:
            comparison = {
                "outcome_name": {"value": claim.outcome},
                "arm": {"value": claim.arm},
                "comparator_arm": {"value": claim.versus},
            }
            if claim.timepoint is not None:
                comparison["timepoint"] = {"value": claim.timepoint}
            comparisons[claim.comparison_key] = comparison
    answer = {
        "arms": [{"arm_name": {"value": name}} for name in arms.values()],
        "outcomes": list(entries.values()),
        "comparisons": list(comparisons.values()),
    }
    return _Plan(answer, paths)


def claims_answer(claims: list[Claim]) -> dict[str, Any]:
    """The answer (RCT template, version 2) the claims amount to: the arms in order of first
    appearance, one outcome entry per comparison and arm, one comparison per entry."""
    return _plan(claims).answer


def check_claims(parsed: ParsedDocument, claims: list[Claim]) -> list[ClaimVerdict]:
    """Each claim's verdict, in the claims' order, from the batch's grounding and checks."""
    if not claims:
        return []
    plan = _plan(claims)
    grounded = ground_output(RCT_TEMPLATE, parse_answer(json.dumps(plan.answer), RCT_TEMPLATE), parsed)
    return [_verdict(claim, path, grounded) for claim, path in zip(claims, plan.paths, strict=True)]


def _verdict(claim: Claim, path: str, grounded: GroundedFields) -> ClaimVerdict:
    found = grounded[path]
    status = str(found.status) if str(found.status) in STATUSES else str(UNVERIFIED)
    flags = list(found.flags)
    entry = path.rpartition(".")[0]
    for name in CONTEXT_FIELDS:
        context = grounded.get(f"{entry}.{name}")
        flags.extend(f"{name}: {flag}" for flag in (context.flags if context else ()) if f"{name}: {flag}" not in flags)
    if (page_flag := _page_flag(claim, found)) is not None:
        flags.append(page_flag)
    return ClaimVerdict(claim, path, status, tuple(flags), found.page, found.reason, found.source)


def _page_flag(claim: Claim, found: GroundedValue) -> str | None:
    """The claim's page against where grounding found its quote (either part of an interrupted
    one); nothing to say when the quote was not found."""
    if claim.page is None or found.page is None:
        return None
    pages = [found.page, *([found.continued["page"]] if found.continued and found.continued.get("page") else [])]
    if claim.page in pages:
        return None
    where = " and ".join(str(page) for page in pages)
    return f"the claim says page {claim.page}, but the quote is on page {where}"
