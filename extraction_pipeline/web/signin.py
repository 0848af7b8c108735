"""The pages that sign users in and out: a personal token (typed) or a one-time sign-in link
(`users add`, `users link`: good once, for minutes, never the token) becomes a session cookie;
signing out ends it; ``/me`` says who the session is.

Who a request proves to be is web/identity.py's; these handlers, like every other route module's,
take the ledger and the settings from the request (web/deps.py).
"""

from __future__ import annotations

import math
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.ledger.users import (
    SESSION_DAYS,
    User,
    end_session,
    start_session,
    use_signin_code,
    user_by_code,
    user_by_token,
)
from extraction_pipeline.web.deps import ledger_of, settings_of, user_of
from extraction_pipeline.web.forms import read_form, text_field
from extraction_pipeline.web.identity import (
    ME_PATH,
    SESSION_COOKIE,
    SIGNIN_PATH,
    SIGNOUT_PATH,
    identify,
    over_https,
    sso_refused,
)
from extraction_pipeline.web.signin_throttle import count_failure, retry_after, too_many
from extraction_pipeline.web.templating import render
from extraction_pipeline.web.urls import PREFIX

HOME_PATH = f"{PREFIX}/"
MAX_NEXT_CHARS = 2000
BAD_CODE = (
    "that sign-in link is not valid: it works once, for 15 minutes "
    "(ask an admin for a new one: extraction-pipeline users link NAME)"
)
BAD_TOKEN = "that token is not valid (ask an admin for a new one: extraction-pipeline users token NAME)"  # noqa: S105 (a message)


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a page of ours, never another site (``//evil.example``,
    ``https://evil.example``) or anything a header could be split with."""
    if (
        value
        and value.startswith(HOME_PATH)
        and len(value) <= MAX_NEXT_CHARS
        and "\\" not in value
        and all(" " < ch < "\x7f" for ch in value)
    ):
        return value
    return HOME_PATH


def _signed_in(request: Request, user: User, target: str) -> Response:
    """A new session (never the one the browser brought: that one is ended), then ``target``."""
    ledger = ledger_of(request)
    previous = request.cookies.get(SESSION_COOKIE)
    if previous:
        end_session(ledger, previous)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        start_session(ledger, user, days=SESSION_DAYS),
        max_age=SESSION_DAYS * 86400,
        path="/",  # Dagster's pages and live updates pass the gate by it too
        httponly=True,
        samesite="strict",
        secure=over_https(request, settings_of(request)),
    )
    return response


def _form_page(
    next_path: str,
    *,
    error: str | None = None,
    status_code: int = 200,
    refresh: bool = False,
    confirm: tuple[User, str] | None = None,
    confirm_field: str = "code",
    headers: dict[str, str] | None = None,
) -> Response:
    """The sign-in form; with ``confirm`` (a sign-in link's user and token) a button that signs in
    as that user — a link alone never signs anyone in (another person's link would sign you in as
    them). ``refresh``: the page was reached from another site's link, so the browser withheld our
    SameSite=Strict cookie; loading it again from our own page sends the cookie (a signed-in user
    then goes on to ``next``; one who is not sees this form, and no further reload)."""
    return render(
        "signin.html",
        title="Sign in",
        signin_path=SIGNIN_PATH,
        next_path=next_path,
        error=error,
        status_code=status_code,
        reload_to=f"{SIGNIN_PATH}?next={quote(next_path, safe='')}" if refresh else None,
        confirm_as=confirm[0].name if confirm else None,
        secret_field=confirm_field,
        secret=confirm[1] if confirm else "",
        headers={"referrer-policy": "same-origin", "cache-control": "no-store", **(headers or {})},
    )


def _wait_page(next_path: str, seconds: float) -> Response:
    return _form_page(
        next_path,
        error=f"too many failed sign-ins from this address: try again in {math.ceil(seconds)} s",
        status_code=429,
        headers=retry_after(seconds),
    )


async def signin_page(request: Request) -> Response:
    next_path = safe_next(request.query_params.get("next"))
    # The one-time link `users add` / `users link` printed, or a link of an older release, which
    # carried the token: either is confirmed by a click (a same-origin POST), never signed in here.
    for field, find, bad in (("code", user_by_code, BAD_CODE), ("token", user_by_token, BAD_TOKEN)):
        secret = request.query_params.get(field)
        if secret is None:
            continue
        if wait := too_many(request, settings_of(request)):
            return _wait_page(next_path, wait)
        user = find(ledger_of(request), secret.strip())
        if user is None:
            count_failure(request, settings_of(request))
            return _form_page(next_path, error=bad, status_code=401)
        return _form_page(next_path, confirm=(user, secret.strip()), confirm_field=field)
    found = identify(request, ledger_of(request), settings_of(request))
    if isinstance(found, User):
        if "next" in request.query_params:
            return RedirectResponse(next_path, status_code=303)
        return render("signed_in.html", title="Signed in", user=found, signout_path=SIGNOUT_PATH)
    if isinstance(found, str):
        return _form_page(next_path, error=sso_refused(found), status_code=403)
    return _form_page(next_path, refresh=request.headers.get("sec-fetch-site") == "cross-site")


async def signin(request: Request) -> Response:
    form = await read_form(request)
    next_path = safe_next(text_field(form, "next", MAX_NEXT_CHARS))
    if wait := too_many(request, settings_of(request)):
        return _wait_page(next_path, wait)
    code = text_field(form, "code", 500).strip()
    if code:  # the click on a one-time link's page: the code is used up
        user = use_signin_code(ledger_of(request), code)
        if user is None:
            count_failure(request, settings_of(request))
            return _form_page(next_path, error=BAD_CODE, status_code=401)
        return _signed_in(request, user, next_path)
    user = user_by_token(ledger_of(request), text_field(form, "token", 500).strip())
    if user is None:
        count_failure(request, settings_of(request))
        return _form_page(next_path, error=BAD_TOKEN, status_code=401)
    return _signed_in(request, user, next_path)


async def signout(request: Request) -> Response:
    await read_form(request)  # refuses another site's post: it could sign a reviewer out
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        end_session(ledger_of(request), secret)
    response = RedirectResponse(SIGNIN_PATH, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def me(request: Request) -> Response:
    user = user_of(request)
    if user is None:
        return JSONResponse({"error": "not signed in"}, status_code=401)
    return JSONResponse({"name": user.name, "role": user.role.value})


ROUTES = [
    Route(SIGNIN_PATH, signin_page, methods=["GET", "HEAD"]),
    Route(SIGNIN_PATH, signin, methods=["POST"]),
    Route(SIGNOUT_PATH, signout, methods=["POST"]),
    Route(ME_PATH, me, methods=["GET"]),
]
