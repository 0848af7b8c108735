"""When a quoted number was measured: before treatment (a baseline table, row, column or group)
or at an earlier time than the paper goes on to print (a table's later column, row or group; a
sentence's later time point), when the claim does not say which time it wants. Each function
returns a flag's sentence, or None when the place agrees with the claim.
"""

from __future__ import annotations

import re

from extraction_pipeline.core.verification.arm_names import TIME_ARM
from extraction_pipeline.core.verification.claimed import Claim
from extraction_pipeline.core.verification.kinds import shown
from extraction_pipeline.core.verification.places import TABLE, Place
from extraction_pipeline.core.verification.vocabulary import times

# "Table 1 Baseline characteristics of the participants": a table of who was randomized, not of results.
BASELINE_CAPTION = re.compile(
    r"\bbaseline (?:characteristics|data|demographics?|values|features|variables|levels|measurements)\b"
    r"|\b(?:patient|participant|demographic|clinical|sample|study population)s?'? characteristics\b"
    r"|\bcharacteristics of (?:the )?(?:patients|participants|subjects|study|population|sample)",
    re.IGNORECASE,
)


# A row, column or heading that is the time before treatment: "Baseline", "Pre-treatment", "Week 0".
BASELINE_TIME = re.compile(
    # "Mean baseline", "Pre: Mean (SE)"; a bare "Pre" but not "Pre-eclampsia", "pressure" or the
    # change "Pre/post", "Pre–post", "Pre vs post"
    r"^\s*(?:(?:mean|median)\s+)?(?:baseline|pre(?:-?(?:treatment|intervention|operative|test)"
    r"|(?![a-z/–—-])(?!\s*(?:vs\.?|versus|and|&)\s))"
    r"|before(?: treatment)?|(?:week|day|month) 0)\b"
    # not "Baseline-adjusted", "Baseline to week 12", "Week 0–12": those speak of what came after
    r"(?![\s-]*(?:adjusted|corrected|to\b|[-–—]\s*\d))",
    re.IGNORECASE,
)


TIME_ROW = re.compile(
    r"\d+[- ]?(?:h|hrs?|hours?|days?|weeks?|wk|months?|years?)\b"
    r"|follow-?up|\bpost|\bend of|\bafter\b|\bweek\b|\bmonth\b",
    re.IGNORECASE,
)


def baseline_flag(place: Place, claim: Claim) -> str | None:
    """A result (a count, mean or SD) quoted from a table of baseline characteristics, or from the
    row, column or group of the time before treatment, when the claim is not about baseline (its
    arm is not a time point and neither its outcome nor its time point says baseline). Group sizes
    are printed there for all outcomes and are not judged here."""
    if claim.kind in ("n", "total") or place.kind != TABLE:
        return None
    if TIME_ARM.match(claim.arm) or _about_baseline(claim):
        return None
    if BASELINE_CAPTION.search(place.caption):
        return f"the quoted table gives baseline characteristics ('{shown(place.caption)}'), not results"
    nearest = [*place.columns[-1:], place.row_label, *place.headings[:1], *_time_groups(place)[:1]]
    for text in nearest:
        if text and BASELINE_TIME.match(text):
            return f"the quoted number is printed for '{text}', before treatment; the claim is a result"
    return None


def _time_groups(place: Place) -> list[str]:
    """The group lines over a table's rows that are times ("Baseline", "4-month follow-up"), nearest first."""
    return [line for line in place.groups if BASELINE_TIME.match(line) or TIME_ROW.search(line)]


# "4-month follow-up", "Week 12", "Weeks 12", "24 h": a time as (value, unit); baseline is 0 of any unit.
WHEN_AFTER = re.compile(r"(\d+(?:\.\d+)?)[- ]?(h|hrs?|hours?|d|days?|wk|weeks?|mo|months?|years?)\b", re.IGNORECASE)
WHEN_BEFORE = re.compile(r"\b(hours?|days?|weeks?|months?|years?|visits?)\s*(\d+(?:\.\d+)?)\b", re.IGNORECASE)


def _when(text: str) -> tuple[float, str] | None:
    if BASELINE_TIME.match(text):
        return 0.0, "*"
    found = WHEN_BEFORE.search(text)
    value, unit = (found.group(2), found.group(1)) if found else (None, None)
    if found is None and (after := WHEN_AFTER.search(text)):
        value, unit = after.group(1), after.group(2)
    if value is None or unit is None:
        return None
    return (0.0, "*") if float(value) == 0 else (float(value), unit.lower()[0])


def _about_baseline(claim: Claim) -> bool:
    """Does the claim itself speak of the time before treatment ("baseline HbA1c", "pre-treatment")?"""
    return bool(ABOUT_BASELINE.search(f"{claim.outcome} {claim.timepoint}"))


ABOUT_BASELINE = re.compile(r"\bbaseline\b|\bpre-?(?:treatment|intervention|operative|test)\b", re.IGNORECASE)


def later_time_flag(place: Place, claim: Claim) -> str | None:
    """A result quoted at one time point of a table that prints the same thing later ("Weeks 12"
    where the column goes on to 24; the "1-month follow-up" group above the "4-month" one; the
    "Week 2" column beside "Week 3"), when the claim names no time point: a review takes the
    time point it wants, and the claim does not say which this is."""
    if claim.kind in ("n", "total") or place.kind != TABLE or claim.timepoint or times(claim.outcome):
        return None
    if TIME_ARM.match(claim.arm) or _about_baseline(claim):
        return None  # the before–after comparison's "baseline" arm, or a claim about baseline
    own_column = place.columns[-1] if place.columns else ""
    if place.row_time:
        own, printed = place.row_time, place.column_times
    elif own_column and _when(own_column):
        own, printed = own_column, (own_column, *place.beside)
    elif groups := _time_groups(place):
        own, printed = groups[0], tuple(groups)
    else:
        return None
    at = _when(own)
    if at is None:
        return None
    later = [text for text in printed if (when := _when(text)) and _after(when, at)]
    if not later:
        return None
    return (
        f"the quoted number is printed for '{own}'; the table also prints '{later[-1]}', and the claim"
        " names no time point"
    )


def _after(when: tuple[float, str], at: tuple[float, str]) -> bool:
    if at[1] == "*":
        return when[1] != "*"
    return when[1] == at[1] and when[0] > at[0]


# "6 hours after surgery", "on the first postoperative day", "at week 12", "after 3 months": where
# a sentence says when its numbers were measured.
SENTENCE_TIME = re.compile(
    r"\b(?:(?P<ordinal>first|second|third|fourth|fifth|sixth|seventh)\s+(?:post-?operative\s+)?(?P<ounit>day|week|month|year)"
    r"|(?P<bunit>hours?|days?|weeks?|months?|years?)\s*(?P<bvalue>\d+(?:\.\d+)?)"
    r"|(?P<avalue>\d+(?:\.\d+)?)[- ]?(?P<aunit>h|hrs?|hours?|days?|weeks?|months?|years?)\b)",
    re.IGNORECASE,
)
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7}
HOURS = {"h": 1, "d": 24, "w": 168, "m": 730, "y": 8760}


def later_in_sentence_flag(place: Place, claim: Claim) -> str | None:
    """A result from a sentence that gives it at one time and goes on to give the same measure at a
    later one ("... 6 hours after surgery was 6.4 ± 1.3 ... and on the first postoperative day
    was 4.3 ± 1.0"), when the claim names no time point: the sentence's own version of
    ``later_time_flag``."""
    if claim.kind in ("n", "total") or place.kind == TABLE or claim.timepoint or times(claim.outcome):
        return None
    if TIME_ARM.match(claim.arm) or _about_baseline(claim):
        return None
    mentions = [
        (match, _hours(match)) for match in SENTENCE_TIME.finditer(place.sentence) if _time_point(place.sentence, match)
    ]
    own = [(match, hours) for match, hours in mentions if match.end() <= place.offset and hours is not None]
    if not own:
        return None
    at_match, at = own[-1]
    for match, hours in mentions:
        later_numbers = NUMBER_AFTER.search(place.sentence, match.end())
        if match.start() > place.offset and hours is not None and hours > at and later_numbers:
            return (
                f"the quoted number is for '{at_match.group()}'; the sentence goes on to '{match.group()}',"
                " and the claim names no time point"
            )
    return None


def _time_point(sentence: str, match: re.Match[str]) -> bool:
    """A time the numbers are measured at ("6 hours after surgery", "at 12 weeks"), not a value
    that is a duration ("9.9 ± 14.8 days")."""
    if match.group("ordinal"):
        return True
    before, after = sentence[max(0, match.start() - 12) : match.start()], sentence[match.end() : match.end() + 12]
    return bool(TIME_LEAD.search(before) or TIME_TAIL.match(after))


TIME_LEAD = re.compile(r"\b(?:at|after|on|within|by|over|during|until)\s+(?:the\s+)?$", re.IGNORECASE)
TIME_TAIL = re.compile(r"^\s*(?:after|post|later|follow)", re.IGNORECASE)


NUMBER_AFTER = re.compile(r"\d+(?:\.\d+)?\s*(?:±|\(|%)")


def _hours(match: re.Match[str]) -> float | None:
    if match.group("ordinal"):
        value, unit = float(ORDINALS[match.group("ordinal").lower()]), match.group("ounit")
    elif match.group("bunit"):
        value, unit = float(match.group("bvalue")), match.group("bunit")
    else:
        value, unit = float(match.group("avalue")), match.group("aunit")
    return value * HOURS.get(unit.lower()[0], 0) or None
