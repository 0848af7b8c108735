"""Hostile PDFs (support/pdf_bombs.py) against everything that opens a PDF: registration, the
estimate's quick text, parsing and page images, and `ui` taking them as uploads while another
analyst reads pages. Each bomb costs its child process, within the time and memory limits, and
gets a one-line reason; the server keeps answering."""

from __future__ import annotations

import re
import resource
import statistics
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.extraction.token_counts import ChosenDocument, ParseMode, read_texts
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.users import add_user
from extraction_pipeline.core.pdf import warm
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import register_pdf, sha256_of
from extraction_pipeline.core.review.page_image import render_isolated
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline_tests.support import pdf_bombs
from extraction_pipeline_tests.support.web import UiServer, create_project, get, post_pdfs

pytestmark = pytest.mark.e2e  # no timing rule: balanced with the other heavy tests, not in the drills lane
T = TypeVar("T")

MEMORY_MB = 512
TIMEOUT_SECONDS = 8.0
LIMITS = ParseOptions(timeout_seconds=TIMEOUT_SECONDS, limits=EngineOptions(memory_mb=MEMORY_MB))
# What reading a bomb may cost the process that reads it, beyond the cap (the libraries mapped).
RSS_MARGIN_MB = 300
# Refused at registration, and why (a bomb whose pages read quickly is registered: its images are drawn below).
REFUSED = {
    "nested-xobjects.pdf": f"needs more memory than the limit of {MEMORY_MB} MB|timed out after",
    "compressed-content.pdf": f"needs more memory than the limit of {MEMORY_MB} MB|timed out after",
    "page-count.pdf": "200000 pages exceeds the limit of 300 pages",
    "deep-nesting.pdf": "no text layer",
}


def _bombs(directory: Path) -> list[Path]:
    return [make(directory) for make in pdf_bombs.ALL.values()]


def _outcome(read: Callable[[], T]) -> T | str:
    """What ``read`` returns, or its PermanentError's reason, which must be one line."""
    try:
        return read()
    except PermanentError as exc:
        reason = str(exc)
    assert reason and "\n" not in reason and "Traceback" not in reason, reason
    return reason


def _rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def test_every_reader_of_a_pdf_survives_the_bombs(tmp_path: Path) -> None:
    sqlite_ledger = Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}")
    bombs = _bombs(tmp_path / "bombs")
    before = _rss_mb()
    registered: dict[str, int] = {}
    for bomb in bombs:
        started = time.monotonic()
        try:
            registered[bomb.name] = register_pdf(sqlite_ledger, tmp_path / "documents", "bombs", bomb, LIMITS).id
        except ConfigError as exc:
            reason = str(exc)
            assert "\n" not in reason and "Traceback" not in reason, reason
            assert re.search(REFUSED[bomb.name], reason), (bomb.name, reason)
        print(f"{bomb.name}: registration {time.monotonic() - started:.1f} s")
    assert set(registered) == {b.name for b in bombs} - set(REFUSED)  # only the image bombs have readable pages
    # Nothing of a bomb was read in this process, and no child grew past the cap.
    assert _rss_mb() - before < 100, (before, _rss_mb())
    warm.stop()  # children forked warm count here once their server is reaped (pdf/warm.py)
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 < MEMORY_MB + RSS_MARGIN_MB

    # The estimate's quick text reads every document in one child: one bomb costs one document.
    good = register_pdf(sqlite_ledger, tmp_path / "documents", "bombs", write_report(make_trial(1), tmp_path), LIMITS)
    chosen = [ChosenDocument(doc_id, bomb.name, "0" * 64, str(bomb)) for doc_id, bomb in enumerate(bombs, start=100)]
    chosen.append(
        ChosenDocument(good.id, good.filename, good.sha256, str(tmp_path / "documents" / f"{good.sha256}.pdf"))
    )
    texts, unreadable = read_texts(sqlite_ledger, chosen, LIMITS, ParseMode.QUICK, None)
    assert good.id in texts and texts[good.id].parsed.pages_text  # the good paper after the bombs is read
    reasons = {u.filename: u.reason for u in unreadable}
    for name, expected in REFUSED.items():
        if name != "deep-nesting.pdf":  # its text is empty, not unreadable
            assert re.search(expected, reasons[name]), (name, reasons)

    # Parsing and page images of the bombs that were registered: a result or one line, in time.
    for name in registered:
        bomb = tmp_path / "bombs" / name
        digest = sha256_of(bomb)
        parsed = _outcome(partial(parse_document, sqlite_ledger, sha256=digest, stored_path=str(bomb), options=LIMITS))
        assert isinstance(parsed, str) or parsed.pages_text, name
        drawn = _outcome(partial(render_isolated, bomb, 1, None, timeout_seconds=TIMEOUT_SECONDS, memory_mb=MEMORY_MB))
        if isinstance(drawn, str):
            assert re.search(rf"timed out after {TIMEOUT_SECONDS:g} s|needs more memory|cannot render", drawn), drawn
        else:
            assert drawn[0].startswith(b"\x89PNG")
        print(f"{name}: parse: {'parsed' if not isinstance(parsed, str) else parsed}")
        print(f"{name}: page image: {'drawn' if not isinstance(drawn, str) else drawn}")
    warm.stop()
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 < MEMORY_MB + RSS_MARGIN_MB


def test_the_server_keeps_answering_while_bombs_are_uploaded(tmp_path: Path) -> None:
    """The bombs uploaded through `ui` while another analyst loads pages: every page load is
    answered while the upload is still being read, and each bomb is refused with its reason."""
    home = tmp_path / "home"
    server = UiServer(
        home,
        tmp_path / "ui.log",
        env={"EXTRACTION_PDF_MEMORY_MB": str(MEMORY_MB), "EXTRACTION_PARSE_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS)},
    )
    try:
        ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
        _, personal = add_user(ledger, "Uma")
        ledger.dispose()
        create_project(server.url, "trials", personal)
        answer: list[str] = []
        uploading = threading.Thread(
            target=lambda: answer.append(post_pdfs(server.url, _bombs(tmp_path / "bombs"), personal))
        )
        uploading.start()
        loads: list[float] = []
        while uploading.is_alive():
            started = time.monotonic()
            status, body = get(f"{server.url}/extraction/projects", personal)
            if uploading.is_alive():  # answered while the bombs were being read
                loads.append(time.monotonic() - started)
            assert status == 200 and b"trials" in body
            time.sleep(0.2)
        uploading.join()
        print(f"{len(loads)} page loads during the upload: median {statistics.median(loads or [0]) * 1000:.0f} ms")
        assert len(loads) >= 3, loads  # the server answered all along, not after the upload
        page = answer[0]
        for name, reason in REFUSED.items():
            row = re.search(rf"{re.escape(name)}</td><td><strong>refused</strong></td><td>([^<]*)", page)
            assert row and re.search(reason, row.group(1)), (name, page[-3000:])
        assert server.process.poll() is None  # the server is still up
    finally:
        server.stop()
