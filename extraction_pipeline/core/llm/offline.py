"""The built-in offline extractor: pattern-based, no network, no key.

It lets the whole pipeline run on a fresh machine. It is registered as a litellm custom provider
(``offline/pattern-v1``) so it travels the exact code path of a real model, and every value it
returns is labelled with that model name in the ledger and the workbook.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from extraction_pipeline.core.templates.arms import arm_key_of

OFFLINE_PROVIDER = "offline"
OFFLINE_MODEL = f"{OFFLINE_PROVIDER}/pattern-v1"
# Said wherever its results show up: it exists for demos and tests, not for real papers.
OFFLINE_WARNING = (
    "no model configured: documents are extracted by the built-in offline pattern extractor, which "
    "exists for demos and tests and finds almost nothing in real papers (set EXTRACTION_MODEL and "
    "EXTRACTION_API_KEY)"
)

_NCT = re.compile(r"\bNCT\d{8}\b")
_RANDOMIZED = re.compile(
    r"\b(\d{1,3}(?:,\d{3})*|\d+)\s+(?:patients|participants|subjects|women|men|children|adults)\b"
    r"[^.]{0,80}?\brandomi[sz]ed\b|\brandomi[sz]ed\b[^.]{0,40}?\b(\d{1,3}(?:,\d{3})*|\d+)\s+"
    r"(?:patients|participants|subjects)\b",
    re.IGNORECASE,
)
_EFFECT = re.compile(
    r"\b(HR|OR|RR|hazard ratio|odds ratio|risk ratio|relative risk)\b[^0-9]{0,20}?"
    r"(-?\d+(?:\.\d+)?)\s*[;,(\[]?\s*(?:95\s*%\s*(?:CI|confidence interval))[^0-9-]{0,5}"
    r"(-?\d+(?:\.\d+)?)\s*(?:-|–|—|to|,)\s*(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_MEASURE_NAMES = {"hazard ratio": "HR", "odds ratio": "OR", "risk ratio": "RR", "relative risk": "RR"}
_SENTENCE_END = re.compile(r"(?<=[.;])\s+(?=[A-Z0-9(])")
# A heading on a line of its own ("Participants", "Results"): no sentence runs across it, so a
# quote never starts with the heading above its sentence.
_HEADING = re.compile(r"^[A-Z][^\n.;:,]{0,40}\n(?=[A-Z])", re.MULTILINE)


def _sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text`` (a heading line is one of its own), blank ones left out."""
    cuts = {0, len(text)}
    cuts.update(match.end() for match in _SENTENCE_END.finditer(text))
    for match in _HEADING.finditer(text):
        cuts.update(match.span())
    ordered = sorted(cuts)
    return [(start, end) for start, end in itertools.pairwise(ordered) if text[start:end].strip()]


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _flat(text: str) -> str:
    """A passage as one line, a word hyphenated at a line end joined again: how the patterns read
    it and how it is quoted (grounding compares letters and digits, so the quote is the page's)."""
    return _clean(re.sub(r"(?<=-)\n", "", text))


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence containing text[start:end] (the sentences, when it runs over several), copied
    verbatim (line breaks kept as spaces)."""
    spans = _sentences(text)
    left = max((first for first, _last in spans if first <= start), default=0)
    right = min((last for _first, last in spans if last >= end), default=len(text))
    return _flat(text[left:right])


_PAGE_MARKER = re.compile(r"^\[page \d+\]$", re.MULTILINE)
Pair = dict[str, Any]  # {"value": ..., "quote": ...}: one field of the answer


def _pair(value: Any, quote: str) -> Pair:
    return {"value": value, "quote": quote}


# -- What the patterns read, in general sentence shapes (never a drug's or an author's name). ---

_COUNT = r"\d{1,3}(?:,\d{3})+|\d+"
_PEOPLE = r"(?:patients|participants|subjects|women|men|children|adults|infants)"
# An arm's name: a few words up to a comma, a semicolon, a parenthesis, the end of the sentence or
# the next "and 598 ..." of a list.
_NAME = r"[A-Za-z][^,;()]{0,60}?"
_NAME_END = r"(?=\s*(?:[,;(]|\.(?:\s|$)|(?:and|versus|vs\.?)\s+\d|$))"
_ASSIGNED = re.compile(
    rf"(?P<n>{_COUNT})\s+(?:{_PEOPLE}\s+)?(?:were\s+)?(?:randomly\s+)?(?:assigned|allocated|randomi[sz]ed)\s+"
    rf"to\s+(?:receive\s+)?(?:the\s+)?(?P<name>{_NAME}){_NAME_END}",
    re.IGNORECASE,
)
_ASSIGNED_MORE = re.compile(
    rf"\s*(?:,\s*(?:and\s+)?|\s+and\s+)(?P<n>{_COUNT})\s+(?:{_PEOPLE}\s+)?"
    rf"(?:(?:were\s+)?(?:randomly\s+)?(?:assigned|allocated|randomi[sz]ed)\s+)?to\s+(?:receive\s+)?(?:the\s+)?"
    rf"(?P<name>{_NAME}){_NAME_END}",
    re.IGNORECASE,
)
_OCCURRED = re.compile(r"\s(?:occurred|was\s+reported|were\s+reported)\s+in\s+(?=\d)", re.IGNORECASE)
_EVENT = re.compile(
    rf"(?P<e>{_COUNT})\s+of\s+(?:the\s+)?(?P<n>{_COUNT})\s+(?:{_PEOPLE}\s+)?(?:\(\d+(?:\.\d+)?\s*%\)\s+)?"
    rf"(?:with|in|receiving|assigned\s+to|given|on)\s+(?:the\s+)?(?P<name>{_NAME}){_NAME_END}",
    re.IGNORECASE,
)
_EVENT_MORE = re.compile(r"\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s+(?:versus|vs\.?)\s+)", re.IGNORECASE)
_PRIMARY = re.compile(r"\bprimary\s+(?:efficacy\s+)?(?:composite\s+)?(?:outcome|end\s*point)\b", re.IGNORECASE)
_PRIMARY_IS = re.compile(
    r"\bprimary\s+(?:efficacy\s+)?(?:composite\s+)?(?:outcome|end\s*point)\s+was\s+(?:defined\s+as\s+)?"
    r"(?!(?:assessed|measured|evaluated|analy[sz]ed|reported|adjudicated|compared|met|reached)\b)"
    r"(?P<name>[^.;]{3,150}?)\s*(?:[.;]\s|[.;]$)",
    re.IGNORECASE,
)
# Vancouver-style authors ("Okafor A, Lindqvist M, Haddad R" or "Okafor A et al"), then the year.
_SURNAME = r"(?:(?:van|von|de|da|del|der|di|du|le|la|ten|ter)\s+)*[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:[-'’][A-Z]?[a-z]+)*"
_AUTHOR = rf"{_SURNAME}\s+[A-Z]{{1,3}}\b"
_AUTHORS = re.compile(
    rf"(?<![\w-])(?P<surname>{_SURNAME})\s+[A-Z]{{1,3}}\b"
    rf"(?:\s*,\s*{_AUTHOR}|,?\s+(?:and|&)\s+{_AUTHOR}|,?\s+et\s+al\b)+"
)
_YEAR = re.compile(r"(?<!\d)(?:19[5-9]\d|20\d\d)(?!\d)")
_YEAR_WITHIN = 300  # characters after the author list: a citation's title and journal come first
_COMPARATOR_CUE = re.compile(r"(?:compared\s+with|versus|vs\.?|than(?:\s+with)?|relative\s+to)\s+(?:the\s+)?$", re.I)
# What stands between an effect and the arm it is about ("0.45 (95% CI 0.27 to 0.75) with A").
_ARM_AFTER = re.compile(r"\s*\)?\s*(?:with|for|in|among)\s+(?:the\s+)?", re.I)


@dataclass(frozen=True)
class _Arm:
    name: str
    quote: str
    size: int | None = None


@dataclass(frozen=True)
class _Events:
    subject: str  # what occurred, as the sentence names it ("The primary outcome")
    results: tuple[tuple[str, int, int], ...]  # (arm, events, total), in the sentence's order
    quote: str


def _arm_name(text: str) -> str:
    """A name as printed, without the "group" or "arm" a sentence adds ("the placebo group")."""
    return re.sub(r"\s+(?:group|arm)$", "", _clean(text), flags=re.IGNORECASE)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _arms(page: str) -> list[_Arm]:
    """Arms and their sizes from "600 were assigned to A and 598 to B" (any number of arms)."""
    for start, end in _sentences(page):
        sentence = _flat(page[start:end])
        head = _ASSIGNED.search(sentence)
        if head is None:
            continue
        found = [(head["name"], head["n"])]
        at = head.end()
        while (more := _ASSIGNED_MORE.match(sentence, at)) is not None:
            found.append((more["name"], more["n"]))
            at = more.end()
        if len(found) >= 2:
            quote = _flat(page[start:end])
            return [_Arm(_arm_name(name), quote, _number(size)) for name, size in found]
    return []


def _events(page: str) -> _Events | None:
    """Per-arm events from "<outcome> occurred in 112 of 600 patients with A and 150 of 598 with B"."""
    for start, end in _sentences(page):
        sentence = _flat(page[start:end])
        occurred = _OCCURRED.search(sentence)
        if occurred is None:
            continue
        results = []
        at = occurred.end()
        while (item := _EVENT.match(sentence, at)) is not None:
            results.append((_arm_name(item["name"]), _number(item["e"]), _number(item["n"])))
            separator = _EVENT_MORE.match(sentence, item.end())
            if separator is None:
                break
            at = separator.end()
        if len(results) >= 2:
            return _Events(sentence[: occurred.start()].strip(), tuple(results), _flat(page[start:end]))
    return None


def _primary_outcome(page: str) -> Pair | None:
    """The primary outcome's name from "The primary outcome was ..."."""
    for start, end in _sentences(page):
        sentence = _flat(page[start:end])
        if match := _PRIMARY_IS.search(sentence + " "):
            return _pair(match["name"].strip(), _flat(page[start:end]))
    return None


def _study_id(page: str) -> Pair | None:
    """The study as a review names it, "Surname Year": the first author of an author list in citation
    form ("Okafor A, Lindqvist M, ...") and the year printed after the list."""
    for match in _AUTHORS.finditer(page):
        year = _YEAR.search(page, match.end(), match.end() + _YEAR_WITHIN)
        if year is not None:
            return _pair(f"{_clean(match['surname'])} {year.group(0)}", _flat(page[match.start() : year.end()]))
    return None


def _mentioned(quote: str, arms: list[_Arm]) -> list[tuple[int, _Arm]]:
    """The declared arms a sentence names, with where, in order."""
    found = []
    for arm in arms:
        if match := re.search(rf"(?<![\w-]){re.escape(arm.name)}(?![\w-])", quote, re.IGNORECASE):
            found.append((match.start(), arm))
    return sorted(found, key=lambda item: item[0])


def _compared_arms(quote: str, arms: list[_Arm]) -> tuple[Pair, Pair] | None:
    """The (arm, comparator arm) an effect's sentence compares, when it says: the arm it names
    "versus"/"compared with" is the comparator; of several others, the one named right after the
    effect ("0.45 (95% CI ...) with A and 0.30 (...) with B") is its arm; of two arms, the one it
    does not name is the other side. None when the sentence leaves it open."""
    named = _mentioned(quote, arms)
    comparators = [arm for at, arm in named if _COMPARATOR_CUE.search(quote[:at])]
    others = [arm for _at, arm in named if arm not in comparators]
    if len(others) > 1 and (effect := _EFFECT.search(quote)) is not None:
        after = [arm for at, arm in named if at >= effect.end() and _ARM_AFTER.fullmatch(quote[effect.end() : at])]
        others = after or others
    if len(comparators) > 1 or len(others) > 1:
        return None
    if len(arms) == 2 and len(named) == 1:
        rest = next(arm for arm in arms if arm not in comparators and arm not in others)
        if comparators:
            others = [rest]
        else:
            comparators = [rest]
    if not (comparators and others):
        return None
    # A side the sentence names is quoted from it; the other from the sentence declaring it.
    return (
        _pair(others[0].name, quote if _named_in(quote, others[0]) else others[0].quote),
        _pair(comparators[0].name, quote if _named_in(quote, comparators[0]) else comparators[0].quote),
    )


def _named_in(quote: str, arm: _Arm) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(arm.name)}(?![\w-])", quote, re.IGNORECASE) is not None


# -- Risk of Bias 2: each domain judged from the methods sentences that speak to it. ------------

LOW, SOME_CONCERNS, HIGH = "low", "some concerns", "high"
_LEVELS = (LOW, SOME_CONCERNS, HIGH)
_QUOTE_MOST = 700  # a judgement's sentences on one page, at most this far apart, are quoted together


@dataclass(frozen=True)
class _Said:
    """A sentence of the paper: its page (index into the pages), where, and its text as read."""

    page: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Judged:
    level: str
    evidence: tuple[_Said, ...]  # the sentences the judgement rests on
    decisive: _Said  # the one quoted alone when they are too far apart


def _rule(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), re.IGNORECASE)


_RANDOM = _rule(r"\brandom")
_SEQUENCE_GOOD = _rule(
    r"computer[- ]generated", r"random[- ]number", r"permuted[- ]blocks?", r"minimi[sz]ation", r"random\w*\s+sequence"
)
_SEQUENCE_BAD = _rule(
    r"\balternat\w*", r"date of birth", r"birth date", r"(?:hospital|record|chart) numbers?", r"day of (?:the )?week"
)
_CONCEALMENT = _rule(r"\bconceal", r"\ballocat")
_CONCEALED_GOOD = _rule(
    r"\bcentral(?:ly|i[sz]ed)?\b",
    r"web[- ]based",
    r"interactive (?:web|voice)",
    r"\btelephone\b",
    r"\bpharmac(?:y|ist)\b",
    r"sequentially numbered,? (?:sealed,? )?opaque",
    r"opaque,? sealed",
)
_CONCEALED_WEAK = _rule(r"\bsealed envelopes?\b")
_CONCEALED_BAD = _rule(r"not concealed", r"\bopen (?:random )?(?:allocation )?(?:list|schedule|table)\b")
# A methods sentence says what was done (a title's "double-blind" says what the trial calls itself).
_VERB = _rule(r"\b(?:was|were|is|are|had|received)\b")
_BLINDED = _rule(
    r"double[- ](?:blind|mask)",
    r"triple[- ]blind",
    r"matching placebo",
    r"identical in appearance",
    r"\b(?:patients|participants)\b.*\b(?:unaware|blinded|masked)\b",
)
_OPEN = _rule(r"open[- ]label", r"\bun(?:blinded|masked)\b", r"\bnot (?:blinded|masked)\b", r"(?<!not )\baware of\b")
_ITT = _rule(
    r"intention[- ]to[- ]treat", r"intent[- ]to[- ]treat", r"\ball randomi[sz]ed \w+ were (?:included|analy[sz]ed)"
)
_PER_PROTOCOL = _rule(
    r"per[- ]protocol", r"modified intention", r"as[- ]treated", r"\bonly (?:the )?\w+ who (?:completed|received)"
)
_ASSESSORS = _rule(r"\bassess\w*", r"\badjudicat\w*", r"\bcommittee\b", r"\bevaluat\w*", r"\braters?\b")
_ASSESSORS_BLIND = _rule(r"\bunaware\b", r"\bblinded\b", r"\bmasked\b", r"without knowledge")
_ASSESSORS_AWARE = _rule(r"(?<!not )\baware of\b", r"\bun(?:blinded|masked)\b", r"\bnot (?:blinded|masked)\b")
_ATTRITION = _rule(r"\bdata\b", r"follow[- ]up", r"\blost\b", r"\bwithdr\w*")
_NOTHING_MISSING = _rule(
    r"\bavailable for all\b(?! but)",
    r"\bno (?:patients|participants) (?:were )?lost to follow[- ]up",
    r"\bno missing (?:outcome )?data",
    r"\bcomplete (?:follow[- ]up|outcome data) (?:for|in) all\b",
)
_MISSING_SHARE = _rule(
    r"\b(?:missing|unavailable|not available|lost to follow[- ]up|available for all but)\b[^.]{0,80}?"
    r"\(\s*(?P<share>\d+(?:\.\d+)?)\s*%\s*\)"
)
_MISSING_COUNT = _rule(
    rf"\b(?:missing|unavailable|lost to follow[- ]up) (?:for|in) (?P<count>{_COUNT}) {_PEOPLE}",
    rf"\bavailable for all but (?P<but>{_COUNT}) {_PEOPLE}",
)
_PLAN = _rule(r"\bprotocol\b", r"analysis plan", r"\bregist(?:ered|ration)\b")
_PLAN_LATE = _rule(
    r"\bafter\b", r"\bamended\b", r"\bchanged\b", r"post[- ]hoc", r"retrospectiv", r"\bnot (?:pre-?specified|published)"
)
_PLAN_EARLY = _rule(
    r"pre-?specified", r"published before", r"registered before", r"finali[sz]ed before", r"before (?:the )?first"
)


def _randomization(said: list[_Said]) -> _Judged | None:
    sequence = [s for s in said if _RANDOM.search(s.text) and _SEQUENCE_GOOD.search(s.text)]
    bad = [s for s in said if _SEQUENCE_BAD.search(s.text) and _CONCEALMENT.search(s.text)]
    concealment = [s for s in said if _CONCEALMENT.search(s.text)]
    concealed = [s for s in concealment if _CONCEALED_GOOD.search(s.text)]
    weak = [s for s in concealment if _CONCEALED_WEAK.search(s.text)]
    exposed = [s for s in concealment if _CONCEALED_BAD.search(s.text)]
    if bad or exposed:
        return _judged(HIGH, [*bad, *exposed])
    if sequence and concealed:
        return _judged(LOW, [sequence[0], concealed[0]], concealed[0])
    if sequence or concealed or weak:
        return _judged(SOME_CONCERNS, [*sequence[:1], *(concealed or weak)[:1]])
    return None


def _blinding(said: list[_Said]) -> tuple[str, _Said] | None:
    """("blinded" or "open", the sentence saying so), from a methods sentence."""
    for sentence in said:
        if not _VERB.search(sentence.text):
            continue
        if _OPEN.search(sentence.text):
            return "open", sentence
        if _BLINDED.search(sentence.text):
            return "blinded", sentence
    return None


def _deviations(said: list[_Said]) -> _Judged | None:
    blinding = _blinding(said)
    if blinding is None:
        return None
    how, sentence = blinding
    itt = next((s for s in said if _ITT.search(s.text) and not _PER_PROTOCOL.search(s.text)), None)
    protocol = next((s for s in said if _PER_PROTOCOL.search(s.text)), None) if itt is None else None
    # Blinded and analysed as randomized: low. Each shortfall (open label, an analysis that leaves
    # patients out) is a concern; both together, high.
    level = (LOW if itt else SOME_CONCERNS) if how == "blinded" else HIGH if protocol else SOME_CONCERNS
    analysis = itt or protocol
    evidence = [sentence, *([analysis] if analysis else [])]
    return _judged(level, evidence, analysis if level != LOW and analysis else None)


def _missing_data(said: list[_Said], randomized: int | None) -> _Judged | None:
    for sentence in said:
        if not _ATTRITION.search(sentence.text):
            continue
        if _NOTHING_MISSING.search(sentence.text):
            return _judged(LOW, [sentence])
        share: float | None = None
        if match := _MISSING_SHARE.search(sentence.text):
            share = float(match["share"])
        elif (match := _MISSING_COUNT.search(sentence.text)) and randomized:
            share = 100 * _number(match["count"] or match["but"]) / randomized
        if share is not None:
            return _judged(LOW if share < 5 else SOME_CONCERNS if share < 15 else HIGH, [sentence])
    return None


def _measurement(said: list[_Said]) -> _Judged | None:
    assessors = [s for s in said if _ASSESSORS.search(s.text)]
    aware = [s for s in assessors if _ASSESSORS_AWARE.search(s.text)]
    if aware:
        return _judged(SOME_CONCERNS, aware[:1])
    blind = [s for s in assessors if _ASSESSORS_BLIND.search(s.text)]
    if blind:
        return _judged(LOW, blind[:1])
    # No word on the assessors: in a double-blind trial they are among those kept unaware.
    blinding = _blinding(said)
    if blinding is not None:
        return _judged(LOW if blinding[0] == "blinded" else SOME_CONCERNS, [blinding[1]])
    return None


def _reporting(said: list[_Said]) -> _Judged | None:
    plans = [s for s in said if _PLAN.search(s.text)]
    late = [s for s in plans if _PLAN_LATE.search(s.text)]
    if late:
        return _judged(SOME_CONCERNS, late[:1])
    early = [s for s in plans if _PLAN_EARLY.search(s.text)]
    return _judged(LOW, early[:1]) if early else None


def _judged(level: str, evidence: list[_Said], decisive: _Said | None = None) -> _Judged:
    return _Judged(level, tuple(evidence), decisive or evidence[-1])


def _rob_quote(pages: list[str], judged: _Judged) -> str:
    """The sentences a judgement rests on, copied as one passage when they stand together on one
    page; else the decisive one alone (a quote is one passage of one page)."""
    evidence = judged.evidence
    start, end = min(s.start for s in evidence), max(s.end for s in evidence)
    if len({s.page for s in evidence}) == 1 and end - start <= _QUOTE_MOST:
        return _flat(pages[evidence[0].page][start:end])
    decisive = judged.decisive
    return _flat(pages[decisive.page][decisive.start : decisive.end])


def _risk_of_bias(pages: list[str], randomized: int | None) -> dict[str, Pair]:
    """The RoB 2 domains the methods speak to, each with its judgement and the passage it rests on;
    the overall judgement is the worst domain's once all five are judged (or any is high)."""
    said = [
        _Said(number, start, end, _flat(page[start:end]))
        for number, page in enumerate(pages)
        for start, end in _sentences(page)
    ]
    domains = {
        "randomization": _randomization(said),
        "deviations": _deviations(said),
        "missing_data": _missing_data(said, randomized),
        "measurement": _measurement(said),
        "reporting": _reporting(said),
    }
    judged = {name: found for name, found in domains.items() if found is not None}
    answer = {name: _pair(found.level, _rob_quote(pages, found)) for name, found in judged.items()}
    if judged and (len(judged) == len(domains) or any(found.level == HIGH for found in judged.values())):
        worst = max(judged, key=lambda name: _LEVELS.index(judged[name].level))
        answer["overall"] = dict(answer[worst])
    return answer


# -- The answer, in the template's shape. ---------------------------------------------------------

EFFECT_FIELDS = ("effect_measure", "effect_estimate", "ci_lower", "ci_upper")


def pattern_extract(document: str, *, comparisons: bool = False) -> dict[str, Any]:
    """An answer in the RCT template's shape with what the patterns find in ``document``: the
    study ("Surname Year" from a citation's author list and year), the NCT number and randomized
    total (``metadata``); the arms and their sizes ("600 were assigned to A and 598 to B"); the
    events per arm of an outcome ("The primary outcome occurred in 112 of 600 patients with A and
    150 of 598 with B", named by "The primary outcome was ..."); the first effect estimate with its
    95% CI; and the Risk of Bias 2 judgements the methods support. Fields it cannot find are left
    out, which the schema reads as null.

    Asked with ``comparisons`` (a template that speaks in arms, version 2), the arms are declared
    in ``arms``, each arm's events are an ``outcomes`` entry, and the effect is a ``comparisons``
    entry naming its two arms where its sentence says which (it names none otherwise). In the
    two-arm template (version 1) the arms are ``baseline``'s treatment and control (the control the
    arm named as one: placebo, usual care, ...) and an outcome entry holds both arms' events and the
    outcome's effect.

    Quotes never span the prompt's ``[page N]`` markers: each pattern is searched page by page."""
    pages = _PAGE_MARKER.split(document)
    found: dict[str, Pair] = {}
    for page in pages:
        for name, pair in _extract_page(page).items():
            found.setdefault(name, pair)
    metadata: dict[str, Pair] = {name: found[name] for name in ("nct_number", "randomized_n") if name in found}
    if study_id := _first(_study_id(page) for page in pages):
        metadata["study_id"] = study_id
    events = _first(_events(page) for page in pages)
    arms = _declared(_first(_arms(page) or None for page in pages) or [], events)
    primary = _first(_primary_outcome(page) for page in pages)
    randomized = found["randomized_n"]["value"] if "randomized_n" in found else None
    effect = {name: found[name] for name in EFFECT_FIELDS} if "effect_estimate" in found else None
    effect_quote = effect["effect_measure"]["quote"] if effect else ""
    effect_outcome = primary if effect and _PRIMARY.search(effect_quote) else None
    outcome = _outcome_of(events, primary)
    # The events' outcome is the effect's: a hazard ratio makes it a time-to-event outcome.
    same = effect_outcome is not None and outcome is not None and effect_outcome["value"] == outcome["value"]
    hazard = effect is not None and effect["effect_measure"]["value"] == "HR"
    answer: dict[str, Any] = {"metadata": metadata}
    if rob := _risk_of_bias(pages, randomized):
        answer["risk_of_bias"] = rob
    if comparisons:
        return {**answer, **_in_arms(arms, events, outcome, effect, effect_outcome, hazard and same)}
    return {**answer, **_in_two_arms(arms, events, outcome, effect, effect_outcome, hazard, same)}


T = TypeVar("T")


def _first(found: Iterable[T | None]) -> T | None:
    return next((item for item in found if item is not None), None)


def _declared(arms: list[_Arm], events: _Events | None) -> list[_Arm]:
    """The arms the sizes sentence declares, and any other the events sentence names."""
    declared = list(arms)
    if events is None:
        return declared
    for name, _count, _total in events.results:
        if all(arm_key_of(arm.name) != arm_key_of(name) for arm in declared):
            declared.append(_Arm(name, events.quote))
    return declared


def _outcome_of(events: _Events | None, primary: Pair | None) -> Pair | None:
    """The events' outcome: the primary outcome's name where the sentence speaks of it, else what
    the sentence says occurred."""
    if events is None:
        return None
    if primary is not None and _PRIMARY.search(events.subject):
        return primary
    return _pair(re.sub(r"^(?:the|a|an)\s+", "", events.subject, flags=re.IGNORECASE), events.quote)


def _as_declared(name: str, arms: list[_Arm]) -> str:
    return next((arm.name for arm in arms if arm_key_of(arm.name) == arm_key_of(name)), name)


def _in_arms(
    arms: list[_Arm],
    events: _Events | None,
    outcome: Pair | None,
    effect: dict[str, Pair] | None,
    effect_outcome: Pair | None,
    survival: bool,
) -> dict[str, Any]:
    """Version 2: the arms declared, one outcome entry per arm, the effect as a comparison."""
    declared = [
        {"arm_name": _pair(arm.name, arm.quote), **({"randomized_n": _pair(arm.size, arm.quote)} if arm.size else {})}
        for arm in arms
    ]
    outcomes = []
    if events is not None and outcome is not None:
        if effect is not None and survival:
            kind = _pair("survival", effect["effect_measure"]["quote"])
        else:
            kind = _pair("dichotomous", events.quote)
        for name, count, total in events.results:
            outcomes.append(
                {
                    "outcome_name": outcome,
                    "outcome_type": kind,
                    "arm": _pair(_as_declared(name, arms), events.quote),
                    "events": _pair(count, events.quote),
                    "total": _pair(total, events.quote),
                }
            )
    compared = []
    if effect is not None:
        entry: dict[str, Pair] = dict(effect)
        if effect_outcome is not None:
            entry["outcome_name"] = effect_outcome
        if sides := _compared_arms(effect["effect_measure"]["quote"], arms):
            entry["arm"], entry["comparator_arm"] = sides
        compared.append(entry)
    return {**({"arms": declared} if declared else {}), "outcomes": outcomes, "comparisons": compared}


def _in_two_arms(
    arms: list[_Arm],
    events: _Events | None,
    outcome: Pair | None,
    effect: dict[str, Pair] | None,
    effect_outcome: Pair | None,
    hazard: bool,
    same: bool,
) -> dict[str, Any]:
    """Version 1: treatment and control in ``baseline``; an outcome entry holds both arms' events,
    and the effect of the same outcome."""
    answer: dict[str, Any] = {}
    roles: dict[str, _Arm] = {}
    if len(arms) == 2:
        roles = dict(zip(("treatment", "control"), _treatment_first(arms), strict=True))
        baseline = {f"{role}_name": _pair(arm.name, arm.quote) for role, arm in roles.items()}
        baseline.update({f"n_{role}": _pair(arm.size, arm.quote) for role, arm in roles.items() if arm.size})
        answer["baseline"] = baseline
    entries: list[dict[str, Pair]] = []
    if events is not None and outcome is not None and len(events.results) == 2 and roles:
        by_arm = {arm_key_of(name): (count, total) for name, count, total in events.results}
        if all(arm_key_of(arm.name) in by_arm for arm in roles.values()):
            entry = {"outcome_name": outcome, "outcome_type": _pair("dichotomous", events.quote)}
            for role, arm in roles.items():
                count, total = by_arm[arm_key_of(arm.name)]
                entry[f"events_{role}"] = _pair(count, events.quote)
                entry[f"total_{role}"] = _pair(total, events.quote)
            entries.append(entry)
    if effect is not None:
        # The effect of the outcome whose events were read joins their entry; another is its own.
        if not (entries and same):
            entries.append({})
        target = entries[0] if same else entries[-1]
        target.update(effect)
        if effect_outcome is not None:
            target["outcome_name"] = effect_outcome
        if hazard:
            target["outcome_type"] = _pair("survival", effect["effect_measure"]["quote"])
    answer["outcomes"] = entries
    return answer


def _treatment_first(arms: list[_Arm]) -> tuple[_Arm, _Arm]:
    """(treatment, control): the control is the arm named as one (placebo, usual care, sham, ...),
    the project's rule for which side an arm is on; else the second arm named."""
    from extraction_pipeline.core.synthesis.comparisons import COMPARATOR, proposed_side

    controls = [arm for arm in arms if proposed_side("", arm.name) == COMPARATOR]
    if len(controls) == 1:
        control = controls[0]
        return next(arm for arm in arms if arm is not control), control
    return arms[0], arms[1]


def asks_for_comparisons(messages: list[Any]) -> bool:
    """Whether the JSON Schema the prompt asks for has a ``comparisons`` list, as a template that
    speaks in arms has."""
    from extraction_pipeline.core.extraction.prompts import asked_schema

    return '"comparisons":' in asked_schema(messages)


def _extract_page(document: str) -> dict[str, dict[str, Any]]:
    fields: dict[str, dict[str, Any]] = {}
    if match := _NCT.search(document):
        fields["nct_number"] = {"value": match.group(0), "quote": _sentence_around(document, *match.span())}
    if match := _RANDOMIZED.search(document):
        number = int((match.group(1) or match.group(2)).replace(",", ""))
        fields["randomized_n"] = {"value": number, "quote": _sentence_around(document, *match.span())}
    if match := _EFFECT.search(document):
        quote = _sentence_around(document, *match.span())
        measure = match.group(1)
        fields["effect_measure"] = {"value": _MEASURE_NAMES.get(measure.lower(), measure.upper()), "quote": quote}
        for name, group in (("effect_estimate", 2), ("ci_lower", 3), ("ci_upper", 4)):
            fields[name] = {"value": float(match.group(group)), "quote": quote}
    return fields


_registered = False


def register_offline_provider() -> None:
    """Register the offline extractor with litellm (idempotent, per process)."""
    global _registered
    if _registered:
        return
    import litellm
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import ModelResponse

    from extraction_pipeline.core.extraction.prompts import document_from_messages

    class OfflinePatternLLM(CustomLLM):
        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
            document = document_from_messages(messages)
            content = json.dumps(pattern_extract(document, comparisons=asks_for_comparisons(messages)))
            return ModelResponse(
                model=OFFLINE_MODEL,
                choices=[{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            )

    litellm.custom_provider_map = [
        item for item in litellm.custom_provider_map if item["provider"] != OFFLINE_PROVIDER
    ] + [{"provider": OFFLINE_PROVIDER, "custom_handler": OfflinePatternLLM()}]
    _registered = True
