"""One server, one port: the Dagster UI and the project's pages in the same ASGI app.

Dagster's webserver is a Starlette app; ours is mounted beside it (``/extraction/...``) and one
uvicorn process serves both, behind the token gate when it listens beyond loopback, and behind
the request guard (web/guard.py) always.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web import downloads, identity, missed, projects, review, signin, synthesis
from extraction_pipeline.web.auth import TokenGate, is_loopback
from extraction_pipeline.web.dagster_roles import DagsterRoles
from extraction_pipeline.web.guard import RequestGuard, allowed_hosts
from extraction_pipeline.web.pages import not_found
from extraction_pipeline.web.urls import PREFIX

STATIC_DIR = Path(__file__).parent / "static"

CODE_LOCATION_MODULE = "extraction_pipeline.definitions"


def build_app(settings: Settings, dagster_app: Any, *, token: str | None, bind_host: str = "127.0.0.1") -> Any:
    """Our routes first, the Dagster UI for everything else; gated by ``token`` when given, and
    guarded against other sites' requests (web/guard.py) always."""
    ledger = Ledger.connect(settings.ledger_url)
    ours = [
        *downloads.ROUTES,
        *projects.ROUTES,
        *review.ROUTES,
        *synthesis.ROUTES,
        *missed.ROUTES,
        *signin.ROUTES,
        Mount(f"{PREFIX}/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    # Anything else under our prefix is a 404 of ours, never Dagster's UI page in its place.
    unknown = Route(f"{PREFIX}/{{rest:path}}", not_found, methods=["GET", "HEAD", "POST"])
    # Dagster's own endpoints take our users' roles (web/dagster_roles.py).
    dagster = DagsterRoles(dagster_app, ledger, settings)
    app: Any = Starlette(routes=[*ours, unknown, Mount("/", app=dagster)])
    app.state.ledger, app.state.settings = ledger, settings  # for the handlers (web/deps.py)

    def signed_in(scope: Scope) -> bool:  # a reviewer's session or personal token also opens the gate
        return identity.passes_gate(scope, ledger, settings)

    def https(conn: HTTPConnection) -> bool:
        return identity.over_https(conn, settings)

    gated = TokenGate(app, token, accepts=signed_in, secure=https) if token else app
    hosts = allowed_hosts(bind_host, settings.public_url, settings.allowed_hosts)
    return RequestGuard(gated, hosts, public_url=settings.public_url)


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve on {host} without an access token: anyone who can reach it could launch "
            "runs and download results; set EXTRACTION_UI_TOKEN (or serve on 127.0.0.1)"
        )


def serve(settings: Settings, *, host: str, port: int, token: str | None) -> None:
    """Run the combined server in the foreground until interrupted."""
    import uvicorn
    from dagster import DagsterInstance
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import ModuleTarget
    from dagster_webserver.app import create_app_from_workspace_process_context

    check_binding(host, token)
    target = ModuleTarget(
        module_name=CODE_LOCATION_MODULE, attribute=None, working_directory=None, location_name="extraction_pipeline"
    )
    with DagsterInstance.get() as instance, WorkspaceProcessContext(instance, target) as context:
        dagster_app = create_app_from_workspace_process_context(context)
        app = build_app(settings, dagster_app, token=token, bind_host=host)
        # No proxy headers: the peer address must be the real one, or a trusted single sign-on
        # proxy could not be told from a browser (uvicorn trusts X-Forwarded-For from loopback).
        uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False)
