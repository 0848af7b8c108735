"""The recall check's labels: the outcome a table row or a sentence names (a row's label under
its group's, a sentence's subject), the abbreviations a paper defines, whether the abstract or
the results section names an outcome too, and a listed item's label as one name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.verification.recall_items import LABEL_SEPARATOR

# A row label that only says when or in whom ("Baseline", "12 weeks", "Post"): the outcome is
# named by the group label above it.
_GENERIC_LABEL = re.compile(
    r"^(?:pre|post|baseline|change|total|overall|all|mean|median|sd|n|week|weeks|month|months|day|days|visit|"
    r"follow[- ]?up|after|before|end|t\d|pre[- ]?intervention|post[- ]?intervention|endpoint|final|"
    r"\d+[- ]?(?:weeks?|months?|days?|h|hours?|years?)|[\d\s.,:-]+)\b.{0,25}$",
    re.IGNORECASE,
)
FOOTNOTE_MARKS = re.compile(r"[*†‡§¶#|^∗]+")
LETTERS = re.compile(r"[^\W\d_]")


_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})


def clean_label(label: str) -> str:
    """A label without footnote marks or ligatures ("ﬂexion": flexion), its spaces collapsed, stray
    punctuation off its ends."""
    return " ".join(FOOTNOTE_MARKS.sub(" ", label.translate(_LIGATURES)).split()).strip(" ,;:")


def labelled(label: str, group_label: str) -> str:
    """A generic label ("12 weeks", "Post") under the label of its group ("Fat mass: 12 weeks")."""
    if group_label and (not label or _GENERIC_LABEL.match(label)):
        return f"{clean_label(group_label)}: {label}" if label else clean_label(group_label)
    return label


# A sentence's outcome is its subject: the words before its first verb ("The mean operation time
# was 74.1 ..."), or after "difference in" when the sentence opens with one ("There was no
# difference in the incidence of PONV between the groups", "A difference was found in handgrip
# strength"). A subject that says who ("the intervention group had a mean HRQoL of") or nothing
# ("Similar results were found for the MRC score") gives way to what the sentence says about it.
_VERB = re.compile(
    r"\b(?:was|were|is|are|had|has|have|did|does|showed?|shown|remained|differed|increased|decreased|"
    r"reduced|improved|declined|rose|fell|obtained|observed|reported|found|occurred|ranged|averaged)\b",
    re.IGNORECASE,
)
_COMPARING = re.compile(
    r"\b(?:between|among|amongst|versus|vs\.?|compared|in (?:the|both|each|all) |"
    r"(?:greater|higher|lower|less|more|better|worse|larger|smaller) than)",
    re.IGNORECASE,
)
_DIFFERENCE_IN = re.compile(
    r"\b(?:differences?|changes?|reductions?|increases?|decreases?|improvements?)"
    r"(?:\s+(?:was|were|is|are)\s+(?:found|observed|seen|noted|detected|shown))?\s+(?:in|of)\b",
    re.IGNORECASE,
)
_WHO = re.compile(r"\b(?:groups?|arms?|patients|participants|subjects|women|men|children|cohort)\s*$", re.IGNORECASE)
_SAYS_NOTHING = re.compile(
    r"^(?:(?:similar|comparable|the|these|this|that|such|there|it|no|a|an|significant|statistically|"
    r"between-group|within-group|results?|findings?|effects?|differences?|values?)\b[\s-]*)+$",
    re.IGNORECASE,
)
_ABOUT = re.compile(r"\b(?:for|in|on|regarding|concerning)\s+", re.IGNORECASE)
_BROKEN_WORD = re.compile(r"(\w)- (?!(?:and|or|to|nor)\b)([a-z])")
_OPEN_PARENTHESIS = re.compile(r"\s*[(\[][^)\]]*$")  # "... of the arms (EMS:": the numbers' own
_LEADING = re.compile(
    r"^(?:(?:the|a|an|overall|mean|median|average|total|matched|respective|respectively)\b[\s,]*)+", re.I
)
_TRAILING = re.compile(
    r"(?:[\s(:;,=−–-]+|\b(?:the|a|an|of|in|for|at|with|and|to|by|from|on|during|after|groups?)\b)+$", re.I
)
MAX_SENTENCE_LABEL = 100


def sentence_label(before: str) -> str:
    """An outcome name from the words of a sentence before its first number: its subject, without
    a section lead-in ("Operative Findings:"), articles, "mean", or the groups it compares; what is
    said of a subject that names a group or nothing."""
    before = _OPEN_PARENTHESIS.sub("", " ".join(before.translate(_LIGATURES).split()))
    before = _BROKEN_WORD.sub(r"\1-\2", before)  # "clinician- rated": a word hyphenated at a line's end
    text = before
    if (difference := _DIFFERENCE_IN.search(text)) is not None:
        text = text[difference.end() :]
    elif (verb := _VERB.search(text)) is not None and LETTERS.search(text[: verb.start()]):
        subject = _last_clause(text[: verb.start()])
        said_of_it = text[verb.end() :]
        if _SAYS_NOTHING.match(subject) and (about := _ABOUT.search(said_of_it)) is not None:
            text = said_of_it[about.end() :]
        elif _WHO.search(subject) and LETTERS.search(said_of_it):
            text = said_of_it
        else:
            text = subject
    text = _last_clause(text)
    if (comparing := _COMPARING.search(text)) is not None and comparing.start() > 0:
        text = text[: comparing.start()]
    label = _TRAILING.sub("", _LEADING.sub("", text.strip())).strip()
    if len(LETTERS.findall(label)) < 3:
        label = re.sub(r"[\s(:;,=−–-]+$", "", before)
    if len(label) > MAX_SENTENCE_LABEL:  # the words nearest the numbers, whole
        label = label[-MAX_SENTENCE_LABEL:].split(" ", 1)[-1]
    return label


def _last_clause(text: str) -> str:
    """The words after a sentence's last colon, semicolon or comma ("In the control group, the HRQoL")."""
    return re.split(r"[:;]|, ", text)[-1] if re.search(r"[:;]|, ", text) else text


# An abbreviation in brackets, and the words before it (up to six, read back from the bracket: a
# scan of the whole text for the words first is slow on long papers).
_IN_BRACKETS = re.compile(r"\(([A-Z][A-Za-z0-9]{1,7})\)")
_WORDS_BEFORE = re.compile(r"((?:[A-Za-z][\w'-]*[\s-]+){1,6})$")
_WORDS_BACK = 200  # characters: six words and their spaces (read from a space on)
STEM = 5  # "complications" and "complication", "infections" and "infection" share a stem
_VAGUE = frozenset(
    word[:STEM]
    for word in re.findall(
        r"\w+",
        "mean median total number rate score group groups patients participants change baseline after before "
        "week weeks month months days day time level levels value values with without from during other all any "
        "the and for per",
    )
)


def defined_acronyms(text: str) -> dict[str, str]:
    """Abbreviations the paper defines ("respiratory distress syndrome (RDS)"): a row labelled
    "RDS" names what the abstract spells out."""
    found: dict[str, str] = {}
    for bracket in _IN_BRACKETS.finditer(text):
        back = max(0, bracket.start() - _WORDS_BACK)
        if back:  # from a space: a word cut in half is no word
            back = next((i for i in range(back, bracket.start()) if text[i].isspace()), bracket.start())
        before = _WORDS_BEFORE.search(text, back, bracket.start())
        if before is None:
            continue
        abbreviation = bracket.group(1)
        letters = [c.lower() for c in abbreviation if c.isupper()]
        words = re.findall(r"[A-Za-z]+", before.group(1))
        if len(letters) >= 2 and len(words) >= len(letters):
            tail = words[-len(letters) :]
            if [w[0].lower() for w in tail] == letters:
                found.setdefault(abbreviation.lower(), " ".join(tail).lower())
    return found


def word_stems(text: str) -> frozenset[str]:
    """The word stems of a text (for "does the abstract name this outcome?")."""
    return frozenset(word[:STEM] for word in normalize_name(text).split() if len(word) >= 3)


def mentioned(label: str, words: frozenset[str], acronyms: Mapping[str, str]) -> bool:
    """Does a text (the abstract, the results) name this outcome too: most of its telling words?"""
    spelled = " ".join(acronyms.get(w.lower(), w) for w in re.findall(r"[\w-]+", label))
    telling = [w for w in word_stems(spelled) if w not in _VAGUE and not w.isdigit()]
    return bool(telling) and sum(1 for w in telling if w in words) >= max(1, math.ceil(0.6 * len(telling)))


def one_label(label: str) -> str:
    """A label as one name: the separator of several names is not part of it."""
    return label.replace(LABEL_SEPARATOR, ", ")


def said(label: str) -> str:
    """A label as compared with another: lower case, its spaces collapsed."""
    return " ".join(label.lower().split())
