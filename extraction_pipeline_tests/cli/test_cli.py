"""The command line: real processes, a temporary instance home, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support import pdf_samples
from extraction_pipeline_tests.support.cli import one_line_error, run_cli

COMMANDS = ["init", "demo", "parse", "ground", "documents", "batch", "template", "history", "users", "ui", "daemon"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("home")
    run_cli(path, "init", check=True)
    return path


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("pdfs")
    return [write_report(make_trial(i), directory) for i in range(1, 4)]


def test_help_documents_every_command(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--help", check=True)
    for command in COMMANDS:
        assert command in result.stdout
    groups = {
        "documents": ["add", "list"],
        "batch": ["create", "status", "export"],
        "template": ["show", "set", "versions"],
    }
    for group, subcommands in groups.items():
        out = run_cli(tmp_path, group, "--help", check=True).stdout
        assert all(sub in out for sub in subcommands)


def test_init_is_idempotent_and_sets_pool_limits(tmp_path: Path) -> None:
    first = run_cli(tmp_path, "init", "--llm-slots", "3", check=True).stdout
    second = run_cli(tmp_path, "init", "--llm-slots", "3", check=True).stdout
    assert "(written, sqlite storage)" in first and "(kept, sqlite storage)" in second
    assert "pdf_parse=2, llm=3" in second
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import dagster as dg\ni=dg.DagsterInstance.get()\n"
            "print(i.event_log_storage.get_concurrency_info('llm').slot_count, "
            "i.event_log_storage.get_concurrency_info('pdf_parse').slot_count)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == ["3", "2"]


def test_documents_add_registers_and_is_idempotent(home: Path, pdfs: list[Path]) -> None:
    out = json.loads(run_cli(home, "documents", "add", "trials", *map(str, pdfs), "--json", check=True).stdout)
    assert [d["pages"] for d in out] == [2, 2, 2] and all(d["created"] for d in out)
    again = json.loads(run_cli(home, "documents", "add", "trials", str(pdfs[0]), "--json", check=True).stdout)
    assert again[0]["id"] == out[0]["id"] and again[0]["created"] is False
    listed = json.loads(run_cli(home, "documents", "list", "--project", "trials", "--json", check=True).stdout)
    assert [d["filename"] for d in listed] == [p.name for p in pdfs]
    # The stored copy is a snapshot: the batch survives the source file moving away.
    assert all(Path(d["stored_path"]).is_file() for d in listed)


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["documents", "add", "trials", "/nonexistent/paper.pdf"], 2, "no such file"),
        (["documents", "add", "bad name", "x.pdf"], 2, "invalid project name"),
        (["batch", "status", "999"], 2, "unknown batch 999"),
        (["batch", "export", "999"], 2, "unknown batch 999"),
        (
            ["batch", "create", "trials", "--user", "ann", "--idempotency-key", "k", "--documents", "999"],
            2,
            "unknown document id(s): 999",
        ),
        (["batch", "create", "nothing-here", "--user", "ann", "--idempotency-key", "k2"], 1, "has no documents"),
        (["batch", "export", "1", "-o", "out.csv"], 2, "must end in .xlsx"),
    ],
)
def test_bad_input_gives_one_clear_line(home: Path, args: list[str], code: int, fragment: str) -> None:
    one_line_error(run_cli(home, *args), code, fragment)


def test_non_pdf_and_empty_files_are_rejected(home: Path, tmp_path: Path) -> None:
    text = tmp_path / "notes.pdf"
    text.write_text("just some text")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(b"%PDF-1.7\n1 0 obj\n<<")
    one_line_error(run_cli(home, "documents", "add", "trials", str(text)), 2, "not a PDF")
    one_line_error(run_cli(home, "documents", "add", "trials", str(empty)), 2, "file is empty")
    one_line_error(
        run_cli(home, "documents", "add", "trials", str(truncated)), 2, "truncated.pdf: truncated or damaged"
    )
    import pymupdf

    scanned = tmp_path / "scanned.pdf"
    with pymupdf.open() as doc:  # a page that is only a picture, as a scanner makes it
        page = doc.new_page()
        pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 40), False)
        pixmap.clear_with(200)
        page.insert_image(pymupdf.Rect(50, 50, 300, 300), pixmap=pixmap)
        doc.save(scanned)
    one_line_error(run_cli(home, "documents", "add", "trials", str(scanned)), 2, "scanned.pdf: no text layer")


def test_argument_errors_exit_2_with_one_line(home: Path) -> None:
    one_line_error(run_cli(home), 2, "required: COMMAND")
    one_line_error(run_cli(home, "batch", "status", "abc"), 2, "expected a positive integer, got 'abc'")
    one_line_error(run_cli(home, "history", "--since", "yesterday"), 2, "expected a date")
    one_line_error(run_cli(home, "batch", "create", "p"), 2, "--user")
    one_line_error(run_cli(home, "history", "--status", "done"), 2, "invalid choice: 'done'")


def test_batch_create_before_init_says_so(tmp_path: Path) -> None:
    one_line_error(
        run_cli(tmp_path / "fresh", "batch", "create", "p", "--user", "u", "--idempotency-key", "k"),
        2,
        "not initialized",
    )
    for command in (["template", "show", "p"], ["documents", "list"], ["history"], ["batch", "status", "1"]):
        one_line_error(run_cli(tmp_path / "fresh", *command), 2, "run `extraction-pipeline init` first")


def test_batch_create_follow_up_is_the_batchs_choice(tmp_path: Path, pdfs: list[Path]) -> None:
    from extraction_pipeline.core.extraction.follow_up import follows_up
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger.queries import batch_item_rows
    from extraction_pipeline.core.settings import Settings

    home = tmp_path / "home"  # its own: the module's home keeps the batch numbers other tests expect
    run_cli(home, "init", check=True)
    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    batches = {}
    for key, extra in (("plain", []), ("asked", ["--follow-up"])):
        created = run_cli(
            home, "batch", "create", "trials", "--user", "ann", "--idempotency-key", key, *extra, "--json", check=True
        )
        batches[key] = json.loads(created.stdout)["batch_id"]
    ledger = Ledger.connect(Settings(home=home).ledger_url)
    asks = {
        key: {follows_up(ledger, row["id"]) for row in batch_item_rows(ledger, batch)} for key, batch in batches.items()
    }
    assert asks == {"plain": {False}, "asked": {True}}
    ledger.dispose()


def test_batch_create_status_history_export(home: Path, pdfs: list[Path], tmp_path: Path) -> None:
    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    created = json.loads(
        run_cli(
            home, "batch", "create", "trials", "--user", "ann", "--idempotency-key", "cli-1", "--json", check=True
        ).stdout
    )
    again = json.loads(
        run_cli(
            home, "batch", "create", "trials", "--user", "ann", "--idempotency-key", "cli-1", "--json", check=True
        ).stdout
    )
    assert created["created"] and not again["created"] and again["batch_id"] == created["batch_id"]
    batch = str(created["batch_id"])
    status = json.loads(run_cli(home, "batch", "status", batch, "--json", check=True).stdout)
    assert status["progress"]["total"] == 3 and status["progress"]["pending"] == 3
    assert "0/3 done" in run_cli(home, "batch", "status", batch, check=True).stdout

    rows = json.loads(run_cli(home, "history", "--user", "ann", "--batch", batch, "--json", check=True).stdout)
    assert len(rows) == 3 and {r["status"] for r in rows} == {"pending"}
    assert json.loads(run_cli(home, "history", "--user", "nobody", "--json", check=True).stdout) == []
    only = json.loads(run_cli(home, "history", "--filename", "trial-002", "--json", check=True).stdout)
    assert {r["filename"] for r in only} == {"trial-002.pdf"}
    assert json.loads(run_cli(home, "history", "--status", "completed", "--json", check=True).stdout) == []
    assert json.loads(run_cli(home, "history", "--until", "2000-01-01", "--json", check=True).stdout) == []
    assert (
        len(
            json.loads(run_cli(home, "history", "--since", "2000-01-01", "--batch", batch, "--json", check=True).stdout)
        )
        == 3
    )

    target = tmp_path / "out.xlsx"
    assert run_cli(home, "batch", "export", batch, "-o", str(target), check=True).stdout.strip() == str(target)
    sheet = openpyxl.load_workbook(target)["Documents"]
    assert sheet.max_row == 4  # header + one row per document
    assert [c.value for c in sheet[2]][:3] == [1, "trial-001.pdf", "pending"]


def _new_batch(tmp_path: Path, pdfs: list[Path], project: str) -> tuple[Path, str]:
    """A new home with ``pdfs`` registered in ``project`` and one batch of them: (home, batch id)."""
    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    run_cli(home, "documents", "add", project, *map(str, pdfs), check=True)
    created = run_cli(home, "batch", "create", project, "--user", "ann", "--idempotency-key", project, check=True)
    return home, created.stdout.split()[1]


def test_batch_status_says_what_an_open_batch_waits_for(tmp_path: Path, pdfs: list[Path]) -> None:
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger.budgets import configure, reserve

    home, batch = _new_batch(tmp_path, pdfs, "waits")
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    model = "openai/gpt-4o-mini"
    assert "waiting for" not in run_cli(home, "batch", "status", batch, check=True).stdout
    configure(ledger, model, tokens_per_minute=40_000, requests_per_minute=None)
    reserve(ledger, model, 38_000)
    reserve(ledger, model, 10_000)  # beyond the minute's allowance: this call waits
    said = "waiting for openai/gpt-4o-mini's token budget: 40k of 40k tokens/min in use"
    assert said in run_cli(home, "batch", "status", batch, check=True).stdout
    status = json.loads(run_cli(home, "batch", "status", batch, "--json", check=True).stdout)
    assert status["waiting_for"] == [said]


def test_batch_status_says_why_documents_failed_most_frequent_first(tmp_path: Path, pdfs: list[Path]) -> None:
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.queries import batch_item_rows, error_reasons

    home, batch = _new_batch(tmp_path, pdfs, "fails")
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    items = [row["id"] for row in batch_item_rows(ledger, int(batch))]
    assert len(items) >= 3
    refused = "openai/gpt-4o-mini refused: I can't help with that"
    for item, message in zip(items, [refused, refused, "parse failed: no text layer"], strict=False):
        assert states.claim(ledger, item, run_id="r", worker="w")
        assert states.fail(ledger, item, run_id="r", message=message)
    said = run_cli(home, "batch", "status", batch, check=True).stdout
    assert f"  2 document(s) in error: {refused}\n  1 document(s) in error: parse failed: no text layer" in said
    status = json.loads(run_cli(home, "batch", "status", batch, "--json", check=True).stdout)
    assert status["errors"] == [
        {"message": refused, "documents": 2},
        {"message": "parse failed: no text layer", "documents": 1},
    ]
    [first] = error_reasons(ledger, int(batch), limit=1)  # the rest is counted, not dropped
    assert first.documents == 2
    ledger.dispose()


def test_batch_create_loads_no_heavy_library(home: Path, pdfs: list[Path]) -> None:
    """`batch create` must answer fast: it must not import dagster, litellm, pymupdf or pydantic
    (the template's output models; freezing a template needs only its definition)."""
    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)  # already there when run after the others
    code = (
        "import sys\nfrom extraction_pipeline.cli import main\n"
        "code = main(['batch', 'create', 'trials', '--user', 'u', '--idempotency-key', 'imports'])\n"
        "heavy = [m for m in ('dagster', 'litellm', 'pymupdf', 'pandas', 'openpyxl', 'pydantic') if m in sys.modules]\n"
        "print(code, heavy)\n"
    )
    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "0 []"


def test_status_watch_follows_the_batch_until_it_closes(home: Path, pdfs: list[Path]) -> None:
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import close_if_done, record_workbook
    from extraction_pipeline.core.ledger.queries import batch_item_rows

    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    created = run_cli(
        home, "batch", "create", "trials", "--user", "w", "--idempotency-key", "watch", "--json", check=True
    )
    batch = json.loads(created.stdout)["batch_id"]
    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extraction_pipeline.cli",
            "batch",
            "status",
            str(batch),
            "--watch",
            "--interval",
            "0.2",
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdout is not None
    first = watcher.stdout.readline()  # the watcher is running and sees the batch open
    assert "0/3 done" in first and first.rstrip().endswith("open")
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    for item in batch_item_rows(ledger, batch):
        states.claim(ledger, item["id"], run_id="r", worker="w")
        states.complete(ledger, item["id"], run_id="r", result={}, usage=Usage("m"))
    assert close_if_done(ledger, batch)
    # Closed, but the sensor has not written the workbook yet: the watcher keeps waiting for it.
    seen = [first]
    while "the workbook is being written" not in seen[-1]:
        seen.append(watcher.stdout.readline())
        assert seen[-1], seen  # the watcher must not stop before the workbook exists
    assert watcher.poll() is None
    assert record_workbook(ledger, batch, "/exports/batch.xlsx", 1)
    out, _ = watcher.communicate(timeout=60)
    assert watcher.returncode == 0
    lines = [*seen, *out.strip().splitlines()]
    final = next(line for line in lines if line.rstrip().endswith("completed"))
    assert "3/3 done" in final and "100.0%" in final and "[##############################]" in final
    assert lines[-1] == "workbook: /exports/batch.xlsx"


def test_bad_environment_is_one_line(home: Path) -> None:
    env = {**os.environ, "EXTRACTION_HOME": str(home), "EXTRACTION_STALE_MINUTES": "later"}
    result = subprocess.run(
        [sys.executable, "-m", "extraction_pipeline.cli", "history"], env=env, capture_output=True, text=True
    )
    one_line_error(result, 2, "EXTRACTION_STALE_MINUTES must be a number")


@pytest.mark.parametrize("stop_signal", ["SIGINT", "SIGTERM"])
def test_daemon_command_runs_on_the_home_until_interrupted(home: Path, stop_signal: str) -> None:
    import signal

    env = {**os.environ, "EXTRACTION_HOME": str(home)}
    command = [sys.executable, "-m", "extraction_pipeline.cli", "daemon"]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as proc:
        _interrupt_when_heartbeating(proc, home, getattr(signal, stop_signal))


def _interrupt_when_heartbeating(proc: subprocess.Popen[str], home: Path, stop_signal: int) -> None:
    import re
    import time

    import dagster as dg

    try:
        assert proc.stdout is not None
        started = proc.stdout.readline()
        found = re.match(r"dagster-daemon running \(pid (\d+), log: ", started)
        assert found, started
        dagster_pid = int(found.group(1))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DAGSTER_HOME", str(home / "dagster"))
            with dg.DagsterInstance.get() as instance:
                deadline = time.monotonic() + 90
                # The daemon's loops report one by one (the sensor loop not always first on a busy machine).
                while "SENSOR" not in instance.get_daemon_heartbeats() and time.monotonic() < deadline:
                    time.sleep(1)
                assert "SENSOR" in instance.get_daemon_heartbeats()  # it runs our sensors on this home
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(ProcessLookupError):  # Dagster itself was stopped, not left running
            os.kill(dagster_pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_more_bad_input_gives_one_line(home: Path, pdfs: list[Path], tmp_path: Path) -> None:
    env_bad_url = {"EXTRACTION_DATABASE_URL": "postgresql://user:pw@host:notaport/db"}
    result = subprocess.run(
        [sys.executable, "-m", "extraction_pipeline.cli", "history"],
        env={**os.environ, "EXTRACTION_HOME": str(home), **env_bad_url},
        capture_output=True,
        text=True,
    )
    one_line_error(result, 2, "invalid ledger database URL")
    one_line_error(run_cli(home, "batch", "status", "1", "--watch", "--interval", "-1"), 2, "expected a number >= 0")
    directory = tmp_path / "taken.xlsx"
    directory.mkdir()
    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    created = run_cli(
        home, "batch", "create", "trials", "--user", "x", "--idempotency-key", "dir", "--json", check=True
    )
    batch = str(json.loads(created.stdout)["batch_id"])
    one_line_error(run_cli(home, "batch", "export", batch, "-o", str(directory)), 1, "taken.xlsx")
    assert [p.name for p in tmp_path.iterdir()] == ["taken.xlsx"]  # no partial file left behind


def test_history_dates_with_an_offset_are_converted_to_utc(home: Path, pdfs: list[Path]) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    run_cli(home, "documents", "add", "trials", *map(str, pdfs), check=True)
    run_cli(home, "batch", "create", "trials", "--user", "tz", "--idempotency-key", "tz", check=True)
    five_hours_east = timezone(timedelta(hours=5))
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).astimezone(five_hours_east).isoformat()
    rows = json.loads(run_cli(home, "history", "--user", "tz", "--since", an_hour_ago, "--json", check=True).stdout)
    assert len(rows) == 3
    later = (datetime.now(UTC) + timedelta(hours=1)).astimezone(five_hours_east).isoformat()
    assert json.loads(run_cli(home, "history", "--user", "tz", "--since", later, "--json", check=True).stdout) == []


def test_workbook_never_turns_document_text_into_formulas(tmp_path: Path) -> None:
    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline_tests.support.ledgers import add_documents
    from extraction_pipeline_tests.support.templates import freeze_version_1

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'l.db'}")
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    freeze_version_1(ledger, batch)  # the fields below are the two-arm template's
    evil = '=HYPERLINK("http://evil.example","click")'
    states.claim(ledger, 1, run_id="r", worker="w")
    entry = {"module": "metadata", "index": None, "field": "nct_number", "value": evil, "quote": "+cmd|' /C calc'!A0"}
    result = {"fields": {"metadata.nct_number": {**entry, "status": "unverified"}}}
    states.complete(ledger, 1, run_id="r", result=result, usage=Usage("m"))
    path = write_workbook(ledger, batch, tmp_path / "out.xlsx")
    sheet = openpyxl.load_workbook(path)["Documents"]
    header = [c.value for c in sheet[1]]
    names = ("metadata.nct_number", "metadata.nct_number quote")
    cells = {name: sheet.cell(row=2, column=header.index(name) + 1) for name in names}
    assert cells["metadata.nct_number"].value == evil and cells["metadata.nct_number"].data_type == "s"
    assert cells["metadata.nct_number quote"].data_type == "s"


def test_parse_prints_pages_and_tables_as_json_and_caches(tmp_path: Path, pdfs: list[Path]) -> None:
    # Its own home: on the module's, a daemon test's dispatcher may have parsed the PDF already.
    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    first = json.loads(run_cli(home, "parse", str(pdfs[0]), "--json", check=True).stdout)
    assert {"pages", "engine", "seconds", "cache", "pages_text", "tables"} <= set(first)
    assert first["pages"] == 2 and len(first["pages_text"]) == 2 and first["tables"] == []
    assert make_trial(1).nct_number in first["pages_text"][0]
    again = json.loads(run_cli(home, "parse", str(pdfs[0]), "--json", check=True).stdout)
    assert (first["cache"], again["cache"]) == ("miss", "hit")
    summary = run_cli(home, "parse", str(pdfs[0]), check=True).stdout
    assert summary.startswith("trial-001.pdf: 2 pages, 0 tables, engine pymupdf-text+tables")


def test_parse_bad_input_is_one_line(home: Path, tmp_path: Path) -> None:
    from extraction_pipeline_tests.support import pdf_samples

    one_line_error(run_cli(home, "parse", str(tmp_path / "missing.pdf")), 2, "no such file")
    one_line_error(run_cli(home, "parse", str(pdf_samples.encrypted(tmp_path))), 1, "PDF is encrypted")
    one_line_error(run_cli(home, "parse", str(pdf_samples.scanned(tmp_path))), 1, "no text layer")


CORPUS = pdf_samples.CORPUS
CASES_TOOL = CORPUS.parent / "tools" / "grounding_cases.py"


@pytest.mark.skipif(
    not CASES_TOOL.exists(), reason="the trial corpus and its case tools are not present (EXTRACTION_CORPUS)"
)
def test_ground_verifies_real_quotes_and_never_a_forged_number(home: Path, tmp_path: Path) -> None:
    cases_file = tmp_path / "cases.jsonl"
    subprocess.run([sys.executable, str(CASES_TOOL), str(CORPUS), str(cases_file)], check=True, capture_output=True)
    cases = [json.loads(line) for line in cases_file.read_text().splitlines()]
    verdicts: list[tuple[str, str]] = []
    for pdf in ("3321528.pdf", "4486927.pdf", "5534041.pdf"):
        mine = [c for c in cases if c["pdf"] == pdf]
        quotes = tmp_path / f"{pdf}.jsonl"
        quotes.write_text("\n".join(json.dumps({"quote": c["quote"], "value": c["value"]}) for c in mine))
        out = run_cli(home, "ground", str(CORPUS / "pdf" / pdf), "--quotes", str(quotes), "--json", check=True)
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        assert len(lines) == len(mine)
        verdicts += [(c["kind"], line["status"]) for c, line in zip(mine, lines, strict=True)]
        assert all(line["page"] for line in lines if line["status"] == "verified")
    forged_verified = sum(1 for kind, status in verdicts if kind == "forged" and status == "verified")
    true_statuses = [status for kind, status in verdicts if kind == "true"]
    assert forged_verified == 0
    assert len(true_statuses) >= 30 and true_statuses.count("verified") / len(true_statuses) >= 0.95


def test_ground_bad_quotes_file_is_one_line(home: Path, pdfs: list[Path], tmp_path: Path) -> None:
    one_line_error(run_cli(home, "ground", str(pdfs[0]), "--quotes", str(tmp_path / "none.jsonl")), 2, "no such file")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"quote": "fine"}\nnot json\n')
    one_line_error(run_cli(home, "ground", str(pdfs[0]), "--quotes", str(bad)), 2, "bad.jsonl:2: not a JSON line")
    bad.write_text('{"text": "no quote field"}\n')
    one_line_error(run_cli(home, "ground", str(pdfs[0]), "--quotes", str(bad)), 2, "needs a string field 'quote'")


def test_workbook_shows_tiers_flags_and_a_summary_per_document(tmp_path: Path) -> None:
    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline_tests.support.ledgers import add_documents
    from extraction_pipeline_tests.support.templates import freeze_version_1

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'l.db'}")
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    freeze_version_1(ledger, batch)  # the fields below are the two-arm template's

    def entry(path: str, value: object, page: int, status: str, flags: list[str] | None = None) -> dict[str, object]:
        module, *index, field = path.split(".")
        where = {"page": page, "source": "text", "start": 10 * page, "end": 10 * page + 5}
        found = {"value": value, "quote": f"q {value}", **where, "status": status, "flags": flags or []}
        return {"module": module, "index": int(index[0]) if index else None, "field": field, **found}

    fields = {
        path: entry(path, *rest)  # type: ignore[arg-type]
        for path, *rest in [
            ("metadata.nct_number", "NCT01234567", 1, "verified"),
            ("metadata.randomized_n", 100, 2, "approximate"),
            ("outcomes.1.ci_lower", 0.9, 3, "verified", ["lower bound above"]),
            ("outcomes.1.ci_upper", 0.6, 3, "unverified"),
            ("outcomes.2.events_treatment", 12, 4, "verified"),
        ]
    }
    fields["baseline.n_control"] = {**entry("baseline.n_control", None, 0, "not reported"), "quote": None}
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result={"fields": fields}, usage=Usage("m"))
    workbook = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "out.xlsx"))
    assert workbook.sheetnames == [
        "Documents",
        "Outcomes",
        "Arms",
        "Comparisons",
        "Values",
        "Possibly missed",
        "Batch",
        "Synthesis",
        "Risk of bias",
    ]

    def rows(name: str) -> list[dict[str, Any]]:
        sheet = workbook[name]
        header = [c.value for c in sheet[1]]
        return [{h: c for h, c in zip(header, row, strict=True)} for row in sheet.iter_rows(min_row=2)]

    [document] = rows("Documents")
    tiers = ("verified", "verified but flagged", "approximate", "unverified")
    summary = [document[f"values {tier}"].value for tier in tiers]
    assert summary == [2, 1, 1, 1] and document["outcomes"].value == 2  # each value once: flagged is not verified
    assert document["metadata.nct_number page"].value == 1 and document["metadata.nct_number check"].value is None
    fills = {document[f"metadata.{n} status"].fill.start_color.rgb[-6:] for n in ("nct_number", "randomized_n")}
    assert fills == {"C6EFCE", "FFEB9C"}
    first, second = rows("Outcomes")
    assert (first["outcome"].value, second["outcome"].value) == (1, 2)
    assert first["ci_lower check"].value == "lower bound above"
    assert first["ci_lower status"].value == "verified, flagged"
    assert first["ci_lower check"].fill.start_color.rgb[-6:] == "F4B183"
    assert first["ci_upper status"].fill.start_color.rgb[-6:] == "FFC7CE"  # the three tiers are visibly distinct
    assert second["events_treatment"].value == 12 and second["ci_lower"].value is None
    values = rows("Values")  # one row per reported value, with its exact location
    assert [(v["field"].value, v["outcome"].value) for v in values][2:] == [
        ("ci_lower", 1),
        ("ci_upper", 1),
        ("events_treatment", 2),
    ]
    located = values[4]
    assert [located[k].value for k in ("page", "source", "start", "end")] == [4, "text", 40, 45]
    assert workbook["Values"].auto_filter.ref == workbook["Values"].dimensions  # ready to filter
    batch_sheet = {row[0].value: row[1].value for row in workbook["Batch"].iter_rows()}
    assert batch_sheet["template"] == "p v2 (rct base v1)"  # the project saved v2 first, then v1 was frozen
    assert {"verified", "approximate", "unverified", "not reported", "check"} <= set(batch_sheet)  # the legend
    assert len(batch_sheet["created_at (UTC)"]) == len("2026-11-30 10:00:00")


def test_template_set_show_versions_and_batches_freeze_theirs(home: Path, pdfs: list[Path], tmp_path: Path) -> None:
    run_cli(home, "documents", "add", "tpl", str(pdfs[0]), check=True)
    shown = run_cli(home, "template", "show", "tpl", check=True).stdout
    assert "has no template yet" in shown and "- nct_number (text)" in shown and "- overall (one of: low" in shown
    first = json.loads(
        run_cli(home, "batch", "create", "tpl", "--user", "u", "--idempotency-key", "t1", "--json", check=True).stdout
    )
    assert first["template"] == "tpl v1 (rct base v2)"
    project_file = tmp_path / "template.json"
    custom = [{"name": "dose_mg", "type": "number", "instruction": "daily dose in mg"}]
    project_file.write_text(json.dumps({"base": "rct", "custom_fields": custom}))
    assert (
        "tpl v2 (rct base v2) saved with 1 custom field"
        in run_cli(home, "template", "set", "tpl", str(project_file), check=True).stdout
    )
    assert "template unchanged" in run_cli(home, "template", "set", "tpl", str(project_file), check=True).stdout
    versions = json.loads(run_cli(home, "template", "versions", "tpl", "--json", check=True).stdout)
    assert [(v["version"], v["custom_fields"]) for v in versions] == [(1, []), (2, ["dose_mg"])]
    second = json.loads(
        run_cli(home, "batch", "create", "tpl", "--user", "u", "--idempotency-key", "t2", "--json", check=True).stdout
    )
    assert second["template"] == "tpl v2 (rct base v2)"
    schema = json.loads(run_cli(home, "template", "show", "tpl", "--schema", check=True).stdout)
    assert "custom" in schema["properties"]
    old = json.loads(run_cli(home, "template", "show", "tpl", "--version", "1", "--json", check=True).stdout)
    assert (old["version"], old["custom_fields"]) == (1, [])


def test_bad_template_input_gives_one_clear_line(home: Path, tmp_path: Path) -> None:
    not_json = tmp_path / "t.json"
    not_json.write_text("{base: rct")
    bad_type = tmp_path / "bad.json"
    bad_type.write_text(json.dumps({"custom_fields": [{"name": "x", "type": "date", "instruction": "y"}]}))
    one_line_error(run_cli(home, "template", "set", "tpl", str(not_json)), 2, "not valid JSON")
    one_line_error(run_cli(home, "template", "set", "tpl", str(tmp_path / "missing.json")), 2, "not found")
    one_line_error(run_cli(home, "template", "set", "tpl", str(bad_type)), 2, "type 'date' is not one of")
    one_line_error(run_cli(home, "template", "set", "bad name", str(bad_type)), 2, "invalid project name")
    one_line_error(run_cli(home, "template", "show", "tpl2", "--version", "7"), 2, "has no template version 7")


def test_workbook_survives_control_characters_and_results_from_before_templates(tmp_path: Path) -> None:
    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline_tests.support.ledgers import add_documents
    from extraction_pipeline_tests.support.templates import freeze_version_1

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'l.db'}")
    [doc] = add_documents(ledger, 1)
    batch = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc]).id
    freeze_version_1(ledger, batch)  # the fields below are the two-arm template's
    # Stored by the first release: bare field names chosen by the model, one of them a formula.
    evil_key = '=HYPERLINK("http://evil.example","x")'
    fields = {
        "status": {"value": "overwritten?", "quote": "q", "status": "verified"},
        evil_key: {"value": 1, "quote": "q", "status": "unverified"},
        "metadata.nct_number": {
            **{"module": "metadata", "index": None, "field": "nct_number", "status": "verified"},
            **{"value": "NCT0\x0c1234567", "quote": "form\x0bfeed " * 4000},
        },
    }
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result={"fields": fields}, usage=Usage("m"))
    sheet = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "out.xlsx"))["Documents"]
    header = {cell.value: cell for cell in sheet[1]}
    row = {name: sheet.cell(row=2, column=cell.column) for name, cell in header.items()}
    assert row["status"].value == "completed" and row["legacy.status"].value == "overwritten?"
    assert header[f"legacy.{evil_key}"].data_type == "s"  # a header never becomes a formula
    assert row["metadata.nct_number"].value == "NCT01234567"
    assert (
        len(row["metadata.nct_number quote"].value) == 32_767 and "\x0b" not in row["metadata.nct_number quote"].value
    )


def test_a_batch_never_takes_another_projects_key_or_documents(home: Path, pdfs: list[Path]) -> None:
    first = json.loads(run_cli(home, "documents", "add", "alpha", str(pdfs[0]), "--json", check=True).stdout)
    run_cli(home, "documents", "add", "beta", str(pdfs[1]), check=True)
    created = run_cli(home, "batch", "create", "alpha", "--user", "u", "--idempotency-key", "shared", check=True)
    assert "created; 1 document(s)" in created.stdout
    one_line_error(
        run_cli(home, "batch", "create", "beta", "--user", "u", "--idempotency-key", "shared"),
        2,
        "already belongs to batch",
    )
    again = run_cli(home, "batch", "create", "alpha", "--user", "u", "--idempotency-key", "shared", check=True)
    assert "already exists (same idempotency key) with 1 document(s); nothing added" in again.stdout
    foreign = ["batch", "create", "beta", "--user", "u", "--idempotency-key", "b1", "--documents", str(first[0]["id"])]
    one_line_error(run_cli(home, *foreign), 2, f"document(s) of another project: {first[0]['id']} (alpha)")


def test_documents_add_registers_the_good_files_and_names_each_bad_one(tmp_path: Path, pdfs: list[Path]) -> None:
    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    text = tmp_path / "notes.pdf"
    text.write_text("just some text")
    result = run_cli(home, "documents", "add", "mixed", str(pdfs[0]), str(text), str(pdfs[1]), "/nonexistent/x.pdf")
    assert result.returncode == 2  # an input error, like every other
    assert [line.split("\t")[1] for line in result.stdout.strip().splitlines()] == [pdfs[0].name, pdfs[1].name]
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("error: ") for line in errors)
    assert "notes.pdf: not a PDF" in errors[0] and "no such file" in errors[1]
    copy = tmp_path / "renamed.pdf"
    copy.write_bytes(pdfs[0].read_bytes())
    again = run_cli(home, "documents", "add", "mixed", str(copy), check=True)
    assert again.stdout.strip().endswith(f"(already registered as {pdfs[0].name})")


def test_small_things_a_new_user_tripped_over(tmp_path: Path, pdfs: list[Path]) -> None:
    from extraction_pipeline.core.settings import Settings
    from extraction_pipeline.instance import DaemonLock

    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    run_cli(home, "documents", "add", "p", str(pdfs[0]), check=True)
    one_line_error(run_cli(home, "batch", "create", "p", "--user", " ", "--idempotency-key", "k"), 2, "empty")
    created = run_cli(home, "batch", "create", "p", "--user", "ann", "--idempotency-key", "k", check=True)
    assert "no daemon is running on this home" in created.stderr  # instead of waiting at 0 % forever
    assert "no model configured" in created.stderr and "finds almost nothing in real papers" in created.stderr
    one_line_error(run_cli(home, "template", "show", "no-such-project"), 2, "unknown project 'no-such-project'")
    # A second daemon on the same home is refused (Dagster would only log two heartbeats).
    lock = DaemonLock(Settings(home=home))
    lock.acquire()
    try:
        one_line_error(run_cli(home, "daemon"), 2, "a Dagster daemon already runs on")
        quiet = run_cli(home, "batch", "create", "p", "--user", "ann", "--idempotency-key", "k2", check=True)
        assert "no daemon" not in quiet.stderr
    finally:
        lock.release()


def test_output_piped_into_a_closed_reader_is_not_an_error(tmp_path: Path, pdfs: list[Path]) -> None:
    run_cli(tmp_path / "home", "init", check=True)
    run_cli(tmp_path / "home", "documents", "add", "p", str(pdfs[0]), check=True)
    env = {**os.environ, "EXTRACTION_HOME": str(tmp_path / "home")}
    env.pop("EXTRACTION_DATABASE_URL", None)
    reader_gone = subprocess.Popen(
        [sys.executable, "-m", "extraction_pipeline.cli", "template", "show", "p", "--schema"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader_gone.stdout is not None and reader_gone.stderr is not None
    reader_gone.stdout.close()  # like `| head -1` that has already exited
    stderr = reader_gone.stderr.read().decode()
    reader_gone.stderr.close()
    assert reader_gone.wait(timeout=60) == 0, stderr  # 8 KB of JSON Schema met a closed pipe
    assert "Broken pipe" not in stderr and "Traceback" not in stderr and "Exception" not in stderr, stderr


def test_history_shows_project_finish_time_duration_and_run(tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline_tests.support.ledgers import add_documents

    home = tmp_path / "home"
    run_cli(home, "init", check=True)
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    [doc] = add_documents(ledger, 1, project="hist")
    create_batch(ledger, idempotency_key="h", project="hist", user="u", document_ids=[doc])
    states.claim(ledger, 1, run_id="run-1", worker="w")
    states.complete(ledger, 1, run_id="run-1", result={}, usage=Usage("m"))
    [row] = json.loads(run_cli(home, "history", "--json", check=True).stdout)
    assert (row["project"], row["run_id"], row["status"]) == ("hist", "run-1", "completed")
    assert row["finished_at"] and row["seconds"] is not None and row["seconds"] >= 0
    header = run_cli(home, "history", check=True).stdout.splitlines()[0].split("\t")
    assert {"project", "finished_at", "seconds", "run_id"} <= set(header)


def test_the_workbook_names_the_model_and_warns_about_the_offline_extractor(tmp_path: Path) -> None:
    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger import Ledger
    from extraction_pipeline.core.ledger import items as states
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline_tests.support.ledgers import add_documents

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'l.db'}")
    batch = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=add_documents(ledger, 1)).id
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result={"fields": {}}, usage=Usage("offline/pattern-v1"))
    sheet = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "out.xlsx"))["Batch"]
    rows = {row[0].value: row[1].value for row in sheet.iter_rows() if row[0].value}
    assert rows["model"] == "offline/pattern-v1"
    assert rows["warning"].startswith("no model configured: documents are extracted by the built-in offline")
    documents = openpyxl.load_workbook(tmp_path / "out.xlsx")["Documents"]
    header = [cell.value for cell in documents[1]]
    row = dict(zip(header, (cell.value for cell in documents[2]), strict=True))
    assert row["status"] == "completed" and row["error"].startswith("completed, but no value was found")
