"""Local ledger and sessions on SQLite and PostgreSQL: names, roles, tokens kept only as digests,
a replaced token and a disabled user refused, sessions that expire and end, single-sign-on users
created on first sight, and an existing ledger upgraded with the new tables."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import Table, delete, inspect, select, text, update

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import ledger_meta, user_sessions, users
from extraction_pipeline.core.ledger.users import (
    Role,
    UserDisabled,
    add_user,
    digest,
    disable_user,
    end_session,
    ensure_sso_user,
    find_user,
    list_users,
    new_token,
    start_session,
    user_by_session,
    user_by_token,
)


def _rows(ledger: Ledger, table: Table) -> list[dict[str, object]]:
    with ledger.engine.connect() as conn:
        return [dict(row) for row in conn.execute(select(table)).mappings()]


def test_a_new_user_signs_in_with_the_token_that_is_stored_only_as_a_digest(ledger: Ledger) -> None:
    user, token = add_user(ledger, "  Alice   Smith ", Role.REVIEWER)
    assert (user.name, user.role, user.disabled, user.is_admin) == ("Alice Smith", Role.REVIEWER, False, False)
    assert len(token) >= 43
    assert user_by_token(ledger, token) == user
    assert user_by_token(ledger, token + "x") is None
    assert user_by_token(ledger, "") is None
    [row] = _rows(ledger, users)
    assert token not in repr(row)
    assert row["token_hash"] == digest(token) and len(str(row["token_hash"])) == 64
    admin, admin_token = add_user(ledger, "bob@example.org", "admin")
    assert admin.is_admin and admin_token != token
    assert [u.name for u in list_users(ledger)] == ["Alice Smith", "bob@example.org"]


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("x" * 101, "at most 100 characters"),
        ("alice/../bob", "not '/'"),
        ("<script>", "not '<', '>'"),
        ("tab\there", "not '\\t'"),
    ],
)
def test_an_invalid_name_is_refused(ledger: Ledger, name: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        add_user(ledger, name, Role.REVIEWER)
    assert fragment in str(raised.value)
    assert list_users(ledger) == []


def test_names_of_letters_digits_and_punctuation_are_accepted(ledger: Ledger) -> None:
    for name in ("José Müller", "r2-d2_x.y@lab", "x" * 100):
        assert add_user(ledger, name, Role.REVIEWER)[0].name == name


def test_a_duplicate_name_is_refused_in_any_case(ledger: Ledger) -> None:
    add_user(ledger, "Alice", Role.REVIEWER)
    for again in ("Alice", "alice", " ALICE "):
        with pytest.raises(ConfigError, match="'Alice' already exists"):
            add_user(ledger, again, Role.ADMIN)
    assert [(u.name, u.role) for u in list_users(ledger)] == [("Alice", Role.REVIEWER)]
    with pytest.raises(ConfigError, match="unknown role 'owner'"):
        add_user(ledger, "carol", "owner")


def test_a_new_token_replaces_the_old_one_and_ends_its_sessions(ledger: Ledger) -> None:
    user, old = add_user(ledger, "alice", Role.REVIEWER)
    session = start_session(ledger, user)
    fresh = new_token(ledger, "ALICE")  # names are found in any case
    assert fresh != old
    assert user_by_token(ledger, old) is None
    assert user_by_token(ledger, fresh) == user
    assert user_by_session(ledger, session) is None  # a leaked token's sessions go with it
    [row] = _rows(ledger, users)
    assert fresh not in repr(row) and row["token_hash"] == digest(fresh)
    with pytest.raises(ConfigError, match="unknown user 'nobody'"):
        new_token(ledger, "nobody")


def test_a_disabled_user_is_refused_everywhere_and_keeps_the_row(ledger: Ledger) -> None:
    user, token = add_user(ledger, "alice", Role.ADMIN)
    session = start_session(ledger, user)
    disabled = disable_user(ledger, "alice")
    assert disabled.disabled and disabled.id == user.id
    assert user_by_token(ledger, token) is None
    assert user_by_session(ledger, session) is None
    assert _rows(ledger, user_sessions) == []
    with pytest.raises(UserDisabled, match="'alice' is disabled"):
        ensure_sso_user(ledger, "alice")
    with pytest.raises(UserDisabled):
        new_token(ledger, "alice")
    assert disable_user(ledger, "alice").disabled  # twice: no error
    assert [(u.name, u.disabled) for u in list_users(ledger)] == [("alice", True)]
    found = find_user(ledger, "Alice")
    assert found is not None and found.disabled
    with pytest.raises(ConfigError, match="unknown user"):
        disable_user(ledger, "bob")


def test_a_session_names_its_user_until_it_expires_or_ends(ledger: Ledger) -> None:
    alice, _ = add_user(ledger, "alice", Role.REVIEWER)
    bob, _ = add_user(ledger, "bob", Role.REVIEWER)
    first, second, other = start_session(ledger, alice), start_session(ledger, alice), start_session(ledger, bob)
    assert len({first, second, other}) == 3
    assert user_by_session(ledger, first) == alice and user_by_session(ledger, other) == bob
    assert user_by_session(ledger, "not-a-session") is None and user_by_session(ledger, "") is None
    stored = _rows(ledger, user_sessions)
    assert {row["id"] for row in stored} == {digest(first), digest(second), digest(other)}
    assert not any(secret in repr(stored) for secret in (first, second, other))
    expires = {row["id"]: row["expires_at"] for row in stored}[digest(first)]
    assert isinstance(expires, datetime)
    assert timedelta(days=13, hours=23) < expires - utcnow() <= timedelta(days=14)

    with ledger.engine.begin() as conn:
        conn.execute(
            update(user_sessions)
            .where(user_sessions.c.id == digest(first))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert user_by_session(ledger, first) is None  # expired
    assert user_by_session(ledger, second) == alice  # the other browser is still signed in
    end_session(ledger, second)
    end_session(ledger, second)  # ending it twice is no error
    assert user_by_session(ledger, second) is None
    assert user_by_session(ledger, other) == bob
    start_session(ledger, bob)  # sweeps the expired session away
    assert digest(first) not in {row["id"] for row in _rows(ledger, user_sessions)}
    with pytest.raises(ConfigError):
        start_session(ledger, alice, days=0)


def test_a_single_sign_on_user_is_created_once_as_a_reviewer(ledger: Ledger) -> None:
    created = ensure_sso_user(ledger, "dana@example.org")
    assert (created.name, created.role, created.disabled) == ("dana@example.org", Role.REVIEWER, False)
    assert ensure_sso_user(ledger, "Dana@Example.org") == created  # the same person, any case
    assert [u.name for u in list_users(ledger)] == ["dana@example.org"]
    # Created with a token nobody knows: `users token` issues one to use.
    token = new_token(ledger, "dana@example.org")
    assert user_by_token(ledger, token) == created
    admin, _ = add_user(ledger, "erin", Role.ADMIN)
    assert ensure_sso_user(ledger, "erin") == admin  # an existing local user keeps their role
    tagged = ensure_sso_user(ledger, "dana+tag@example.org")  # an e-mail sub-address is a name too
    assert tagged.name == "dana+tag@example.org" and tagged != created
    with pytest.raises(ConfigError, match="letters, digits"):
        ensure_sso_user(ledger, "dana<script>@example.org")


def test_an_existing_ledger_gets_the_user_tables_when_opened(ledger_url: str) -> None:
    old = Ledger.connect(ledger_url)
    with old.engine.begin() as conn:
        conn.execute(text("DROP TABLE signin_codes"))
        conn.execute(text("DROP TABLE user_sessions"))
        conn.execute(text("DROP TABLE users"))
        # What a ledger of the release before had recorded.
        conn.execute(update(ledger_meta).where(ledger_meta.c.key == "schema").values(value="before-users"))
    assert not {"users", "user_sessions", "signin_codes"} & set(inspect(old.engine).get_table_names())
    old.dispose()

    upgraded = Ledger.connect(ledger_url)
    try:
        assert {"users", "user_sessions", "signin_codes"} <= set(inspect(upgraded.engine).get_table_names())
        user, token = add_user(upgraded, "alice", Role.REVIEWER)
        assert user_by_session(upgraded, start_session(upgraded, user)) == user
        assert user_by_token(upgraded, token) == user
    finally:
        with upgraded.engine.begin() as conn:
            conn.execute(text("DELETE FROM signin_codes"))
            conn.execute(delete(user_sessions))
            conn.execute(delete(users))
        upgraded.dispose()


def test_a_sign_in_code_signs_in_once_until_it_expires_and_never_a_disabled_user(ledger: Ledger) -> None:
    from extraction_pipeline.core.ledger.schema import signin_codes
    from extraction_pipeline.core.ledger.users import issue_signin_code, use_signin_code, user_by_code

    alice, _ = add_user(ledger, "alice")
    code = issue_signin_code(ledger, alice)
    assert user_by_code(ledger, code) == alice and user_by_code(ledger, code) == alice  # looking uses nothing
    assert use_signin_code(ledger, code) == alice
    assert use_signin_code(ledger, code) is None and user_by_code(ledger, code) is None  # good once
    late = issue_signin_code(ledger, alice)
    with ledger.engine.begin() as conn:  # its 15 minutes have passed
        conn.execute(update(signin_codes).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert use_signin_code(ledger, late) is None
    held = issue_signin_code(ledger, alice)
    disable_user(ledger, "alice")
    assert use_signin_code(ledger, held) is None
    assert use_signin_code(ledger, "") is None and use_signin_code(ledger, "x" * 500) is None
    with ledger.engine.connect() as conn:  # only digests are kept
        stored = {row.id for row in conn.execute(select(signin_codes))}
    assert code not in stored and late not in stored and len(stored) >= 1


def test_a_new_token_ends_the_sign_in_links_not_yet_used(ledger: Ledger) -> None:
    from extraction_pipeline.core.ledger.users import issue_signin_code, use_signin_code

    alice, _ = add_user(ledger, "alice")
    code = issue_signin_code(ledger, alice)
    new_token(ledger, "alice")  # replaced because something may have leaked: the links too
    assert use_signin_code(ledger, code) is None
    assert use_signin_code(ledger, issue_signin_code(ledger, alice)) == alice  # a new link works
