"""Does a number's place in the paper say what its claim says? Outcome, arm and time point.

Grounding proves that a number is printed in the paper; models rarely invent numbers, they copy
one from the wrong row, column, arm or time point. So a number's place (``places.Place``: its
table row and column headers, or its sentence) must name what the number is claimed for:

- the outcome: a table row's label (or, for a row labelled only by a statistic or a time such as
  "n (%)" or "Week 8", the heading above it or the caption) or the sentence, or the sentence
  before it, shares an identifying word with the outcome's name;
- the arm: the column headers (or a row label that names an arm) or the number's clause do not
  name another declared arm instead of the claimed one;
- the time point: where the claim and the place both print a time, they agree.

Words match on their first five letters (word forms: "vomiting"/"vomited"), abbreviations are
resolved from the paper itself ("PONV" where it prints "postoperative nausea and vomiting
(PONV)"), and words that name no outcome ("incidence", "mean", "patients") never match alone.
A check that cannot read a place (no boxes, a number not found) raises nothing: it adds flags,
it never removes a verdict. Each flag is a sentence saying what the place names instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property

from rapidfuzz import fuzz

from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.arithmetic import percent_flag, percentage_only_flag
from extraction_pipeline.core.verification.places import TABLE, Place, places_of
from extraction_pipeline.core.verification.sizes import ROW_LABEL_CHARS, PrintedTable, printed_tables

WORD = re.compile(r"[a-zα-ω][a-zα-ω0-9]*|\d+[a-z]+[a-z0-9]*", re.IGNORECASE)
# Words that say how an outcome is measured or reported, not which outcome it is.
GENERIC = {
    "the",
    "and",
    "for",
    "with",
    "from",
    "after",
    "during",
    "between",
    "over",
    "into",
    "that",
    "this",
    "were",
    "was",
    "are",
    "per",
    "than",
    "all",
    "any",
    "each",
    "its",
    "their",
    "other",
    "those",
    "incidence",
    "rate",
    "rates",
    "level",
    "levels",
    "number",
    "numbers",
    "total",
    "mean",
    "means",
    "change",
    "changes",
    "percentage",
    "percent",
    "proportion",
    "patients",
    "patient",
    "participants",
    "subjects",
    "group",
    "groups",
    "overall",
    "value",
    "values",
    "measure",
    "measured",
    "outcome",
    "outcomes",
    "score",
    "scores",
    "scale",
    "data",
    "result",
    "results",
    "baseline",
    "study",
    "trial",
    "period",
    "time",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "hour",
    "hours",
    "min",
    "minutes",
    "observation",
    "recorded",
    "assessed",
    "reported",
    "having",
    "had",
    "who",
    "which",
    "not",
    "non",
    "no",
    "yes",
    "treatment",
    "treated",
    "received",
    "receive",
    "versus",
    "compared",
    "difference",
    "significant",
    "significantly",
    "statistically",
    "vs",
    "intervention",
    "control",
    "controls",
    "arm",
    "arms",
    "dose",
    "mg",
    "kg",
    "ml",
    # how an instrument is built, not what it measures ("Physical Component Summary")
    "component",
    "summary",
    "subscale",
    "questionnaire",
    "inventory",
    "item",
    "items",
}
# Words that name the same outcome as another word ("58 patients ... had died": mortality).
SYNONYMS = {
    "death": "morta",
    "deaths": "morta",
    "died": "morta",
    "dead": "morta",
    "fatal": "morta",
    "emesis": "vomit",
    "hospitalisation": "hospi",
    "admissions": "admis",
}
# A row label that names only how a value is given or when, never which outcome.
STATISTIC_LABEL = re.compile(
    r"^[\s(]*(?:n|no|mean|median|sd|se|iqr|range|%|n\s*\(%\)|yes|no|total|all|overall|"
    r"baseline|end(?:point)?|final|change|difference|follow[- ]?up|(?:pre|post)[- ]?\w*|"
    r"(?:day|week|wk|month|year|visit|hour|h|min)s?\s*[-–]?\s*\d*(?:\s*[-–]\s*\d+)?|\d+\s*(?:h|hr|hours?|days?|weeks?|months?|years?))"
    r"[\s)]*(?:[(,].*)?$",
    re.IGNORECASE,
)
TIME = re.compile(
    r"(\d+(?:\.\d+)?)(?:\s*(?:[-–—]|to)\s*(\d+(?:\.\d+)?))?\s*(h|hr|hrs|hours?|d|days?|wk|weeks?|mo|months?|years?)\b",
    re.IGNORECASE,
)
TIME_WORD = re.compile(r"\b(day|week|month|year|visit)\s*(\d+)\b", re.IGNORECASE)
UNIT = {
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "d": "d",
    "day": "d",
    "days": "d",
    "wk": "w",
    "week": "w",
    "weeks": "w",
    "mo": "m",
    "month": "m",
    "months": "m",
    "year": "y",
    "years": "y",
}
# Two capitals that name a statistic or a unit, not an outcome.
STATISTIC_CODES = {"hr", "or", "rr", "rd", "md", "ci", "sd", "se", "na", "nr", "ns", "iq", "vs", "mg", "kg", "ml"}
# Words that name no particular arm ("the placebo group", "patients in the intervention arm").
ARM_GENERIC = {
    "group",
    "groups",
    "arm",
    "arms",
    "patients",
    "patient",
    "participants",
    "subjects",
    "the",
    "and",
    "with",
    "for",
    "who",
    "received",
    "receive",
    "receiving",
    "treated",
    "treatment",
    "day",
    "dose",
    "daily",
}
# Arm names that are time points, not arms ("baseline" as the comparator of a before-after row).
TIME_ARM = re.compile(r"^\s*(?:baseline|pre-?treatment|pre-?intervention|before(?: treatment)?|week 0|day 0)\s*$", re.I)
# "The primary outcome was X", "Secondary endpoints were X and Y", "The main outcome measure: X".
OUTCOME_DEFINITION = re.compile(
    r"\b(primary|secondary|main|co-primary)\s+(?:efficacy\s+)?(?:outcome|endpoint|end point|outcome measure)s?"
    r"\s*(?:was|were|is|are|included|comprised|:)\s+([^.;]{3,200})",
    re.IGNORECASE,
)
ROLE = re.compile(r"\b(primary|secondary|main|co-primary)\s+(?:efficacy\s+)?(?:outcome|endpoint|end point)", re.I)
ABBREVIATION = re.compile(r"\(([A-Z][A-Za-z0-9\-]{1,9})\)")
# "kPCS: Short Form ... Physical Component Summary." (a footnote mark may lead the abbreviation)
COLON_DEFINITION = re.compile(r"(?:^|[\s.;])[a-z]?([A-Z][A-Z0-9\-]{1,9}):\s+([A-Z][^.;:]{4,120})")
# "X (ie, Y) were measured using the ... (ABBR)": the instrument names what it measures.
MEASURED_WITH = re.compile(
    r"(?P<what>[A-Za-z][^.;:]{2,80}?)\s+(?:was|were|is|are)\s+(?:measured|assessed|evaluated|rated|quantified)"
    r"\s+(?:using|with|by|on)\s+[^.;]{0,120}?\((?P<short>[A-Z][A-Za-z0-9\-]{1,9})\)"
)
# An abbreviation with a footnote mark or a plural "s" glued to it: "BMIh", "MCSl", "RBCs".
FOOTNOTED = re.compile(r"^[A-Z]{2,}[a-z]$")
NON_PREFIX = re.compile(r"\b(non)-(?=[a-z])", re.IGNORECASE)
COMPOUND = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+")
# Words an abbreviation's letters skip ("postoperative nausea and vomiting" is PONV).
LINKING = {"and", "of", "the", "in", "for", "to", "with", "on", "at", "or"}


# A reference list's heading line, or a table's or figure's caption (tables often follow the references).
SECTION_MARK = re.compile(
    r"^[ \t]*(?:(?P<references>references|bibliography|literature cited|reference list)[ \t]*$"
    r"|(?:table|fig\.?|figure)[ \t]+[0-9ivx]+\b)",
    re.IGNORECASE | re.MULTILINE,
)
REFERENCE_FLAG = "the quote is in the reference list, not in the paper's text or tables"


@dataclass(frozen=True)
class Claim:
    """What a number is claimed to be: of which outcome, arm and time point, among which arms."""

    outcome: str
    arm: str
    arms: tuple[str, ...]  # every declared arm (the claim's among them)
    kind: str  # events, total, mean, sd, n
    timepoint: str = ""


# The numbers of an arm's result whose place is checked.
PLACED_KINDS = ("events", "total", "mean", "sd", "n")
COUNTS = ("events", "total", "n")


@dataclass(frozen=True)
class PlacedNumber:
    """A verified arm number with where its quote is and what it is claimed to be."""

    path: str
    kind: str  # events, total, mean, sd, n
    value: object
    page: int
    start: int
    end: int
    outcome: str
    arm: str
    timepoint: str = ""
    total: object = None  # the same entry's total (for the percentage beside events)


def placed_flags(
    numbers: list[PlacedNumber],
    arms: tuple[str, ...],
    parsed: ParsedDocument,
    vocabulary: Vocabulary | None = None,
) -> dict[str, list[str]]:
    """path -> flags: each number's place against its claim, the percentage printed beside a
    count, a count printed only as a percentage, and the arms of one outcome read from different
    rows of one table."""
    vocabulary = vocabulary or Vocabulary(parsed)  # given when one paper is checked many times
    flags: dict[str, list[str]] = {}
    rows: dict[tuple[str, str, str], dict[str, set[tuple[str, str, str]]]] = {}
    for number in numbers:
        if not number.outcome:
            continue
        claim = Claim(number.outcome, number.arm, arms, number.kind, number.timepoint)
        places = places_of(parsed, number.page, number.start, number.end, number.value)
        if not places:
            continue
        verdicts = [
            [REFERENCE_FLAG] if place.kind != TABLE and vocabulary.in_references(number.page, number.start) else []
            for place in places
        ]
        verdicts = [
            found or check_place(place, claim, vocabulary) for found, place in zip(verdicts, places, strict=True)
        ]
        if number.kind == "events":
            sums = [percent_flag(place.printed, number.value, number.total, _says_percent(place)) for place in places]
            verdicts = [[*found, summed] if summed else found for found, summed in zip(verdicts, sums, strict=True)]
        if number.kind in ("n", "total") and (other := _own_table_size_flag(number, claim, places, vocabulary)):
            verdicts = [[*found, other] for found in verdicts]
        if number.kind in COUNTS:
            verdicts = [
                [*found, only] if (only := percentage_only_flag(place.printed, number.value)) else found
                for found, place in zip(verdicts, places, strict=True)
            ]
        if all(verdicts):
            flags[number.path] = verdicts[0]
            continue
        agreeing = [place for place, found in zip(places, verdicts, strict=True) if not found]
        if number.kind in ("events", "mean") and number.arm:
            key = (number.outcome, number.timepoint, number.kind)
            rows.setdefault(key, {}).setdefault(number.arm, set()).update(
                _row_of(place, claim, vocabulary) for place in agreeing
            )
    for (_outcome, _timepoint, kind), by_arm in rows.items():
        _same_row(kind, by_arm, numbers, flags)
    return flags


def _own_table_size_flag(number: PlacedNumber, claim: Claim, places: list[Place], vocabulary: Vocabulary) -> str | None:
    """An arm size quoted from outside the outcome's own table, when that table's header gives
    the arm another size ("Intervention* (N = 40)" over a table about the outcome; the quote's
    453 counts the patients interviewed, the table's 40 the clusters analysed)."""
    if any(DENOMINATOR.search(place.printed_after) for place in places):
        return None  # "134/394": the count's own denominator, however many the table's header counts
    sizes: list[tuple[PrintedTable, str, int]] = []
    for table in vocabulary.tables:
        if not _about(table, claim.outcome, vocabulary):
            continue
        if any(place.kind == TABLE and place.caption.startswith(table.caption) for place in places):
            return None  # quoted from the outcome's table itself (a row's own "12/40")
        sizes += [
            (table, label, size) for label, size in table.sizes if _header_arm(label, claim, vocabulary) == claim.arm
        ]
    if sizes:
        if any(str(size) == str(number.value) for _, _, size in sizes):
            return None
        table, label, size = sizes[0]
        return (
            f"the table about this outcome ('{_shown(table.title)}') gives this arm N = {size} ('{label}'); "
            f"the quote gives {number.value}"
        )
    # No table about the outcome: every table's header sizes for the arm (a baseline table's
    # "RMD (n = 33)"); a size none of them prints is a subgroup's or another outcome's.
    every = [
        (table, label, size)
        for table in vocabulary.tables
        for label, size in table.sizes
        if _header_arm(label, claim, vocabulary) == claim.arm and _of_the_trials_arms(label, claim, vocabulary)
    ]
    if not every or any(str(size) == str(number.value) for _, _, size in every):
        return None
    table, label, size = every[0]
    return (
        f"the paper's tables give this arm N = {size} ('{label}', {_shown(table.caption)}); "
        f"the quote gives {number.value}"
    )


def _of_the_trials_arms(label: str, claim: Claim, vocabulary: Vocabulary) -> bool:
    """Does a header speak of the declared arms, not of a population they share a word with? Where
    every arm's name holds a word ("palmvitee" of "palmvitee smokers" and "palmvitee nonsmokers"),
    a header without it ("Smokers (n = 58)" of a baseline table) counts everyone who smokes."""
    if CONTROL_ARM.search(label) or ACTIVE_ARM.search(label):
        return True  # "Control", "Intervention": the trial's own arms
    every = [_arm_words(arm, vocabulary) for arm in claim.arms if not TIME_ARM.match(arm)]
    shared = set.intersection(*every) if every else set()
    return not shared or bool(shared & _arm_words(label, vocabulary))


def _about(table: PrintedTable, outcome: str, vocabulary: Vocabulary) -> bool:
    """Is ``table`` about ``outcome``: its title, or one of its rows' labels, holds every word that
    identifies the outcome (on six letters: "completed" is "completion", not "complications")?"""
    wanted = {
        word.lower()[:6]
        for word in tokens(outcome)
        if (len(word) >= 4 or (word.isupper() and len(word) >= 2)) and word.lower() not in GENERIC
    }
    if not wanted or BASELINE_TABLE.search(table.title):
        return False  # a table of baseline characteristics is no outcome's own table
    for line in (table.title, *table.lines[2:]):
        if len(line) <= ROW_LABEL_CHARS or line == table.title:
            words = {word.lower()[:6] for word in tokens(line)}
            if wanted <= words:
                return True
    return False


BASELINE_TABLE = re.compile(r"\bbaseline\b|\bcharacteristics\b|\bdemographic", re.IGNORECASE)
ACTIVE_ARM = re.compile(r"\b(?:intervention|experimental|treatment|active|treated)\b", re.IGNORECASE)


def _header_arm(label: str, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """The declared arm a table header names: by its own words, or in a two-arm trial by "control"
    (the one comparison arm) or "intervention" (the other)."""
    if _undeclared_arm(label, claim):
        return None  # "Non-smokers (placebo, n = 27)": a group the answer did not declare
    named = _named_arms(label, claim, vocabulary)
    if len(named) == 1:
        return next(iter(named))
    if named or len(claim.arms) != 2:
        return None
    comparison = [arm for arm in claim.arms if _comparison_arm(arm)]
    if len(comparison) != 1:
        return None
    if CONTROL_ARM.search(label):
        return comparison[0]
    if ACTIVE_ARM.search(label):
        return next(arm for arm in claim.arms if arm != comparison[0])
    return None


def _row_of(place: Place, claim: Claim, vocabulary: Vocabulary) -> tuple[str, str, str]:
    """Which row of which table a number is in, for a table whose columns are the arms (its
    column names the claimed arm); anything else (running text, arms as rows) gives no row."""
    if place.kind != TABLE or claim.arm not in _named_arms(" ".join(place.columns), claim, vocabulary):
        return ("", "", "")
    return (place.caption, place.row_label, place.headings[0] if place.headings else "")


def _same_row(
    kind: str, by_arm: dict[str, set[tuple[str, str, str]]], numbers: list[PlacedNumber], flags: dict[str, list[str]]
) -> None:
    """Both arms' numbers of one outcome from one table row: a row each, and different rows of one
    table, means one arm's number is from another row (another outcome or time point)."""
    single = {arm: next(iter(found)) for arm, found in by_arm.items() if len(found) == 1}
    tables = {arm: row for arm, row in single.items() if any(row)}
    if len(tables) < 2 or len({row for row in tables.values()}) == 1:
        return
    if len({row[0] for row in tables.values()}) != 1:
        return  # different tables (or a caption not read): no verdict
    described = "; ".join(f"'{arm}' from the row '{row[1] or row[2]}'" for arm, row in tables.items())
    sentence = f"the arms' {kind} values are from different rows of one table ({described})"
    for number in numbers:
        if number.kind == kind and number.arm in tables and sentence not in flags.get(number.path, []):
            flags.setdefault(number.path, []).append(sentence)


class Vocabulary:
    """The paper's own abbreviations, read once per document."""

    def __init__(self, parsed: ParsedDocument) -> None:
        self.parsed = parsed

    @cached_property
    def expansions(self) -> dict[str, set[str]]:
        """abbreviation (lower case) -> the stems of its long form, and each long form's stems -> abbreviation."""
        found: dict[str, set[str]] = {}
        for text in self.parsed.pages_text:
            flat = " ".join(text.split())
            for match in ABBREVIATION.finditer(flat):
                short = match.group(1)
                letters = [c for c in short if c.isalpha()]
                # "digestion-resistant maltodextrin (RMD)": a hyphen's parts are words of their own
                words = re.findall(r"[A-Za-z]+", flat[max(0, match.start() - 120) : match.start()])
                long_form = _long_form(letters, words)
                if long_form:
                    found.setdefault(short.lower(), set()).update(stems(" ".join(long_form)))
            # A table's footnote: "kPCS: Short Form 12-item Health Survey Physical Component Summary."
            for match in COLON_DEFINITION.finditer(flat):
                short = match.group(1)
                letters = [c for c in short if c.isalpha()]
                long_form = _long_form(letters, re.findall(r"[A-Za-z]+", match.group(2)))
                if long_form and short.lower() not in found:
                    found[short.lower()] = stems(" ".join(long_form))
        return found

    @cached_property
    def measures(self) -> dict[str, set[str]]:
        """instrument abbreviation -> the stems of what the paper measures with it ("psychological
        flexibility ... were measured using the ... Questionnaire-II (AAQ-II)")."""
        found: dict[str, set[str]] = {}
        for text in self.parsed.pages_text:
            for match in MEASURED_WITH.finditer(" ".join(text.split())):
                found.setdefault(match.group("short").lower(), set()).update(stems(match.group("what")))
        return found

    @cached_property
    def defined_outcomes(self) -> dict[str, set[str]]:
        """ "primary outcome" -> the stems of what the paper says it was ("The primary outcome was
        nausea or vomiting within 24 hours"): a results sentence often names only the role."""
        found: dict[str, set[str]] = {}
        for text in self.parsed.pages_text:
            for match in OUTCOME_DEFINITION.finditer(" ".join(text.split())):
                found.setdefault(match.group(1).lower(), set()).update(stems(match.group(2)))
        return found

    @cached_property
    def marks(self) -> list[tuple[int, int, bool]]:
        """(page, offset, is the reference list) of each "References" heading and each table or
        figure caption, in reading order: the latest before a number says where it is."""
        found = []
        for page, text in enumerate(self.parsed.pages_text, start=1):
            for match in SECTION_MARK.finditer(text):
                found.append((page, match.start(), bool(match.group("references"))))
        return found

    @cached_property
    def tables(self) -> list[PrintedTable]:
        return printed_tables(self.parsed.pages_text)

    def in_references(self, page: int, offset: int) -> bool:
        """Is ``offset`` of ``page`` in the reference list (after its heading, before any later caption)?"""
        before = [mark for mark in self.marks if (mark[0], mark[1]) <= (page, offset)]
        return bool(before) and before[-1][2]

    def stems_of(self, text: str, generic: set[str] = GENERIC) -> set[str]:
        """The identifying stems of ``text``, with every abbreviation it uses spelled out and every
        long form it spells out abbreviated."""
        found = stems(text, generic)
        words = {token.lower() for token in tokens(text)}
        for short, long_stems in self.expansions.items():
            if short in words:
                found |= long_stems
            elif long_stems and long_stems <= found:
                found.add(short)
        return found


def _long_form(letters: list[str], words: list[str]) -> list[str]:
    """The words before "(ABBR)" whose initials spell the abbreviation (Schwartz & Hearst, simplified):
    the shortest run of trailing words starting with the abbreviation's first letter and holding
    its letters in order."""
    if not letters or not words:
        return []
    for size in range(1, min(len(words), len(letters) + 3) + 1):
        run = words[-size:]
        if run[0][0].lower() != letters[0].lower():
            continue
        joined = " ".join(run).lower()
        position = 0
        for letter in (c.lower() for c in letters):
            position = joined.find(letter, position)
            if position < 0:
                break
            position += 1
        else:
            return run
    return []


def tokens(text: str) -> list[str]:
    """The words of ``text``, an abbreviation's footnote mark or plural dropped ("BMIh" in a table
    whose note h gives the unit, "RBCs")."""
    joined = NON_PREFIX.sub(r"\1", text)  # "Non-smokers" is the word "nonsmokers", not a negation
    return [token[:-1] if FOOTNOTED.match(token) else token for token in WORD.findall(joined)]


def _compounds(text: str) -> list[str]:
    """Hyphenated names whole ("AAQ-II", "IL-2"), a footnote mark dropped from each part ("AAQ-IIj")."""
    return [
        "-".join(part[:-1] if FOOTNOTED.match(part) else part for part in match.group().split("-"))
        for match in COMPOUND.finditer(text)
    ]


def stems(text: str, generic: set[str] = GENERIC) -> set[str]:
    """Identifying words on their first five letters (codes such as "H2" or "CD4" kept whole)."""
    found = set()
    for token in tokens(text):
        lower = token.lower()
        code = token.isupper() and len(token) == 2 and lower not in STATISTIC_CODES  # "GT", "GG" genotypes
        if lower in generic or (len(lower) < 3 and not code and not any(c.isdigit() for c in lower)):
            continue
        found.add(lower if any(c.isdigit() for c in lower) else SYNONYMS.get(lower, lower[:5]))
    return found


def times(text: str) -> set[tuple[str, str]]:
    """The time points a text prints, as (span, unit): "2–24 h" -> ("2-24", "h"), "week 8" -> ("8", "w")."""
    found = set()
    for match in TIME.finditer(text):
        first, second, unit = match.groups()
        found.add((f"{first}-{second}" if second else first, UNIT.get(unit.lower(), unit.lower())))
    for match in TIME_WORD.finditer(text):
        found.add((match.group(2), UNIT.get(match.group(1).lower() + "s", match.group(1)[0].lower())))
    return found


def check_place(place: Place, claim: Claim, vocabulary: Vocabulary) -> list[str]:
    """The flags for a number at ``place`` claimed as ``claim``: empty when the place agrees."""
    found = (
        _outcome_flag(place, claim, vocabulary),
        _arm_flag(place, claim, vocabulary),
        _time_flag(place, claim),
        _spread_flag(place, claim),
        _part_as_size_flag(place, claim),
        _change_flag(place, claim),
        _baseline_flag(place, claim),
    )
    return [flag for flag in found if flag]


def _names(text: str, target: set[str], vocabulary: Vocabulary, outcome: str = "") -> bool:
    """Does ``text`` share an identifying word with ``target``? An abbreviation in ``text`` counts
    when at least half of its long form's words are in ``target`` ("Total PONV" names
    "postoperative nausea and vomiting", not "postoperative pain"), or when its letters are the
    initials of ``outcome``'s words ("TNF-α" names "tumor necrosis factor alpha" in a paper that
    never spells it out)."""
    if target & stems(text):
        return True
    compounds = _compounds(text)
    if outcome and any(_initials_of(token, outcome) for token in [*tokens(text), *compounds]):
        return True
    for role in ROLE.finditer(text):  # "the primary outcome occurred in 11 of 68": what the paper defined it as
        if target & vocabulary.defined_outcomes.get(role.group(1).lower(), set()):
            return True
    words = {token.lower() for token in [*tokens(text), *compounds]}
    if any(vocabulary.measures.get(word, set()) & target for word in words):
        return True  # the instrument the paper measures the outcome with ("AAQ-II")
    for short, long_stems in vocabulary.expansions.items():
        if short in words and long_stems and 2 * len(long_stems & target) >= len(long_stems):
            return True
        if short in target and long_stems and long_stems <= stems(text):
            return True
    return False


def _initials_of(token: str, text: str) -> bool:
    """Are the capitals of ``token`` (an abbreviation: "TNF", "ABC-J", "DPP") the initials of a run
    of two or more of ``text``'s words, in order? Each word of the run gives its first letter and
    may give later ones of its own ("DiPeptidyl Peptidase"); linking words ("and", "of") may be
    skipped."""
    letters = [c.lower() for c in token.split("-")[0] if c.isupper()]
    if len(letters) < 2 or token.lower() in STATISTIC_CODES or "".join(letters) in STATISTIC_CODES:
        return False
    words = [word.lower() for word in re.findall(r"[A-Za-z]+", text)]

    # "IL-2" and "interleukin 2": the shared number makes one word enough.
    number = re.search(r"\d+", token)
    least = 1 if number and re.search(rf"(?<![\d.]){number.group()}(?![\d.])", text) else 2

    def spells(letter: int, word: int, used: int) -> bool:
        if letter == len(letters):
            return used >= least
        if word == len(words):
            return False
        current = words[word]
        if current[0] != letters[letter]:
            return current in LINKING and used > 0 and spells(letter, word + 1, used)
        # This word gives its initial and then ``extra`` more letters from inside it, in order.
        position, taken = 1, letter + 1
        if spells(taken, word + 1, used + 1):
            return True
        while taken < len(letters):
            position = current.find(letters[taken], position) + 1
            if position == 0:
                return False
            taken += 1
            if spells(taken, word + 1, used + 1):
                return True
        return False

    return any(spells(0, start, 0) for start in range(len(words)) if words[start][0] == letters[0])


def _outcome_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    if claim.kind in ("n", "total"):
        return None  # an arm's size is printed once for all its outcomes
    wanted = vocabulary.stems_of(claim.outcome)
    if not wanted:
        return None
    if place.kind == TABLE:
        label = place.row_label
        specific = (
            label and not STATISTIC_LABEL.match(label) and stems(label) and not _names_an_arm(label, claim, vocabulary)
        )
        if specific:
            # A row of its own: its label, the heading it sits under, or (outcomes as columns)
            # its column must name the outcome; a caption naming it does not make a row about it.
            if any(
                _names(text, wanted, vocabulary, claim.outcome)
                for text in (label, *place.headings[:1], " ".join(place.columns))
            ):
                return None
            return f"the quoted row is '{label}', not the outcome '{claim.outcome}'"
        # A row labelled by a statistic, a time or an arm: the outcome is named above it.
        context = " ".join([label, *place.headings, *place.columns, place.caption])
        if _names(context, wanted, vocabulary, claim.outcome):
            return None
        shown = label or (place.headings[0] if place.headings else "no label")
        return f"the quoted row ('{shown}') does not name the outcome '{claim.outcome}'"
    if _names(place.sentence, wanted, vocabulary, claim.outcome) or _names(place.before, wanted, vocabulary):
        return None
    return f"the quoted sentence does not name the outcome '{claim.outcome}'"


def _names_an_arm(text: str, claim: Claim, vocabulary: Vocabulary) -> bool:
    """Does ``text`` name a declared arm, or an arm in words every trial uses?"""
    return bool(_named_arms(text, claim, vocabulary)) or bool(
        re.search(r"\b(?:placebo|control|controls|intervention|sham|usual care|standard care)\b", text, re.I)
    )


def _arm_stems(claim: Claim, vocabulary: Vocabulary) -> dict[str, set[str]]:
    """Each declared arm's distinguishing stems: its words that not every arm shares."""
    every = {arm: _arm_words(arm, vocabulary) for arm in claim.arms if not TIME_ARM.match(arm)}
    shared = set.intersection(*every.values()) if every else set()
    return {arm: words - shared for arm, words in every.items()}


CONTROL_WORDS = {"control", "controls", "controlled"}
# An arm named by a letter or number after a word: "Drug A", "Group 2" (the letter alone is no word).
LETTERED = re.compile(r"\b([A-Za-z]{2,})\s+([A-Z]|\d{1,2})\b(?![.,]\d)")


def _arm_words(text: str, vocabulary: Vocabulary) -> set[str]:
    """The words that can name an arm in ``text``: its stems (negations left out) and its lettered
    names ("drug a")."""
    plain = NEGATED.sub(" ", text)
    found = vocabulary.stems_of(plain, ARM_GENERIC)
    if "contr" in found and not {token.lower() for token in tokens(plain)} & CONTROL_WORDS:
        found.discard("contr")  # "Controller medicine", "contraception": no control arm
    return found | {f"{match.group(1).lower()[:5]} {match.group(2).lower()}" for match in LETTERED.finditer(text)}


NEGATED = re.compile(r"\b(?:no|non|not|without)\s+(?:an?\s+|the\s+)?[\w-]+", re.IGNORECASE)
ARM_WORD = re.compile(r"\b(?:placebo|control|controls|intervention|sham|usual|standard)\b", re.IGNORECASE)


def _named_arms(text: str, claim: Claim, vocabulary: Vocabulary) -> set[str]:
    """The declared arms ``text`` names by a word of their own ("No intervention" names none)."""
    found = _arm_words(text, vocabulary)
    return {arm for arm, words in _arm_stems(claim, vocabulary).items() if words and words & found}


def _mentions(text: str, claim: Claim, vocabulary: Vocabulary) -> list[tuple[int, str | None]]:
    """Where ``text`` speaks of an arm: (offset, the declared arm it names), in order; the arm is
    None for a word of an arm that does not tell which ("Palmvitee" of two palmvitee arms,
    "placebo" not declared)."""
    every = {arm: vocabulary.stems_of(NEGATED.sub(" ", arm), ARM_GENERIC) for arm in claim.arms}
    words_of_arms = set().union(*every.values()) if every else set()
    found: list[tuple[int, str | None]] = []
    plain = NEGATED.sub(lambda m: " " * len(m.group()), text)
    for match in WORD.finditer(plain):
        named = _named_arms(match.group(), claim, vocabulary)
        if len(named) == 1:
            found.append((match.start(), next(iter(named))))
        elif named or ARM_WORD.fullmatch(match.group()) or (stems(match.group(), ARM_GENERIC) & words_of_arms):
            found.append((match.start(), None))
    # "drug A": the lettered name tells which arm its first word ("drug", of both arms) does not.
    by_offset = dict(found)
    for match in LETTERED.finditer(plain):
        named = _named_arms(match.group(), claim, vocabulary)
        if len(named) == 1:
            by_offset[match.start()] = next(iter(named))
    return sorted(by_offset.items())


def _arm_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    if len(claim.arms) < 2:
        return None
    stems_of_arm = _arm_stems(claim, vocabulary).get(claim.arm)
    if place.kind == TABLE:
        # The header line nearest the number that names an arm decides (a spanning "Smokers" above
        # "Placebo | Palmvitee" decides only where the line below names no arm of its own).
        headers = [
            *(("column", line) for line in reversed(place.columns)),
            ("row", place.row_label),
            # A line alone over its rows speaks of an arm when it says so ("Smokers (placebo, n = 28)",
            # "Control group"); others are outcomes' labels ("IES-2 total").
            *(("group", line) for line in _arm_groups(place)[:1]),
        ]
        for where, text in headers:
            undeclared = _undeclared_arm(text, claim)
            if undeclared:
                return f"the quoted {where} is '{text}': a {undeclared} arm, which is not among the declared arms"
            named = _named_arms(text, claim, vocabulary)
            if claim.arm in named or (named and not stems_of_arm):
                return None  # the claimed arm, or (claimed: a time point such as baseline) a declared group
            if named:
                return f"the quoted {where} is '{text}', not the arm '{claim.arm}'"
        return None
    given_for = _arm_in_sentence(place, claim, vocabulary) if stems_of_arm else None
    if given_for and given_for != claim.arm:
        return f"the quoted sentence gives this number for '{given_for}', not for '{claim.arm}'"
    if given_for is None and not _named_arms(place.clause, claim, vocabulary):
        undeclared = _undeclared_arm(place.sentence[place.clause_start : place.offset], claim)
        if undeclared:
            return f"the quoted sentence gives this number for a {undeclared} arm, which is not among the declared arms"
    return None


GROUP_WORDS = 6  # a group's line is a name and its size, not a sentence
ARM_GROUP = re.compile(r"\b(?:n\s*=|groups?\b|arms?\b)", re.IGNORECASE)
# Words naming a comparison arm every trial may have ("placebo", "usual care").
CONTROL_ARM = re.compile(r"\b(placebo|controls?|sham|usual care|standard care|no treatment)\b", re.IGNORECASE)


def _arm_groups(place: Place) -> list[str]:
    """The group lines above a table row that speak of an arm, nearest first (the nearest is the row's)."""
    return [
        line
        for line in place.groups
        if len(line.split()) <= GROUP_WORDS and (ARM_GROUP.search(line) or CONTROL_ARM.search(line))
    ]


def _undeclared_arm(text: str, claim: Claim) -> str | None:
    """A comparison arm ``text`` names ("Placebo, n = 28") when no declared arm could be it: no
    declared arm is a comparison arm by its words ("Control", "Placbeo", "without quinine")."""
    found = CONTROL_ARM.search(text)
    if found is None or any(_comparison_arm(arm) for arm in claim.arms):
        return None
    return found.group(1).lower()


def _comparison_arm(arm: str) -> bool:
    """Is ``arm`` named as a comparison arm: a control word (allowing a typo), or a negation
    ("no text message", "without quinine")?"""
    if NEGATED.search(arm) or CONTROL_ARM.search(arm):
        return True
    control_words = ("placebo", "control", "sham", "usual", "standard")
    return any(fuzz.ratio(word.lower(), known) >= 80 for word in WORD.findall(arm) for known in control_words)


def _arm_in_sentence(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """The arm the sentence gives the number for: in "A (12 ± 3) versus B (15 ± 4)" or "B (n = 45)
    or A (n = 47)", the arm named nearest before the number in its clause; in "A improved more
    than B (12 vs 15)", the arms in the order last named before the bracket. None when it cannot tell."""
    sentence, at = place.sentence, place.offset
    bracket = _bracket_around(sentence, at)
    if bracket is not None:
        open_at, close_at = bracket
        groups = re.split(r"\s(?:vs\.?|versus)\s|;|\band\b", sentence[open_at:close_at])
        if len(groups) >= 2:
            offset, index = open_at, 0
            for index, group in enumerate(groups):  # noqa: B007 - the index is the answer
                if offset + len(group) >= at:
                    break
                offset += len(group) + 1
            # The arms named last before the bracket, in their order ("with ICU-AW ... those
            # without (6.6 versus 23.4)": an earlier word of either arm does not count).
            order: list[str] = []
            for _, arm in reversed(_mentions(sentence[:open_at], claim, vocabulary)):
                if arm is not None and arm not in order:
                    order.insert(0, arm)
            return order[index] if len(order) == len(groups) else None
    before = [arm for offset, arm in _mentions(sentence, claim, vocabulary) if place.clause_start <= offset < at]
    if before:
        return before[-1]  # the nearest word of an arm; None when it does not tell which
    after = [arm for offset, arm in _mentions(place.clause, claim, vocabulary)]
    return after[0] if after and len(set(after)) == 1 else None


def _bracket_around(text: str, at: int) -> tuple[int, int] | None:
    """The innermost (...) or [...] holding offset ``at``, as (after the opening, at the closing)."""
    depth_open = max(text.rfind("(", 0, at), text.rfind("[", 0, at))
    if depth_open < 0:
        return None
    closing = min((i for i in (text.find(")", at), text.find("]", at)) if i >= 0), default=-1)
    if closing < 0 or max(text.rfind(")", 0, at), text.rfind("]", 0, at)) > depth_open:
        return None
    # Widen to the outermost bracket still holding the number ("[2.7 (0.1) vs 3.4 (0.1)]").
    outer = max(text.rfind("[", 0, depth_open), -1)
    if outer >= 0 and text.find("]", at) > 0 and text.rfind("]", 0, at) < outer:
        return outer + 1, text.find("]", at)
    return depth_open + 1, closing


STANDARD_ERROR = re.compile(r"\b(?:SEM?|S\.E\.(?:M\.)?|standard errors?)(?![A-Za-z])", re.IGNORECASE)
STANDARD_DEVIATION = re.compile(r"\b(?:SD|S\.D\.|standard deviations?)(?![A-Za-z])", re.IGNORECASE)


def _spread_flag(place: Place, claim: Claim) -> str | None:
    """An SD quoted where the paper says the spread is a standard error ("Mean (SE)", "data are
    expressed as mean (standard error)"). The nearest text that names a spread decides: the
    column headers and row label, then the caption, then the table's legend; in running text the
    number's clause, then its sentence."""
    if claim.kind != "sd":
        return None
    if place.kind == TABLE:
        nearest = [" ".join([*place.columns, place.row_label, *place.headings[:1]]), place.caption, place.legend]
    else:
        nearest = [place.clause, place.sentence]
    for text in nearest:
        error, deviation = STANDARD_ERROR.search(text), STANDARD_DEVIATION.search(text)
        if error and not deviation:
            return (
                f"the place gives a standard error, not a standard deviation ('{error.group()}' in '{_shown(text)}'):"
                " an SD is the SE times the square root of the arm's n"
            )
        if deviation:
            return None
    return None


# A count printed with its share ("705 (61.9)" in a row of "n (%)"): a part of a group.
DENOMINATOR = re.compile(r"(?:/|\bof)\s*$")
COUNT_WITH_SHARE = re.compile(r"^[-−–]?\d+\s*[(\[]\s*(\d+(?:\.\d+)?)\s*(%?)\s*[)\]]")


def _part_as_size_flag(place: Place, claim: Claim) -> str | None:
    """A group's size (total, n) quoted where the paper prints it as a count with its percentage:
    that is how many of a group had something, not how many the group holds (a group is 100% of
    itself)."""
    if claim.kind not in ("total", "n") or place.kind != TABLE or DENOMINATOR.search(place.printed_after):
        return None  # "83/94 (88.3)": 94 is the group the count is of
    match = COUNT_WITH_SHARE.match(place.printed.strip())
    if match is None:
        return None
    if _shares_a_word(place.row_label, claim.arm):
        return None  # "Male (%) 231 (70.9%)" for the arm "control - males": the subgroup's size
    share = Decimal(match.group(1))
    says_percent = match.group(2) or _says_percent(place)
    if not says_percent or share >= 100:
        return None
    return (
        f"the quote prints {match.group().strip()} in the row '{place.row_label}': a count with its percentage"
        f" ({share}%), a part of a group, not the group's size"
    )


def _shares_a_word(text: str, other: str) -> bool:
    """Do two texts share a word (one a form of the other: "Male" and "males")?"""
    ours = {token.lower() for token in tokens(text) if len(token) >= 4}
    theirs = {token.lower() for token in tokens(other) if len(token) >= 4}
    return any(a.startswith(b) or b.startswith(a) for a in ours for b in theirs)


def _says_percent(place: Place) -> bool:
    """Does the number's row or column say its bracket is a percentage ("n (%)")?"""
    return place.kind == TABLE and "%" in " ".join([place.row_label, *place.headings[:1], *place.columns])


CHANGE = re.compile(r"\bchanges?\b|Δ|\bdifferences?\b|\bdiff\b|\bimprovement|\breduction|\bincrease", re.IGNORECASE)
LEVEL = re.compile(r"\bmeans?\b|\bmedian\b|\bpost", re.IGNORECASE)
BASELINE_COLUMN = re.compile(r"\bbaseline\b|\bpre\b|^pre|\bbefore\b|\bscreening\b", re.IGNORECASE)


def _change_flag(place: Place, claim: Claim) -> str | None:
    """A mean or SD quoted from a column of changes ("Mean change (SD)") when its row also prints the
    level after treatment ("Mean (SD)") and the outcome does not speak of change: two different
    numbers, and the claim does not say which it wants. (A row of a baseline level and its change
    prints only one result: no flag.)"""
    if claim.kind not in ("mean", "sd") or place.kind != TABLE or CHANGE.search(claim.outcome):
        return None
    column = " ".join(place.columns)
    if not CHANGE.search(column):
        return None
    levels = [
        header
        for header in place.beside
        if LEVEL.search(header) and not CHANGE.search(header) and not BASELINE_COLUMN.search(header)
    ]
    if not levels:
        return None
    return (
        f"the quoted column gives a change ('{column}'); its row also prints the level ('{levels[0]}'),"
        f" and the outcome '{claim.outcome}' does not say change"
    )


# "Table 1 Baseline characteristics of the participants": a table of who was randomized, not of results.
BASELINE_CAPTION = re.compile(
    r"\bbaseline (?:characteristics|data|demographics?|values|features|variables)\b"
    r"|\b(?:patient|participant|demographic|clinical|sample|study population)s?'? characteristics\b"
    r"|\bcharacteristics of (?:the )?(?:patients|participants|subjects|study|population|sample)",
    re.IGNORECASE,
)
# A row, column or heading that is the time before treatment: "Baseline", "Pre-treatment", "Week 0".
BASELINE_TIME = re.compile(
    r"^\s*(?:baseline|pre-?(?:treatment|intervention|operative|test)|before(?: treatment)?|(?:week|day|month) 0)\b",
    re.IGNORECASE,
)


def _baseline_flag(place: Place, claim: Claim) -> str | None:
    """A result (a count, mean or SD) quoted from a table of baseline characteristics, or from the
    row, column or group of the time before treatment, when the claim is not about baseline (its
    arm is not a time point and neither its outcome nor its time point says baseline). Group sizes
    are printed there for all outcomes and are not judged here."""
    if claim.kind in ("n", "total") or place.kind != TABLE:
        return None
    if TIME_ARM.match(claim.arm) or re.search(r"\bbaseline\b|\bpre-?", f"{claim.outcome} {claim.timepoint}", re.I):
        return None
    if BASELINE_CAPTION.search(place.caption):
        return f"the quoted table gives baseline characteristics ('{_shown(place.caption)}'), not results"
    nearest = [*place.columns[-1:], place.row_label, *place.headings[:1], *_time_groups(place)[:1]]
    for text in nearest:
        if text and BASELINE_TIME.match(text):
            return f"the quoted number is printed for '{text}', before treatment; the claim is a result"
    return None


TIME_ROW = re.compile(
    r"\d+[- ]?(?:h|hrs?|hours?|days?|weeks?|wk|months?|years?)\b"
    r"|follow-?up|\bpost|\bend of|\bafter\b|\bweek\b|\bmonth\b",
    re.IGNORECASE,
)


def _time_groups(place: Place) -> list[str]:
    """The group lines over a table's rows that are times ("Baseline", "4-month follow-up"), nearest first."""
    return [line for line in place.groups if BASELINE_TIME.match(line) or TIME_ROW.search(line)]


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."


def _time_flag(place: Place, claim: Claim) -> str | None:
    wanted = times(claim.timepoint) if claim.timepoint else times(claim.outcome)
    if not wanted:
        return None
    table = " ".join([place.row_label, *place.headings[:1], *place.columns])
    context = table if place.kind == TABLE else place.clause
    printed = times(context)
    if printed and not printed & wanted:
        shown = ", ".join("–".join(span.split("-")) + " " + unit for span, unit in sorted(printed))
        claimed = claim.timepoint or ", ".join("–".join(span.split("-")) + " " + unit for span, unit in sorted(wanted))
        return f"printed for {shown}; the claim is at {claimed}"
    return None
