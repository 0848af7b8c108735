"""Commands on the local accounts that sign in to the pages: add, list, a new token, a sign-in
link, disable.

Whoever runs these holds the ledger, so they are the admin's tools. A personal token is printed
once, when it is made (`users add`, `users token`): the ledger keeps only its digest, and a lost
token is replaced, never shown again. A sign-in link (`users add`, `users link`) holds a code good
once, for 15 minutes, never the token: a link that leaks (a chat log, a browser history, a proxy's
log) is worth nothing once used or old.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from extraction_pipeline.cli.common import AddCommand, add_group, non_empty, open_ledger, print_json
from extraction_pipeline.core.settings import Settings

if TYPE_CHECKING:
    from extraction_pipeline.core.ledger.users import User

# Role's values (core/ledger/users.py), written out so building the parser does not import the
# ledger; Role() checks them again when the command runs.
ROLE_CHOICES = ("reviewer", "admin")


def _signin_link(settings: Settings, user: User) -> str:
    """A one-time sign-in link for ``user``, good for SIGNIN_CODE_MINUTES (never the token)."""
    from extraction_pipeline.core.ledger.users import issue_signin_code
    from extraction_pipeline.web.urls import PREFIX

    code = issue_signin_code(open_ledger(settings), user)
    return f"{settings.link_base()}{PREFIX}/signin?code={code}"


def _print_token(token: str, user: User, settings: Settings) -> None:
    from extraction_pipeline.core.ledger.users import SIGNIN_CODE_MINUTES
    from extraction_pipeline.web.urls import PREFIX

    page = f"{settings.link_base()}{PREFIX}/signin"
    # The token alone on the first line, for scripts: `users add bob | head -1`.
    print(token)
    print(
        f"{user.name} signs in once at {_signin_link(settings, user)} (good for {SIGNIN_CODE_MINUTES} min; "
        f"`extraction-pipeline users link {shlex.quote(user.name)}` gives a new one), or pastes the token at "
        f"{page}; the token is shown only now: `extraction-pipeline users token {shlex.quote(user.name)}` "
        "replaces a lost one"
    )


def cmd_users_link(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.errors import ConfigError
    from extraction_pipeline.core.ledger.users import SIGNIN_CODE_MINUTES, find_user

    user = find_user(open_ledger(settings), args.name)
    if user is None or user.disabled:
        raise ConfigError(f"no active user {args.name!r}: `extraction-pipeline users list` shows them")
    print(_signin_link(settings, user))
    print(f"good once, for {SIGNIN_CODE_MINUTES} min: it signs {user.name} in after a click on the page it opens")
    return 0


def cmd_users_add(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.users import add_user

    user, token = add_user(open_ledger(settings), args.name, args.role)
    _print_token(token, user, settings)
    return 0


def cmd_users_list(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.users import list_users

    found = list_users(open_ledger(settings))
    if args.json:
        print_json(
            [
                {"name": u.name, "role": u.role.value, "created_at": u.created_at.isoformat(), "disabled": u.disabled}
                for u in found
            ]
        )
    elif not found:
        print("no users yet: add one with `extraction-pipeline users add NAME [--role admin]`")
    else:
        for user in found:
            state = "disabled" if user.disabled else "active"
            print(f"{user.name}\t{user.role.value}\tcreated {user.created_at:%Y-%m-%d %H:%M} UTC\t{state}")
    return 0


def cmd_users_token(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.errors import ConfigError
    from extraction_pipeline.core.ledger.users import find_user, new_token

    ledger = open_ledger(settings)
    token = new_token(ledger, args.name)
    user = find_user(ledger, args.name)  # the stored spelling ("Alice" when "alice" was typed)
    if user is None:
        raise ConfigError(f"unknown user {args.name!r}")
    _print_token(token, user, settings)
    return 0


def cmd_users_disable(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.users import disable_user

    user = disable_user(open_ledger(settings), args.name)
    print(f"{user.name} is disabled: their token and sessions no longer sign in (their past decisions keep the name)")
    return 0


def register(add: AddCommand) -> None:
    users_sub = add_group(add, "users", "Manage the accounts that sign in to the pages (personal tokens).")
    new = add(
        "add",
        cmd_users_add,
        "Add a user; prints their personal token (once) and where they sign in.",
        users_sub,
    )
    new.add_argument("name", metavar="NAME", type=non_empty)
    new.add_argument("--role", choices=ROLE_CHOICES, default="reviewer", help="default: reviewer")
    listing = add("list", cmd_users_list, "List users: name, role, created, disabled.", users_sub)
    listing.add_argument("--json", action="store_true")
    token = add(
        "token",
        cmd_users_token,
        "Give a user a new personal token (printed once); the old one and its sessions stop working.",
        users_sub,
    )
    token.add_argument("name", metavar="NAME", type=non_empty)
    link = add(
        "link",
        cmd_users_link,
        "Print a one-time sign-in link for a user (good for 15 minutes; the token is unchanged).",
        users_sub,
    )
    link.add_argument("name", metavar="NAME", type=non_empty)
    disable = add("disable", cmd_users_disable, "Disable a user: their token and sessions stop working.", users_sub)
    disable.add_argument("name", metavar="NAME", type=non_empty)
