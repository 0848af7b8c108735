"""The project page shows the price of the launch before its button: loaded over real HTTP
(uvicorn on a loopback port), the figures are the core estimate's for the documents and models
the form would start; "Update the estimate" sends the form's choices back; an upload's PDFs are
parsed in the background, after which the figures are exact."""

from __future__ import annotations

import contextlib
import html
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from extraction_pipeline.core.extraction.estimate import estimate_batch
from extraction_pipeline.core.extraction.token_counts import ParseMode
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import project_documents, recent_batches
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import parsed_contents
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.web.estimate_text import money
from extraction_pipeline.web.server import build_app
from extraction_pipeline_tests.support.web import serving

TOKEN = "estimate-token-for-tests"
MODEL = "openai/gpt-4o-mini"


@contextlib.contextmanager
def _site(settings: Settings, ledger: Ledger) -> Iterator[httpx.Client]:
    async def dagster_ui(request: Any) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    _, personal = add_user(ledger, "Ada", Role.ADMIN)
    app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=TOKEN)
    with serving(app) as base:
        headers = {"Authorization": f"Bearer {TOKEN}", "Origin": base}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            assert client.post("/extraction/signin", data={"token": personal}).status_code == 303
            yield client


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Settings, Ledger]]:
    settings = Settings(home=tmp_path / "home", model=MODEL)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    yield settings, ledger
    ledger.dispose()


def _estimate_section(page: str) -> str:
    found = re.search(r'<section id="estimate".*?</section>', page, re.DOTALL)
    assert found, page[:2000]
    return html.unescape(found.group(0))


def _row(section: str, model: str) -> list[str]:
    """The cells of the estimate table's row for ``model``, as text."""
    row = re.search(rf"<tr>\s*<td><code>{re.escape(model)}</code>.*?</tr>", section, re.DOTALL)
    assert row, section
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.DOTALL)
    return [re.sub(r"<[^>]+>", " ", cell).split("  ")[0].strip() for cell in cells]


def test_the_project_page_shows_the_estimate_before_the_launch_button(
    home: tuple[Settings, Ledger], tmp_path: Path
) -> None:
    settings, ledger = home
    pdfs = [write_report(make_trial(i), tmp_path / "src") for i in (1, 2, 3)]
    with _site(settings, ledger) as client:
        assert client.post("/extraction/projects", data={"project": "statins"}).status_code == 303
        files = [("pdfs", (p.name, p.read_bytes(), "application/pdf")) for p in pdfs]
        uploaded = client.post("/extraction/projects/statins/documents", files=files)
        assert uploaded.status_code == 303  # post, redirect, get: the project page shows the estimate
        page = client.get(uploaded.headers["location"]).text
        section = _estimate_section(page)
        assert page.index('id="estimate"') < page.index("Start batch with the selected documents")
        # The upload's parse runs in the background: some or all may be parsed by now.
        assert "3 document(s)" in section

        ids = [d["id"] for d in project_documents(ledger, "statins")]
        shas = [d["sha256"] for d in project_documents(ledger, "statins")]
        version = settings.parse_options().limits.parser_version
        deadline = time.monotonic() + 60  # the upload's background parse (a child process per PDF)
        while len(parsed_contents(ledger, shas, version)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(parsed_contents(ledger, shas, version)) == 3, "the upload did not parse its PDFs"

        section = _estimate_section(client.get("/extraction/projects/statins").text)
        expected = estimate_batch(
            ledger,
            project="statins",
            document_ids=ids,
            llm=LLMConfig(MODEL),
            parse=ParseMode.QUICK,
            parse_options=settings.parse_options(),
        ).models[0]
        cells = _row(section, MODEL)
        assert cells[1:6] == [
            "3",
            "0",
            # one slot assumed: the second and third calls read the template from the cache
            f"{expected.prompt_tokens:,} ({expected.cache_read_tokens:,} read from the provider's cache)",
            f"{expected.answer_tokens:,}",
            money(expected.cost_usd, ""),
        ]
        assert expected.cache_read_tokens >= 2 * 1024 and expected.cache_written_tokens == 0
        assert cells[6] == money(expected.batch_cost_usd, "") and cells[7] == "no budget known"
        assert "Approximate" not in section  # parsed now: exact
        assert "Expected duration: <strong>no budget known</strong>" in section
        assert "default 1,057 tokens per call" in section

        chosen = client.get(
            "/extraction/projects/statins",
            params={"estimate": "1", "document": [str(ids[0])], "second_model": "openai/gpt-4o", "fresh": "on"},
        )
        assert chosen.status_code == 200
        section = _estimate_section(chosen.text)
        assert "1 document(s), fresh answers asked" in section
        assert _row(section, MODEL)[1] == "1" and _row(section, "openai/gpt-4o")[1] == "1"
        assert "Total: <strong>$" in section
        assert f'value="{ids[1]}" aria-label' in chosen.text  # the form keeps the choices: others unticked
        assert f'value="{ids[0]}" checked' in chosen.text and 'value="openai/gpt-4o"' in chosen.text

        for params, said in (
            ({"estimate": "1"}, "select at least one document to estimate"),
            ({"estimate": "1", "document": "99"}, "document(s) not in project statins: [99]"),
            ({"estimate": "1", "document": "x"}, "invalid document selection"),
            ({"estimate": "1", "document": str(ids[0]), "second_model": MODEL}, "another model than the first"),
        ):
            refused = client.get("/extraction/projects/statins", params=params)
            assert refused.status_code == 400 and said in html.unescape(refused.text), params
    assert recent_batches(ledger) == []  # estimating never starts a batch


def test_a_large_project_is_estimated_when_asked_not_on_every_view(
    home: tuple[Settings, Ledger], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting a project's every paper on each view would stall the page (and the server) for a
    project of thousands: beyond a few dozen documents the figures wait for the button."""
    monkeypatch.setattr("extraction_pipeline.web.projects.AUTO_ESTIMATE_DOCUMENTS", 1)
    settings, ledger = home
    pdfs = [write_report(make_trial(i), tmp_path / "src") for i in (1, 2)]
    with _site(settings, ledger) as client:
        assert client.post("/extraction/projects", data={"project": "statins"}).status_code == 303
        files = [("pdfs", (p.name, p.read_bytes(), "application/pdf")) for p in pdfs]
        assert client.post("/extraction/projects/statins/documents", files=files).status_code == 303
        shown = _estimate_section(client.get("/extraction/projects/statins").text)
        assert "Not worked out yet" in shown and "estimate-table" not in shown
        ids = [str(d["id"]) for d in project_documents(ledger, "statins")]
        asked = client.get("/extraction/projects/statins", params={"estimate": "1", "document": ids})
        assert "2 document(s)" in _estimate_section(asked.text) and "estimate-table" in asked.text
