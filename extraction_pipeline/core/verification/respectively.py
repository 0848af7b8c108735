"""Sentences that give several groups' numbers in one list: "glycaemia was 0.83 ± 0.05, 0.92 ±
0.07 and 0.74 ± 0.05 g/l on saline, dextrose and saline with quinine, respectively". The k-th
number belongs to the k-th name, whatever words the sentence puts next to it, so a number's group
is read from its position, not from the words nearest it.
"""

from __future__ import annotations

import re

from extraction_pipeline.core.verification.places import NUMBER, as_number

LINE_BREAK_HYPHEN = re.compile(r"(?<=[a-z])- (?=[a-z])")

RESPECTIVELY = re.compile(r",?\s*\brespectively\b", re.IGNORECASE)

# A listed value and what follows it: "0.83 ± 0.05", "12 (24%)", "6.4 (1.3)" (a spread or share is
# part of its value, not a value of its own).
LISTED_VALUE = re.compile(
    r"[-−–]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?\s*%?(?:\s*(?:±|\+/-)\s*\d+(?:\.\d+)?|\s*[(\[][^()\[\]]{0,30}[)\]])?"
)

# Between two values of one list: a comma, "and", "or", "vs", units ("mg/dl and").
VALUE_GAP = re.compile(
    r"^\s*(?:[A-Za-zµμ/%]{1,8}\s*)?(?:,|;|\band\b|\bor\b|\bvs\.?|\bversus\b)(?:\s*(?:and|or)\b)?\s*$", re.I
)

# Where the names of a list begin after its values: "g/l on", "in", "for the", "among".
NAMES_LEAD = re.compile(r"^\s*(?:[A-Za-zµμ/%]{1,8}\s+)?(?:in|on|for|with|among|of|at)\s+(?:the\s+)?", re.I)

SEPARATOR = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s+vs\.?\s+|\s+versus\s+)\s*", re.I)


def listed_group(sentence: str, offset: int) -> tuple[list[str], int] | None:
    """(the names of the list, the position of the value holding ``offset``) when ``sentence`` gives
    its values "respectively" and names as many groups as it gives values; else None."""
    # Words broken at a line's end ("respec- tively", "contain- ing") are read whole.
    offset -= 2 * len(LINE_BREAK_HYPHEN.findall(sentence[:offset]))
    sentence = LINE_BREAK_HYPHEN.sub("", sentence)
    ending = RESPECTIVELY.search(sentence, offset)
    if ending is None:
        return None
    values = next((run for run in _runs(sentence, ending.start()) if run[0][0] <= offset < run[-1][1]), [])
    position = next((i for i, (start, end) in enumerate(values) if start <= offset < end), None)
    if position is None or len(values) < 2:
        return None
    after = sentence[values[-1][1] : ending.start()]
    lead = NAMES_LEAD.match(after)
    names = _names(after[lead.end() :]) if lead else []
    if len(names) != len(values):
        # "In groups A, B and C, the means were 1, 2 and 3, respectively": the names come first.
        before = sentence[: values[0][0]]
        head = re.split(r"\b(?:was|were|is|are|of|had|reached|showed)\b(?!.*\b(?:was|were|is|are)\b)", before)[0]
        groups = re.search(r"\b(?:in|for|among|between)\s+(?:the\s+)?(.+?)\s+(?:groups?|arms?)\b", head, re.I)
        names = _names(groups.group(1)) if groups else []
    if len(names) != len(values):
        return None
    return names, position


def _runs(sentence: str, end: int) -> list[list[tuple[int, int]]]:
    """The spans of each run of listed values before ``end`` (values joined by commas or "and")."""
    runs: list[list[tuple[int, int]]] = []
    for match in LISTED_VALUE.finditer(sentence, 0, end):
        number = NUMBER.match(match.group())
        if number is None or as_number(number.group()) is None:
            continue
        if runs and VALUE_GAP.match(sentence[runs[-1][-1][1] : match.start()]):
            runs[-1].append((match.start(), match.end()))
        else:
            runs.append([(match.start(), match.end())])
    return runs


def _names(text: str) -> list[str]:
    parts = [part.strip(" .,;:") for part in SEPARATOR.split(text.strip())]
    return [part for part in parts if part and re.search(r"[A-Za-z]", part)]
