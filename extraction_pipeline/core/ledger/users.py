"""Local accounts and browser sessions: who is signed in, so the ledger records decisions, uploads
and batch launches under a user that was proven, never under a name someone typed.

A user proves who they are with a personal token (printed once by `extraction-pipeline users add`
or `users token`) or through a single-sign-on proxy the server trusts (``ensure_sso_user``). The
ledger keeps only sha256 digests of tokens and session secrets: the secrets are 256-bit random
values, so a plain digest cannot be reversed, and a copy of the ledger (a backup, a read replica)
signs nobody in. Names compare case-insensitively ("Alice" and "alice" are one person in an
audit trail); the comparison is done here rather than in SQL because SQLite's ``lower`` folds
ASCII only.

Pure domain: no web framework, no Dagster.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import signin_codes, user_sessions, users

MAX_NAME_CHARS = 100
NAME_PUNCTUATION = frozenset(" .-_@+")  # + for e-mail sub-addresses (a+b@x.org) from single sign-on
SESSION_DAYS = 14
SIGNIN_CODE_MINUTES = 15  # a sign-in link is good once, for this long
TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 random bits
# Far longer than any token we issue: a longer value is refused before it is hashed or looked up.
MAX_SECRET_CHARS = 200


class Role(StrEnum):
    """What a user may do: reviewers decide, upload and launch; admins also manage the project."""

    REVIEWER = "reviewer"
    ADMIN = "admin"


class UserDisabled(ConfigError):
    """The user exists but was disabled (`users disable`): refused, whatever proves who they are."""


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: Role
    created_at: datetime
    disabled: bool

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


def digest(secret: str) -> str:
    """What the ledger stores for a token or session secret (sha256, hex)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def validate_name(name: str) -> str:
    """The name as stored (outer spaces dropped, runs of spaces made one), or ConfigError."""
    cleaned = " ".join(part for part in name.strip(" ").split(" ") if part)
    if not cleaned:
        raise ConfigError("a user name must not be empty")
    if len(cleaned) > MAX_NAME_CHARS:
        raise ConfigError(f"a user name has at most {MAX_NAME_CHARS} characters, got {len(cleaned)}")
    bad = sorted({ch for ch in cleaned if not (ch.isalnum() or ch in NAME_PUNCTUATION)})
    if bad:
        shown = ", ".join(repr(ch) for ch in bad)
        raise ConfigError(f"user name {cleaned!r} may hold letters, digits, spaces and . - _ @ + only (not {shown})")
    return cleaned


def _role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise ConfigError(f"unknown role {role!r}: use {' or '.join(r.value for r in Role)}") from None


def _from_row(row: Any) -> User:
    return User(row["id"], row["name"], Role(row["role"]), row["created_at"], row["disabled_at"] is not None)


def _find(conn: Connection, name: str) -> Any:
    """The row of ``name``: the exact name, else the one that differs only in case."""
    row = conn.execute(select(users).where(users.c.name == name)).mappings().first()
    if row is not None:
        return row
    folded = name.casefold()
    # Only on a miss, over a table of people (tens, hundreds): cheap, and the same on both databases.
    for candidate in conn.execute(select(users).order_by(users.c.id)).mappings():
        if candidate["name"].casefold() == folded:
            return candidate
    return None


def _known(conn: Connection, name: str) -> Any:
    row = _find(conn, name)
    if row is None:
        raise ConfigError(f"unknown user {name!r} (see `extraction-pipeline users list`)")
    return row


def add_user(ledger: Ledger, name: str, role: Role | str = Role.REVIEWER) -> tuple[User, str]:
    """A new user and their personal token (returned this once; only its digest is stored)."""
    name = validate_name(name)
    chosen = _role(role)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    try:
        with ledger.engine.begin() as conn:
            existing = _find(conn, name)
            if existing is not None:
                raise ConfigError(f"user {existing['name']!r} already exists (a new token: `users token NAME`)")
            conn.execute(
                insert(users).values(name=name, role=chosen.value, token_hash=digest(token), created_at=utcnow())
            )
            row = _known(conn, name)
    except IntegrityError:
        raise ConfigError(f"user {name!r} already exists (a new token: `users token NAME`)") from None
    return _from_row(row), token


def new_token(ledger: Ledger, name: str) -> str:
    """Replace the user's personal token. The old token stops working, and so do the sessions
    started with it and the sign-in links not yet used: a token is replaced because it may have
    leaked, and so may what it opened."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with ledger.engine.begin() as conn:
        row = _known(conn, name)
        if row["disabled_at"] is not None:
            raise UserDisabled(f"user {row['name']!r} is disabled: a new token would not sign them in")
        conn.execute(update(users).where(users.c.id == row["id"]).values(token_hash=digest(token)))
        conn.execute(delete(user_sessions).where(user_sessions.c.user_id == row["id"]))
        conn.execute(delete(signin_codes).where(signin_codes.c.user_id == row["id"]))  # links out there too
    return token


def disable_user(ledger: Ledger, name: str) -> User:
    """Refuse the user from now on: their token, their sessions and their single-sign-on name.
    The row stays, so the name in earlier decisions still names someone. Disabling twice is a no-op."""
    with ledger.engine.begin() as conn:
        row = _known(conn, name)
        if row["disabled_at"] is None:
            conn.execute(
                update(users).where(users.c.id == row["id"], users.c.disabled_at.is_(None)).values(disabled_at=utcnow())
            )
        conn.execute(delete(user_sessions).where(user_sessions.c.user_id == row["id"]))
        row = _known(conn, row["name"])
    return _from_row(row)


def find_user(ledger: Ledger, name: str) -> User | None:
    """The user of that name (in any case), disabled or not."""
    with ledger.engine.connect() as conn:
        row = _find(conn, name.strip())
    return _from_row(row) if row else None


def list_users(ledger: Ledger) -> list[User]:
    with ledger.engine.connect() as conn:
        rows = list(conn.execute(select(users)).mappings())
    return sorted((_from_row(row) for row in rows), key=lambda user: (user.name.casefold(), user.id))


def user_by_token(ledger: Ledger, token: str) -> User | None:
    """The enabled user whose personal token this is. Looked up by the token's digest, so the
    database compares digests, never the token, and no timing reveals a prefix of a real one."""
    if not token or len(token) > MAX_SECRET_CHARS:
        return None
    query = select(users).where(users.c.token_hash == digest(token), users.c.disabled_at.is_(None))
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return _from_row(row) if row else None


def ensure_sso_user(ledger: Ledger, name: str) -> User:
    """The user a trusted single-sign-on proxy names, created as a reviewer on first sight (with a
    random token nobody knows; `users token NAME` issues a usable one). A disabled user stays
    refused (``UserDisabled``); an invalid name is a ConfigError."""
    name = validate_name(name)
    for _ in range(2):
        with ledger.engine.connect() as conn:
            row = _find(conn, name)
        if row is not None:
            if row["disabled_at"] is not None:
                raise UserDisabled(f"user {row['name']!r} is disabled (ask an admin)")
            return _from_row(row)
        try:
            return add_user(ledger, name, Role.REVIEWER)[0]
        except ConfigError:
            continue  # the same name's first two requests raced: the other created it, read it again
    raise ConfigError(f"could not create user {name!r}")


def start_session(ledger: Ledger, user: User, *, days: float = SESSION_DAYS) -> str:
    """A new browser session for ``user``; returns the cookie's secret (only its digest is stored)."""
    if days <= 0:
        raise ConfigError(f"a session lasts more than 0 days, got {days}")
    return _issue_secret(ledger, user_sessions, user, timedelta(days=days))


def _issue_secret(ledger: Ledger, table: Table, user: User, lifetime: timedelta) -> str:
    """A new secret for ``user`` in ``table`` (sessions, sign-in codes), good for ``lifetime``:
    returns it; only its digest is stored."""
    secret = secrets.token_urlsafe(TOKEN_BYTES)
    now = utcnow()
    with ledger.engine.begin() as conn:
        # Housekeeping where secrets are made, so the table holds live ones only.
        conn.execute(delete(table).where(table.c.expires_at <= now))
        conn.execute(
            insert(table).values(id=digest(secret), user_id=user.id, created_at=now, expires_at=now + lifetime)
        )
    return secret


def user_by_session(ledger: Ledger, secret: str) -> User | None:
    """The user of a live session: None when it is unknown, ended, expired or its user disabled."""
    if not secret or len(secret) > MAX_SECRET_CHARS:
        return None
    query = (
        select(users)
        .join(user_sessions, user_sessions.c.user_id == users.c.id)
        .where(
            user_sessions.c.id == digest(secret),
            user_sessions.c.expires_at > utcnow(),
            users.c.disabled_at.is_(None),
        )
    )
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return _from_row(row) if row else None


def end_session(ledger: Ledger, secret: str) -> None:
    """Sign a browser out (an unknown or already ended session is no error)."""
    if not secret or len(secret) > MAX_SECRET_CHARS:
        return
    with ledger.engine.begin() as conn:
        conn.execute(delete(user_sessions).where(user_sessions.c.id == digest(secret)))


def issue_signin_code(ledger: Ledger, user: User, *, minutes: float = SIGNIN_CODE_MINUTES) -> str:
    """A code for a sign-in link: good once, for ``minutes`` (only its digest is stored)."""
    if minutes <= 0:
        raise ConfigError(f"a sign-in code lasts more than 0 minutes, got {minutes}")
    return _issue_secret(ledger, signin_codes, user, timedelta(minutes=minutes))


def user_by_code(ledger: Ledger, code: str) -> User | None:
    """The user a sign-in code is for, while it is unused and unexpired (the code is not used up)."""
    if not code or len(code) > MAX_SECRET_CHARS:
        return None
    query = (
        select(users)
        .join(signin_codes, signin_codes.c.user_id == users.c.id)
        .where(
            signin_codes.c.id == digest(code),
            signin_codes.c.used_at.is_(None),
            signin_codes.c.expires_at > utcnow(),
            users.c.disabled_at.is_(None),
        )
    )
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return _from_row(row) if row else None


def use_signin_code(ledger: Ledger, code: str) -> User | None:
    """Use a sign-in code up: its user, or None when it is unknown, used, expired or its user
    disabled. One conditional update: two clicks on one link sign in once."""
    user = user_by_code(ledger, code)
    if user is None:
        return None
    now = utcnow()
    used = (
        update(signin_codes)
        .where(signin_codes.c.id == digest(code), signin_codes.c.used_at.is_(None), signin_codes.c.expires_at > now)
        .values(used_at=now)
    )
    with ledger.engine.begin() as conn:
        return user if conn.execute(used).rowcount == 1 else None
