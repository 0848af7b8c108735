"""The HTML frame shared by the project's pages: escaping, layout, a little CSS, flash messages.

Pages are rendered on the server from the ledger (no client framework); a few lines of script add
keyboard navigation. Every value from a PDF, a model or a user goes through ``esc``.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from extraction_pipeline.core.review.values import REVIEWER_UNGROUNDED
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_NOT_FOUND,
    JUDGEMENT_SUPPORTED,
    JUDGEMENT_UNSUPPORTED,
    UNVERIFIED,
    VERIFIED,
)
from extraction_pipeline.web.urls import PREFIX

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:18px;align-items:center}
header a{color:#cfe0ff;text-decoration:none} header strong{margin-right:12px}
main{padding:16px 24px;max-width:1500px}
table{border-collapse:collapse;background:#fff;margin:8px 0 16px}
th,td{border:1px solid #d8dce3;padding:5px 8px;text-align:left;vertical-align:top;font-size:14px}
th{background:#eef1f5}
.flash{padding:8px 12px;border-radius:4px;margin:8px 0;background:#e8f4ff;border:1px solid #9cc8f0}
.flash.error{background:#fdecea;border-color:#f1a39b}
.warn{padding:8px 12px;border-radius:4px;margin:8px 0;background:#fff4d6;border:1px solid #e8c56b}
.verified{background:#c6efce}.approximate{background:#ffeb9c}.unverified{background:#ffc7ce}
.reviewer-ungrounded{background:#e4dfec}
.judgement-supported{background:#bdd7ee}
.second{margin-top:6px;padding:6px 8px;border:1px dashed #e0a050;border-radius:4px;background:#fffaf0}
.flag{background:#f4b183}.decided{color:#1a7f37;font-weight:600}
.pill{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px}
form.inline{display:inline}
.grid{display:grid;grid-template-columns:minmax(420px,1fr) minmax(420px,1fr);gap:18px;align-items:start}
.values{max-height:calc(100vh - 140px);overflow:auto}
.value{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:8px 10px;margin:0 0 8px}
.value.current{outline:3px solid #3b82f6}
.value blockquote{margin:4px 0;padding:4px 8px;border-left:3px solid #c9ced8;background:#fafbfc;font-size:13px}
.value .actions{margin-top:6px;display:flex;gap:6px;flex-wrap:wrap;align-items:center}
.page{position:sticky;top:8px;background:#fff;border:1px solid #d8dce3;padding:6px;max-height:calc(100vh - 40px);
overflow:auto}
.page img{max-width:100%}
.muted{color:#6b7280;font-size:13px}
button{cursor:pointer}
input[type=text]{padding:3px 5px}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url_part(value: Any) -> str:
    return quote(str(value), safe="")


def page(
    title: str,
    body: str,
    *,
    flash: str | None = None,
    error: str | None = None,
    script: str = "",
    status_code: int = 200,
) -> HTMLResponse:
    notes = ""
    if flash:
        notes += f'<div class="flash" role="status">{esc(flash)}</div>'
    if error:
        notes += f'<div class="flash error" role="alert">{esc(error)}</div>'
    document = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)} · extraction_pipeline</title><style>{CSS}</style></head><body>"
        f"<header><strong>extraction_pipeline</strong><a href='{PREFIX}/'>Batches</a>"
        f"<a href='{PREFIX}/projects'>Projects &amp; upload</a><a href='/'>Dagster UI</a></header>"
        f"<main><h1>{esc(title)}</h1>{notes}{body}</main>"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>"
    )
    return HTMLResponse(document, status_code=status_code)


def table(header: list[str], rows: list[list[str]], *, attrs: str = "") -> str:
    """``rows`` hold already-escaped HTML cells."""
    head = "".join(f"<th>{esc(name)}</th>" for name in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table {attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STATUS_CLASSES: dict[str, str] = {
    VERIFIED: "verified",
    APPROXIMATE: "approximate",
    UNVERIFIED: "unverified",
    JUDGEMENT_SUPPORTED: "judgement-supported",
    JUDGEMENT_APPROXIMATE: "approximate",
    JUDGEMENT_NOT_FOUND: "unverified",
    JUDGEMENT_UNSUPPORTED: "unverified",
    REVIEWER_UNGROUNDED: "reviewer-ungrounded",
}


def status_pill(status: str | None) -> str:
    css = _STATUS_CLASSES.get(status or "", "")
    return f'<span class="pill {css}">{esc(status or "")}</span>'


class IdConvertor(Convertor[int]):
    """A ledger id in a URL: 1 to 18 digits (ids beyond a 64-bit integer match no page: a 404,
    never a database error)."""

    regex = "[0-9]{1,18}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("id", IdConvertor())


async def not_found(request: Request) -> Response:
    """Any address under our prefix that is not one of our pages (never Dagster's UI instead)."""
    return page("Not found", "", error=f"there is no page {request.url.path}", status_code=404)
