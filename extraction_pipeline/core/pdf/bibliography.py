"""What a paper is, for the documents list: its title, first author and year, read at registration
from the PDF's own metadata where that is a real title, else from the first page (the title in its
largest type; the year the page prints most). A reviewer sees "Smith 2020 · Aripiprazole in the
treatment of irritability …" instead of a file name and a hash. Nothing here is trusted for an
extraction: it labels a list (and names a study in the pictures when the form has neither a study
id nor an NCT number), and the file name stays beside it."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

MAX_TITLE_CHARS = 300
# A metadata title that names a file or a typesetting job, not the paper.
NOT_A_TITLE = re.compile(
    r"^\s*(?:untitled|unknown|microsoft word\b.*|.*\.(?:docx?|pdf|tex|indd|qxd)|[A-Z]{2,}\d+\S*(?:\s+\d+\.\.\d+)?)\s*$",
    re.IGNORECASE,
)
NOT_AN_AUTHOR = re.compile(r"^\s*(?:unknown|admin(?:istrator)?|user|author)\s*$", re.IGNORECASE)
YEAR = re.compile(r"(?<!\d)(19[5-9]\d|20\d\d)(?!\d)")
CREATED = re.compile(r"^(?:D:)?(\d{4})")  # a PDF date: "D:20200315120000+01'00'"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # metadata can hold NULs (UTF-16 without its mark)
TITLE_WORDS = 3  # a title says something: a few words at least
INITIALS = re.compile(r"^(?:[A-Z]\.?){1,3}$")  # "E", "EM", "E.M."


@dataclass(frozen=True)
class Bibliography:
    title: str = ""
    first_author: str = ""  # the first author's surname
    year: int | None = None


def bibliography(metadata: dict[str, Any], first_page: dict[str, Any], this_year: int) -> Bibliography:
    """From PyMuPDF's ``doc.metadata`` and ``page.get_text("dict")`` of the first page."""
    return Bibliography(
        _title(_text(metadata.get("title")), first_page),
        first_author_surname(_text(metadata.get("author"))),
        _year(first_page, _text(metadata.get("creationDate")), this_year),
    )


def _text(value: object) -> str:
    """A metadata string as text a database takes: control characters (NULs) become spaces."""
    return CONTROL.sub(" ", value) if isinstance(value, str) else ""


def _title(meta_title: str, first_page: dict[str, Any]) -> str:
    title = " ".join(meta_title.split())
    if len(title.split()) >= TITLE_WORDS and not NOT_A_TITLE.match(title):
        return title[:MAX_TITLE_CHARS]
    return _largest_type(first_page)


def _largest_type(first_page: dict[str, Any]) -> str:
    """The first page's text in its largest type (a title wraps: its lines are joined), if it reads
    as a title."""
    lines: list[tuple[float, str]] = []
    for block in first_page.get("blocks", []):
        for line in block.get("lines", []):
            spans = [span for span in line.get("spans", []) if str(span.get("text", "")).strip()]
            if spans:
                size = max(float(span.get("size", 0)) for span in spans)
                lines.append((size, " ".join(str(span["text"]).strip() for span in spans)))
    if not lines:
        return ""
    largest = max(size for size, _ in lines)
    body = Counter(size for size, text in lines for _ in text).most_common(1)[0][0]
    if largest <= body + 0.5:
        return ""  # all in the body's type: no title stands out
    words = " ".join(text for size, text in lines if size >= largest - 0.5)
    title = " ".join(words.split())
    return title[:MAX_TITLE_CHARS] if len(title.split()) >= TITLE_WORDS else ""


def first_author_surname(author: str) -> str:
    """The first author's surname from the metadata's author list ("Jin Joo", "Maren Schmidt,
    Rahel Eckardt", "Karatzanos E; ...", "Eleftherios Karatzanos {et al.}")."""
    first = re.split(r";|,| and |\{", author, maxsplit=1)[0].strip()
    if not first or NOT_AN_AUTHOR.match(first):
        return ""
    tokens = first.split()
    words = [word for word in tokens if re.search(r"[^\W\d_]{2,}", word)]
    if not words:
        return ""
    # "Karatzanos E" lists the surname first (initials last); "Jin Joo", "John M Wiecha" and
    # "J. Jason van Steenburgh" last.
    if INITIALS.match(tokens[-1]) and len(tokens) > 1:
        return words[0]
    surname = words[-1]
    particles = [word for word in words[:-1] if word.islower()]  # "van", "de", "von"
    return " ".join([*particles, surname])


def _year(first_page: dict[str, Any], creation_date: str, this_year: int) -> int | None:
    """The year the first page prints most (its running head, received and published dates), else
    the year the PDF was made."""
    text = " ".join(
        str(span.get("text", ""))
        for block in first_page.get("blocks", [])
        for line in block.get("lines", [])
        for span in line.get("spans", [])
    )
    years = Counter(int(found) for found in YEAR.findall(text) if int(found) <= this_year)
    if years:
        return max(years, key=lambda year: (years[year], year))
    made = CREATED.match(creation_date)
    return int(made.group(1)) if made and 1950 <= int(made.group(1)) <= this_year else None
