"""HTML from Jinja2 templates (``web/templates/``), escaped by default.

Every value from a PDF, a model or a user is escaped by Jinja2's autoescaping; nothing is marked
safe that did not come from another template, except the SVG pictures of ``core/synthesis``
(web/synthesis.py), which escape every text they place. Status words map to CSS classes here, in
one place, so the page, the workbook's colours and the legend agree; a value's status is written
by ``core/review/status_words.py`` (``verified, flagged`` for a flagged one, orange).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse

from extraction_pipeline.core.review.form import field_title
from extraction_pipeline.core.review.status_words import FLAGGED, colour_key, shown_status
from extraction_pipeline.core.review.values import REVIEWER_UNGROUNDED
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_SUPPORTED,
    JUDGEMENT_UNSUPPORTED,
    NOT_REPORTED,
    UNVERIFIED,
    VERIFIED,
)
from extraction_pipeline.web.urls import PREFIX

STATUS_CLASSES: dict[str, str] = {
    VERIFIED: "verified",
    APPROXIMATE: "approximate",
    UNVERIFIED: "unverified",
    JUDGEMENT_SUPPORTED: "judgement-supported",
    JUDGEMENT_APPROXIMATE: "approximate",
    JUDGEMENT_NOT_FOUND: "unverified",
    JUDGEMENT_UNSUPPORTED: "unverified",
    REVIEWER_UNGROUNDED: "reviewer-ungrounded",
    NOT_REPORTED: "not-reported",
    FLAGGED: "flagged",
}


def status_class(status: Any) -> str:
    return STATUS_CLASSES.get(colour_key(str(status or "")), "")


def shown(value: Any) -> str:
    """A value as the page shows it: numbers and text as printed, nothing as a dash."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value)) if "e" not in repr(value) else repr(value)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _query(url: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v is not None}
    return f"{url}?{urlencode(kept)}" if kept else url


environment = Environment(
    loader=PackageLoader("extraction_pipeline.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,  # a misspelt name fails the render (and its test), never renders empty
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.globals.update(PREFIX=PREFIX)
environment.filters.update(
    status_class=status_class, status_text=shown_status, shown=shown, url_part=lambda v: quote(str(v), safe="")
)
environment.filters["query"] = _query
environment.filters["field_title"] = field_title  # a value's name in words, never its path


def render(
    template_name: str, /, *, status_code: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    """``template_name`` rendered with ``context`` (``flash``, ``error`` and ``user`` default to none)."""
    context.setdefault("flash", None)
    context.setdefault("error", None)
    context.setdefault("user", None)
    html = environment.get_template(template_name).render(**context)
    return HTMLResponse(html, status_code=status_code, headers=headers)
