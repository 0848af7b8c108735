"""`extraction-pipeline users`: real processes on a temporary instance home. A token is printed
once, with where to sign in; a replaced token and a disabled user stop working; errors are one
line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_pipeline.cli.users import ROLE_CHOICES
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import Role, digest, user_by_token
from extraction_pipeline.core.settings import Settings
from extraction_pipeline_tests.support.cli import one_line_error, run_cli

PUBLIC_URL = "https://review.example.org/"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXTRACTION_PUBLIC_URL", PUBLIC_URL)
    path = tmp_path / "home"
    path.mkdir()  # what `init` leaves for these commands: a home for the SQLite ledger
    return path


@pytest.fixture
def home_ledger(home: Path) -> Iterator[Ledger]:
    """The same ledger the commands use, read in this process."""
    handle = Ledger.connect(Settings(home=home).ledger_url)
    yield handle
    handle.dispose()


LINK = re.compile(r"https://review\.example\.org/extraction/signin\?code=([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])")


def _token_of(stdout: str, name: str) -> str:
    token, how = stdout.strip().splitlines()
    assert how.startswith(f"{name} signs in once at https://review.example.org/extraction/signin?code="), how
    assert LINK.search(how) and token not in how  # the link holds a one-time code, never the token
    assert "(good for 15 min; `extraction-pipeline users link" in how
    assert "pastes the token at https://review.example.org/extraction/signin;" in how
    return token


def test_a_sign_in_link_is_a_code_good_once(home: Path, home_ledger: Ledger) -> None:
    from extraction_pipeline.core.ledger.users import use_signin_code

    added = run_cli(home, "users", "add", "alice", check=True).stdout
    first = LINK.search(added)
    assert first is not None
    linked = run_cli(home, "users", "link", "ALICE", check=True).stdout
    second = LINK.search(linked)
    assert second is not None and second.group(1) != first.group(1)
    assert "good once, for 15 min: it signs alice in" in linked
    for code in (first.group(1), second.group(1)):  # both good (a new link does not end the other)
        used = use_signin_code(home_ledger, code)
        assert used is not None and used.name == "alice"
        assert use_signin_code(home_ledger, code) is None  # once
    one_line_error(run_cli(home, "users", "link", "nobody"), 2, "no active user 'nobody'")


def test_add_prints_the_token_and_where_to_sign_in(home: Path, home_ledger: Ledger) -> None:
    out = run_cli(home, "users", "add", "Alice Smith", check=True).stdout
    token = _token_of(out, "Alice Smith")
    assert "`extraction-pipeline users token 'Alice Smith'` replaces a lost one" in out
    user = user_by_token(home_ledger, token)
    assert user is not None and (user.name, user.role) == ("Alice Smith", Role.REVIEWER)
    admin = _token_of(run_cli(home, "users", "add", "bob", "--role", "admin", check=True).stdout, "bob")
    found = user_by_token(home_ledger, admin)
    assert found is not None and found.is_admin
    stored = b"".join(path.read_bytes() for path in home.glob("ledger.db*"))  # the WAL too
    assert digest(token).encode() in stored and token.encode() not in stored  # only its digest is kept


def test_list_shows_name_role_created_and_disabled(home: Path) -> None:
    assert "no users yet" in run_cli(home, "users", "list", check=True).stdout
    run_cli(home, "users", "add", "carol", "--role", "admin", check=True)
    run_cli(home, "users", "add", "alice", check=True)
    run_cli(home, "users", "disable", "carol", check=True)
    listed = json.loads(run_cli(home, "users", "list", "--json", check=True).stdout)
    assert [(u["name"], u["role"], u["disabled"]) for u in listed] == [
        ("alice", "reviewer", False),
        ("carol", "admin", True),
    ]
    assert all(u["created_at"][:4].isdigit() for u in listed)
    lines = run_cli(home, "users", "list", check=True).stdout.strip().splitlines()
    assert lines[0].startswith("alice\treviewer\tcreated ") and lines[0].endswith("\tactive")
    assert lines[1].startswith("carol\tadmin\tcreated ") and lines[1].endswith("\tdisabled")
    assert "token" not in json.dumps(listed)  # no token, no digest


def test_token_replaces_the_old_one(home: Path, home_ledger: Ledger) -> None:
    old = _token_of(run_cli(home, "users", "add", "alice", check=True).stdout, "alice")
    fresh = _token_of(run_cli(home, "users", "token", "ALICE", check=True).stdout, "alice")
    assert fresh != old
    assert user_by_token(home_ledger, old) is None
    found = user_by_token(home_ledger, fresh)
    assert found is not None and found.name == "alice"


def test_disable_stops_the_token(home: Path, home_ledger: Ledger) -> None:
    token = _token_of(run_cli(home, "users", "add", "alice", check=True).stdout, "alice")
    out = run_cli(home, "users", "disable", "alice", check=True).stdout
    assert "alice is disabled" in out and token not in out
    assert user_by_token(home_ledger, token) is None
    one_line_error(run_cli(home, "users", "token", "alice"), 2, "'alice' is disabled")


def test_errors_are_one_line(home: Path, tmp_path: Path) -> None:
    run_cli(home, "users", "add", "alice", check=True)
    one_line_error(run_cli(home, "users", "add", "Alice"), 2, "user 'alice' already exists")
    one_line_error(run_cli(home, "users", "add", "a/b"), 2, "letters, digits, spaces and . - _ @ + only")
    one_line_error(run_cli(home, "users", "add", "x", "--role", "owner"), 2, "invalid choice: 'owner'")
    one_line_error(run_cli(home, "users", "token", "nobody"), 2, "unknown user 'nobody'")
    one_line_error(run_cli(home, "users", "disable", "nobody"), 2, "unknown user 'nobody'")
    one_line_error(run_cli(tmp_path / "missing", "users", "list"), 2, "run `extraction-pipeline init` first")


def test_the_role_choices_are_the_roles() -> None:
    assert tuple(role.value for role in Role) == ROLE_CHOICES
