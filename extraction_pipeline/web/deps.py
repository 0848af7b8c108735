"""What every handler needs, taken from the request: the ledger, the settings, who is asking.

``build_app`` (web/server.py) puts one ledger and the settings on the application's state; the
handlers are plain module-level functions that ask for them here, the way the FastAPI project
template keeps its shared dependencies in one ``deps`` module.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import User
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web import identity


def ledger_of(request: Request) -> Ledger:
    ledger: Ledger = request.app.state.ledger
    return ledger


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def user_of(request: Request) -> User | None:
    """The signed-in user (a session, a personal token, or a trusted single sign-on header)."""
    return identity.current_user(request, ledger_of(request), settings_of(request))


def signed_in(request: Request) -> User | Response:
    """The signed-in user, or the answer that asks them to sign in."""
    return identity.require_user(request, ledger_of(request), settings_of(request))


def admin(request: Request) -> User | Response:
    """The signed-in admin, or the answer that says only an admin may."""
    return identity.require_admin(request, ledger_of(request), settings_of(request))
