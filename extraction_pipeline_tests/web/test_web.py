"""The one server: our pages and downloads beside the Dagster UI, over real HTTP (uvicorn on a
loopback port), the token gate both ways, path traversal refused, and the meta-analysis CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import openpyxl
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.meta_csv import COLUMNS
from extraction_pipeline.core.export.workbook import default_export_path, write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import close_if_done, create_batch, record_workbook
from extraction_pipeline.core.ledger.queries import project_documents
from extraction_pipeline.core.ledger.users import add_user
from extraction_pipeline.core.pdf.registration import sha256_of
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.web.server import build_app, check_binding
from extraction_pipeline_tests.support.ledgers import add_documents
from extraction_pipeline_tests.support.templates import freeze_version_1
from extraction_pipeline_tests.support.web import UiServer, create_project, free_port, post_pdfs

TOKEN = "s3cret-token-for-tests"
ALL_INTERFACES = "0.0.0.0"  # noqa: S104  (checked that it is refused, never bound)


def _outcome(value: Any, quote: str = "q") -> dict[str, Any]:
    return {"value": value, "quote": quote, "status": "verified"}


RESULT = {
    "fields": {
        "metadata.study_id": _outcome("SMITH-2020"),
        "outcomes.1.outcome_name": _outcome("mortality"),
        "outcomes.1.outcome_type": _outcome("dichotomous"),
        "outcomes.1.effect_measure": _outcome("RR"),
        "outcomes.1.effect_estimate": _outcome(0.8),
        "outcomes.1.ci_lower": _outcome(0.6),
        "outcomes.1.ci_upper": _outcome(1.1),
        "outcomes.1.events_treatment": _outcome(12),
        "outcomes.1.total_treatment": _outcome(100),
        "outcomes.1.events_control": _outcome(15),
        "outcomes.1.total_control": _outcome(98),
        "outcomes.2.outcome_name": _outcome("=HbA1c"),  # formula-like text stays text
        "outcomes.2.mean_treatment": _outcome(7.1),
        "outcomes.2.sd_treatment": _outcome(1.2),
        "outcomes.2.n_treatment": _outcome(50),
    }
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Ledger, int, Path]]:
    """Our app (with a stand-in for Dagster's app under '/') on a real loopback port."""
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="k", project="p", user="ann", document_ids=[doc]).id
    freeze_version_1(ledger, batch)  # RESULT is in the two-arm template's fields, as earlier batches hold them
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result=RESULT, usage=Usage("openai/x"))
    assert close_if_done(ledger, batch)
    path = write_workbook(ledger, batch, default_export_path(settings.exports_dir, batch))
    assert record_workbook(ledger, batch, str(path), 1)

    async def dagster_ui(request: Any) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    stand_in = Starlette(routes=[Route("/{rest:path}", dagster_ui)])
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(settings, stand_in, token=TOKEN), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", ledger, batch, settings.exports_dir
    server.should_exit = True
    thread.join(timeout=10)
    ledger.dispose()


def _get(url: str, token: str | None = TOKEN) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def test_downloads_over_http_open_as_a_workbook_and_a_meta_analysis_csv(served: tuple[str, Ledger, int, Path]) -> None:
    base, _, batch, _ = served
    status, body, headers = _get(f"{base}/extraction/batches/{batch}/workbook.xlsx")
    assert status == 200 and "spreadsheetml" in headers["content-type"]
    workbook = openpyxl.load_workbook(io.BytesIO(body))
    assert {"Documents", "Outcomes", "Values", "Batch"} <= set(workbook.sheetnames)
    status, body, headers = _get(f"{base}/extraction/batches/{batch}/meta-analysis.csv")
    assert status == 200 and headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert tuple(rows[0].keys()) == COLUMNS
    dichotomous = [(r["group"], r["xi"], r["ni"]) for r in rows if r["outcome"] == "1"]
    assert dichotomous == [("treatment", "12", "100"), ("control", "15", "98")]
    assert all(r["study"] == "SMITH-2020" and r["measure"] in ("RR", "") for r in rows)
    [continuous] = [r for r in rows if r["outcome"] == "2"]
    assert (continuous["mi"], continuous["sdi"], continuous["ni"], continuous["xi"]) == ("7.1", "1.2", "50", "")
    assert continuous["outcome_name"] == "'=HbA1c" and continuous["status_mi"] == "verified"
    status, body, _ = _get(f"{base}/extraction")
    assert status == 200 and f"/extraction/batches/{batch}/workbook.xlsx" in body.decode()
    assert _get(f"{base}/runs")[1] == b"dagster ui"  # everything else is the Dagster UI, same port


def test_the_token_gate_refuses_without_and_admits_with_the_token(served: tuple[str, Ledger, int, Path]) -> None:
    base, _, batch, _ = served
    for path in ("/extraction", f"/extraction/batches/{batch}/workbook.xlsx", "/runs", "/graphql"):
        assert _get(f"{base}{path}", token=None)[0] == 401
        assert _get(f"{base}{path}", token="wrong")[0] == 401
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(f"{base}/extraction?token={TOKEN}", timeout=30) as response:  # a browser's first visit
        assert response.status == 200 and response.url == f"{base}/extraction"  # token dropped from the address
    with opener.open(f"{base}/extraction/batches/{batch}/meta-analysis.csv", timeout=30) as response:
        assert response.status == 200  # the cookie carries it from then on


def test_no_route_serves_a_file_outside_the_exports_folder(
    served: tuple[str, Ledger, int, Path], tmp_path: Path
) -> None:
    base, ledger, batch, _ = served
    for path in (
        "/extraction/batches/../../../etc/passwd",
        "/extraction/batches/%2e%2e%2f%2e%2e%2fetc%2fpasswd/workbook.xlsx",
        f"/extraction/batches/{batch}%2F..%2F..%2Fledger.db/workbook.xlsx",
        "/extraction/batches/-1/workbook.xlsx",
        "/extraction/batches/999/workbook.xlsx",
    ):
        status, body, _ = _get(f"{base}{path}")
        assert status in (401, 404) or body == b"dagster ui", (path, status)
        assert b"root:" not in body
    outside = tmp_path / "secret.xlsx"
    outside.write_bytes(b"not for you")
    from extraction_pipeline.core.ledger.schema import batches

    with ledger.engine.begin() as conn:  # a tampered ledger row pointing outside the home
        conn.execute(batches.update().values(export_path=str(outside)))
    status, body, _ = _get(f"{base}/extraction/batches/{batch}/workbook.xlsx")
    assert status == 404 and b"not for you" not in body


def test_serving_beyond_loopback_needs_a_token() -> None:
    check_binding("127.0.0.1", None)
    check_binding("::1", None)
    check_binding(ALL_INTERFACES, TOKEN)
    for host in (ALL_INTERFACES, "192.168.1.5", "my-host.example"):
        with pytest.raises(ConfigError, match="without an access token"):
            check_binding(host, None)


@pytest.mark.e2e
def test_ui_serves_dagster_and_our_pages_on_one_port(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    env["EXTRACTION_HOME"] = str(home)
    cli = [sys.executable, "-m", "extraction_pipeline.cli"]
    refused = subprocess.run(
        [*cli, "ui", "--host", ALL_INTERFACES], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "without an access token" in refused.stderr
    assert not home.exists()  # refused before anything was set up
    port = free_port()
    log = tmp_path / "ui.log"
    with log.open("wb") as out:  # a fresh home, no `init`: the first start sets it up
        server = subprocess.Popen(
            [*cli, "ui", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                status, body, _ = _get(f"http://127.0.0.1:{port}/server_info", token=None)
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(1)
        assert json.loads(body)["dagster_webserver_version"]
        status, body, _ = _get(f"http://127.0.0.1:{port}/extraction", token=None)
        assert status == 200 and b"<h1>Batches</h1>" in body
        assert f"initialized {home}" in log.read_text()
        assert 'nux:\n  # No "join the community"' in (home / "dagster" / "dagster.yaml").read_text()
        assert not dg.DagsterInstance.from_config(str(home / "dagster")).nux_enabled
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
    assert server.returncode == 0


# --- uploads survive a server kill ------------------------------------------------------------


def test_uploads_survive_a_server_killed_mid_upload(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    env["EXTRACTION_HOME"] = str(home)
    subprocess.run([sys.executable, "-m", "extraction_pipeline.cli", "init"], env=env, check=True, capture_output=True)
    pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in range(1, 11)]
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    _, personal = add_user(ledger, "Uma")
    staging = home / "uploads"
    server = UiServer(home, tmp_path / "ui-1.log")
    try:
        create_project(server.url, "trials", personal)
        uploading = threading.Thread(target=post_pdfs, args=(server.url, pdfs, personal), kwargs={"may_be_cut": True})
        uploading.start()
        # Killed while a file is staged and some are already registered: in the middle of the 10.
        deadline = time.monotonic() + 120
        while not (len(project_documents(ledger, "trials")) >= 1 and any(staging.glob(".extraction-upload.*"))):
            assert time.monotonic() < deadline and uploading.is_alive(), "the upload never got under way"
            time.sleep(0.002)
    finally:
        server.kill()  # also when the test fails: no server or daemon left running
    uploading.join(timeout=60)
    registered = project_documents(ledger, "trials")
    assert 1 <= len(registered) < 10, len(registered)
    assert any(staging.glob(".extraction-upload.*"))  # what the killed server left
    for document in registered:  # every registered document is whole: its stored copy is its bytes
        assert sha256_of(Path(document["stored_path"])) == document["sha256"]

    server = UiServer(home, tmp_path / "ui-2.log")
    try:
        assert re.search(r"removed [12] unfinished upload\(s\)", server.log.read_text())
        assert list(staging.iterdir()) == []
        assert [p.name for p in (home / "documents").iterdir() if not p.name.endswith(".pdf")] == []
        post_pdfs(server.url, pdfs, personal)  # the analyst uploads the same 10 again: nothing is missing after
        documents = project_documents(ledger, "trials")
        assert sorted(d["filename"] for d in documents) == sorted(p.name for p in pdfs)
        assert all(sha256_of(Path(d["stored_path"])) == d["sha256"] for d in documents)
        assert list(staging.iterdir()) == []
    finally:
        server.stop()
        ledger.dispose()
