"""The project and review pages over real HTTP (uvicorn on a loopback port, a real home with a
really extracted document): upload with per-file verdicts, template edits, batch launch, decisions,
the page image, the reviewed workbook, cross-site posts and path tricks refused, the token gate."""

from __future__ import annotations

import contextlib
import html
import http.client
import io
import json
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import httpx
import openpyxl
import pymupdf
import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.export.workbook import default_export_path, write_workbook
from extraction_pipeline.core.extraction.follow_up import follows_up
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import close_if_done, create_batch, get_batch, record_workbook
from extraction_pipeline.core.ledger.queries import batch_item_rows, project_documents, recent_batches
from extraction_pipeline.core.ledger.templates import latest_version
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.review import decisions
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support import pdf_samples
from extraction_pipeline_tests.support.arms_case import make_arms_batch, three_arm_trial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import ReviewCase, make_case
from extraction_pipeline_tests.support.web import serving_pages

TOKEN = "review-token-for-tests"


@dataclass
class Site:
    base: str
    case: ReviewCase

    tokens: dict[str, str]  # personal tokens: Ada (admin), Rita (reviewer)

    def client(self, *, token: str | None = TOKEN, origin: bool = True, user: str | None = "Ada") -> httpx.Client:
        """A browser-like client behind the instance token, signed in as ``user`` through the
        sign-in page (a session cookie), or not signed in (``user=None``)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if origin:
            headers["Origin"] = self.base
        cookies = {}
        if user is not None:
            signed = httpx.post(
                f"{self.base}/extraction/signin",
                data={"token": self.tokens[user]},
                headers={**headers, "Origin": self.base},
                timeout=60,
            )
            assert signed.status_code == 303, signed.text
            cookies["extraction_session"] = signed.cookies["extraction_session"]
        return httpx.Client(base_url=self.base, headers=headers, cookies=cookies, timeout=60)


def _serving(settings: Settings) -> contextlib.AbstractContextManager[str]:
    return serving_pages(settings, TOKEN)


@pytest.fixture
def site(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[Site]:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    case = make_case(settings, ledger, fake_llm)
    assert close_if_done(ledger, case.batch_id)
    path = write_workbook(ledger, case.batch_id, default_export_path(settings.exports_dir, case.batch_id))
    assert record_workbook(ledger, case.batch_id, str(path), 1)
    tokens = {name: add_user(ledger, name, role)[1] for name, role in (("Ada", Role.ADMIN), ("Rita", Role.REVIEWER))}
    with _serving(settings) as base:
        yield Site(base, case, tokens)
    ledger.dispose()


def _pdf_bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_upload_registers_good_files_and_names_each_bad_one(site: Site, tmp_path: Path) -> None:
    good = [write_report(make_trial(i), tmp_path / "src") for i in (11, 12)]
    broken = pdf_samples.write(tmp_path / "src", "broken.pdf", b"%PDF-1.7\n1 0 obj\n<<")
    with site.client() as client:
        assert client.post("/extraction/projects", data={"project": "statins"}).status_code == 303
        files = [("pdfs", (p.name, _pdf_bytes(p), "application/pdf")) for p in (*good, broken)]
        files.append(("pdfs", ("../../evil name.pdf", _pdf_bytes(good[0]), "application/pdf")))
        response = client.post("/extraction/projects/statins/documents", files=files)
        # Post, redirect, get: the verdicts are on the page the browser is sent to, and a reload
        # of that page uploads nothing again.
        assert response.status_code == 303 and response.headers["location"] == "/extraction/projects/statins"
        page = html.unescape(client.get(response.headers["location"]).text)
        again = html.unescape(client.get(response.headers["location"]).text)
    assert "2 of 4 file(s) registered by Ada; 1 already registered (a duplicate, stored once); 1 refused" in page
    assert "broken.pdf</td><td><strong>refused</strong></td><td>truncated or damaged PDF" in page
    # The same bytes under another name: said as a duplicate, in the row and in the summary.
    duplicate = r'class="upload-duplicate"><td>[^<]*evil name\.pdf</td><td>duplicate</td><td>already registered as'
    assert re.search(duplicate, page)
    assert "upload-results" not in again and "file(s) registered" not in again  # said once
    names = sorted(d["filename"] for d in project_documents(site.case.ledger, "statins"))
    assert names == ["trial-011.pdf", "trial-012.pdf"]
    # A paper whose PDF says what it is is listed by its first author, year and title.
    described = tmp_path / "src" / "joo.pdf"
    with pymupdf.open() as doc:
        doc.new_page().insert_text((72, 72), "Received 3 May 2016. Trials 2016, 17:120.", fontsize=10)
        doc.set_metadata({"title": "Dexamethasone and haloperidol for PONV", "author": "Jin Joo, Kim Lee"})
        doc.save(described)
    with site.client() as client:
        client.post("/extraction/projects/statins/documents", files=[("pdfs", ("joo.pdf", described.read_bytes()))])
        listed = client.get("/extraction/projects/statins").text
    row = re.search(r'<tr class="document">(?:(?!</tr>).)*joo\.pdf(?:(?!</tr>).)*</tr>', listed, re.S)
    assert row is not None
    cells = [html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(), re.S)]
    assert cells[2:5] == ["Joo 2016", "Dexamethasone and haloperidol for PONV", "1"]
    staged = site.case.settings.home_dir / "uploads"
    assert not any(staged.rglob("*.pdf"))  # staged copies removed; stored copies live in documents/
    assert page.lower().count("no model configured") == 1  # what the offline extractor is for, said once


def test_an_upload_over_the_size_cap_is_never_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = 1024 * 1024
    settings = Settings(home=tmp_path / "home", max_pdf_mb=1)
    settings.home_dir.mkdir(parents=True)
    spool = tmp_path / "spool"  # where a parser that buffers the body would put it
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    good = write_report(make_trial(21), tmp_path / "src")
    boundary = "----cap-boundary-5f1e"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="pdfs"; filename="huge.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n%PDF-1.7\n"
    ).encode()
    tail = (
        (
            f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="pdfs"; filename="{good.name}"\r\n'
            "Content-Type: application/pdf\r\n\r\n"
        ).encode()
        + good.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    chunk, chunks = b"0" * cap, 5

    def written() -> int:
        return sum(f.stat().st_size for d in (settings.home_dir, spool) for f in d.rglob("*") if f.is_file())

    ledger = Ledger.connect(settings.ledger_url)
    _, personal = add_user(ledger, "Uma", Role.REVIEWER)
    with _serving(settings) as base:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}", "Origin": base}) as client:
            assert client.post("/extraction/signin", data={"token": personal}).status_code == 303
            session = client.cookies["extraction_session"]
            assert client.post("/extraction/projects", data={"project": "big"}).status_code == 303
        before = written()  # the ledger and the project so far
        connection = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=60)
        connection.putrequest("POST", "/extraction/projects/big/documents")
        for name, value in (
            ("Authorization", f"Bearer {TOKEN}"),
            ("Cookie", f"extraction_session={session}"),
            ("Origin", base),
            ("Content-Type", f"multipart/form-data; boundary={boundary}"),
            ("Content-Length", str(len(head) + chunks * len(chunk) + len(tail))),
        ):
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(head)
        most = 0
        for _ in range(chunks):
            connection.send(chunk)
            time.sleep(0.4)  # the server has read what was sent
            most = max(most, written() - before)
        connection.send(tail)
        response = connection.getresponse()
        page = response.read().decode()
        connection.close()
    assert response.status == 303, page
    assert most <= cap  # 5 MB sent, never more than the cap on disk
    said = unquote(response.getheader("set-cookie") or "")  # the verdicts, for the page redirected to
    assert "1 of 2 file(s) registered by Uma" in said and f"larger than the limit of {cap} bytes" in said
    assert [d["filename"] for d in project_documents(ledger, "big")] == [good.name]
    ledger.dispose()
    assert not any((settings.home_dir / "uploads").rglob("*.pdf"))


def test_unknown_addresses_and_ids_out_of_range_are_our_404(site: Site) -> None:
    with site.client() as client:
        for path in (
            f"/extraction/batches/{2**63}",  # past a 64-bit id: no database error
            "/extraction/batches/99999999999999999999/documents/1",
            f"/extraction/items/{2**64}/page.png",
            "/extraction/no-such-page",
            "/extraction/projects/never-created",
        ):
            response = client.get(path)
            assert response.status_code == 404, path
            assert "dagster ui" not in response.text  # never Dagster's page in place of ours
        assert "unknown project 'never-created'" in html.unescape(client.get("/extraction/projects/never-created").text)
        assert client.post("/extraction/projects/never-created/template", data={"template": "{}"}).status_code == 404
    assert latest_version(site.case.ledger, "never-created") is None  # visiting an address creates nothing


def test_project_names_and_posts_from_other_sites_are_refused(site: Site) -> None:
    with site.client() as client:
        assert client.post("/extraction/projects", data={"project": "../etc"}).status_code == 400
        assert client.post("/extraction/projects", data={"project": "has space"}).status_code == 400
        for bad in ("..", "%2e%2e", "a%2Fb", "%00"):
            response = client.get(f"/extraction/projects/{bad}")
            # Either refused, or the client normalized the path to another page: never a project page.
            assert response.status_code in (404, 200) and "root:" not in response.text
            assert "<h1>Project " not in response.text
    with site.client(origin=False) as client:
        assert client.post("/extraction/projects", data={"project": "x"}).status_code == 403
        evil = client.post("/extraction/projects", data={"project": "x"}, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403
    assert not latest_version(site.case.ledger, "x")


def test_template_edit_saves_a_version_and_explains_a_bad_one(site: Site) -> None:
    field = {"name": "blinding", "type": "choice", "instruction": "who was blinded", "choices": ["none", "double"]}
    with site.client(user="Rita") as client:  # a reviewer may not change what is extracted
        edit = {"template": json.dumps({"custom_fields": [field]})}
        refused = client.post("/extraction/projects/p/template", data=edit)
        assert refused.status_code == 403 and "only an admin" in refused.text
    before = latest_version(site.case.ledger, "p")
    assert before is not None and not before.definition.custom_fields
    with site.client() as client:
        saved = client.post(
            "/extraction/projects/p/template", data={"template": json.dumps({"custom_fields": [field]})}
        )
        assert saved.status_code == 200 and "saved by Ada; new batches use it" in saved.text
        bad = client.post("/extraction/projects/p/template", data={"template": '{"custom_fields": [{"name": "X"}]}'})
        assert bad.status_code == 400 and "field name 'X'" in html.unescape(bad.text)
        not_json = client.post("/extraction/projects/p/template", data={"template": "{"})
        assert not_json.status_code == 400 and "not valid JSON" in not_json.text
    current = latest_version(site.case.ledger, "p")
    assert current is not None and [f.name for f in current.definition.custom_fields] == ["blinding"]


def test_start_batch_goes_through_the_ledger_as_the_signed_in_user(site: Site, tmp_path: Path) -> None:
    ledger = site.case.ledger
    [doc] = [d["id"] for d in project_documents(ledger, "p")]
    with site.client(user=None) as client:  # behind the instance token, but nobody signed in
        anonymous = client.post("/extraction/projects/p/batches", data={"document": str(doc), "user": "Ann Lee"})
        assert anonymous.status_code == 401 and "sign in first" in anonymous.text
    with site.client(user="Rita") as client:
        foreign = client.post("/extraction/projects/p/batches", data={"document": "999"})
        assert foreign.status_code == 400 and "not in project p" in foreign.text
        # A typed name is ignored: the batch is the signed-in reviewer's.
        form = {"document": str(doc), "user": "Ann Lee", "request_id": "form-1"}
        first = client.post("/extraction/projects/p/batches", data=form)
        again = client.post("/extraction/projects/p/batches", data=form)  # a double click
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"]
    batch_id = int(first.headers["location"].split("/")[3].split("?")[0])
    batch = get_batch(ledger, batch_id)
    assert batch is not None and batch["user"] == "Rita" and batch["total_items"] == 1
    assert len([b for b in recent_batches(ledger) if b["project"] == "p"]) == 2
    with site.client() as client:
        page = client.get(first.headers["location"])
    assert "runs in the Dagster UI" in page.text and batch["uid"] in page.text


def test_banners_say_what_is_true_now(site: Site) -> None:
    """The "batch N started" banner is shown once, not on every reload while the batch runs; a
    document from which nothing was extracted says so on its page and is never counted reviewed."""
    ledger = site.case.ledger
    [doc] = [d["id"] for d in project_documents(ledger, "p")]
    with site.client(user="Rita") as client:
        started = client.post("/extraction/projects/p/batches", data={"document": str(doc)})
        assert started.status_code == 303
        batch_page = started.headers["location"].split("?")[0]
        first = client.get(batch_page)
        assert "started by Rita with 1 document(s)" in first.text
        again = client.get(batch_page)  # the page reloading itself, or the user coming back
        assert "started by Rita with" not in again.text and 'data-waiting="true"' in again.text
    batch_id = int(batch_page.rsplit("/", 1)[1])
    [item] = batch_item_rows(ledger, batch_id)
    assert not follows_up(ledger, item["id"])  # the follow-up question is opt-in
    with site.client(user="Rita") as client:
        asked = client.post(
            "/extraction/projects/p/batches", data={"document": str(doc), "follow_up": "on", "request_id": "asks"}
        )
        [asking] = batch_item_rows(ledger, int(asked.headers["location"].split("?")[0].rsplit("/", 1)[1]))
        assert follows_up(ledger, asking["id"])
    states.claim(ledger, item["id"], run_id="r", worker="w")
    states.complete(ledger, item["id"], run_id="r", result={"fields": {}}, usage=Usage("openai/x"))
    assert close_if_done(ledger, batch_id)
    with site.client(user="Rita") as client:
        listing = html.unescape(client.get(batch_page).text)
        document = html.unescape(client.get(f"{batch_page}/documents/{item['id']}").text)
    assert "nothing extracted — check the paper" in listing and "reviewed by" not in listing
    assert 'id="nothing-extracted"' in document and "Nothing was extracted from this document" in document
    assert "nothing extracted — check the paper" in document  # the review state, never "reviewed"


def test_an_open_batchs_page_says_what_its_documents_wait_for(site: Site) -> None:
    from extraction_pipeline.core.ledger.budgets import configure, reserve

    ledger = site.case.ledger
    [doc] = [d["id"] for d in project_documents(ledger, "p")]
    with site.client() as client:
        created = client.post("/extraction/projects/p/batches", data={"document": str(doc), "user": "ann"})
        assert created.status_code == 303
        batch_page = created.headers["location"].split("?")[0]
        assert "waiting for" not in html.unescape(client.get(batch_page).text)
        configure(ledger, "openai/gpt-4o-mini", tokens_per_minute=40_000, requests_per_minute=None)
        reserve(ledger, "openai/gpt-4o-mini", 38_000)
        reserve(ledger, "openai/gpt-4o-mini", 10_000)  # beyond the minute's allowance: this call waits
        page = html.unescape(client.get(batch_page).text)
    assert "waiting for openai/gpt-4o-mini's token budget: 40k of 40k tokens/min in use" in page


def test_an_account_without_credit_is_named_on_the_batch_page_and_the_next_document_sends_nothing(
    site: Site,
) -> None:
    """OpenAI's 429 ``insufficient_quota``, met by a real extraction of the page's batch: the batch
    page says the account has no credit left, and new calls are paused (no retry spent on it)."""
    from extraction_pipeline.core.errors import QuotaExhaustedError
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.llm.gateway import LLMConfig
    from extraction_pipeline.core.pdf.parsing import parse_document
    from extraction_pipeline_tests.support.providers import OpenAIFake, Reply

    ledger = site.case.ledger
    [doc] = [d["id"] for d in project_documents(ledger, "p")]
    with site.client() as client, OpenAIFake() as fake:
        created = client.post("/extraction/projects/p/batches", data={"document": str(doc), "user": "ann"})
        batch_page = created.headers["location"].split("?")[0]
        [item] = batch_item_rows(ledger, int(batch_page.rstrip("/").rsplit("/", 1)[1]))
        parsed = parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])
        llm = LLMConfig(model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test", timeout_seconds=10)
        fake.push(Reply(status=429, error="insufficient_quota"))
        with pytest.raises(QuotaExhaustedError):
            extract_item(ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=llm)
        page = html.unescape(client.get(batch_page).text)
        sent = len(fake.requests)
        again = extract_item(ledger, item_id=item["id"], run_id="r2", worker="w", parsed=parsed, llm=llm)
    assert "waiting for the provider openai/gpt-4o-mini" in page
    assert "the provider says the account has no credit left: You exceeded your current quota" in page
    assert "new calls paused until" in page
    assert again.status == "waiting" and len(fake.requests) == sent == 1  # nothing sent, no retry spent


def test_review_pages_record_decisions_and_show_the_highlighted_page(site: Site) -> None:
    case = site.case
    batch_page = f"/extraction/batches/{case.batch_id}"
    document_page = f"{batch_page}/documents/{case.item_id}"
    with site.client(user=None) as anonymous:
        listing = anonymous.get(batch_page)
        assert listing.status_code == 200 and "not yet reviewed (0 of 6 values decided)" in listing.text
        said = re.search(r'id="extracted-with">([^<]*)<', listing.text)  # which model, which template
        assert said is not None and re.fullmatch(r"Extracted by \S+ · template p v\d+ \(rct base v\d+\)", said.group(1))
        page = anonymous.get(document_page).text
        cells = re.findall(r'<a class="cell (?!absent)([^"]*)"[^>]*data-path="([^"]+)"', page)
        assert len(cells) == 6  # every value the model gave, each a cell of the form
        assert [path for css, path in cells if "current" in css] == ["comparisons.1.ci_lower"]  # the forged one first
        assert "unverified" in dict((path, css) for css, path in cells)["comparisons.1.ci_lower"]
        no_name = anonymous.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "metadata.nct_number", "action": "approve", "seen_seq": "0"},
        )
        assert no_name.status_code == 401 and "sign in first" in no_name.text
        assert decisions.current_decisions(case.ledger, case.batch_id) == {}
    with site.client(user="Rita") as client:
        approved = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "metadata.nct_number", "action": "approve", "seen_seq": "0"},
        )
        assert approved.status_code == 303 and "value=" in approved.headers["location"]
        stale = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "metadata.nct_number", "action": "not reported", "seen_seq": "0"},
        )
        followed = client.get(stale.headers["location"])
        assert "Rita decided 'approve'" in html.unescape(followed.text) and "not overwritten" in followed.text
        image = client.get(
            f"/extraction/items/{case.item_id}/page.png", params={"path": "comparisons.1.effect_estimate"}
        )
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
        assert len(json.loads(image.headers["x-highlight-rects"])) == 2
        odd = client.get(f"/extraction/items/{case.item_id}/page.png", params={"path": "../../etc/passwd"})
        assert odd.status_code == 200 and json.loads(odd.headers["x-highlight-rects"]) == []
        assert client.get(f"/extraction/items/{case.item_id}/page.png", params={"page": "9"}).status_code == 404
        assert client.get("/extraction/items/999/page.png").status_code == 404
    current = decisions.current_decisions(case.ledger, case.batch_id)
    assert [(d.action, d.reviewer) for d in current.values()] == [("approve", "Rita")]


def test_the_workbook_download_carries_the_decisions_and_stays_the_same_file(site: Site) -> None:
    case = site.case
    original = default_export_path(case.settings.exports_dir, case.batch_id).read_bytes()
    decisions.record(
        case.ledger,
        item_id=case.item_id,
        path="comparisons.1.ci_lower",
        action="not reported",
        reviewer="Rita",
        seen_seq=0,
    )
    with site.client() as client:
        first = client.get(f"/extraction/batches/{case.batch_id}/workbook.xlsx")
        second = client.get(f"/extraction/batches/{case.batch_id}/workbook.xlsx")
    assert first.status_code == 200 and first.content == second.content
    sheet = openpyxl.load_workbook(io.BytesIO(first.content))["Values"]
    header = [c.value for c in sheet[1]]
    decided = [r for r in sheet.iter_rows(min_row=2, values_only=True) if r[header.index("decided by")] == "Rita"]
    assert len(decided) == 1 and decided[0][header.index("decision")] == "not reported"
    assert default_export_path(case.settings.exports_dir, case.batch_id).read_bytes() == original


@contextlib.contextmanager
def _signed_in(base: str, ledger: Ledger, name: str) -> Iterator[httpx.Client]:
    _user, personal = add_user(ledger, name, Role.REVIEWER)
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": base}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        assert client.post("/extraction/signin", data={"token": personal}).status_code == 303
        yield client


def _arm_columns(page: str, table: str) -> list[str]:
    head = re.search(rf'<table class="{table}"[^>]*>\s*<thead>(.*?)</thead>', page, re.S)
    assert head is not None, table
    return [html.unescape(label) for label in re.findall(r'<th[^>]*data-arm="[^"]+"[^>]*>([^<]*)</th>', head.group(1))]


def _numbers_under(page: str, outcome: str) -> dict[str, list[str]]:
    """Arm column -> the value paths shown in it, for one outcome's row group."""
    group = re.search(rf'<tbody class="outcome" data-outcome="{re.escape(outcome)}">(.*?)</tbody>', page, re.S)
    assert group is not None, outcome
    found: dict[str, list[str]] = {}
    for arm, cell in re.findall(r'<td class="arm-numbers" data-arm="([^"]+)">(.*?)</td>', group.group(1), re.S):
        paths = re.findall(r'data-path="([^"]+)"', cell)
        if paths:  # an arm without numbers for the outcome shows a dash
            found[arm] = paths
    return found


def test_a_three_arm_paper_is_reviewed_arm_by_arm_and_numbers_reassigned(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    [case] = make_arms_batch(settings, ledger, fake_llm, [three_arm_trial()])
    document = f"/extraction/batches/{case.batch_id}/documents/{case.item_id}"
    with _serving(settings) as base, _signed_in(base, ledger, "Rita") as client:
        page = client.get(document).text
        arms = ["Haloperidol 1 mg", "Haloperidol 2 mg", "Saline"]
        assert _arm_columns(page, "arms") == arms and _arm_columns(page, "outcomes") == arms
        # One row group per outcome, one column group per arm, the comparisons under it.
        assert _numbers_under(page, "outcomes.1") == {
            "arms.1": ["outcomes.1.events", "outcomes.1.total", "outcomes.1.arm"],
            "arms.2": ["outcomes.2.events", "outcomes.2.total", "outcomes.2.arm", *_own(2)],
            "arms.3": ["outcomes.3.events", "outcomes.3.total", "outcomes.3.arm", *_own(3)],
        }
        comparisons = re.findall(r'<tr class="comparison" data-comparison="([^"]+)">', page)
        assert comparisons == ["comparisons.1", "comparisons.2"]
        cells = re.findall(r'<a class="cell (?!absent)[^"]*"[^>]*data-path="([^"]+)"', page)
        values = [path for path in cells if path]
        assert len(values) == len(set(values)) == len(re.findall(r'<div class="detail" data-path=', page))
        # The arm reference's panel offers the study's arms, the one it names now selected.
        panel = re.search(r'<div class="detail" data-path="outcomes.2.arm".*?</select>', page, re.S)
        assert panel is not None
        options = re.findall(r'<option value="([^"]+)"( selected)?>', panel.group(0))
        assert options == [("Haloperidol 1 mg", ""), ("Haloperidol 2 mg", " selected"), ("Saline", "")]
        moved = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "outcomes.2.arm", "action": "correct", "seen_seq": "0", "value": "Haloperidol 1 mg"},
        )
        assert moved.status_code == 303
        after = client.get(moved.headers["location"]).text
        assert "outcome 2 · arm: correct recorded" in html.unescape(after)
        # The 2 mg arm's numbers now stand under the 1 mg arm: a row of their own (1 mg has its numbers already).
        assert list(_numbers_under(after, "outcomes.1")) == ["arms.1", "arms.3"]
        assert list(_numbers_under(after, "outcomes.2")) == ["arms.1"]
        refused = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "outcomes.2.arm", "action": "correct", "seen_seq": "1", "value": "Haloperidol 5 mg"},
        )
        shown = html.unescape(client.get(refused.headers["location"]).text)
        assert "'Haloperidol 5 mg' is not an arm of this study" in shown
        back = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={"path": "outcomes.2.arm", "action": "correct", "seen_seq": "1", "value": "Haloperidol 2 mg"},
        )
        assert back.status_code == 303
        assert list(_numbers_under(client.get(document).text, "outcomes.1")) == ["arms.1", "arms.2", "arms.3"]
        # "Approve the outcome" approves its arms' numbers and its comparisons, each its own decision.
        group = re.search(r'<tbody class="outcome" data-outcome="outcomes.1">(.*?)</tbody>', page, re.S)
        assert group is not None
        paths = re.findall(r'<input type="hidden" name="path" value="([^"]+)">', group.group(1))
        assert {"outcomes.3.events", "comparisons.2.ci_upper"} <= set(paths)
        approved = client.post(
            f"/extraction/items/{case.item_id}/decisions", data={"action": "approve-row", "path": paths}
        )
        assert approved.status_code == 303
    current = decisions.current_decisions(ledger, case.batch_id)
    assert current[(case.item_id, "comparisons.2.ci_upper")].action == "approve"
    assert [(d.reviewer, d.value) for (_, path), d in current.items() if path == "outcomes.2.arm"] == [
        ("Rita", "Haloperidol 2 mg")
    ]
    ledger.dispose()


def _own(entry: int) -> list[str]:
    """An entry's own name and time point, shown beside its numbers when not the row's first entry."""
    return [f"outcomes.{entry}.{name}" for name in ("outcome_name", "outcome_type", "timepoint")]


def test_a_version_1_document_keeps_its_two_arm_form(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    case = make_case(settings, ledger, fake_llm, version=1)
    with _serving(settings) as base, _signed_in(base, ledger, "Rita") as client:
        page = client.get(f"/extraction/batches/{case.batch_id}/documents/{case.item_id}").text
        cells = re.findall(r'<a class="cell (?!absent)([^"]*)"[^>]*data-path="([^"]+)"', page)
        assert len(cells) == 6 and [path for css, path in cells if "current" in css] == ["outcomes.1.ci_lower"]
        assert _arm_columns(page, "outcomes") == ["treatment", "control"]
        assert re.findall(r'<tr class="comparison" data-comparison="([^"]+)">', page) == ["outcomes.1"]
        assert "<select" not in page  # nothing to reassign: version 1 names no arms per entry
        fixed = client.post(
            f"/extraction/items/{case.item_id}/decisions",
            data={
                "path": "outcomes.1.ci_lower",
                "action": "correct",
                "seen_seq": "0",
                "value": str(case.trial.ci_lower),
            },
        )
        assert fixed.status_code == 303
    [decided] = decisions.current_decisions(ledger, case.batch_id).values()
    assert (decided.path, decided.value) == ("outcomes.1.ci_lower", case.trial.ci_lower)
    ledger.dispose()


def test_every_project_page_needs_the_token(site: Site) -> None:
    case = site.case
    paths = [
        "/extraction/projects",
        "/extraction/projects/p",
        f"/extraction/batches/{case.batch_id}",
        f"/extraction/batches/{case.batch_id}/documents/{case.item_id}",
        f"/extraction/items/{case.item_id}/page.png",
    ]
    with site.client(token=None, user=None) as client:
        for path in paths:
            assert client.get(path).status_code == 401, path
        assert client.post("/extraction/projects", data={"project": "x"}).status_code == 401
        assert client.post(f"/extraction/items/{case.item_id}/decisions", data={}).status_code == 401
    with site.client() as client:
        for path in paths:
            assert client.get(path).status_code == 200, path


def test_the_project_page_sets_a_models_budget_for_the_whole_instance(site: Site) -> None:
    from extraction_pipeline.core.ledger.budgets import get_budget, learn, reserve
    from extraction_pipeline.core.llm.rate_headers import RateLimits

    ledger = site.case.ledger
    model = "anthropic/claude-sonnet-4"
    with site.client() as client:
        assert "No budget known yet" in client.get("/extraction/projects/p").text
        saved = client.post(
            "/extraction/projects/p/budget",
            data={"model": model, "tokens_per_minute": "40,000", "requests_per_minute": ""},
        )
        assert saved.status_code == 200, saved.text
        assert f"budget saved: {model}: your limits 40,000 tokens/min, no requests limit" in html.unescape(saved.text)
        learn(ledger, model, RateLimits(tokens_limit=30_000, tokens_remaining=30_000, requests_limit=50))
        shown = html.unescape(client.get("/extraction/projects/p").text)
        for bad in ("-5", "0", "lots", "1e9"):
            refused = client.post("/extraction/projects/p/budget", data={"model": model, "tokens_per_minute": bad})
            assert refused.status_code == 400 and "whole number from 1" in refused.text
        nameless = client.post("/extraction/projects/p/budget", data={"model": " ", "tokens_per_minute": "5"})
        assert nameless.status_code == 400 and "name the model" in nameless.text
    with site.client(user="Rita") as client:  # budgets are an admin's
        reviewer = client.post("/extraction/projects/p/budget", data={"model": model, "tokens_per_minute": "1"})
        assert reviewer.status_code == 403 and "only an admin" in reviewer.text
    with site.client(origin=False) as client:
        evil = client.post(
            "/extraction/projects/p/budget",
            data={"model": model, "tokens_per_minute": "1"},
            headers={"Origin": "http://evil.example"},
        )
        assert evil.status_code == 403
    budget = get_budget(ledger, model)
    assert budget is not None
    # Yours, the provider's, and the lower one applying: what every run's calls wait on.
    assert (budget.configured_tokens, budget.learned_tokens, budget.tokens_per_minute) == (40_000, 30_000, 30_000)
    assert (budget.configured_requests, budget.requests_per_minute) == (None, 50)
    row = re.search(r"<tr><td><code>anthropic/claude-sonnet-4</code>.*?</tr>", shown)
    assert row is not None
    assert [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", row.group(0))][1:] == [
        "40,000",
        "—",
        "30,000",
        "50",
        "30,000",
        "50",
    ]
    # The saved limit paces calls: a minute's 30,000 tokens reserved, the next call waits.
    assert reserve(ledger, model, 30_000).wait_seconds == 0
    assert reserve(ledger, model, 15_000).wait_seconds > 20


def test_a_budget_pinned_by_the_environment_is_not_changed_by_the_page(tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger.budgets import get_budget

    settings = Settings(home=tmp_path / "home", model="openai/gpt-4o-mini", tokens_per_minute=40_000)
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    _, personal = add_user(ledger, "Ada", Role.ADMIN)
    with (
        _serving(settings) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
    ):
        client.headers["Origin"] = base
        assert client.post("/extraction/signin", data={"token": personal}).status_code == 303
        assert client.post("/extraction/projects", data={"project": "q"}).status_code == 303
        refused = client.post(
            "/extraction/projects/q/budget", data={"model": "openai/gpt-4o-mini", "tokens_per_minute": "90000"}
        )
        other = client.post(
            "/extraction/projects/q/budget", data={"model": "openai/gpt-4o", "tokens_per_minute": "90000"}
        )
    assert refused.status_code == 400 and "EXTRACTION_TOKENS_PER_MINUTE" in refused.text
    assert get_budget(ledger, "openai/gpt-4o-mini") is None
    assert other.status_code == 200
    pinned = get_budget(ledger, "openai/gpt-4o")
    assert pinned is not None and pinned.configured_tokens == 90_000
    ledger.dispose()


def test_a_batch_sent_to_the_providers_batch_api_says_so_and_a_model_without_one_is_refused(site: Site) -> None:
    ledger = site.case.ledger
    [doc] = [d["id"] for d in project_documents(ledger, "p")]
    with site.client(user="Rita") as client:
        project_page = client.get("/extraction/projects/p")
        assert 'name="provider_batch"' in project_page.text  # offered beside the other launch options
        refused = client.post(
            "/extraction/projects/p/batches", data={"document": str(doc), "provider_batch": "on", "request_id": "pb"}
        )
        assert refused.status_code == 400 and "has no provider batch API here" in html.unescape(refused.text)
    batch = create_batch(
        ledger, idempotency_key="pb", project="p", user="Rita", document_ids=[doc], provider_batch=True
    )
    with site.client(user="Rita") as client:
        page = html.unescape(client.get(f"/extraction/batches/{batch.id}").text)
    assert "waiting for the provider's batch API: its prompts are being prepared" in page


def test_a_field_the_model_left_empty_is_set_in_the_browser_and_shown_counted_and_exported(
    site: Site, tmp_path: Path
) -> None:
    """An empty study field is a cell like any other: set with a quote (grounded again) it shows
    the reviewer's value, quote and verdict at once, counts as a decided value and reaches the
    Values sheet; an empty judgement confirmed as not reported counts too; approving an empty
    field is refused (there is nothing of the model's to approve)."""
    case = site.case
    batch_page = f"/extraction/batches/{case.batch_id}"
    document_page = f"{batch_page}/documents/{case.item_id}"
    decide = f"/extraction/items/{case.item_id}/decisions"
    funding = "The trial was funded by a public research council."
    with site.client(user="Rita") as client:
        page = client.get(document_page).text
        assert re.search(r'<a class="cell absent settable[^"]*"[^>]*data-path="metadata.funding_source"', page)
        empty_panel = re.search(r'<div class="detail empty" data-path="metadata.funding_source".*?</form>', page, re.S)
        assert empty_panel is not None and 'name="value"' in empty_panel.group() and "Set" in empty_panel.group()
        assert "0 of 6 values decided" in client.get(batch_page).text
        before = html.unescape(
            re.search(r'data-path="metadata.funding_source" data-img="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        )

        refused = client.post(decide, data={"path": "metadata.funding_source", "action": "approve", "seen_seq": "0"})
        assert "nothing here to approve" in html.unescape(client.get(refused.headers["location"]).text)
        assert decisions.current_decisions(case.ledger, case.batch_id) == {}

        client.post(
            decide,
            data={
                "path": "metadata.funding_source",
                "action": "correct",
                "value": "a public research council",
                "quote": funding,
                "seen_seq": "0",
            },
        )
        page = client.get(f"{document_page}?value=metadata.funding_source").text
        cell = re.search(r'<a class="cell ([^"]*)"[^>]*data-path="metadata.funding_source"[^>]*>([^<]*)</a>', page)
        assert cell is not None and "absent" not in cell.group(1) and "decided" in cell.group(1)
        assert cell.group(2) == "a public research council"
        panel = re.search(r'<div class="detail" data-path="metadata.funding_source".*?"actions"', page, re.S)
        assert panel is not None
        shown = html.unescape(panel.group())
        assert "not reported by the model" in shown and "a public research council" in shown
        assert "reviewer's quote" in shown and funding in shown
        assert re.search(r'class="pill reviewer-status verified[^"]*">verified<', panel.group())
        assert "1 of 7 values decided" in client.get(batch_page).text
        # The page image is addressed by what it highlights: the reviewer's quote is a new address,
        # cached for good; the old address is never cached (a browser cannot show a stale highlight).
        after = html.unescape(
            re.search(r'data-path="metadata.funding_source" data-img="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        )
        assert after != before and "v=" in after
        now = client.get(after)
        assert now.status_code == 200 and "immutable" in now.headers["cache-control"]
        assert json.loads(now.headers["x-highlight-rects"])  # the reviewer's quote, highlighted
        assert client.get(before).headers["cache-control"] == "no-store"

        client.post(decide, data={"path": "risk_of_bias.randomization", "action": "not reported", "seen_seq": "0"})
        assert "2 of 8 values decided" in client.get(batch_page).text
    # Approving a value a reviewer set where the model gave none is refused everywhere (a workbook's
    # "approve" too): it would wipe the reviewer's value.
    with pytest.raises(ConfigError, match="nothing here to approve"):
        decisions.record(
            case.ledger,
            item_id=case.item_id,
            path="metadata.funding_source",
            action="approve",
            reviewer="Ada",
            seen_seq=1,
        )

    sheet = openpyxl.load_workbook(write_workbook(case.ledger, case.batch_id, tmp_path / "set.xlsx"))["Values"]
    header = [c.value for c in sheet[1]]
    rows = {
        (r[header.index("module")], r[header.index("field")]): r for r in sheet.iter_rows(min_row=2, values_only=True)
    }
    funded = rows[("metadata", "funding_source")]
    assert funded[header.index("final value")] == "a public research council"
    assert funded[header.index("final status")] == "verified" and funded[header.index("decided by")] == "Rita"
    assert rows[("risk_of_bias", "randomization")][header.index("decided by")] == "Rita"


def test_the_highlighted_parts_header_stays_small_ascii_and_aligned_with_the_rects() -> None:
    """A paragraph-long quote must not outgrow a proxy's header buffer, nor carry a byte a header
    cannot hold; the parts kept are the first ones, each still at its rectangle's index."""
    from extraction_pipeline.web.review import HEADER_BYTES, texts_header

    short = ["25.78±3.30 (19)", "Pain\x7f at rest"]
    assert json.loads(texts_header(short)) == ["257833019", "painatrest"]  # as review.js's skeleton reads them
    long = [f"line {i}: μ = {i}.5 ± 0.{i} " * 20 for i in range(60)]
    header = texts_header(long)
    assert header.isascii() and len(header) <= HEADER_BYTES
    parts = json.loads(header)
    assert 0 < len(parts) < 60 and parts[1].startswith("line1μ15")  # the first parts, in their places
