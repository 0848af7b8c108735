"""Nothing is read before it is allowed: who asks and how much they send are checked before a
body is read, each request has a cap (configurable), and an anonymous client cannot make the
server write anything to disk. Over real HTTP (uvicorn on a loopback port)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.web.server import build_app
from extraction_pipeline_tests.support.web import serving

MB = 1024 * 1024


@contextlib.contextmanager
def _site(tmp_path: Path, **caps: Any) -> Iterator[tuple[str, Settings, str]]:
    """The server with ``caps`` (Settings fields), a project, and an admin's personal token."""

    async def dagster_ui(request: Any) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    settings = Settings(home=tmp_path / "home", **caps)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    _, personal = add_user(ledger, "Ada", Role.ADMIN)
    with serving(build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=None)) as base:
        with httpx.Client(base_url=base, headers={"Origin": base, "Authorization": f"Bearer {personal}"}) as client:
            assert client.post("/extraction/projects", data={"project": "trials"}).status_code == 303
        yield base, settings, personal
    ledger.dispose()


def _written(home: Path) -> list[Path]:
    """Files an upload left in the staging folder (folders alone hold nothing)."""
    return [path for path in (home / "uploads").rglob("*") if path.is_file()]


def test_a_form_larger_than_the_configured_cap_is_not_read(tmp_path: Path) -> None:
    with _site(tmp_path, max_form_kb=64) as (base, _, personal), httpx.Client(base_url=base) as client:
        headers = {"Origin": base}
        big = client.post("/extraction/signin", data={"token": personal, "pad": "x" * 70_000}, headers=headers)
        assert big.status_code == 413 and "a form of more than 64 KB is not read (EXTRACTION_MAX_FORM_KB)" in big.text
        small = client.post("/extraction/signin", data={"token": personal, "pad": "x" * 60_000}, headers=headers)
        assert small.status_code == 303  # within the cap: read, and the analyst is signed in


def test_an_upload_over_the_request_cap_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    pdf = write_report(make_trial(1), tmp_path / "src")
    padding = b"%PDF-1.7\n" + b"0" * (MB - 20)  # each file within the per-file cap, together over
    with _site(tmp_path, max_upload_mb=1, max_pdf_mb=2.0) as (base, settings, personal):
        auth = {"Origin": base, "Authorization": f"Bearer {personal}"}
        with httpx.Client(base_url=base, headers=auth, timeout=60) as client:
            files = [("pdfs", (f"pad-{n}.pdf", padding, "application/pdf")) for n in (1, 2)]
            declared = client.post("/extraction/projects/trials/documents", files=files)
            assert declared.status_code == 413, declared.text[:500]
            assert "larger than 1 MB for one upload (EXTRACTION_MAX_UPLOAD_MB)" in declared.text
            # Sent without a size (chunked): read up to the cap, then refused; what it staged is gone.
            boundary = "cap-boundary"
            body = (
                b"".join(
                    f'--{boundary}\r\nContent-Disposition: form-data; name="pdfs"; filename="pad-{n}.pdf"\r\n'
                    f"Content-Type: application/pdf\r\n\r\n".encode()
                    + padding
                    + b"\r\n"
                    for n in (1, 2)
                )
                + f"--{boundary}--\r\n".encode()
            )
            chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
            chunked = client.post(
                "/extraction/projects/trials/documents",
                content=chunks,
                headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            )
            assert chunked.status_code == 413 and "EXTRACTION_MAX_UPLOAD_MB" in chunked.text
            assert _written(settings.home_dir) == []
            within = client.post(
                "/extraction/projects/trials/documents",
                files=[("pdfs", (pdf.name, pdf.read_bytes(), "application/pdf"))],
            )
            assert within.status_code == 303
            assert "1 of 1 file(s) registered by Ada" in client.get(within.headers["location"]).text


def test_an_anonymous_client_cannot_make_the_server_write_anything(tmp_path: Path) -> None:
    with _site(tmp_path) as (base, settings, _), httpx.Client(base_url=base, headers={"Origin": base}) as client:
        files = [("pdfs", ("big.pdf", b"%PDF-1.7\n" + b"0" * (4 * MB), "application/pdf"))]
        upload = client.post("/extraction/projects/trials/documents", files=files)
        assert upload.status_code == 401
        template = client.post(
            "/extraction/projects/trials/template", files=[("template", ("t.json", b"{" * MB, "application/json"))]
        )
        assert template.status_code == 401
        assert _written(settings.home_dir) == []
        assert sorted(p.name for p in (settings.home_dir / "documents").glob("*")) == []
