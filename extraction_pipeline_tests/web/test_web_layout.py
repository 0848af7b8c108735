"""The review page is readable at 1366x768 and 1920x1080. Chromium (Playwright) opens the document
page of a two-arm trial with 10 continuous outcomes, printed in a journal's small type (7 pt, as
trial tables are), and the element boxes say: nothing scrolls the window or the form sideways,
an arm's numbers stay on one line, the p column and "Approve the outcome" are in the pane; the
page image is zoomed until the quoted line is at least 12 CSS px high, with its highlight in view;
z shows the whole page and zooms back. A trial of six arms scrolls its outcome table in the
table's own box, never the page. Screenshots land in ``test-output/layout/`` (or
``EXTRACTION_TEST_ARTIFACTS``): look at them after changing the page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.verification.grounding import skeleton
from extraction_pipeline_tests.support.arms_case import ArmsTrial, TrialArm, make_arms_batch
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, extraction_json
from extraction_pipeline_tests.support.layout import READABLE_PX, SIZES, boxes, inside, line_heights
from extraction_pipeline_tests.support.review_case import extract_answered, parse_registered
from extraction_pipeline_tests.support.web import serving_pages

pytestmark = [pytest.mark.browser]
CHROMIUM = os.environ.get("EXTRACTION_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("EXTRACTION_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-output"))

NCT, RANDOMIZED = "NCT04188301", 39
ARMS = ("Dexmedetomidine", "Placebo")
TITLE = "Table 2. Outcomes at 24 hours, intention-to-treat population"
HEADER = ("Outcome", f"{ARMS[0]} (n=19)", f"{ARMS[1]} (n=20)", "MD (95% CI)", "p")
COLUMNS = (56, 196, 296, 396, 515)  # where each column starts, in points


@dataclass(frozen=True)
class Result:
    name: str
    means: tuple[float, float]
    sds: tuple[float, float]
    p: float
    ns: tuple[int, int] = (19, 20)

    @property
    def difference(self) -> float:
        return round(self.means[0] - self.means[1], 2)

    @property
    def ci(self) -> tuple[float, float]:
        return round(self.difference - 2.1, 2), round(self.difference + 2.1, 2)

    @property
    def cells(self) -> tuple[str, ...]:
        """Its row of the printed table: each arm's mean±SD (n), the mean difference with its CI, p."""
        arms = (f"{m:.2f}±{sd:.2f} ({n})" for m, sd, n in zip(self.means, self.sds, self.ns, strict=True))
        lower, upper = self.ci
        return (self.name, *arms, f"{self.difference:.2f} ({lower:.2f} to {upper:.2f})", f"{self.p:.3f}")

    @property
    def line(self) -> str:
        return " ".join(self.cells)


RESULTS = tuple(
    Result(name, (a, b), (sa, sb), p)
    for name, a, b, sa, sb, p in (
        ("Pain at rest (VAS)", 25.78, 31.02, 3.30, 4.12, 0.012),
        ("Pain on movement (VAS)", 38.40, 44.91, 5.02, 6.33, 0.004),
        ("Morphine use (mg)", 12.35, 18.70, 4.41, 5.90, 0.031),
        ("Sedation score", 2.10, 1.85, 0.61, 0.58, 0.214),
        ("Anxiety (STAI)", 41.20, 47.55, 8.10, 9.02, 0.048),
        ("Sleep quality (RCSQ)", 62.30, 55.10, 12.40, 13.05, 0.087),
        ("Time to extubation (h)", 6.45, 7.90, 1.82, 2.11, 0.026),
        ("Length of stay (days)", 4.20, 4.65, 1.10, 1.34, 0.255),
        ("Heart rate (bpm)", 71.30, 82.60, 9.40, 10.10, 0.001),
        ("Quality of recovery (QoR-15)", 118.40, 109.70, 14.20, 15.60, 0.071),
    )
)
INTRO = (
    "Dexmedetomidine versus placebo for recovery after cardiac surgery: a randomized, double-blind trial\n\n"
    f"This trial was registered at ClinicalTrials.gov ({NCT}). A total of {RANDOMIZED} patients were "
    "randomized in a 1:1 ratio to dexmedetomidine or placebo. All outcomes were measured at 24 hours."
)
RESULTS_TEXT = (
    "Results\nOutcomes at 24 hours are shown in Table 2. Pain at rest and on movement, morphine use, "
    "anxiety, time to extubation and heart rate were lower with dexmedetomidine."
)
DISCUSSION = "Discussion\nDexmedetomidine reduced pain and opioid use in the first day after surgery."


def write_report(path: Path) -> Path:
    """The trial's report: its registration on page 1; on page 2 a paragraph, then the results
    table in 7 pt type between three rules, one row per outcome, its cells in columns; page 3
    discusses it."""
    import pymupdf

    path.parent.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as doc:
        doc.new_page(width=595, height=842).insert_textbox(pymupdf.Rect(56, 56, 539, 786), INTRO, fontsize=11)
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 56, 539, 140), RESULTS_TEXT, fontsize=10)
        page.insert_text((56, 160), TITLE, fontsize=8, fontname="hebo")
        y = 178.0
        for cells, font in ((HEADER, "hebo"), *((result.cells, "helv") for result in RESULTS)):
            for x, text in zip(COLUMNS, cells, strict=True):
                page.insert_text((x, y), text, fontsize=7, fontname=font)
            y += 11 if font == "hebo" else 10
        for rule in (167.0, 181.0, y - 6):
            page.draw_line((56, rule), (539, rule), width=0.6)
        doc.new_page(width=595, height=842).insert_textbox(pymupdf.Rect(56, 56, 539, 786), DISCUSSION, fontsize=11)
        doc.save(path)
    return path


def answer() -> str:
    """The model's answer: the two arms, and per outcome each arm's mean, SD and n (quoted from
    its cell) and the printed comparison (quoted as its whole row, wider than the panel)."""
    values: dict[str, tuple[object, str | None]] = {
        "metadata.nct_number": (NCT, f"registered at ClinicalTrials.gov ({NCT})"),
        "metadata.randomized_n": (RANDOMIZED, f"A total of {RANDOMIZED} patients were randomized"),
    }
    for number, arm in enumerate(ARMS, start=1):
        values[f"arms.{number}.arm_name"] = (arm, HEADER[number])
        values[f"arms.{number}.randomized_n"] = ((19, 20)[number - 1], HEADER[number])
    for number, result in enumerate(RESULTS, start=1):
        for side, arm in enumerate(ARMS):
            entry = 2 * number - 1 + side
            values[f"outcomes.{entry}.outcome_name"] = (result.name, result.name)
            values[f"outcomes.{entry}.outcome_type"] = ("continuous", result.line)
            values[f"outcomes.{entry}.timepoint"] = ("24 hours", TITLE)
            values[f"outcomes.{entry}.arm"] = (arm, HEADER[1 + side])
            cell = result.cells[1 + side]
            values[f"outcomes.{entry}.mean"] = (result.means[side], cell)
            values[f"outcomes.{entry}.sd"] = (result.sds[side], cell)
            values[f"outcomes.{entry}.n"] = (result.ns[side], cell)
        lower, upper = result.ci
        values[f"comparisons.{number}.outcome_name"] = (result.name, result.name)
        values[f"comparisons.{number}.timepoint"] = ("24 hours", TITLE)
        values[f"comparisons.{number}.arm"] = (ARMS[0], HEADER[1])
        values[f"comparisons.{number}.comparator_arm"] = (ARMS[1], HEADER[2])
        values[f"comparisons.{number}.effect_measure"] = ("MD", HEADER[3])
        values[f"comparisons.{number}.effect_estimate"] = (result.difference, result.line)
        values[f"comparisons.{number}.ci_lower"] = (lower, result.line)
        values[f"comparisons.{number}.ci_upper"] = (upper, result.line)
        values[f"comparisons.{number}.p_value"] = (result.p, result.line)
    return extraction_json(values)


def six_arms() -> ArmsTrial:
    doses = [
        TrialArm(f"Haloperidol {dose} mg", f"haloperidol {dose} mg iv", 40 + dose, 12 - dose) for dose in range(1, 6)
    ]
    return ArmsTrial(8, (*doses, TrialArm("Saline", "saline iv", 44, 15)))


@dataclass(frozen=True)
class Site:
    base: str
    token: str  # Rita's personal token
    two_arms: str  # the document pages
    six_arms: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("layout")
    settings = Settings(home=home / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    fake = FakeLLMServer().start()
    try:
        pdf = write_report(home / "incoming" / "dexmedetomidine-trial.pdf")
        document = register_pdf(ledger, settings.documents_dir, "layout", pdf)
        batch_id = create_batch(
            ledger, idempotency_key="layout", project="layout", user="ann", document_ids=[document.id]
        ).id
        [item] = batch_item_rows(ledger, batch_id)
        parse_registered(settings, ledger, [document.sha256])
        extract_answered(settings, ledger, fake, document.sha256, item["id"], answer())
        [wide] = make_arms_batch(settings, ledger, fake, [six_arms()])
        token = add_user(ledger, "Rita", Role.REVIEWER)[1]
        with serving_pages(settings, None) as base:
            yield Site(
                base,
                token,
                f"{base}/extraction/batches/{batch_id}/documents/{item['id']}",
                f"{base}/extraction/batches/{wide.batch_id}/documents/{wide.item_id}",
            )
    finally:
        fake.stop()
        ledger.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required in CI: {CHROMIUM} is missing (./dev test installs it)")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = ARTIFACTS / "layout"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def _signed_in(browser: Any, site: Site, width: int, height: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{site.base}/extraction/signin")
    page.fill("input[name=token]", site.token)
    page.click("#signin-form button")
    page.wait_for_selector("#signed-in-user")
    return page


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_two_arm_trial_of_ten_outcomes_fits_and_its_quote_is_readable(
    site: Site, browser: Any, shots: Path, width: int, height: int
) -> None:
    page = _signed_in(browser, site, width, height)
    page.goto(f"{site.two_arms}?value=outcomes.1.mean")
    quote = boxes(page, "quote")
    page.screenshot(path=str(shots / f"{width}x{height}-quote.png"))
    # Nothing scrolls the window (the panes scroll), nor the form or its table sideways.
    scroll_width, scroll_height, inner_width, inner_height = quote["page"]
    assert scroll_width <= inner_width and scroll_height <= inner_height, quote["page"]
    assert quote["form"][0] <= quote["form"][1], quote["form"]
    assert quote["table"][0] <= quote["table"][1], quote["table"]
    # The table, every p-value and every "Approve the outcome" inside the pane, across (the pane
    # scrolls them into view down).
    assert len(quote["ends"]) == 2 * len(RESULTS)
    for box in (quote["tableBox"], *quote["ends"]):
        assert quote["pane"][0] <= box[0] and box[2] <= quote["pane"][2], (box, quote["pane"])
    # "← page 1" and "page 3 →" apart, not "← page 1page 3 →".
    [before, after] = quote["pages"]
    assert after[0] - before[2] >= 4, quote["pages"]
    # An arm's mean, SD and n on one line: never "— SD — n 19" over two.
    assert len(quote["nums"]) == 2 * len(RESULTS)
    assert all(line < 1.6 * cell for line, cell in quote["nums"]), quote["nums"]

    # The quoted cell of a 7 pt table, zoomed until readable, its highlight in view.
    assert quote["highlight"] and all(inside(box, quote["visible"]) for box in quote["highlight"]), quote
    assert min(line_heights(quote)) >= READABLE_PX, line_heights(quote)
    assert quote["sharp"]

    # z: the whole page across the panel, the highlight still in view; z again: the quote.
    page.keyboard.press("z")
    whole = boxes(page, "page")
    page.screenshot(path=str(shots / f"{width}x{height}-whole-page.png"))
    assert whole["image"][2] - whole["image"][0] <= whole["panel"][2] - whole["panel"][0] + 1, whole
    assert whole["image"][3] - whole["image"][1] <= whole["panel"][3] - whole["panel"][1] + 1, whole  # all of it
    assert all(inside(box, whole["visible"]) for box in whole["highlight"]), whole
    assert max(line_heights(whole)) < min(line_heights(quote))  # the default is the closer view
    # The figures of record (pytest -s shows them).
    print(
        f"{width}x{height}: page {quote['page']}, form {quote['form']}, table {quote['table']}, "
        f"quoted line {min(line_heights(quote)):.1f} px, whole page {max(line_heights(whole)):.1f} px, "
        f"image {[round(v) for v in whole['image']]} in panel {[round(v) for v in whole['panel']]}"
    )
    page.keyboard.press("z")
    again = boxes(page, "quote")
    assert min(line_heights(again)) >= READABLE_PX and all(inside(box, again["visible"]) for box in again["highlight"])

    # The last outcome's p, quoted as its whole row: shown whole where its lines stay readable that
    # way (a wide screen's panel), else the part of the highlight that prints the p-value.
    page.locator(".cell[data-path='comparisons.10.p_value']").click()
    row = boxes(page, "quote")
    page.screenshot(path=str(shots / f"{width}x{height}-row-quote.png"))
    assert len(row["texts"]) == len(row["highlight"]) == len(HEADER)  # one part per cell of the row
    assert min(line_heights(row)) >= READABLE_PX
    [p_part] = [
        box for box, text in zip(row["highlight"], row["texts"], strict=True) if text == skeleton(RESULTS[-1].cells[-1])
    ]
    assert inside(p_part, row["visible"]), (p_part, row["visible"])
    across = row["highlight"][-1][2] - row["highlight"][0][0]
    if across / min(line_heights(row)) * (READABLE_PX + 1) <= row["panel"][2] - row["panel"][0] - 48:
        assert all(inside(box, row["visible"]) for box in row["highlight"]), row
    assert row["page"][0] <= row["page"][2] and row["page"][1] <= row["page"][3]
    page.close()


def test_a_trial_of_six_arms_scrolls_its_table_not_the_page(site: Site, browser: Any, shots: Path) -> None:
    page = _signed_in(browser, site, 1366, 768)
    page.goto(site.six_arms)
    laid = boxes(page, "quote")
    page.locator("#outcomes").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "1366x768-six-arms.png"))
    assert laid["page"][0] <= laid["page"][2] and laid["form"][0] <= laid["form"][1], laid
    assert laid["table"][0] > laid["table"][1], laid["table"]  # the table's own box scrolls
    page.close()
