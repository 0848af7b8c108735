"""A value grounding verified but a check flagged is never counted or shown as plain `verified`:
the batch page counts it under "verified but flagged", the review page shows its status as
"verified, flagged" with the flag's sentence beside it, the workbook's Values sheet writes that
status with the check beside it, and the meta-analysis CSV's status column says the same, even
after a reviewer approved the value. A real trial PDF, really parsed and extracted through
litellm from the loopback fake model, a real SQLite ledger, the real app over HTTP, openpyxl
reading the workbook."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pytest

from extraction_pipeline.core.export.workbook import FLAG_FILL, default_export_path, write_workbook
from extraction_pipeline.core.extraction.grounded import GroundedValue, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import close_if_done, record_workbook
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.review import decisions
from extraction_pipeline.core.review.progress import batch_review
from extraction_pipeline.core.review.status_words import (
    Tier,
    shown_status,
    status_counts,
    tier,
    trusted,
)
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import SyntheticTrial
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_SUPPORTED,
    NOT_REPORTED,
    UNVERIFIED,
    VERIFIED,
)
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, extraction_json
from extraction_pipeline_tests.support.review_case import (
    OUTCOME_QUOTE,
    ReviewCase,
    arms_sentence,
    make_batch,
    synthesis_answer,
)
from extraction_pipeline_tests.support.web import serving_pages

TOKEN = "flagged-values-token-for-tests"
EVENTS = "outcomes.1.events"
NCT = "metadata.nct_number"


def flagged_answer(trial: SyntheticTrial) -> str:
    """The two arms, the hazard ratio, two RoB judgements, and one outcome entry whose events are
    the trial's whole randomized total, quoted from the sentence that prints it: every number is
    the paper's (verified), but the events exceed the arm's total (a check flags them)."""
    answer = json.loads(synthesis_answer(trial))
    arms = arms_sentence(trial)
    outcome = json.loads(
        extraction_json(
            {
                "outcomes.1.outcome_name": ("hospitalization or death", OUTCOME_QUOTE),
                "outcomes.1.arm": (trial.drug, arms),
                "outcomes.1.events": (trial.randomized_n, arms),
                "outcomes.1.total": (trial.randomized_n // 2, arms),
            }
        )
    )
    return json.dumps({**answer, **outcome})


def events_flag(trial: SyntheticTrial) -> str:
    return f"{trial.randomized_n} events exceed the {trial.randomized_n // 2} participants of the arm"


@dataclass
class Site:
    base: str
    case: ReviewCase

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKEN}", "Origin": self.base}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60)


def _serving(settings: Settings) -> contextlib.AbstractContextManager[str]:
    return serving_pages(settings, TOKEN)


@pytest.fixture
def site(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[Site]:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    [case] = make_batch(settings, ledger, fake_llm, [4], flagged_answer, project="flags")
    assert close_if_done(ledger, case.batch_id)
    path = write_workbook(ledger, case.batch_id, default_export_path(settings.exports_dir, case.batch_id))
    assert record_workbook(ledger, case.batch_id, str(path), 1)
    with _serving(settings) as base:
        yield Site(base, case)
    ledger.dispose()


def test_each_value_is_in_one_tier_and_only_an_unflagged_verified_one_is_trusted() -> None:
    def value(status: Any, *flags: str) -> GroundedValue:
        return GroundedValue(None, None, "f", 1, "q 1", status, 1.0, "", flags=flags)

    values = [
        value(VERIFIED),
        value(VERIFIED, "estimate 95 lies outside its own CI 0.60 to 0.86"),
        value(APPROXIMATE),
        value(APPROXIMATE, "a flag"),
        value(UNVERIFIED, "a flag"),
        value(JUDGEMENT_SUPPORTED, "a flag"),
        value(NOT_REPORTED),
    ]
    assert [trusted(v) for v in values] == [True, False, False, False, False, False, False]
    assert [tier(v) for v in values] == [
        Tier.VERIFIED,
        Tier.VERIFIED_FLAGGED,
        Tier.APPROXIMATE,
        Tier.APPROXIMATE,
        Tier.UNVERIFIED,
        Tier.JUDGEMENT,
        None,
    ]
    assert [shown_status(v) for v in values[:2]] == ["verified", "verified, flagged"]
    counts = status_counts(values)
    assert (counts.verified, counts.verified_flagged, counts.approximate, counts.approximate_flagged) == (1, 1, 2, 1)
    assert (counts.unverified, counts.judgements, counts.total) == (1, 1, 6)  # "not reported" in no tier
    assert counts.summary() == (
        "1 verified · 1 verified but flagged · 2 approximate (1 flagged) · 1 unverified · 1 judgement"
    )


def stored_values(case: ReviewCase) -> dict[str, GroundedValue]:
    """The document's values as the ledger holds them (the statuses and flags every surface reads)."""
    [item] = batch_item_rows(case.ledger, case.batch_id)
    fields = fields_of(json.loads(item["result_json"] or "{}"))
    return {path: entry for path, entry in fields.items() if entry.reviewable}


def expected_counts(case: ReviewCase) -> dict[str, int]:
    """Counted here by the statuses and flags themselves (no helper of the code under test): each
    value in one column; verified only without a flag. The checks may flag more than the events
    (those of place and arithmetic), so the numbers come from what the ledger holds."""
    values = list(stored_values(case).values())
    verified = [v for v in values if v.status == VERIFIED]
    return {
        "verified": sum(1 for v in verified if not v.flags),
        "verified-flagged": sum(1 for v in verified if v.flags),
        "approximate": sum(1 for v in values if v.status == APPROXIMATE),
        "unverified": sum(1 for v in values if v.status == UNVERIFIED),
        "judgements": sum(1 for v in values if str(v.status).startswith("judgement")),
    }


def test_the_answer_has_a_verified_value_a_check_flags(site: Site) -> None:
    events = stored_values(site.case)[EVENTS]
    assert events.status == VERIFIED and events_flag(site.case.trial) in events.flags
    assert stored_values(site.case)[NCT].status == VERIFIED and not stored_values(site.case)[NCT].flags


def _row_counts(page: str) -> dict[str, int]:
    return {name: int(number) for name, number in re.findall(r'<td class="count-([a-z-]+)">(\d+)', page)}


def test_the_batch_page_counts_a_flagged_verified_value_as_verified_but_flagged(site: Site) -> None:
    [review] = batch_review(site.case.ledger, site.case.batch_id)
    expected = expected_counts(site.case)
    assert expected["verified-flagged"] >= 1 and expected["judgements"] == 5  # two RoB levels, three arm references
    counts = review.counts
    assert (counts.verified, counts.verified_flagged) == (expected["verified"], expected["verified-flagged"])
    assert counts.total == review.values == 18  # one partition: every value counted once
    with site.client() as client:
        page = client.get(f"/extraction/batches/{site.case.batch_id}").text
    head = re.search(r'<table id="documents">\s*<thead>(.*?)</thead>', page, re.S)
    assert head is not None
    columns = [html.unescape(name) for name in re.findall(r"<th[^>]*>([^<]*)</th>", head.group(1))]
    assert columns[2:7] == ["verified", "verified but flagged", "approximate", "unverified", "judgements"]
    assert "flagged" not in columns[7:]  # no second count of the same values
    assert "a flagged one is counted here too" in html.unescape(head.group(1))  # where approximate+flag goes
    assert _row_counts(page) == expected


def test_the_review_page_shows_the_flag_in_its_sentence_and_never_plain_verified(site: Site) -> None:
    case = site.case
    with site.client() as client:
        page = client.get(f"/extraction/batches/{case.batch_id}/documents/{case.item_id}").text
    cell = re.search(rf'<a class="cell ([^"]*)"[^>]*data-path="{EVENTS}"[^>]*title="([^"]*)"', page, re.S)
    assert cell is not None
    assert "flagged" in cell.group(1).split() and "verified" not in cell.group(1).split()
    title = html.unescape(cell.group(2))
    assert "· verified, flagged · check: " in title and f"check: {events_flag(case.trial)}" in title
    detail = re.search(rf'<div class="detail" data-path="{EVENTS}"[^>]*>(.*?)<div class="actions">', page, re.S)
    assert detail is not None
    shown = html.unescape(detail.group(1))
    assert '<span class="pill machine-status flagged">verified, flagged</span>' in shown
    assert f'<div class="flag-note">⚑ check: {events_flag(case.trial)}</div>' in shown
    counts = re.search(r'<span id="status-counts"[^>]*>([^<]*)</span>', page)
    assert counts is not None
    expected = expected_counts(case)
    assert html.unescape(counts.group(1)).startswith(
        f"{expected['verified']} verified · {expected['verified-flagged']} verified but flagged · "
    )
    # An unflagged verified value still reads plain "verified".
    nct = re.search(rf'<div class="detail" data-path="{NCT}"[^>]*>(.*?)</div>', page, re.S)
    assert nct is not None and '<span class="pill machine-status verified">verified</span>' in nct.group(1)


def test_the_workbook_writes_verified_flagged_with_the_flags_sentence_beside_it(site: Site) -> None:
    case = site.case
    with site.client() as client:
        download = client.get(f"/extraction/batches/{case.batch_id}/workbook.xlsx")
    assert download.status_code == 200
    book = openpyxl.load_workbook(io.BytesIO(download.content))
    values = book["Values"]
    header = [c.value for c in values[1]]
    assert header.index("check") == header.index("status") + 1  # the flag always beside the status
    every = list(values.iter_rows(min_row=2))
    rows = {(r[header.index("module")].value, r[header.index("field")].value): r for r in every}
    events = rows[("outcomes", "events")]
    assert events[header.index("status")].value == "verified, flagged"
    assert events_flag(case.trial) in events[header.index("check")].value.split("; ")
    assert events[header.index("final status")].value == "verified, flagged"
    assert events[header.index("status")].fill.start_color.rgb.endswith(FLAG_FILL)  # orange, never green
    nct = rows[("metadata", "nct_number")]
    assert nct[header.index("status")].value == "verified" and nct[header.index("check")].value is None
    statuses = [r[header.index("status")].value for r in every]
    expected = expected_counts(case)
    assert statuses.count("verified") == expected["verified"]
    assert statuses.count("verified, flagged") == expected["verified-flagged"]
    documents = book["Documents"]
    doc_header = [c.value for c in documents[1]]
    [row] = [[c.value for c in r] for r in documents.iter_rows(min_row=2)]
    assert "values flagged" not in doc_header
    assert row[doc_header.index("values verified")] == expected["verified"]
    assert row[doc_header.index("values verified but flagged")] == expected["verified-flagged"]
    assert row[doc_header.index("judgements")] == 5
    outcomes = book["Outcomes"]
    out_header = [c.value for c in outcomes[1]]
    [outcome] = [[c.value for c in r] for r in outcomes.iter_rows(min_row=2)]
    assert outcome[out_header.index("events status")] == "verified, flagged"
    assert events_flag(case.trial) in outcome[out_header.index("events check")].split("; ")
    legend = {r[0]: r[1] for r in book["Batch"].iter_rows(values_only=True) if r and r[0]}
    assert "never counted as verified" in legend["verified, flagged"]
    assert "no check raised a flag" in legend["verified"]


def test_the_csv_status_of_a_flagged_number_is_not_verified_even_when_approved(site: Site) -> None:
    case = site.case

    def arm_row() -> dict[str, str]:
        with site.client() as client:
            text = client.get(f"/extraction/batches/{case.batch_id}/meta-analysis.csv").text
        [row] = [r for r in csv.DictReader(io.StringIO(text)) if r["xi"]]
        return row

    row = arm_row()
    assert (row["xi"], row["status_xi"]) == (str(case.trial.randomized_n), "verified, flagged")
    assert row["status_ni"] in ("verified", "verified, flagged")  # never anything else: its quote is the paper's
    decisions.record(case.ledger, item_id=case.item_id, path=EVENTS, action="approve", reviewer="Rita", seen_seq=0)
    approved = arm_row()
    assert approved["decision_xi"] == "approve by Rita" and approved["status_xi"] == "verified, flagged"
