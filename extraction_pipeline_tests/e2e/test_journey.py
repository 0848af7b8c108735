"""The analyst's journey in a real browser (Debian's Chromium driven by Playwright), against a
real `extraction-pipeline ui` (one server: our pages and the Dagster UI, plus its daemon) with the
model served by the loopback fake over real HTTP:

an admin adds a user on the command line -> she signs in with her personal token -> create project
-> upload 5 PDFs (two two-arm trials, two three-arm trials, one broken: its reason shown) -> start a
batch (recorded under her name) -> see it complete -> open a document: its extraction form, the
forged bound first, its quote highlighted on the page, readable at 1366x768 and 1920x1080 (element
boxes asserted, screenshots taken) -> correct that bound with a new quote (the panel and the page's
highlight show it at once, from a new image address), turn the number listed as "possibly missed"
into its empty cell's value, approve the outcome row and the study fields from the form -> the batch
page says the second paper's outcome has no name; its link opens the paper, the name is set in its
empty cell, the rest reviewed with the keyboard (the two papers are then pooled) -> a three-arm paper: its
arms as columns, one arm's numbers reassigned to another arm and back, reviewed -> the batch's
forest plots, a study row followed to its review page; the three-arm trials pooled with their
shared placebo split, then one comparison defined (the high dose vs placebo) and pooled -> download
the workbook (its Arms, Comparisons and Synthesis sheets) and CSV and open them -> the
`batch_workbook` materialization's URL in the Dagster UI downloads the same file.

Screenshots of every step go to test-output/journey/ (or $EXTRACTION_TEST_ARTIFACTS).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import openpyxl
import pytest

from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.synthetic import make_three_arm_trial, make_trial, write_report, write_three_arm_report
from extraction_pipeline_tests.support import pdf_samples
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.layout import READABLE_PX, SIZES, boxes, inside, line_heights
from extraction_pipeline_tests.support.review_case import (
    OUTCOME_QUOTE,
    answer_for,
    arms_sentence,
    results_sentence,
    three_arm_answer,
)
from extraction_pipeline_tests.support.web import free_port

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
CHROMIUM = os.environ.get("EXTRACTION_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("EXTRACTION_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-output"))
BATCH_TIMEOUT_MS = 420_000
TRIALS = (21, 22)
UNNAMED_TRIAL = TRIALS[1]
THREE_ARM_TRIALS = (make_three_arm_trial(1), make_three_arm_trial(2))
REVIEWER = "Rita Reviewer"
OUTCOME = "hospitalization or death"


@dataclass
class Journey:
    base: str
    home: Path
    shots: Path
    page: Any
    token: str
    step: int = 0

    def shot(self, name: str) -> Path:
        self.step += 1
        path = self.shots / f"{self.step:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def _answer(messages: list[dict[str, str]]) -> Reply:
    text = document_from_messages(messages)
    for three_arm in THREE_ARM_TRIALS:
        if three_arm.nct_number in text:
            return Reply(three_arm_answer(three_arm), tokens_in=2500, tokens_out=900)
    trial = next(make_trial(i) for i in TRIALS if make_trial(i).nct_number in text)
    # The review case's answer (one forged CI bound) with the outcome and both arms named, so the
    # batch's forest plot has its two studies to pool, drug against placebo.
    answer = json.loads(answer_for(trial))
    arms, results = arms_sentence(trial), results_sentence(trial)
    answer["arms"] = [{"arm_name": {"value": name, "quote": arms}} for name in (trial.drug, "placebo")]
    answer["comparisons"][0].update(
        outcome_name={"value": OUTCOME, "quote": OUTCOME_QUOTE},
        arm={"value": trial.drug, "quote": results},
        comparator_arm={"value": "placebo", "quote": arms},
    )
    if trial.index == UNNAMED_TRIAL:
        del answer["comparisons"][0]["outcome_name"]  # the model left the outcome unnamed: a reviewer names it
    else:
        # The outcome's events per arm, the placebo arm's left out: the recall check lists the
        # sentence's unread number, and a reviewer turns it into the empty field's value.
        events = trial.events_sentence
        named = {"value": OUTCOME, "quote": OUTCOME_QUOTE}
        answer["outcomes"] = [
            {
                "outcome_name": named,
                "arm": {"value": trial.drug, "quote": events},
                "events": {"value": trial.drug_events, "quote": events},
                "total": {"value": trial.drug_n, "quote": events},
            },
            {"outcome_name": named, "arm": {"value": "placebo", "quote": events}},
        ]
    return Reply(json.dumps(answer), tokens_in=1500, tokens_out=120)


def _wait_for(url: str, timeout: float, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"{url} did not answer within {timeout} s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required in CI: {CHROMIUM} is missing (.ci/run installs it)")
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    home = tmp_path_factory.mktemp("journey-home")
    fake = FakeLLMServer().start()
    fake.answer = _answer
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    env.update(
        EXTRACTION_HOME=str(home),
        EXTRACTION_MODEL="openai/fake-model",
        EXTRACTION_API_BASE=fake.api_base,
        EXTRACTION_API_KEY="sk-journey-not-a-secret",
    )  # no EXTRACTION_PUBLIC_URL: the UI's links must work on this port all the same
    cli = [sys.executable, "-m", "extraction_pipeline.cli"]
    subprocess.run([*cli, "init"], env=env, check=True, capture_output=True)
    added = subprocess.run(
        [*cli, "users", "add", REVIEWER, "--role", "admin"], env=env, check=True, capture_output=True, text=True
    )
    token = added.stdout.splitlines()[0]
    assert "signs in once at" in added.stdout and len(token) >= 40
    log = home / "ui.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*cli, "ui", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_for(f"{base}/server_info", 180, process, log)
        yield base, home, token
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        fake.stop()


@pytest.fixture(scope="module")
def journey(server: tuple[str, Path, str]) -> Iterator[Journey]:
    from playwright.sync_api import sync_playwright

    base, home, token = server
    shots = ARTIFACTS / "journey"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # A high-density screen (2 device pixels per CSS pixel): page images must be rendered for it.
        context = browser.new_context(
            viewport={"width": 1440, "height": 960}, device_scale_factor=2, accept_downloads=True
        )
        page = context.new_page()
        page.set_default_timeout(60_000)
        try:
            yield Journey(base, home, shots, page, token)
        finally:
            context.close()
            browser.close()


def test_the_analyst_journey(journey: Journey, tmp_path: Path) -> None:
    page, base = journey.page, journey.base
    from playwright.sync_api import expect

    # 0. Sign in with the personal token `users add` printed (the session is kept by the browser).
    page.goto(f"{base}/extraction/projects")
    expect(page.locator("#who")).to_contain_text("Sign in")
    page.get_by_role("link", name="Sign in").click()
    page.fill("input[name=token]", journey.token)
    journey.shot("sign-in")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signed-in-user")).to_have_text(REVIEWER)

    # 1. Create a project.
    page.goto(f"{base}/extraction/projects")
    journey.shot("projects")
    page.fill("input[name=project]", "journey")
    page.get_by_role("button", name="Create project").click()
    page.wait_for_load_state("load")
    expect(page.locator("h1")).to_have_text("Project journey")

    # 2. Upload five PDFs at once, one of them broken.
    pdfs = [write_report(make_trial(i), tmp_path / "pdfs") for i in TRIALS]
    pdfs += [write_three_arm_report(trial, tmp_path / "pdfs") for trial in THREE_ARM_TRIALS]
    broken = pdf_samples.write(tmp_path / "pdfs", "broken.pdf", b"%PDF-1.7\n1 0 obj\n<<")
    page.set_input_files("input[name=pdfs]", [str(p) for p in (*pdfs, broken)])
    page.get_by_role("button", name="Upload", exact=True).click()
    results = page.locator("#upload-results")
    expect(results).to_contain_text("broken.pdf")
    expect(results.locator("tr", has_text="broken.pdf")).to_contain_text("truncated or damaged")
    for pdf in pdfs:
        expect(results.locator("tr", has_text=pdf.name)).to_contain_text("registered as document")
    expect(page.locator(".flash")).to_contain_text("4 of 5 file(s) registered")
    journey.shot("uploaded")

    # 3. Start a batch for the registered documents: it is the signed-in user's.
    page.get_by_role("button", name="Start batch with the selected documents").click()
    expect(page.locator(".flash")).to_contain_text(f"started by {REVIEWER} with 4 document(s)")
    journey.shot("batch-started")

    # 4. Watch it complete (the page refreshes itself while the batch is open).
    expect(page.locator("#batch-status")).to_have_text("completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.locator("#workbook-link")).to_be_visible(timeout=BATCH_TIMEOUT_MS)  # exported once closed
    journey.shot("batch-completed")
    batch_url = page.url.split("?")[0]
    page.get_by_role("link", name="runs in the Dagster UI").click()  # Dagster stays the monitor
    # The upload parsed the PDFs already, so the runs are of the job without a parse step.
    expect(page.get_by_text(re.compile(r"extract_(parsed_)?documents")).first).to_be_visible(timeout=60_000)
    journey.shot("dagster-runs-of-the-batch")
    page.goto(batch_url)

    # 5. Open the first document: an extraction form; the forged bound is selected first, in the
    # outcome row, coloured unverified; a click on a number shows its quote highlighted on the page.
    page.locator("#documents tr", has_text=make_trial(TRIALS[0]).filename).locator("a", has_text="review").click()
    # The outcome's row group: its arms' numbers and the hazard ratio printed for it.
    outcome = page.locator("#outcomes tbody.outcome").filter(
        has=page.locator(".cell[data-path='comparisons.1.ci_lower']")
    )
    forged_cell = outcome.locator(".cell[data-path='comparisons.1.ci_lower']")
    expect(forged_cell).to_have_class(re.compile(r"\bcurrent\b"))
    expect(forged_cell).to_have_class(re.compile(r"\bunverified\b"))
    expect(page.locator(".detail:visible")).to_contain_text("unverified")
    estimate = outcome.locator(".cell[data-path='comparisons.1.effect_estimate']")
    expect(estimate).to_have_class(re.compile(r"\bverified\b"))
    estimate.click()
    expect(page.locator(".detail:visible")).to_contain_text("comparison 1 · effect estimate")  # words, not a path
    expect(page.locator("#page-caption")).to_contain_text("comparison 1 · effect estimate")
    # The page is fetched at the screen's resolution, then the highlighted quote is scrolled into view.
    page.wait_for_function(
        "() => { const i = document.getElementById('page-image'); "
        "return i.src.startsWith('blob:') && i.complete && i.naturalWidth > 0; }"
    )
    natural, shown = page.evaluate(
        "(() => { const i = document.getElementById('page-image'); return [i.naturalWidth, i.clientWidth]; })()"
    )
    assert natural >= 2 * shown, (natural, shown)  # a device pixel per image pixel, at least: sharp
    image_response = page.request.get(base + (estimate.get_attribute("data-img") or ""))
    assert image_response.ok and image_response.headers["x-highlight-rects"] not in ("", "[]")
    journey.shot("document-form-highlight")
    # Readable on a laptop's screen and a desktop's: nothing scrolls the window sideways, the form
    # fits its pane, the quoted line is at least 12 px high with its highlight in view.
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.reload()
        laid = boxes(page, "quote")
        assert laid["page"][0] <= laid["page"][2] and laid["form"][0] <= laid["form"][1], laid
        assert laid["highlight"] and all(inside(box, laid["visible"]) for box in laid["highlight"]), laid
        assert min(line_heights(laid)) >= READABLE_PX, line_heights(laid)
        page.screenshot(path=str(journey.shots / f"document-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 960})
    page.reload()
    shown_width = page.evaluate("document.getElementById('page-image').clientWidth")
    page.locator("#zoom-in").click()  # + enlarges the page beyond the quote's own zoom
    page.wait_for_function("(w) => document.getElementById('page-image').clientWidth > w", arg=shown_width)
    journey.shot("document-zoomed")

    # 6. Through the form only: correct the forged bound (its true quote grounded again), approve
    # the outcome's row, then the study fields from their cells.
    trial = next(make_trial(i) for i in TRIALS if make_trial(i).filename in page.locator("h1").inner_text())
    forged_cell.click()
    before = forged_cell.get_attribute("data-img") or ""
    old_rects = page.request.get(base + before).headers["x-highlight-rects"]
    forged = page.locator(".detail:visible")
    forged.locator("form.correct input[name=value]").fill(f"{trial.ci_lower:.2f}")
    new_quote = f"95% CI {trial.ci_lower:.2f} to {trial.ci_upper:.2f}"  # the bound's own words, not the sentence
    forged.locator("form.correct input[name=quote]").fill(new_quote)
    forged.locator("form.correct button").click()
    expect(page.locator(".flash")).to_contain_text("correct recorded")
    corrected = page.locator(".cell[data-path='comparisons.1.ci_lower']")
    expect(corrected).to_have_class(re.compile(r"\bdecided\b"))
    expect(corrected).to_have_text(f"{trial.ci_lower:.2f}")
    # What changed is what is shown: the reviewer's quote and its verdict in the panel, and a page
    # image at a new address highlighting the new quote (never the old picture from a cache).
    panel = page.locator(".detail[data-path='comparisons.1.ci_lower']")
    expect(panel.locator(".reviewer-quote")).to_contain_text(new_quote)
    after = corrected.get_attribute("data-img") or ""
    assert after != before
    corrected.click()  # the page moved on to the next undecided value; back to this one
    page.wait_for_function("(url) => document.getElementById('page-image').dataset.url === url", arg=after)
    new_rects = page.request.get(base + after).headers["x-highlight-rects"]
    assert new_rects not in ("", "[]", old_rects), (old_rects, new_rects)
    journey.shot("corrected")
    # What the model left out: the placebo arm's events, listed as possibly missed, turned into the
    # empty field's value; it shows in its cell at once, decided.
    missed = page.locator("#possibly-missed a.cell.missed-item", has_text="no numbers for placebo")
    missed.click()
    detail = page.locator(f".detail.missed-detail[data-path='{missed.get_attribute('data-path')}']")
    detail.locator("form.add-value select[name=path]").select_option("outcomes.2.events")
    detail.locator("form.add-value input[name=value]").fill(str(trial.placebo_events))
    detail.locator("form.add-value").get_by_role("button", name="Turn into a value").click()
    page.wait_for_load_state("load")
    expect(page.locator(".flash")).to_contain_text("outcome 2 · events: correct recorded")
    added = page.locator(".cell[data-path='outcomes.2.events']")
    expect(added).to_have_text(str(trial.placebo_events))
    expect(added).to_have_class(re.compile(r"\bdecided\b"))
    journey.shot("missed-turned-into-a-value")
    outcome.get_by_role("button", name="Approve the outcome").click()
    expect(page.locator(".flash")).to_contain_text("outcome approved")
    expect(outcome).to_contain_text("decided")
    for path in ("metadata.nct_number", "metadata.randomized_n", "arms.1.arm_name", "arms.2.arm_name"):
        page.locator(f".cell[data-path='{path}']").click()
        page.locator(".detail:visible").get_by_role("button", name="Approve").click()
        page.wait_for_load_state("load")
    _approve_the_rest(page)
    journey.shot("document-reviewed")

    # The second document's outcome has no name: the batch page says so in words, with a link to
    # fix it; its name is set in its empty cell, then everything with the keyboard (r approves the
    # outcome, a the value).
    page.goto(batch_url)
    left_out = page.locator("#left-out")
    expect(left_out).to_contain_text("without an outcome name")
    expect(left_out).not_to_contain_text(re.compile(r"\blines? \d"))
    expect(page.locator("figure.forest", has_text=f"{OUTCOME} — HR")).to_have_count(0)  # one named study only
    left_out.locator("summary").click()
    left_out.get_by_role("link", name=make_trial(UNNAMED_TRIAL).nct_number).click()
    page.wait_for_load_state("load")
    expect(page.locator("h1")).to_contain_text(make_trial(UNNAMED_TRIAL).filename)
    unnamed = page.locator(".cell.settable[data-path='comparisons.1.outcome_name']")
    unnamed.click()
    empty = page.locator(".detail.empty[data-path='comparisons.1.outcome_name']")
    empty.locator("form.set-value input[name=value]").fill(OUTCOME)
    empty.locator("form.set-value input[name=quote]").fill(OUTCOME_QUOTE)
    empty.locator("form.set-value button").click()
    page.wait_for_load_state("load")
    named = page.locator(".cell[data-path='comparisons.1.outcome_name']")
    expect(named).to_have_text(OUTCOME)
    expect(named).to_have_class(re.compile(r"\bdecided\b"))
    journey.shot("outcome-named")
    _review_with_the_keyboard(page)

    # A three-arm paper: its arms as columns; the low dose's numbers reassigned to the high dose
    # (they move to that arm's column, in a row of their own as that arm has numbers already), then
    # back; then reviewed with the keyboard.
    low, high, placebo = (arm.name for arm in THREE_ARM_TRIALS[0].arms)
    page.goto(batch_url)
    page.locator("#documents tr", has_text=THREE_ARM_TRIALS[0].filename).locator("a", has_text="review").click()
    expect(page.locator("#outcomes th.arm-head")).to_have_text([low, high, placebo])
    expect(page.locator("#section-arms")).to_contain_text(str(THREE_ARM_TRIALS[0].arms[0].randomized_n))
    expect(page.locator("#outcomes tbody.outcome")).to_have_count(1)
    expect(page.locator("#outcomes tr.comparison")).to_have_count(2)
    journey.shot("three-arm-form")
    _reassign(page, "outcomes.1.arm", high)
    expect(page.locator("#outcomes tbody.outcome")).to_have_count(2)
    moved = f"{THREE_ARM_TRIALS[0].arms[0].events}/{THREE_ARM_TRIALS[0].arms[0].randomized_n}"
    expect(page.locator("#outcomes td.arm-numbers[data-arm='arms.2']", has_text=moved)).to_have_count(1)
    expect(page.locator("#outcomes td.arm-numbers[data-arm='arms.1']", has_text=moved)).to_have_count(0)
    journey.shot("three-arm-reassigned")
    _reassign(page, "outcomes.1.arm", low)
    expect(page.locator("#outcomes tbody.outcome")).to_have_count(1)
    _review_with_the_keyboard(page)
    page.goto(batch_url)
    page.locator("#documents tr", has_text=THREE_ARM_TRIALS[1].filename).locator("a", has_text="review").click()
    _review_with_the_keyboard(page)
    page.goto(batch_url)
    expect(page.locator("#reviewed-count")).to_have_text("4/4")
    journey.shot("batch-reviewed")

    # The batch's forest plots: both studies reviewed (filled), pooled; a study row opens its review page.
    forest = page.locator("figure.forest", has_text=f"{OUTCOME} — HR, k = 2")
    expect(forest.locator("g.study.reviewed")).to_have_count(2)
    forest.scroll_into_view_if_needed()
    journey.shot("forest-plot")
    # The picture downloads: the forest plot as a PNG that opens, as a PDF.
    for fmt, signature in (("PNG", b"\x89PNG\r\n\x1a\n"), ("PDF", b"%PDF")):
        with page.expect_download() as picture:
            forest.locator(".downloads a", has_text=fmt).click()
        saved = tmp_path / picture.value.suggested_filename
        picture.value.save_as(saved)
        assert saved.suffix == f".{fmt.lower()}" and saved.read_bytes().startswith(signature), saved
    first_study = make_trial(TRIALS[0])
    forest.locator(".study-link a", has_text=first_study.nct_number).click()
    page.wait_for_load_state("load")
    expect(page.locator("h1")).to_contain_text(first_study.filename)
    journey.shot("forest-plot-study-opened")
    page.goto(batch_url)

    # The three-arm trials: each dose against its study's placebo, the shared placebo split between
    # the two doses (four rows from two studies); then a comparison of the high dose alone.
    three_arm_outcome = THREE_ARM_TRIALS[0].outcome
    split = page.locator("figure.forest", has_text=f"{three_arm_outcome} — RR, k = 4")
    expect(split).to_contain_text("Cochrane Handbook")
    split.scroll_into_view_if_needed()
    journey.shot("forest-plot-three-arm-split")
    split.screenshot(path=str(journey.shots / "forest-three-arm.png"))  # the README's picture
    page.fill("input[name=new]", "high dose vs placebo")
    page.get_by_role("button", name="Add").click()
    page.wait_for_load_state("load")
    sides = page.locator("form.comparison-sides[data-comparison='high dose vs placebo']")
    for three_arm in THREE_ARM_TRIALS:
        label = f"{three_arm.nct_number}, {three_arm.arms[0].name}: side in high dose vs placebo"
        sides.get_by_label(label).select_option("none")
    sides.get_by_role("button", name="Save the sides").click()
    page.wait_for_load_state("load")
    high_dose = page.locator(
        ".comparison-plots[data-comparison='high dose vs placebo'] figure.forest", has_text=three_arm_outcome
    )
    expect(high_dose).to_contain_text(f"{three_arm_outcome}, high dose vs placebo — RR, k = 2")
    expect(high_dose).not_to_contain_text("Cochrane Handbook")  # one dose per study: nothing shared
    high_dose.scroll_into_view_if_needed()
    journey.shot("forest-plot-one-comparison")

    # 7. Download the workbook and the CSV; open them.
    with page.expect_download() as download_info:
        page.click("#workbook-link")
    workbook_path = tmp_path / "downloaded.xlsx"
    download_info.value.save_as(workbook_path)
    values = openpyxl.load_workbook(workbook_path)["Values"]
    header = [c.value for c in values[1]]
    rows = [dict(zip(header, r, strict=True)) for r in values.iter_rows(min_row=2, values_only=True)]
    corrected = [r for r in rows if r["decision"] == "correct" and r["field"] not in ("arm", "events", "outcome_name")]
    assert len(corrected) == 1 and corrected[0]["field"] == "ci_lower"
    # The outcome name set in its empty cell: a decided value of the Values sheet.
    [named_row] = [r for r in rows if r["decision"] == "correct" and r["field"] == "outcome_name"]
    assert (named_row["filename"], named_row["final value"]) == (make_trial(UNNAMED_TRIAL).filename, OUTCOME)
    # The number turned into a value from "Possibly missed" is in the Values sheet, decided.
    [from_missed] = [r for r in rows if r["decision"] == "correct" and r["field"] == "events"]
    assert (from_missed["filename"], from_missed["final value"]) == (trial.filename, trial.placebo_events)
    # The reassignment there and back: a decision on the entry's arm, its final value the arm it began with.
    [reassigned] = [r for r in rows if r["decision"] == "correct" and r["field"] == "arm"]
    assert (reassigned["filename"], reassigned["final value"]) == (THREE_ARM_TRIALS[0].filename, low)
    assert corrected[0]["final value"] == pytest.approx(trial.ci_lower) and corrected[0]["value"] == pytest.approx(0.11)
    assert {r["decided by"] for r in rows} == {REVIEWER}
    batch_sheet = {r[0]: r[1] for r in openpyxl.load_workbook(workbook_path)["Batch"].iter_rows(values_only=True) if r}
    assert batch_sheet["reviewed documents"] == "4 of 4" and batch_sheet["model"] == "openai/fake-model"
    book = openpyxl.load_workbook(workbook_path)
    arms_sheet = _rows(book["Arms"])
    assert {(r["study"], r["arm"]) for r in arms_sheet} >= {
        (trial.nct_number, arm.name) for trial in THREE_ARM_TRIALS for arm in trial.arms
    }
    compared = _rows(book["Comparisons"])
    assert sum(1 for r in compared if r["study"] == THREE_ARM_TRIALS[0].nct_number) == 2
    pooled = {r["outcome"]: r for r in _rows(book["Synthesis"])}
    assert (pooled[OUTCOME]["studies"], pooled[OUTCOME]["reviewed studies"]) == (2, 2)
    with page.expect_download() as csv_info:
        page.get_by_role("link", name="meta-analysis CSV").click()
    csv_path = tmp_path / "downloaded.csv"
    csv_info.value.save_as(csv_path)
    csv_rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    [printed_hr] = [r for r in csv_rows if r["study"] == trial.nct_number and r["comparison"]]
    assert float(printed_hr["ci.lb"]) == pytest.approx(trial.ci_lower)
    placebo_row = next(r for r in csv_rows if r["study"] == trial.nct_number and r["group"] == "placebo" and r["xi"])
    assert int(placebo_row["xi"]) == trial.placebo_events  # the value added from "Possibly missed", in the CSV too
    assert all(r["review"] == f"reviewed by {REVIEWER}" for r in csv_rows)
    # A three-arm trial: one row per arm with its name and numbers, one per printed comparison.
    first = THREE_ARM_TRIALS[0]
    per_arm = {r["group"]: r for r in csv_rows if r["study"] == first.nct_number and not r["comparison"]}
    assert {name: (int(r["xi"]), int(r["ni"])) for name, r in per_arm.items()} == {
        arm.name: (arm.events, arm.randomized_n) for arm in first.arms
    }
    printed = [r for r in csv_rows if r["study"] == first.nct_number and r["comparison"]]
    assert sorted((r["group"], r["comparator"], float(r["estimate"])) for r in printed) == sorted(
        (first.arms[dose].name, "placebo", first.risk_ratio(dose)[0]) for dose in (0, 1)
    )

    # 8. The batch_workbook materialization in the Dagster UI links to the same file.
    with _instance(journey.home) as instance:
        [event] = instance.fetch_materializations(dg.AssetKey("batch_workbook"), limit=1).records
        materialization = event.asset_materialization
        assert materialization is not None
        url = materialization.metadata["download"].value
        partition = materialization.partition
    assert url.startswith("/extraction/batches/")  # relative: served here, on this port
    page.goto(f"{base}/assets/batch_workbook?partition={partition}")
    link = page.locator(f'a[href="{url}"]').first
    expect(link).to_be_visible(timeout=60_000)
    journey.shot("dagster-batch-workbook")
    # Activated from the keyboard, as a keyboard user would: a mouse click lands on the link's
    # centre, which a long URL pushes past its cell's edge, where Dagster's hover popover for a
    # truncated value can sit over it (seen in CI: "<div class=bp5-portal> intercepts pointer events").
    link.focus()
    with page.expect_download() as dagster_info:
        page.keyboard.press("Enter")
    from_dagster = tmp_path / "from-dagster.xlsx"
    dagster_info.value.save_as(from_dagster)
    assert from_dagster.read_bytes() == workbook_path.read_bytes()


def _review_with_the_keyboard(page: Any) -> None:
    """r approves the outcome row the page opened on, then a approves one value at a time until the
    document is reviewed."""
    from playwright.sync_api import expect

    page.locator("body").press("r")
    page.wait_for_load_state("load")
    expect(page.locator(".flash")).to_contain_text("outcome approved")
    _approve_the_rest(page)


def _approve_the_rest(page: Any) -> None:
    """a approves one value at a time until the document is reviewed."""
    from playwright.sync_api import expect

    for _ in range(60):
        if "not yet reviewed" not in page.locator("#review-state").inner_text():
            break
        page.locator("body").press("a")
        page.wait_for_load_state("load")
    expect(page.locator("#review-state")).to_have_text(f"reviewed by {REVIEWER}")


def _reassign(page: Any, path: str, arm: str) -> None:
    """Reassign an outcome entry's numbers to another declared arm from its arm cell's panel."""
    from playwright.sync_api import expect

    page.locator(f".cell[data-path='{path}']").click()
    panel = page.locator(f".detail[data-path='{path}']")
    panel.locator("form.reassign select[name=value]").select_option(arm)
    panel.locator("form.reassign").get_by_role("button", name="Reassign").click()
    page.wait_for_load_state("load")
    expect(page.locator(".flash")).to_contain_text("correct recorded")


def _rows(sheet: Any) -> list[dict[str, Any]]:
    header = [c.value for c in sheet[1]]
    return [dict(zip(header, row, strict=False)) for row in sheet.iter_rows(min_row=2, values_only=True) if any(row)]


def _instance(home: Path) -> Any:
    return dg.DagsterInstance.from_config(str(home / "dagster"))
