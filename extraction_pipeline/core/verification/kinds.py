"""What a quoted number is, beyond where it is: a standard error or an SD, a median or a mean, an
arm's value or the arms' comparison, a change or a level, a part of a group or its size, clusters
or people, and the arm size the outcome's own table prints (when it was measured is
``time_points``'). Each function returns a flag's sentence, or None when the place agrees with the claim.
"""

from __future__ import annotations

import re
from decimal import Decimal

from extraction_pipeline.core.verification.arm_names import header_arm, of_the_trials_arms, whose
from extraction_pipeline.core.verification.claimed import COUNTS, Claim, PlacedNumber
from extraction_pipeline.core.verification.places import TABLE, Place, as_number
from extraction_pipeline.core.verification.sizes import ROW_LABEL_CHARS, PrintedTable, table_number
from extraction_pipeline.core.verification.vocabulary import GENERIC, Vocabulary, tokens

STANDARD_ERROR = re.compile(r"\b(?:SEM?|S\.E\.(?:M\.)?|standard errors?)(?![A-Za-z])", re.IGNORECASE)


STANDARD_DEVIATION = re.compile(r"\b(?:SD|S\.D\.|standard deviations?)(?![A-Za-z])", re.IGNORECASE)


def spread_flag(place: Place, claim: Claim) -> str | None:
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
                f"the place gives a standard error, not a standard deviation ('{error.group()}' in '{shown(text)}'):"
                " an SD is the SE times the square root of the arm's n"
            )
        if deviation:
            return None
    return None


MEDIAN = re.compile(r"\bmedians?\b|\bIQR\b|\binterquartile\b|\bpercentiles?\b|\brang(?:e|es|ed|ing)\b", re.IGNORECASE)


MEAN = re.compile(r"\bmeans?\b|\baverage\b|\bSD\b|±", re.IGNORECASE)


def median_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """A mean or SD quoted where the paper gives a median, its interquartile range or a range
    ("Median (IQR)", "ranged from 0 to 139 days, with a median of 9"), or where the paper says it
    reports what the place is about as medians ("MRC measures are reported as median (25th–75th
    percentiles)"). The nearest text that names a statistic decides, as for the SE."""
    if claim.kind not in ("mean", "sd"):
        return None
    if place.kind == TABLE:
        nearest = [" ".join([*place.columns, place.row_label, *place.headings[:1]]), place.caption, place.legend]
    else:
        nearest = [place.clause, place.sentence]
    own = {word.lower() for word in re.findall(r"[A-Za-z]+", claim.outcome)}  # "range of motion"
    for text in nearest:
        text = " ".join(word for word in text.split() if word.lower().strip("(),.:;") not in own)
        median, mean = MEDIAN.search(text), MEAN.search(text)
        if median and not mean:
            return f"the place gives a median or range, not a mean or SD ('{median.group()}' in '{shown(text)}')"
        if mean:
            return None
    outcome = vocabulary.stems_of(claim.outcome)
    for subject in vocabulary.given_as_medians:
        if subject and 2 * len(subject & outcome) >= len(subject) and subject & outcome:
            named = ", ".join(sorted(subject & outcome))
            return f"the paper says it reports these numbers ('{named}') as medians, not means"
    return None


# A column of the comparison between arms, not of one arm: "P value", "P*", "OR (95% CI)", "Difference".
COMPARISON_COLUMN = re.compile(
    r"^\s*(?:p(?:[- ]?values?)?\b|sig(?:\.|nificance)?\s*$"
    # a ratio with its interval, not "HR (bpm)", "RR, breaths/min", "OR time"
    r"|(?:adjusted\s+|crude\s+)?(?:OR|RR|HR|IRR)\s*(?:[(\[]\s*95|95\s*%|\(?CI\b|$)"
    r"|(?:odds|risk|hazard|rate) ratio|relative risk|95\s*%\s*CI\b"
    # between the arms, not one arm's "Difference (post - pre)" or "difference from baseline"
    r"|(?:mean\s+|between[- ]groups?\s+)?differences?\b"
    r"(?![\s,]*\(?\s*(?:post|pre|after|before|from|vs\.?|versus|to|week|month|change)\b))",
    re.IGNORECASE,
)


def comparison_column_flag(place: Place, claim: Claim) -> str | None:
    """An arm's number (a count, mean, SD or size) quoted from a table column that compares the
    arms (a p-value, a ratio, a difference or its confidence interval): no arm's value."""
    if place.kind != TABLE:
        return None
    for column in reversed(place.columns):  # "Between-group differences," over "mean (95% CI)"
        if COMPARISON_COLUMN.match(column):
            return f"the quoted column is '{shown(column)}', which compares the arms: not the {claim.kind} of one arm"
    return None


# What a cluster trial counts besides people: "42 of 82 selected shops", "12 practices (n = 240)".
CLUSTER_UNIT = re.compile(
    r"^\W{0,3}(?:(?:selected|participating|eligible|randomi[sz]ed|included|study|intervention|control)\s+){0,2}"
    r"(shops|clusters|sites|practices|hospitals|schools|villages|centres|centers|wards"
    r"|communities|households|clinics|pharmacies|classes|classrooms)\b",
    re.IGNORECASE,
)


def cluster_size_flag(place: Place, claim: Claim) -> str | None:
    """An arm's size (total, n) quoted where the number counts clusters ("82 selected shops"), not
    the arm's participants."""
    if claim.kind not in ("n", "total"):
        return None
    after = place.printed if place.kind == TABLE else place.sentence[place.offset :]
    number = re.match(r"[-−–]?[\d,]+(?:\.\d+)?", after)
    unit = CLUSTER_UNIT.match(after[number.end() :] if number else after)
    if unit is None:
        return None
    return f"the quoted number counts {unit.group(1).lower()}, not the arm's participants"


CHANGE = re.compile(r"\bchanges?\b|Δ|\bdifferences?\b|\bdiff\b|\bimprovement|\breduction|\bincrease", re.IGNORECASE)


LEVEL = re.compile(r"\bmeans?\b|\bmedian\b|\bpost", re.IGNORECASE)


BASELINE_COLUMN = re.compile(r"\bbaseline\b|\bpre\b|^pre|\bbefore\b|\bscreening\b", re.IGNORECASE)


def change_flag(place: Place, claim: Claim) -> str | None:
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


# A count printed with its share ("705 (61.9)" in a row of "n (%)"): a part of a group.
ANALYSED = re.compile(r"\b(?:analy[sz]ed|completed|included|followed|evaluable|assessed)\b", re.IGNORECASE)
DENOMINATOR = re.compile(r"(?:/|\bof)\s*$")


COUNT_WITH_SHARE = re.compile(r"^[-−–]?\d+\s*[(\[]\s*(\d+(?:\.\d+)?)\s*(%?)\s*[)\]]")


def part_as_size_flag(place: Place, claim: Claim) -> str | None:
    """A group's size (total, n) quoted where the paper prints it as a count with its percentage:
    that is how many of a group had something, not how many the group holds (a group is 100% of
    itself)."""
    if claim.kind not in ("total", "n") or place.kind != TABLE or DENOMINATOR.search(place.printed_before):
        return None  # "83/94 (88.3)": 94 is the group the count is of
    match = COUNT_WITH_SHARE.match(place.printed.strip())
    if match is None:
        return None
    if ANALYSED.search(place.row_label):
        return None  # "Analysed, n (%) 45 (90.0)": the analysed group's size, with its share of the randomized
    if _shares_a_word(place.row_label, claim.arm):
        return None  # "Male (%) 231 (70.9%)" for the arm "control - males": the subgroup's size
    share = Decimal(match.group(1))
    percent = match.group(2) or says_percent(place)
    if not percent or share >= 100:
        return None
    return (
        f"the quote prints {match.group().strip()} in the row '{place.row_label}': a count with its percentage"
        f" ({share}%), a part of a group, not the group's size"
    )


# People counted for what happened to them: the number, a few words naming whom ("patients in
# group II"), then what they had ("had fever", "developed", "withdrew"). "12 patients had complete
# data" is still a group.
HAD_SOMETHING = re.compile(
    r"^\S+\s+(?:[A-Za-z()-]+\s+){0,5}?(?:were\s+)?(?:had(?!\s+(?:been|complete|completed|full|valid|both|all|data))"
    r"|developed|experienced|suffered|died|complained|withdrew|dropped\s+out|discontinued|vomited|relapsed)\b",
    re.IGNORECASE,
)


def had_something_flag(place: Place, claim: Claim) -> str | None:
    """A group's size (total, n) quoted from a sentence that counts the people who had something
    ("Two patients in group II had fever"): a part of a group, not its size."""
    if claim.kind not in ("total", "n") or place.kind == TABLE:
        return None
    clause_end = len(place.clause) + place.clause_start
    match = HAD_SOMETHING.match(place.sentence[place.offset : clause_end])
    if match is None:
        return None
    return f"the quoted sentence counts the people who had something ('{shown(match.group())}'), not the group's size"


# A number printed with a unit of measure after it ("10 mg/kg", "12 mm Hg", "3 days"): an amount, a
# pressure, a duration, never how many people. "%" is a share (``percentage_only_flag``).
MEASURED = re.compile(
    r"^[-−–]?\d+(?:\.\d+)?\s*(mg|g|kg|µg|μg|mcg|ng|ml|mL|dl|dL|mmol|µmol|μmol|IU|mm\s?Hg|mmHg|mm|cm|bpm|kcal|"
    r"min(?:utes?)?|h|hrs?|hours?|days?|weeks?|months?|years?)(?!\w)(?!\.\s?[a-z])(?:\s*/\s*[a-z]+)?"
)  # case as printed: "40 MM patients" and "45 H. pylori" are no units


def measured_count_flag(place: Place, claim: Claim) -> str | None:
    """A count (events, a group's size) quoted where the paper prints the number with a unit of
    measure: a dose, a pressure or a duration, not a number of people."""
    if claim.kind not in COUNTS:
        return None
    match = MEASURED.match(place.printed.strip())
    if match is None:
        return None
    return f"the quote prints '{match.group()}': an amount in {match.group(1)}, not a number of participants"


def _shares_a_word(text: str, other: str) -> bool:
    """Do two texts share a word (one a form of the other: "Male" and "males")?"""
    ours = {token.lower() for token in tokens(text) if len(token) >= 4}
    theirs = {token.lower() for token in tokens(other) if len(token) >= 4}
    return any(a.startswith(b) or b.startswith(a) for a in ours for b in theirs)


def says_percent(place: Place) -> bool:
    """Does the number's row or column say its bracket is a percentage ("n (%)")?"""
    return place.kind == TABLE and "%" in " ".join([place.row_label, *place.headings[:1], *place.columns])


BASELINE_TABLE = re.compile(r"\bbaseline\b|\bcharacteristics\b|\bdemographic", re.IGNORECASE)


def own_table_size_flag(number: PlacedNumber, claim: Claim, places: list[Place], vocabulary: Vocabulary) -> str | None:
    """An arm size quoted from outside the outcome's own table, when that table's header gives
    the arm another size ("Intervention* (N = 40)" over a table about the outcome; the quote's
    900 counts the patients interviewed, the table's 40 the clinics analysed)."""
    if any(DENOMINATOR.search(place.printed_before) for place in places):
        return None  # "134/394": the count's own denominator, however many the table's header counts
    sizes: list[tuple[PrintedTable, str, int]] = []
    for table in vocabulary.tables:
        if not _about(table, claim.outcome, vocabulary):
            continue
        if any(
            place.kind == TABLE
            and number.page == table.page
            and table_number(place.caption) == table_number(table.caption)
            for place in places
        ):
            return None  # quoted from the outcome's table itself (a row's own "12/40")
        sizes += [
            (table, label, size) for label, size in table.sizes if header_arm(label, claim, vocabulary) == whose(claim)
        ]
    if sizes:
        if any(as_number(str(number.value)) == size for _, _, size in sizes):
            return None
        table, label, size = sizes[0]
        return (
            f"the table about this outcome ('{shown(table.title)}') gives this arm N = {size} ('{label}'); "
            f"the quote gives {number.value}"
        )
    # No table about the outcome: every table's header sizes for the arm (a baseline table's
    # "Drug A (n = 33)"); a size none of them prints is a subgroup's or another outcome's.
    every = [
        (table, label, size)
        for table in vocabulary.tables
        for label, size in table.sizes
        if header_arm(label, claim, vocabulary) == whose(claim) and of_the_trials_arms(label, claim, vocabulary)
    ]
    # An analysed size below the tables' randomized one is the usual case; one above all of them
    # counts another population (patients interviewed where the tables count clusters).
    quoted = as_number(str(number.value))
    if not every or quoted is None or quoted <= max(size for _, _, size in every):
        return None
    table, label, size = every[0]
    return (
        f"the paper's tables give this arm N = {size} ('{label}', {shown(table.caption)}); "
        f"the quote gives {number.value}"
    )


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


def shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."
