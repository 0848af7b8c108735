"""Who is asking, over real HTTP (uvicorn on a loopback port, ledgers on SQLite and PostgreSQL):
signing in with a personal token (form or printed link) gives a session cookie that names the
user; a wrong token, another site's post, a link to another site and an ended session are
refused; a single-sign-on header counts only from a trusted proxy; a signed-in user passes the
instance's token gate without the instance token; pages that need a user or an admin say so."""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.schema import user_sessions
from extraction_pipeline.core.ledger.users import (
    Role,
    User,
    add_user,
    digest,
    disable_user,
    find_user,
    list_users,
    start_session,
)
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.auth import TokenGate
from extraction_pipeline.web.guard import RequestGuard, allowed_hosts
from extraction_pipeline.web.identity import (
    SESSION_COOKIE,
    current_user,
    passes_gate,
    require_admin,
    require_user,
)
from extraction_pipeline.web.signin import ROUTES as SIGNIN_ROUTES
from extraction_pipeline_tests.support.web import serving

INSTANCE_TOKEN = "instance-token-for-tests"
SESSION_SECONDS = 14 * 86400


def _app(ledger: Ledger, settings: Settings, *, instance_token: str | None) -> Any:
    """The sign-in routes, two pages wired the way the project's pages will be, a stand-in for
    Dagster's UI and its live updates; behind the token gate when ``instance_token`` is given."""

    async def decide(request: Request) -> Response:
        found = require_user(request, ledger, settings)
        if isinstance(found, Response):
            return found
        return PlainTextResponse(f"recorded under {found.name}")

    async def settings_page(request: Request) -> Response:
        found = require_admin(request, ledger, settings, action="change the project's settings")
        if isinstance(found, Response):
            return found
        return PlainTextResponse(f"settings changed by {found.name}")

    async def dagster_ui(request: Request) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    async def live(socket: WebSocket) -> None:
        await socket.accept()
        user = current_user(socket, ledger, settings)
        await socket.send_text(f"live for {user.name if user else 'nobody'}")
        await socket.close()

    app: Any = Starlette(
        routes=[
            *SIGNIN_ROUTES,
            Route("/extraction/decide", decide, methods=["GET", "POST"]),
            Route("/extraction/settings", settings_page, methods=["GET", "POST"]),
            WebSocketRoute("/live", live),
            Route("/{rest:path}", dagster_ui),
        ]
    )
    app.state.ledger, app.state.settings = ledger, settings  # what the sign-in handlers read (web/deps.py)
    if instance_token:
        app = TokenGate(app, instance_token, accepts=lambda scope: passes_gate(scope, ledger, settings))
    return RequestGuard(app, allowed_hosts("127.0.0.1", settings.public_url, ()))


@contextlib.contextmanager
def _serving(ledger: Ledger, settings: Settings, *, instance_token: str | None = None) -> Iterator[str]:
    with serving(_app(ledger, settings, instance_token=instance_token)) as base:
        yield base


def _client(base: str, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Origin": base, **headers}, timeout=30)


def _session_cookie(response: httpx.Response) -> str:
    [header] = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{SESSION_COOKIE}=")]
    return header


def _cookie(secret: str) -> dict[str, str]:
    """A browser's session cookie, sent as it is (an explicit header wins over the client's jar)."""
    return {"Cookie": f"{SESSION_COOKIE}={secret}"}


def _settings(tmp_path: Path, **changes: Any) -> Settings:
    return Settings(home=tmp_path / "home", **changes)


def _me(client: httpx.Client, **kwargs: Any) -> tuple[int, Any]:
    response = client.get("/extraction/me", **kwargs)
    return response.status_code, response.json()


def test_signing_in_with_the_token_gives_a_session_that_names_the_user(ledger: Ledger, tmp_path: Path) -> None:
    alice, token = add_user(ledger, "alice", Role.ADMIN)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        assert _me(client) == (401, {"error": "not signed in"})
        form = client.get("/extraction/signin")
        assert form.status_code == 200 and 'type="password" name="token"' in form.text
        response = client.post("/extraction/signin", data={"token": token, "next": "/extraction/batches/3"})
        assert response.status_code == 303 and response.headers["location"] == "/extraction/batches/3"
        cookie = _session_cookie(response)
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and f"Max-Age={SESSION_SECONDS}" in cookie
        assert "Path=/" in cookie and "Secure" not in cookie  # plain http: a Secure cookie would be dropped
        secret = client.cookies[SESSION_COOKIE]
        assert token not in secret
        assert _me(client) == (200, {"name": "alice", "role": "admin"})
        assert client.get("/extraction/decide").text == "recorded under alice"
        assert client.post("/extraction/decide").text == "recorded under alice"
        assert client.get("/extraction/signin?next=/extraction/decide").headers["location"] == "/extraction/decide"
        signed_in = client.get("/extraction/signin")
        assert "Signed in as <strong>alice</strong>" in signed_in.text and "/extraction/signout" in signed_in.text
    with ledger.engine.connect() as conn:
        stored = list(conn.execute(select(user_sessions.c.id, user_sessions.c.user_id)))
    assert [tuple(row) for row in stored] == [(digest(secret), alice.id)]  # the secret itself is not stored


def test_a_wrong_token_is_refused_with_401(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        for wrong in (token[:-1], "", "x" * 5000):
            response = client.post("/extraction/signin", data={"token": wrong})
            assert response.status_code == 401
            assert (
                "that token is not valid (ask an admin for a new one: extraction-pipeline users token NAME)"
                in response.text
            )
            assert not response.headers.get_list("set-cookie")
        linked = client.get("/extraction/signin", params={"token": "not-a-token"})
        assert linked.status_code == 401 and "that token is not valid" in linked.text
        assert _me(client)[0] == 401
        assert _me(client, headers={"Authorization": "Bearer not-a-token"})[0] == 401


def test_another_sites_sign_in_post_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base:
        for origin in ({"Origin": "https://evil.example"}, {"Origin": "null"}, {}):
            with httpx.Client(base_url=base, headers=origin, timeout=30) as client:
                response = client.post("/extraction/signin", data={"token": token})
                assert response.status_code == 403, origin
                assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
        with httpx.Client(base_url=base, headers={"Origin": "https://evil.example"}, timeout=30) as client:
            assert client.post("/extraction/signout").status_code == 403  # nor sign a reviewer out
    with ledger.engine.connect() as conn:
        assert list(conn.execute(select(user_sessions))) == []


def test_a_form_is_read_only_when_it_says_its_size_and_that_size_is_small(ledger: Ledger, tmp_path: Path) -> None:
    """An anonymous client's sign-in post is read before anyone is known: it is read only when it
    says its size and that is within the cap, so a huge or endless post is never spooled."""
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        big = client.post("/extraction/signin", data={"token": token, "pad": "x" * 1024 * 1024})  # the default cap
        assert big.status_code == 413 and "is not read" in big.text
        unsized = client.post("/extraction/signin", content=iter([f"token={token}".encode()]), headers=form_type)
        assert unsized.status_code == 411 and "Content-Length" in unsized.text  # sent chunked: no size said
        assert _me(client)[0] == 401  # neither signed anyone in
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303
        assert _me(client)[0] == 200


def test_failed_sign_ins_are_throttled_per_client_and_logged_without_the_token(
    ledger: Ledger, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from extraction_pipeline.web.signin_throttle import FAILURES_ALLOWED

    _, token = add_user(ledger, "alice", Role.REVIEWER)
    guesses = [f"guess-{n}-not-a-token" for n in range(FAILURES_ALLOWED + 1)]
    with caplog.at_level("WARNING"), _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        statuses = [client.post("/extraction/signin", data={"token": guess}).status_code for guess in guesses]
        assert statuses == [401] * FAILURES_ALLOWED + [429]
        held = client.post("/extraction/signin", data={"token": token})  # right, but within the pause
        assert held.status_code == 429 and 0 < int(held.headers["retry-after"]) <= 60
        assert "too many failed sign-ins" in held.text and _me(client)[0] == 401
        linked = client.get("/extraction/signin", params={"token": guesses[0]})  # the link's way too
        assert linked.status_code == 429
    failures = [r.getMessage() for r in caplog.records if "failed sign-in from 127.0.0.1" in r.getMessage()]
    assert len(failures) == FAILURES_ALLOWED
    assert not any(guess in r.getMessage() or token in r.getMessage() for r in caplog.records for guess in guesses)


def test_a_one_time_link_asks_before_it_signs_in_and_works_once(ledger: Ledger, tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger.users import issue_signin_code

    alice, token = add_user(ledger, "alice", Role.REVIEWER)
    code = issue_signin_code(ledger, alice)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        asked = client.get("/extraction/signin", params={"code": code, "next": "/extraction/projects"})
        assert asked.status_code == 200 and "Sign in as <strong>alice</strong>?" in asked.text
        assert token not in asked.text and _me(client)[0] == 401  # the page holds the code, not the token
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', asked.text))
        assert fields == {"next": "/extraction/projects", "code": code}
        confirmed = client.post("/extraction/signin", data=fields)
        assert confirmed.status_code == 303 and confirmed.headers["location"] == "/extraction/projects"
        assert _me(client) == (200, {"name": "alice", "role": "reviewer"})
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as other:  # the same link again
        again = other.get("/extraction/signin", params={"code": code})
        assert again.status_code == 401 and "works once, for 15 minutes" in again.text
        assert other.post("/extraction/signin", data={"code": code}).status_code == 401
        assert _me(other)[0] == 401


def test_another_sites_page_cannot_lock_the_analyst_out_with_failed_sign_ins(ledger: Ledger, tmp_path: Path) -> None:
    """An image or link on a hostile page makes the browser ask for sign-in pages with bad codes:
    the browser says another site sent them (Sec-Fetch-Site), so they are not counted."""
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        for n in range(20):
            planted = client.get(
                "/extraction/signin", params={"code": f"x{n}"}, headers={"Sec-Fetch-Site": "cross-site"}
            )
            assert planted.status_code == 401
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303  # not locked out


def test_the_printed_link_asks_before_it_signs_in(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        # A link alone signs nobody in (someone else's link would sign you in as them): it asks.
        response = client.get("/extraction/signin", params={"token": token, "next": "/extraction/projects"})
        assert response.status_code == 200 and "Sign in as <strong>alice</strong>?" in response.text
        assert not response.headers.get_list("set-cookie") and _me(client)[0] == 401
        assert response.headers["referrer-policy"] == "same-origin"  # the token leaves in no Referer to another site
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', response.text))
        assert fields == {"next": "/extraction/projects", "token": token}
        confirmed = client.post("/extraction/signin", data=fields)  # the click: a same-origin POST
        assert confirmed.status_code == 303
        assert confirmed.headers["location"] == "/extraction/projects" and token not in confirmed.headers["location"]
        assert "HttpOnly" in _session_cookie(confirmed)
        assert _me(client) == (200, {"name": "alice", "role": "reviewer"})
        wrong = client.get("/extraction/signin", params={"token": "not-a-token"})
        assert wrong.status_code == 401 and "not valid" in wrong.text


def test_signing_out_ends_the_session(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303
        old = client.cookies[SESSION_COOKIE]
        other_browser = start_session(ledger, find_user(ledger, "alice") or _missing())
        response = client.post("/extraction/signout")
        assert response.status_code == 303 and response.headers["location"] == "/extraction/signin"
        cleared = _session_cookie(response)
        assert 'extraction_session=""' in cleared and "Max-Age=0" in cleared
        assert SESSION_COOKIE not in client.cookies
        assert _me(client) == (401, {"error": "not signed in"})
        assert _me(client, headers=_cookie(old))[0] == 401  # the old cookie no longer works
        assert _me(client, headers=_cookie(other_browser))[0] == 200  # only this browser signed out


def _missing() -> User:
    raise AssertionError("the user should exist")


def test_the_single_sign_on_header_is_ignored_from_an_untrusted_address(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        for header in ("X-Forwarded-User", "X-Forwarded-Email"):
            assert _me(client, headers={header: "mallory"})[0] == 401
        forged = client.post("/extraction/decide", headers={"X-Forwarded-User": "alice"})
        assert forged.status_code == 401 and "sign in first" in forged.text
        # A personal token is still believed; the header changes nothing about whom it names.
        bearer = {"Authorization": f"Bearer {token}", "X-Forwarded-User": "mallory"}
        assert _me(client, headers=bearer) == (200, {"name": "alice", "role": "reviewer"})
    assert [u.name for u in list_users(ledger)] == ["alice"]  # nobody was created from the header


def test_the_single_sign_on_header_is_honoured_from_a_trusted_proxy(ledger: Ledger, tmp_path: Path) -> None:
    alice, _ = add_user(ledger, "alice", Role.REVIEWER)
    settings = _settings(tmp_path, trusted_proxies=("127.0.0.1",))
    with _serving(ledger, settings) as base, _client(base) as client:
        assert _me(client, headers={"X-Forwarded-User": "dana@example.org"}) == (
            200,
            {"name": "dana@example.org", "role": "reviewer"},
        )
        assert _me(client, headers={"X-Forwarded-Email": "erin@example.org"})[1]["name"] == "erin@example.org"
        both = {"X-Forwarded-User": "frank", "X-Forwarded-Email": "frank@example.org"}
        assert _me(client, headers=both)[1]["name"] == "frank"
        # The proxy's word decides, over a cookie that names someone else.
        cookie = _cookie(start_session(ledger, alice))
        assert _me(client, headers={"X-Forwarded-User": "dana@example.org", **cookie})[1]["name"] == (
            "dana@example.org"
        )
        assert client.post("/extraction/decide", headers={"X-Forwarded-User": "dana@example.org"}).text == (
            "recorded under dana@example.org"
        )
        disable_user(ledger, "frank")
        assert _me(client, headers=both)[0] == 401
        refused = client.post("/extraction/decide", headers=both)
        assert refused.status_code == 403 and "frank" in refused.text and "disabled" in refused.text
        invalid = client.get("/extraction/decide", headers={"X-Forwarded-User": "<script>"})
        assert invalid.status_code == 403 and "letters, digits" in invalid.text and "&lt;script&gt;" in invalid.text
        assert _me(client, headers=cookie)[1]["name"] == "alice"  # no header: the cookie again
    roles = {u.name: u.role for u in list_users(ledger)}
    assert roles == {"alice": Role.REVIEWER, "dana@example.org": Role.REVIEWER, "erin@example.org": Role.REVIEWER} | {
        "frank": Role.REVIEWER
    }


def test_a_signed_in_user_passes_the_instance_token_gate(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    _, bobs = add_user(ledger, "bob", Role.REVIEWER)
    disable_user(ledger, "bob")
    with _serving(ledger, _settings(tmp_path), instance_token=INSTANCE_TOKEN) as base, _client(base) as client:
        assert client.get("/").status_code == 401  # the gate stands
        assert client.get("/", headers={"Authorization": f"Bearer {INSTANCE_TOKEN}"}).text == "dagster ui"
        assert client.get("/", headers={"Authorization": "Bearer not-a-token"}).status_code == 401
        assert client.get("/", headers={"Authorization": f"Bearer {bobs}"}).status_code == 401  # disabled
        personal = {"Authorization": f"Bearer {token}"}
        assert client.get("/", headers=personal).text == "dagster ui"
        assert _me(client, headers=personal) == (200, {"name": "alice", "role": "reviewer"})
        # The instance token opens the gate but names nobody: pages that record need a user.
        instance = {"Authorization": f"Bearer {INSTANCE_TOKEN}"}
        assert _me(client, headers=instance)[0] == 401
        # The sign-in page is reachable without the instance token, and its session opens the gate.
        assert client.get("/extraction/signin").status_code == 200
        assert client.get("/extraction/static/app.css").status_code == 200  # nor its stylesheet
        assert client.get("/extraction/batches").status_code == 401  # nothing else is
        assert client.post("/extraction/static/app.css").status_code == 401
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303
        assert client.get("/").text == "dagster ui"
        assert client.get("/extraction/decide").text == "recorded under alice"
        secret = client.cookies[SESSION_COOKIE]
        assert asyncio.run(_live(base, _cookie(secret))) == "live for alice"
        with pytest.raises(Exception, match="403"):
            asyncio.run(_live(base, {}))  # a websocket without proof is refused too
        client.post("/extraction/signout")
        assert client.get("/", headers=_cookie(secret)).status_code == 401
    with _serving(ledger, _settings(tmp_path), instance_token=INSTANCE_TOKEN) as base, _client(base) as client:
        link = client.get("/extraction/signin", params={"token": token})  # the printed link, through the gate
        assert link.status_code == 200 and "Sign in as <strong>alice</strong>?" in link.text
        confirmed = client.post("/extraction/signin", data={"token": token, "next": "/extraction/"})
        assert confirmed.status_code == 303 and confirmed.headers["location"] == "/extraction/"
        assert client.get("/").text == "dagster ui"


async def _live(base: str, headers: dict[str, str]) -> str:
    import websockets

    url = base.replace("http://", "ws://") + "/live"
    async with websockets.connect(url, additional_headers=headers) as socket:
        return str(await asyncio.wait_for(socket.recv(), 10))


def test_next_never_leads_to_another_site(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    hostile = (
        "https://evil.example/extraction/",
        "//evil.example/extraction/",
        "/\\evil.example",
        "/extraction/\r\nSet-Cookie: x=1",
        "javascript:alert(1)",
        "/dagster-page",
        "extraction/",
    )
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        for target in hostile:
            posted = client.post("/extraction/signin", data={"token": token, "next": target})
            assert posted.status_code == 303 and posted.headers["location"] == "/extraction/", target
            linked = client.get("/extraction/signin", params={"token": token, "next": target})
            assert linked.status_code == 200 and 'name="next" value="/extraction/"' in linked.text, target
            signed_in = client.get("/extraction/signin", params={"next": target})
            assert signed_in.status_code == 303 and signed_in.headers["location"] == "/extraction/", target
            form = client.get("/extraction/signin", params={"next": target}, headers=_cookie("not-a-session"))
            assert "evil.example" not in form.text, target


def test_pages_that_need_a_user_send_them_to_sign_in_and_back(ledger: Ledger, tmp_path: Path) -> None:
    _, reviewer = add_user(ledger, "alice", Role.REVIEWER)
    _, admin = add_user(ledger, "root", Role.ADMIN)
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        response = client.get("/extraction/decide", params={"item": "7"})
        assert response.status_code == 303
        assert response.headers["location"] == "/extraction/signin?next=%2Fextraction%2Fdecide%3Fitem%3D7"
        form = client.get(response.headers["location"])
        assert 'name="next" value="/extraction/decide?item=7"' in form.text and "location.replace" not in form.text
        back = client.post("/extraction/signin", data={"token": reviewer, "next": "/extraction/decide?item=7"})
        assert back.headers["location"] == "/extraction/decide?item=7"
        not_admin = client.post("/extraction/settings")
        assert not_admin.status_code == 403
        assert "only an admin can change the project's settings" in html.unescape(not_admin.text)
        admin_header = {"Authorization": f"Bearer {admin}"}
        assert client.post("/extraction/settings", headers=admin_header).text == "settings changed by root"
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        refused = client.post("/extraction/decide", data={"value": "12"})
        assert refused.status_code == 401 and "sign in first" in refused.text
        assert client.post("/extraction/settings").status_code == 401
        # Reached from another site's link, the browser held back our SameSite=Strict cookie: the
        # page loads itself again from here, which sends it.
        cross = client.get(
            "/extraction/signin", params={"next": "/extraction/x"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert 'location.replace("/extraction/signin?next=%2Fextraction%2Fx")' in cross.text


def test_a_session_cookie_is_secure_when_the_trusted_proxy_says_https(ledger: Ledger, tmp_path: Path) -> None:
    _, token = add_user(ledger, "alice", Role.REVIEWER)
    https = {"X-Forwarded-Proto": "https"}
    with _serving(ledger, _settings(tmp_path)) as base, _client(base) as client:
        untrusted = client.post("/extraction/signin", data={"token": token}, headers=https)
        assert "Secure" not in _session_cookie(untrusted)
    with _serving(ledger, _settings(tmp_path, trusted_proxies=("127.0.0.0/8",))) as base, _client(base) as client:
        trusted = client.post("/extraction/signin", data={"token": token}, headers=https)
        assert "Secure" in _session_cookie(trusted)


def test_the_instance_tokens_cookie_is_secure_behind_tls(tmp_path: Path) -> None:
    """The cookie that remembers the instance's access token is sent back over https only when
    the request came over https (here: a trusted proxy says so)."""
    from extraction_pipeline.web.server import build_app

    async def dagster_ui(request: Request) -> Response:
        return PlainTextResponse("dagster ui")

    for trusted, secure in (((), False), (("127.0.0.0/8",), True)):
        settings = _settings(tmp_path / str(secure), trusted_proxies=trusted)
        settings.home_dir.mkdir(parents=True)
        app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token="instance-token-x")
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            answer = client.get("/runs?token=instance-token-x", headers={"X-Forwarded-Proto": "https"})
            assert answer.status_code == 303, answer.text
            assert ("Secure" in answer.headers["set-cookie"]) is secure, answer.headers["set-cookie"]


def test_trusted_proxies_come_from_the_environment_and_a_bad_one_is_named() -> None:
    assert Settings.from_env({}).trusted_proxies == ()
    env = {"EXTRACTION_TRUSTED_PROXIES": " 10.0.0.5, 10.1.0.0/16 ,,::1 "}
    assert Settings.from_env(env).trusted_proxies == ("10.0.0.5", "10.1.0.0/16", "::1")
    for bad in ("proxy.local", "10.0.0.300", "10.0.0.0/33"):
        with pytest.raises(ConfigError, match=f"EXTRACTION_TRUSTED_PROXIES .*got '{bad}'"):
            Settings.from_env({"EXTRACTION_TRUSTED_PROXIES": f"10.0.0.5,{bad}"})
