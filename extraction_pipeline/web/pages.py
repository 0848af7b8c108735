"""Pages every part of the web layer shares: a message page (not found, refused) and the ``id``
URL convertor.

Pages are rendered on the server from the ledger by Jinja2 templates (web/templates/, through
web/templating.py; no client framework); a little script (web/static/) adds keyboard navigation
and the page viewer. No handler assembles HTML in Python.
"""

from __future__ import annotations

from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from extraction_pipeline.web.templating import render


def message_page(
    title: str, *, message: str = "", error: str | None = None, status_code: int = 200, user: Any = None
) -> HTMLResponse:
    return render("message.html", title=title, message=message, error=error, status_code=status_code, user=user)


def not_found_page(request: Request, error: str) -> Response:
    return message_page("Not found", error=error, status_code=404)


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
    return not_found_page(request, f"there is no page {request.url.path}")
