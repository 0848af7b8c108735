"""The batch page's forest plots and risk-of-bias pictures over real HTTP: study rows link to their
review pages, a signed-in reviewer pools differently named outcomes under one label, and nobody
else can."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import openpyxl
import pymupdf
import pytest
from PIL import Image
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from extraction_pipeline.core.export.workbook import write_workbook
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.review import decisions
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthesis.batch import current_labels
from extraction_pipeline.core.synthetic import SyntheticTrial
from extraction_pipeline.web.server import build_app
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import (
    ReviewCase,
    make_batch,
    synthesis_answer,
    synthesis_answer_v1,
)
from extraction_pipeline_tests.support.svg import classed, parse, study_links, texts
from extraction_pipeline_tests.support.web import serving, serving_pages

TOKEN = "synthesis-token-for-tests"
OTHER_NAME = "death or hospital admission"
RESULTS_TABLE = (
    "Table 2. Secondary outcomes at 12 months\nOutcome\nDrug (n=600)\nPlacebo (n=600)\n"
    "Stroke\n12/600\n25/600\nMyocardial infarction\n30/600\n41/600\n"
)


def _answer(trial: SyntheticTrial) -> str:
    text = synthesis_answer(trial, randomization="high" if trial.index == 4 else "low")
    return text.replace("hospitalization or death", OTHER_NAME) if trial.index == 5 else text


@pytest.fixture
def site(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[tuple[str, list[ReviewCase], str]]:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    cases = make_batch(settings, ledger, fake_llm, [3, 4, 5], answer=_answer)
    _user, token = add_user(ledger, "Rita", Role.REVIEWER)

    async def dagster_ui(request: object) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=TOKEN)
    with serving(app) as base:
        yield base, cases, token
    ledger.dispose()


@contextlib.contextmanager
def _client(base: str, personal: str | None = None, origin: str | None = None) -> Iterator[httpx.Client]:
    """A browser behind the instance token, signed in with ``personal`` (a session cookie) when
    given; its later posts carry ``origin`` (a page of another site, when one is named)."""
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {TOKEN}", "Origin": base}, timeout=60
    ) as client:
        if personal is not None:
            signed = client.post("/extraction/signin", data={"token": personal})
            assert signed.status_code == 303, signed.text
        client.headers["Origin"] = origin or base
        yield client


def test_the_batch_page_draws_forest_plots_linked_to_review_pages(site: tuple[str, list[ReviewCase], str]) -> None:
    base, cases, _token = site
    batch_id = cases[0].batch_id
    with _client(base) as client:
        page = client.get(f"/extraction/batches/{batch_id}").text
    forest = re.search(r'<figure class="forest" id="forest-1">\s*(<svg.*?</svg>)', page, re.S)
    assert forest is not None
    svg = parse(forest.group(1))
    assert "hospitalization or death — HR, k = 2" in texts(svg)
    links = study_links(svg)
    assert links == [f"/extraction/batches/{batch_id}/documents/{c.item_id}" for c in cases[:2]]
    assert len(classed(svg, "study not-reviewed")) == 2  # nothing reviewed yet: hollow
    assert classed(svg, "study reviewed") == []
    single = re.search(r'<details id="single-study-outcomes".*?</details>', page, re.S)
    assert single is not None and OTHER_NAME in single.group(0)
    # The risk-of-bias pictures: one row per study, each linking to its review page.
    lights = re.search(r'<figure class="traffic-lights">\s*(<svg.*?</svg>)', page, re.S)
    assert lights is not None
    assert len(study_links(parse(lights.group(1)))) == 3
    assert len(classed(parse(lights.group(1)), "judgement high")) == 1
    with _client(base) as client:
        review = client.get(links[0])
    assert review.status_code == 200 and cases[0].trial.nct_number in review.text


def test_the_pictures_download_as_svg_png_and_pdf(site: tuple[str, list[ReviewCase], str]) -> None:
    base, cases, _token = site
    batch_id = cases[0].batch_id
    with _client(base) as client:
        page = client.get(f"/extraction/batches/{batch_id}").text
        offered = [html.unescape(url) for url in re.findall(r'<a href="([^"]+)" download>', page)]
        forest = [url for url in offered if "/forest." in url]
        assert [url.split("?")[0].rsplit(".", 1)[1] for url in forest] == ["svg", "png", "pdf"]
        assert all("outcome=hospitalization+or+death&measure=HR" in url for url in forest)
        name = f"batch-{batch_id}-forest-hospitalization-or-death-hr"
        files = {fmt: _download(client, url, f"{name}.{fmt}") for fmt, url in zip(FORMATS, forest, strict=True)}
        assert "hospitalization or death — HR, k = 2" in texts(parse(files["svg"].decode()))
        assert study_links(parse(files["svg"].decode())) == []  # a file has no review pages to open
        _assert_png(files["png"])
        _assert_pdf(files["pdf"], "Random effects (REML)")
        for picture, shown in (("traffic-lights", "D1"), ("summary", "Overall risk of bias")):
            urls = [url for url in offered if f"/risk-of-bias/{picture}." in url]
            assert len(urls) == 3
            name = f"batch-{batch_id}-risk-of-bias-{picture}"
            files = {fmt: _download(client, url, f"{name}.{fmt}") for fmt, url in zip(FORMATS, urls, strict=True)}
            assert shown in texts(parse(files["svg"].decode()))
            _assert_png(files["png"])
            _assert_pdf(files["pdf"], shown)
        for missing in (
            f"/extraction/batches/{batch_id}/forest.gif?outcome=hospitalization+or+death&measure=HR",
            f"/extraction/batches/{batch_id}/forest.svg?outcome=hospitalization+or+death&measure=OR",
            f"/extraction/batches/{batch_id}/forest.svg?outcome={OTHER_NAME}&measure=HR",  # one study: no plot
            f"/extraction/batches/{batch_id}/forest.svg",
            f"/extraction/batches/{batch_id + 99}/forest.svg?outcome=hospitalization+or+death&measure=HR",
            f"/extraction/batches/{batch_id}/risk-of-bias/summary.jpeg",
            f"/extraction/batches/{batch_id}/risk-of-bias/robvis.svg",
            f"/extraction/batches/{batch_id + 99}/risk-of-bias/summary.svg",
        ):
            assert client.get(missing).status_code == 404, missing
    with httpx.Client(base_url=base, timeout=60) as stranger:  # without the instance token
        assert stranger.get(forest[0]).status_code == 401


FORMATS = ("svg", "png", "pdf")
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}


def _download(client: httpx.Client, url: str, filename: str) -> bytes:
    """The file at ``url``, checked to come as an attachment of its format under ``filename``."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.text)
    assert response.headers["content-type"] == MEDIA_TYPES[filename.rsplit(".", 1)[1]]
    assert response.headers["content-disposition"] == f'attachment; filename="{filename}"'
    return response.content


def _assert_png(data: bytes) -> None:
    """A PNG at print resolution: 300 dpi recorded in the file (a word processor places it at the
    figure's size), so an 8-inch figure is 2,400 pixels wide."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert image.info["dpi"] == pytest.approx((300, 300), abs=0.5)
        assert image.width > 5 * 300 and image.height > 2 * 300


def _assert_pdf(data: bytes, text: str) -> None:
    """A PDF of one page whose text can be searched (PyMuPDF reads it)."""
    assert data.startswith(b"%PDF")
    with pymupdf.open(stream=data, filetype="pdf") as document:
        assert document.page_count == 1 and text in document[0].get_text()


def test_a_reviewer_pools_two_names_as_one_outcome(site: tuple[str, list[ReviewCase], str]) -> None:
    base, cases, token = site
    batch_id, ledger = cases[0].batch_id, cases[0].ledger
    form = {"name": OTHER_NAME, "label": "hospitalization or death"}
    url = f"/extraction/batches/{batch_id}/outcome-labels"
    with _client(base) as anonymous:
        assert anonymous.post(url, data=form).status_code == 401
    with _client(base, token, origin="https://evil.example") as foreign:
        assert foreign.post(url, data=form).status_code == 403
    assert current_labels(ledger, batch_id) == {}
    with _client(base, token) as client:
        saved = client.post(url, data=form)
        assert saved.status_code == 303 and saved.headers["location"].endswith(f"/batches/{batch_id}#synthesis")
        page = client.get(f"/extraction/batches/{batch_id}").text
        assert "pooled as &#39;hospitalization or death&#39;" in page
        refused = client.post(url, data={"name": OTHER_NAME, "label": "!!"})
        assert "needs letters or digits" in html.unescape(client.get(refused.headers["location"]).text)
    assert current_labels(ledger, batch_id) == {OTHER_NAME: "hospitalization or death"}
    assert "hospitalization or death — HR, k = 3" in html.unescape(page)
    assert 'id="single-study-outcomes"' not in page


def _half_read_answer(trial: SyntheticTrial) -> str:
    """The results table's second outcome with its control arm left out (a batch of the two-arm
    template of earlier releases: its review page and missed list keep working)."""
    text = synthesis_answer_v1(trial)
    answer = json.loads(text)
    answer["outcomes"].append(
        {
            "outcome_name": {"value": "Myocardial infarction", "quote": "Myocardial infarction"},
            "events_treatment": {"value": 30, "quote": "30/600"},
            "total_treatment": {"value": 600, "quote": "Drug (n=600)"},
        }
    )
    return json.dumps(answer)


def test_the_review_page_lists_what_may_be_missed_and_a_reviewer_turns_it_into_a_value(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    [case] = make_batch(settings, ledger, fake_llm, [3], answer=_half_read_answer, extra_text=RESULTS_TABLE, version=1)
    _user, token = add_user(ledger, "Rita", Role.REVIEWER)

    async def dagster_ui(request: object) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=TOKEN)
    page_url = f"/extraction/batches/{case.batch_id}/documents/{case.item_id}"
    with serving(app) as base, _client(base, token) as client:
        page = client.get(page_url).text
        listed = re.findall(r'<tr data-key="([^"]+)">', page)
        assert listed, page
        # The half-read row: myocardial infarction, its control arm (41/600) not read.
        quoted = dict(
            re.findall(
                r'class="detail missed-detail" data-path="missed:([^"]+)".*?<blockquote>(.*?)</blockquote>', page, re.S
            )
        )
        key = next(k for k, text in quoted.items() if "41/600" in text and "Myocardial" in text)
        cell = re.search(rf'data-path="missed:{re.escape(key)}" data-img="([^"]+)"', page)
        assert cell is not None
        shown = client.get(html.unescape(cell.group(1)))
        assert shown.status_code == 200 and shown.headers["x-highlight-rects"] not in ("", "[]")
        assert client.get(f"/extraction/items/{case.item_id}/page.png?missed=outcome:9:text:0").status_code == 404
        # Turn it into a value: the control arm's events, the row as the quote the form offers
        # (on one line, as a browser sends a text input), grounded on the spot.
        pattern = rf'class="detail missed-detail" data-path="missed:{re.escape(key)}".*?name="quote" size="24"'
        detail = re.search(pattern + r' value="([^"]*)"', page, re.S)
        assert detail is not None and "\n" not in detail.group(1)
        quote = html.unescape(detail.group(1))
        form = {"key": key, "action": "add", "path": "outcomes.2.events_control", "value": "41", "quote": quote}
        added = client.post(f"/extraction/items/{case.item_id}/missed", data=form)
        assert added.status_code == 303
        after = html.unescape(client.get(added.headers["location"]).text)
        assert "turned into outcome 2 · events control by Rita" in after  # words, not a path
        # The value is in its cell at once, decided.
        cell = re.search(r'<a class="cell ([^"]*)"[^>]*data-path="outcomes.2.events_control"[^>]*>([^<]*)</a>', after)
        assert cell is not None and "decided" in cell.group(1) and cell.group(2) == "41"
        assert '<option value="outcomes.2.events_control">' in page  # offered while empty and undecided
        assert '<option value="outcomes.2.events_control">' not in after  # decided now: never overwritten here
        dismissed = client.post(
            f"/extraction/items/{case.item_id}/missed", data={"key": listed[0], "action": "dismiss"}
        )
        assert dismissed.status_code == 303
    decided = decisions.current_decisions(ledger, case.batch_id)[(case.item_id, "outcomes.2.events_control")]
    assert decided.value == 41 and decided.grounding is not None and decided.grounding["status"] == "verified"
    book = openpyxl.load_workbook(write_workbook(ledger, case.batch_id, tmp_path / "b.xlsx"))
    states = [row[-1] for row in book["Possibly missed"].iter_rows(min_row=2, values_only=True)]
    assert "turned into outcome 2 · events control by Rita" in states
    ledger.dispose()


def _unnamed_answer(trial: SyntheticTrial) -> str:
    """The synthesis answer with no outcome name on its comparisons (the model left it empty)."""
    answer = json.loads(synthesis_answer(trial))
    for comparison in answer["comparisons"]:
        comparison.pop("outcome_name", None)
    return json.dumps(answer)


def test_rows_left_out_of_the_pooling_are_said_in_words_grouped_with_links_to_fix_them(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    cases = make_batch(settings, ledger, fake_llm, [3, 4], answer=_unnamed_answer)
    with serving_pages(settings, TOKEN) as base, _client(base) as client:
        page = client.get(f"/extraction/batches/{cases[0].batch_id}").text
    left_out = re.search(r'<details id="left-out">(.*?)</details>', page, re.S)
    assert left_out is not None, page
    said = html.unescape(re.sub(r"<[^>]+>", "", left_out.group(1)))
    assert "2 outcome rows without an outcome name" in said and "name them on the review pages" in said
    assert not re.search(r"\blines? \d", said)  # no CSV line numbers on a web page
    links = re.findall(r'href="/extraction/batches/\d+/documents/(\d+)"', left_out.group(1))
    assert sorted(map(int, links)) == sorted(case.item_id for case in cases)  # each study once, to fix it
    ledger.dispose()
