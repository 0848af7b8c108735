"""Reading form posts safely, and one-time messages after a post.

A form post must come from this server's own pages: a browser sends ``Origin`` (or at least
``Referer``) with every POST, and a page on another site that tries to make a reviewer's browser
post here (cross-site request forgery) is refused. Who posted is web/identity.py's business.

A form is read only when it says its size (``Content-Length``, which browsers always send with a
form) and that size is within ``EXTRACTION_MAX_FORM_KB`` (1 MB by default: the biggest form of ours
is a template of 100,000 characters). Nothing larger is read, so no form post spools to disk.
(PDF uploads are streamed with their own caps: web/upload_stream.py.)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlsplit

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from extraction_pipeline.web.deps import settings_of

CROSS_SITE = "form posts are accepted from this server's own pages only"


def same_origin(request: Request) -> bool:
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent or sent == "null":
        return False
    return urlsplit(sent).netloc == request.headers.get("host", "")


async def read_form(request: Request, *, max_files: int = 0) -> FormData:
    if not same_origin(request):
        raise HTTPException(403, CROSS_SITE)
    declared = request.headers.get("content-length", "")
    if not declared.isdigit():
        raise HTTPException(411, "a form post must say its size (Content-Length)")
    limit_kb = settings_of(request).max_form_kb
    if int(declared) > limit_kb * 1024:
        raise HTTPException(413, f"a form of more than {limit_kb} KB is not read (EXTRACTION_MAX_FORM_KB)")
    return await request.form(max_files=max(max_files, 1), max_fields=5000)


def text_field(form: FormData, name: str, limit: int = 10_000) -> str:
    value: Any = form.get(name)
    return value[:limit] if isinstance(value, str) else ""


FLASH_COOKIE = "extraction_flash"


def set_flash(response: Response, message: str, *, error: bool = False) -> None:
    """A one-time message for the page the browser is redirected to (post, redirect, get)."""
    response.set_cookie(FLASH_COOKIE, quote(("!" if error else "") + message[:500]), httponly=True, samesite="strict")


def read_flash(request: Request) -> tuple[str | None, str | None]:
    """(message, error message) left by the previous post (clear it with ``clear_flash``)."""
    raw = unquote(request.cookies.get(FLASH_COOKIE, ""))
    if not raw:
        return None, None
    return (None, raw[1:]) if raw.startswith("!") else (raw, None)


def clear_flash(request: Request, response: Response) -> Response:
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(FLASH_COOKIE)
    return response
