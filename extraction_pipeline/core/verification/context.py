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

The paper's words (stems, the abbreviations and instruments it defines) are ``vocabulary``'s,
which arm a text names is ``arm_names``' (and, in a "respectively" list, ``respectively``'s),
what the number is beyond where it is (an SE or an SD, a median or a mean, an arm's value or the
arms' comparison, a change or a level, a part or a group's size, the size the outcome's own table
prints) is ``kinds``', when it was measured (baseline, an earlier time than the paper goes on to)
is ``time_points``', and whose it is (a subgroup, a group named by what it lacks) is
``populations``'. A check that cannot read a place (no boxes, a number not found)
raises nothing: it adds flags, it never removes a verdict. Each flag is a sentence saying what
the place names instead.
"""

from __future__ import annotations

import re

from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.arithmetic import percent_flag, percentage_only_flag
from extraction_pipeline.core.verification.arm_names import (
    DOSE,
    TIME_ARM,
    arm_groups,
    arm_stems,
    arm_words,
    mentions,
    named_arms,
    names_an_arm,
    undeclared_arm,
)
from extraction_pipeline.core.verification.claimed import COUNTS, Claim, PlacedNumber
from extraction_pipeline.core.verification.kinds import (
    change_flag,
    cluster_size_flag,
    comparison_column_flag,
    had_something_flag,
    measured_count_flag,
    median_flag,
    own_table_size_flag,
    part_as_size_flag,
    says_percent,
    shown,
    spread_flag,
)
from extraction_pipeline.core.verification.number_words import NUMBER_WORD
from extraction_pipeline.core.verification.places import TABLE, Place, places_of
from extraction_pipeline.core.verification.populations import NEGATED_WORD, subgroup_flag
from extraction_pipeline.core.verification.respectively import listed_group
from extraction_pipeline.core.verification.time_points import (
    baseline_flag,
    later_in_sentence_flag,
    later_time_flag,
)
from extraction_pipeline.core.verification.vocabulary import (
    ROLE,
    Vocabulary,
    compounds,
    initials_of,
    stems,
    times,
    tokens,
)

# A row label that names only how a value is given or when, never which outcome.
STATISTIC_LABEL = re.compile(
    r"^[\s(]*(?:n|no|mean|median|sd|se|iqr|range|%|n\s*\(%\)|yes|total|all|overall|"
    r"baseline|end(?:point)?|final|change|difference|follow[- ]?up|"
    r"(?:pre|post)(?:[- ]?(?:treatment|intervention|operative|op|test|trial|dose|randomi[sz]ation))?(?![a-z])|"
    r"(?:day|week|wk|month|year|visit|hour|h|min)s?\s*[-–]?\s*\d*(?:\s*[-–]\s*\d+)?"
    r"|\d+[\s-]*(?:h|hr|hours?|days?|weeks?|months?|years?)(?:\s+follow[- ]?up)?)"  # "3-month follow-up"
    r"[\s)]*(?:[(,].*)?$",
    re.IGNORECASE,
)


REFERENCE_FLAG = "the quote is in the reference list, not in the paper's text or tables"
FURNITURE_FLAG = (
    "the number is on the page's running head or footer (a line repeated at the top or foot of pages), not a finding"
)


# A total printed as a count's denominator ("Five out of 24", "9/24", "11 of 49"): the count's
# outcome is the total's.
COUNTED_OF = re.compile(rf"(?:\d|\b(?:{NUMBER_WORD.pattern}))\s*(?:/|\bout\s+of\b|\bof\b)\s*$", re.IGNORECASE)


# A number inside a citation's brackets in running text: "hypoglycemia [7–10].", "[12, 14]".
CITATION_BEFORE = re.compile(r"\[\s*(?:\d+\s*[,;\-–]\s*)*$")
CITATION_AFTER = re.compile(r"^\d+\s*(?:[,;\-–]\s*\d+\s*)*\]")


def _where_flags(place: Place, number: PlacedNumber, vocabulary: Vocabulary) -> list[str]:
    """A number printed where no finding is: the reference list, a running head or footer, a
    citation's brackets."""
    if place.at >= 0 and vocabulary.in_furniture(number.page, place.at):
        return [FURNITURE_FLAG]
    if place.kind != TABLE and vocabulary.in_references(number.page, number.start):
        return [REFERENCE_FLAG]
    opened, closed = CITATION_BEFORE.search(place.printed_before), CITATION_AFTER.match(place.printed)
    if place.kind != TABLE and opened and closed:
        return [f"the number is a citation ('{opened.group()}{closed.group()}'): another paper's, not a finding"]
    return []


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
    printed_at: dict[str, list[Place]] = {}  # path -> the places of its number
    for number in numbers:
        if not number.outcome:
            continue
        claim = Claim(number.outcome, number.arm, arms, number.kind, number.timepoint)
        places = places_of(parsed, number.page, number.start, number.end, number.value)
        if not places:
            continue
        printed_at[number.path] = places
        verdicts = [_where_flags(place, number, vocabulary) for place in places]
        verdicts = [
            found or check_place(place, claim, vocabulary) for found, place in zip(verdicts, places, strict=True)
        ]
        if number.kind == "events":
            sums = [percent_flag(place.printed, number.value, number.total, says_percent(place)) for place in places]
            verdicts = [[*found, summed] if summed else found for found, summed in zip(verdicts, sums, strict=True)]
        if number.kind in ("n", "total") and (other := own_table_size_flag(number, claim, places, vocabulary)):
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
    _one_number_for_two_arms(numbers, printed_at, parsed, vocabulary, flags)
    return flags


def _row_of(place: Place, claim: Claim, vocabulary: Vocabulary) -> tuple[str, str, str]:
    """Which row of which table a number is in, for a table whose columns are the arms (its
    column names the claimed arm); anything else (running text, arms as rows) gives no row."""
    if place.kind != TABLE or claim.arm not in named_arms(" ".join(place.columns), claim, vocabulary):
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


# Where the paper gives one number for every group, beside the number: "15 in each group", "30
# patients per treatment arm", "n = 30/group", "randomly divided into two groups (n = 10)".
EVERY_GROUP = re.compile(
    r"\b(?:each|every|both|either|neither)\s+(?:\w+\s+){0,2}?(?:group|arm)s?\b"
    r"|\bper\s+(?:\w+\s+)?(?:group|arm)\b|/\s*(?:group|arm)\b"
    r"|\b(?:two|three|four|five|\d)\s+(?:equal\s+|\w+\s+)?(?:groups|arms)\s*[(\[]\s*n\s*=",
    re.IGNORECASE,
)
EVERY_GROUP_CHARS = 60  # how far from the number the words that say so may be


def _one_number_for_two_arms(
    numbers: list[PlacedNumber],
    printed_at: dict[str, list[Place]],
    parsed: ParsedDocument,
    vocabulary: Vocabulary,
    flags: dict[str, list[str]],
) -> None:
    """Two arms of one outcome given the same number from the one place that prints it: one
    printed number is one group's (or the whole study's), so at most one arm's claim is right.
    Said unless the words beside the number give it for every group ("15 in each group"), one
    arm is the other's baseline, every arm is the same people (a crossover trial), or the quote's
    text is printed more than once (two boxes of a flow chart: grounding cannot tell them apart)."""
    if vocabulary.crossover:
        return
    shared: dict[tuple[str, str, str, int, int], list[PlacedNumber]] = {}
    for number in numbers:
        places = printed_at.get(number.path, [])
        if number.arm and len(places) == 1 and places[0].at >= 0:
            key = (number.outcome, number.timepoint, number.kind, number.page, places[0].at)
            shared.setdefault(key, []).append(number)
    for sharing in shared.values():
        arms = sorted({number.arm for number in sharing})
        if len(arms) < 2 or any(TIME_ARM.match(arm) for arm in arms):
            continue  # one arm, or an arm against its own baseline: one group, one size
        place = printed_at[sharing[0].path][0]
        if _for_every_group(place) or _printed_twice(parsed, sharing[0]):
            continue
        where = place.row_label or " ".join(place.columns[-1:]) if place.kind == TABLE else place.clause
        named = " and ".join(f"'{arm}'" for arm in arms)
        for number in sharing:
            sentence = (
                f"{named} are {'both' if len(arms) == 2 else 'all'} given the {number.kind} {number.value} "
                f"from one printed number ('{shown(where or place.sentence)}'), which is one group's, not each arm's"
            )
            if sentence not in flags.get(number.path, []):
                flags.setdefault(number.path, []).append(sentence)


def _for_every_group(place: Place) -> bool:
    """Do the words beside the number give it for every group?"""
    if place.kind == TABLE:
        near = f"{place.printed_before}{place.printed} {' '.join(place.columns)}"
    else:
        start = max(0, place.offset - EVERY_GROUP_CHARS)
        near = place.sentence[start : place.offset + EVERY_GROUP_CHARS]
    return bool(EVERY_GROUP.search(near))


def _printed_twice(parsed: ParsedDocument, number: PlacedNumber) -> bool:
    """Is the quote's text printed more than once in the paper (spacing aside)?"""
    if not 1 <= number.page <= len(parsed.pages_text):
        return False
    quoted = " ".join(parsed.pages_text[number.page - 1][number.start : number.end].split())
    if len(quoted) < 3:
        return False
    return sum(" ".join(text.split()).count(quoted) for text in parsed.pages_text) > 1


def check_place(place: Place, claim: Claim, vocabulary: Vocabulary) -> list[str]:
    """The flags for a number at ``place`` claimed as ``claim``: empty when the place agrees."""
    found = (
        _outcome_flag(place, claim, vocabulary),
        _arm_flag(place, claim, vocabulary),
        _time_flag(place, claim),
        subgroup_flag(place, claim, vocabulary),
        spread_flag(place, claim),
        comparison_column_flag(place, claim),
        cluster_size_flag(place, claim),
        median_flag(place, claim, vocabulary),
        part_as_size_flag(place, claim),
        had_something_flag(place, claim),
        measured_count_flag(place, claim),
        change_flag(place, claim),
        baseline_flag(place, claim),
        later_time_flag(place, claim),
        later_in_sentence_flag(place, claim),
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
    hyphenated = compounds(text)
    if outcome and any(initials_of(token, outcome) for token in [*tokens(text), *hyphenated]):
        return True
    for role in ROLE.finditer(text):  # "the primary outcome occurred in 11 of 68": what the paper defined it as
        if target & vocabulary.defined_outcomes.get(role.group(1).lower(), set()):
            return True
    words = {token.lower() for token in [*tokens(text), *hyphenated]}
    if any(vocabulary.measures.get(word, set()) & target for word in words):
        return True  # the instrument the paper measures the outcome with ("HADS")
    for short, long_stems in vocabulary.expansions.items():
        if short in words and long_stems and 2 * len(long_stems & target) >= len(long_stems):
            return True
        if short in target and long_stems and long_stems <= stems(text):
            return True
    lowered = text.lower()
    spelled = {token.lower() for token in tokens(outcome)} if outcome else set()
    for short, named in vocabulary.notation_words.items():
        # "25(OH)D" in a row label names the outcome when every word of its name does:
        # "25-hydroxyvitamin D" names "vitamin D levels" (a compound by the word inside it), not
        # "vitamin K levels".
        if short in lowered and named and all(_word_named(word, target, spelled) for word in named):
            return True
    return False


def _word_named(word: str, target: set[str], spelled: set[str]) -> bool:
    """``word`` is one of the outcome's: a letter ("D") as the outcome spells it, a word by its
    stem or as a compound holding one ("hydroxyvitamin" holds "vitamin")."""
    if len(word) < 3:
        return word in spelled
    return bool(stems(word) & target) or any(len(stem) == 5 and not stem.isdigit() and stem in word for stem in target)


def _outcome_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    before = place.printed_before if place.kind == TABLE else place.sentence[max(0, place.offset - 30) : place.offset]
    if claim.kind in ("n", "total") and not COUNTED_OF.search(before):
        return None  # an arm's size is printed once for all its outcomes; a count's total is the count's
    wanted = vocabulary.stems_of(claim.outcome)
    if not wanted:
        return None
    if place.kind == TABLE:
        label = place.row_label
        specific = (
            label and not STATISTIC_LABEL.match(label) and stems(label) and not names_an_arm(label, claim, vocabulary)
        )
        if specific:
            # A row of its own: its label, the heading it sits under, or (outcomes as columns)
            # its column must name the outcome; a caption naming it does not make a row about it.
            if any(
                _names(text, wanted, vocabulary, claim.outcome)
                for text in (label, *place.headings[:1], " ".join(place.columns))
            ):
                return _better_row(place, claim, wanted, vocabulary)
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


def _better_row(place: Place, claim: Claim, wanted: set[str], vocabulary: Vocabulary) -> str | None:
    """A row that names the outcome only in part ("Body mass index" for body weight) when another
    row of the same table names more of it ("Body weight (kg)"): the number is the other row's
    neighbour, not the outcome's."""

    def fit(text: str) -> int:
        if any(initials_of(token, claim.outcome) for token in [*tokens(text), *compounds(text)]):
            return len(wanted)  # "IL-2" names all of "interleukin 2"
        return len(vocabulary.stems_of(text) & wanted)

    own = fit(" ".join([place.row_label, *place.headings, *place.groups[:1]]))
    fits = {label: fit(label) for label in place.table_rows}
    best = max(fits, key=lambda label: fits[label], default=None)
    if best is not None and fits[best] > own:
        return f"the quoted row is '{place.row_label}'; the table's row '{best}' names the outcome '{claim.outcome}'"
    return None


def _arm_flag(place: Place, claim: Claim, vocabulary: Vocabulary) -> str | None:
    if len(claim.arms) < 2:
        return None
    stems_of_arm = arm_stems(claim, vocabulary).get(claim.arm)
    if place.kind == TABLE:
        # The header line nearest the number that names an arm decides (a spanning "Smokers" above
        # "Placebo | Vitamin E" decides only where the line below names no arm of its own).
        headers = [
            *(("column", line) for line in reversed(place.columns)),
            ("row", place.row_label),
            # A line alone over its rows speaks of an arm when it says so ("Smokers (placebo, n = 28)",
            # "Control group"); others are outcomes' labels ("IES-2 total").
            *(("group", line) for line in arm_groups(place)[:1]),
        ]
        for where, text in headers:
            undeclared = undeclared_arm(text, claim)
            if undeclared:
                return f"the quoted {where} is '{text}': a {undeclared} arm, which is not among the declared arms"
            named = named_arms(text, claim, vocabulary)
            if claim.arm in named or (named and not stems_of_arm):
                return None  # the claimed arm, or (claimed: a time point such as baseline) a declared group
            if named:
                return f"the quoted {where} is '{text}', not the arm '{claim.arm}'"
        return None
    listed = listed_group(place.sentence, place.offset)
    if listed is not None:  # a "respectively" list: the position decides, not the nearest word
        return _listed_arm_flag(*listed, claim, vocabulary)
    given_for = _arm_in_sentence(place, claim, vocabulary) if stems_of_arm else None
    if given_for and given_for != claim.arm:
        return f"the quoted sentence gives this number for '{given_for}', not for '{claim.arm}'"
    if given_for is None and not named_arms(place.clause, claim, vocabulary):
        undeclared = undeclared_arm(place.sentence[place.clause_start : place.offset], claim, sentence=True)
        if undeclared:
            return f"the quoted sentence gives this number for a {undeclared} arm, which is not among the declared arms"
    return None


def _listed_arm_flag(names: list[str], position: int, claim: Claim, vocabulary: Vocabulary) -> str | None:
    """A number of a "respectively" list is its position's group's: flagged when another
    position's name fits the claimed arm better (its words, less the words it is claimed
    without: "without quinine")."""
    negated = {stem for m in NEGATED_WORD.finditer(claim.arm) for stem in stems(m.group(1))}
    wanted = arm_words(claim.arm, vocabulary) - negated  # its words, "drug b" of "Drug B"; not "without ..."
    doses = set(DOSE.findall(NEGATED_WORD.sub(" ", claim.arm)))  # "5%", "10 mg": what sets arms of one drug apart

    def fit(name: str) -> int:
        found = arm_words(name, vocabulary) | vocabulary.stems_of(name)
        return len(found & wanted) + len(doses & set(DOSE.findall(name))) - len(found & negated)

    best = max(range(len(names)), key=lambda index: fit(names[index]))
    if fit(names[best]) > fit(names[position]):
        return (
            f"the sentence gives its numbers respectively: this one is for '{names[position]}',"
            f" and the arm '{claim.arm}' is '{names[best]}'"
        )
    return None


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
            # The arms named last before the bracket, in their order ("with the complication ... those
            # without (6.6 versus 23.4)": an earlier word of either arm does not count).
            order: list[str] = []
            for _, arm in reversed(mentions(sentence[:open_at], claim, vocabulary)):
                if arm is not None and arm not in order:
                    order.insert(0, arm)
            return order[index] if len(order) == len(groups) else None
    before = [arm for offset, arm in mentions(sentence, claim, vocabulary) if place.clause_start <= offset < at]
    if before:
        return before[-1]  # the nearest word of an arm; None when it does not tell which
    after = [arm for offset, arm in mentions(place.clause, claim, vocabulary)]
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
