"""The paper's own words: identifying stems, abbreviations it defines, instruments it names,
what it calls its primary outcome, its time points and where its reference list is.

Words are compared on their first five letters (word forms: "vomiting"/"vomited"); words that say
how an outcome is measured or reported ("incidence", "mean", "patients") never identify one.
"""

from __future__ import annotations

import re
from functools import cached_property

from extraction_pipeline.core.pdf.furniture import edge_lines, furniture, furniture_key
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.sizes import PrintedTable, printed_tables

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


# Two capitals that name a statistic or a unit, not an outcome.
STATISTIC_CODES = {"hr", "or", "rr", "rd", "md", "ci", "sd", "se", "na", "nr", "ns", "iq", "vs", "mg", "kg", "ml"}


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


# "The primary outcome was X", "Secondary endpoints were X and Y", "The main outcome measure: X".
OUTCOME_DEFINITION = re.compile(
    r"\b(primary|secondary|main|co-primary)\s+(?:efficacy\s+)?(?:outcome|endpoint|end point|outcome measure)s?"
    r"\s*(?:was|were|is|are|included|comprised|:)\s+([^.;]{3,200})",
    re.IGNORECASE,
)


ROLE = re.compile(r"\b(primary|secondary|main|co-primary)\s+(?:efficacy\s+)?(?:outcome|endpoint|end point)", re.I)


ABBREVIATION = re.compile(r"\(([A-Z][A-Za-z0-9\-]{1,9})\)")


# A chemical notation defined in brackets after its name: "25-hydroxyvitamin D [25(OH)D]",
# "1,25-dihydroxyvitamin D3 (1,25(OH)2D3)". Its letters are no initials; its name starts with the
# notation's leading number and ends with its last letters.
NOTATION = re.compile(r"[\[(](?P<short>(?P<lead>\d[\d,]*)\([A-Za-z]{1,6}\)\d?(?P<tail>[A-Za-z]{1,3}\d?))[\])]")


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
    r"^[^\S\n]*(?:(?P<references>references|bibliography|literature cited|reference list)[^\S\n]*$"
    r"|(?:table|fig\.?|figure)[^\S\n]+[0-9ivx]+\b)",
    re.IGNORECASE | re.MULTILINE,
)


# Words that name no outcome in "continuous variables were presented as ...".
STATISTICAL_SUBJECTS = {
    "variables",
    "variable",
    "measures",
    "measurements",
    "parameters",
    "continuous",
    "skewed",
    "normally",
    "distributed",
    "non",
    "results",
    "scores",
}


# "MRC measures are reported as median (IQR)": the subject (a few words, not "all other variables").
GIVEN_AS_MEDIAN = re.compile(
    r"(?:^|[.;:]\s)(?P<what>[^.;:]{3,60}?)\s+(?:are|were|is|was)\s+(?:reported|presented|expressed|given|shown|summari[sz]ed)"
    r"\s+as\s+(?:the\s+)?medians?\b",
    re.IGNORECASE,
)


# "a randomized crossover trial", "cross-over design", "a within-subject design", "the order of the
# four explorations was randomly assigned": every participant received every arm (a parallel trial
# randomizes its participants, not the order of what they receive; "messages were sent in random
# order" says nothing of the design).
CROSSOVER = re.compile(
    r"\bcross[- ]?over\b|\bwithin[- ]subjects?\b"
    r"|\border\s+of\s+(?:the\s+)?(?:[\w-]+\s+){1,3}(?:was|were)\s+(?:randomly\s+assigned|randomi[sz]ed|counterbalanced)\b",
    re.IGNORECASE,
)
CROSSOVER_PAGES = 3  # said where the design is: the title, abstract and methods


class Vocabulary:
    """The paper's own abbreviations, read once per document."""

    def __init__(self, parsed: ParsedDocument) -> None:
        self.parsed = parsed
        # A chemical notation's name in words, numbers left out ("25(oh)d" -> "hydroxyvitamin",
        # "d"), filled with ``expansions``.
        self.notation_words: dict[str, tuple[str, ...]] = {}

    @cached_property
    def expansions(self) -> dict[str, set[str]]:
        """abbreviation (lower case) -> the stems of its long form, and each long form's stems -> abbreviation."""
        found: dict[str, set[str]] = {}
        for text in self.parsed.pages_text:
            flat = " ".join(text.split())
            for match in ABBREVIATION.finditer(flat):
                short = match.group(1)
                letters = [c for c in short if c.isalpha()]
                # "enzyme-resistant starch (RS)": a hyphen's parts are words of their own
                words = re.findall(r"[A-Za-z]+", flat[max(0, match.start() - 120) : match.start()])
                spelled = long_form(letters, words)
                if spelled:
                    found.setdefault(short.lower(), set()).update(stems(" ".join(spelled)))
            # A table's footnote: "kPCS: Short Form 12-item Health Survey Physical Component Summary."
            for match in COLON_DEFINITION.finditer(flat):
                short = match.group(1)
                letters = [c for c in short if c.isalpha()]
                spelled = long_form(letters, re.findall(r"[A-Za-z]+", match.group(2)))
                if spelled and short.lower() not in found:
                    found[short.lower()] = stems(" ".join(spelled))
            for match in NOTATION.finditer(flat):
                named = _notation_name(match, flat[max(0, match.start() - 80) : match.start()])
                if named:
                    found.setdefault(match.group("short").lower(), set()).update(stems(named))
                    self.notation_words[match.group("short").lower()] = tuple(
                        word.lower() for word in tokens(named) if not word.isdigit()
                    )
        return found

    @cached_property
    def measures(self) -> dict[str, set[str]]:
        """instrument abbreviation -> the stems of what the paper measures with it ("psychological
        distress was measured using the Hospital Anxiety and Depression Scale (HADS)")."""
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
    def given_as_medians(self) -> list[frozenset[str]]:
        """The stems of what the paper says it reports as medians ("MRC measures are reported as
        median (25th–75th percentiles)"): those numbers are no means, wherever they are printed."""
        found: list[frozenset[str]] = []
        for text in self.parsed.pages_text:
            for match in GIVEN_AS_MEDIAN.finditer(" ".join(text.split())):
                subject = frozenset(stems(match.group("what"), GENERIC | STATISTICAL_SUBJECTS))
                if subject:
                    found.append(subject)
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

    @cached_property
    def crossover(self) -> bool:
        """Does the paper say it is a crossover trial (every participant in every arm)?"""
        return any(CROSSOVER.search(text) for text in self.parsed.pages_text[:CROSSOVER_PAGES])

    @cached_property
    def furniture(self) -> set[str]:
        return furniture(self.parsed.pages_text)

    def in_furniture(self, page: int, offset: int) -> bool:
        """Is ``offset`` of ``page`` on a running head or footer (a line most pages repeat)?"""
        if not 1 <= page <= len(self.parsed.pages_text):
            return False
        text = self.parsed.pages_text[page - 1]
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        line = text[start : end if end >= 0 else len(text)]
        return line in edge_lines(text) and furniture_key(line) in self.furniture

    def in_references(self, page: int, offset: int) -> bool:
        """Is ``offset`` of ``page`` in the reference list (after its heading, before any later caption)?"""
        before = [mark for mark in self.marks if (mark[0], mark[1]) <= (page, offset)]
        return bool(before) and before[-1][2]

    def stems_of(self, text: str, generic: set[str] = GENERIC) -> set[str]:
        """The identifying stems of ``text``, with every abbreviation it uses spelled out and every
        long form it spells out abbreviated."""
        found = stems(text, generic)
        # A hyphenated abbreviation ("F-URS") is looked up whole as well as by its parts.
        words = {token.lower() for token in [*tokens(text), *compounds(text)]}
        for short, long_stems in self.expansions.items():
            if short in words:
                found |= long_stems
            elif long_stems and long_stems <= found:
                found.add(short)
        return found


def _notation_name(match: re.Match[str], before: str) -> str:
    """The name a bracketed notation follows, from its leading number to its last letters
    ("25-hydroxyvitamin D" before "[25(OH)D]"); "" when the text before is not its name."""
    named = re.search(re.escape(match.group("lead")) + r"-?[A-Za-z][A-Za-z\- ]{2,60}$", before.rstrip())
    if not named or not named.group().lower().endswith(match.group("tail").lower()):
        return ""
    return named.group()


def long_form(letters: list[str], words: list[str]) -> list[str]:
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


def compounds(text: str) -> list[str]:
    """Hyphenated names whole ("SF-36", "IL-2"), a footnote mark dropped from each part ("BDI-IIj")."""
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


def initials_of(token: str, text: str) -> bool:
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
