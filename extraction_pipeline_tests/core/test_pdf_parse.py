"""The parse step: page-anchored output, isolation with a hard timeout, cache, bad input."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.pdf import parsing
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseOptions, ParseTimeout, run_isolated
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import register_pdf, sha256_of
from extraction_pipeline_tests.support import pdf_samples

CORPUS_PDF = pdf_samples.CORPUS / "pdf" / "3321528.pdf"
needs_corpus = pytest.mark.skipif(not CORPUS_PDF.exists(), reason="the trial corpus is not present (EXTRACTION_CORPUS)")


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Ledger:
    return Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}")


def _parse(ledger: Ledger, path: Path, **options: object) -> parsing.ParsedDocument:
    return parse_document(ledger, sha256=sha256_of(path), stored_path=str(path), options=ParseOptions(**options))  # type: ignore[arg-type]


@needs_corpus
def test_real_trial_gives_pages_tables_and_a_character_map(sqlite_ledger: Ledger) -> None:
    parsed = _parse(sqlite_ledger, CORPUS_PDF, limits=EngineOptions(table_detection="layout"))
    assert parsed.pages == 8 and parsed.engine == "pymupdf-text+tables" and parsed.engine_version.startswith("pymupdf")
    assert parsed.tables and all(t.html.startswith("<table><tr><td>") for t in parsed.tables)
    first = parsed.tables[0]
    assert "24" in first.text and "28" in first.text  # the group sizes of the baseline table
    # Any span of the searchable text resolves to (page, source, start, end).
    text = parsed.searchable_text
    phrase = "electrical muscle stimulation"
    start = text.lower().index(phrase)
    where = parsed.locate(start, start + len(phrase))
    assert where is not None and where.source == "text"
    assert parsed.pages_text[where.page - 1][where.start : where.end].lower() == phrase
    table_start = text.index(first.text)
    in_table = parsed.locate(table_start, table_start + 10)
    assert in_table is not None and (in_table.page, in_table.source, in_table.start) == (first.page, "table 1", 0)


def test_second_parse_is_a_cache_hit_without_the_engine(
    sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = pdf_samples.good(tmp_path)
    first = _parse(sqlite_ledger, pdf)
    assert not first.cache_hit and first.pages == 2

    def engine_must_not_run(*args: object, **kwargs: object) -> dict[str, object]:
        raise AssertionError("the engine ran on cached content")

    monkeypatch.setattr(parsing, "run_isolated", engine_must_not_run)
    copy = tmp_path / "elsewhere" / "same-bytes.pdf"  # same content, another batch or project
    copy.parent.mkdir()
    copy.write_bytes(pdf.read_bytes())
    second = _parse(sqlite_ledger, copy)
    assert second.cache_hit and second.pages_text == first.pages_text and second.metadata()["cache"] == "hit"


def test_parser_version_change_invalidates_the_cache(
    sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = pdf_samples.good(tmp_path)
    _parse(sqlite_ledger, pdf)
    from extraction_pipeline.core.pdf import engine

    monkeypatch.setattr(engine, "PARSER_VERSION", "pymupdf-text+tables/next")
    assert not _parse(sqlite_ledger, pdf).cache_hit


def _script(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "parser.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


@pytest.mark.parametrize("ignores_sigterm", [False, True], ids=["obeys-sigterm", "ignores-sigterm"])
def test_hanging_parser_and_its_children_are_killed(tmp_path: Path, ignores_sigterm: bool) -> None:
    pids = tmp_path / "pids"
    command = _script(
        tmp_path,
        f"""
        import os, signal, subprocess, sys, time
        if {ignores_sigterm}:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", stubborn])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(600)
        """,
    )
    with pytest.raises(ParseTimeout, match=r"parse timed out after 2 s"):
        run_isolated(pdf_samples.good(tmp_path), timeout_seconds=2, limits=EngineOptions(), command=command)
    parser_pid, grandchild_pid = map(int, pids.read_text().split())
    assert not _alive(parser_pid) and not _alive(grandchild_pid)


def test_a_pdf_that_exhausts_its_child_costs_itself_only(tmp_path: Path) -> None:
    """Several PDFs read by one child: the one that needs more than the memory cap is named so,
    and the PDFs after it are read by a fresh child (a child whose MuPDF ran out of memory is not
    trusted with the next file)."""
    from extraction_pipeline.core.pdf.isolation import run_each
    from extraction_pipeline_tests.support import pdf_bombs

    pdfs = [pdf_samples.good(tmp_path, 1), pdf_bombs.nested_xobjects(tmp_path), pdf_samples.good(tmp_path, 2)]
    outcomes = run_each(pdfs, timeout_seconds=60, limits=EngineOptions(memory_mb=300), task="text")
    assert [bool(o.value and o.value["pages_text"]) for o in outcomes] == [True, False, True]
    assert str(outcomes[1].error) == "needs more memory than the limit of 300 MB (EXTRACTION_PDF_MEMORY_MB)"
    # Registration reads it the same way and refuses it in one line.
    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}")
    with pytest.raises(ConfigError, match=r"^nested-xobjects.pdf: needs more memory than the limit of 300 MB"):
        register_pdf(ledger, tmp_path / "store", "p", pdfs[1], ParseOptions(limits=EngineOptions(memory_mb=300)))


def test_a_childs_answers_keep_every_character_of_the_page(tmp_path: Path) -> None:
    """Text with characters some readers take for line breaks (U+2028, U+2029, U+0085) and
    non-ASCII letters comes back whole, one answer per PDF."""
    from extraction_pipeline.core.pdf.child import answer_line
    from extraction_pipeline.core.pdf.isolation import read_answers

    pages = ["Å\u2028b\u2029c\x85d – 95% CI", "second"]
    out = tmp_path / "results.jsonl"
    out.write_text(answer_line({"ok": {"pages_text": pages}}) + answer_line({"error": "damaged PDF"}))
    first, second = read_answers(out)
    assert first.value == {"pages_text": pages} and str(second.error) == "damaged PDF"


def test_several_documents_are_parsed_by_one_child_each_with_its_own_verdict(
    sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``parse_documents``: the same verdicts as ``parse_document`` one by one, in order, cached
    alike; a bomb, a changed stored copy and a cached paper among them cost only themselves (the
    bomb's failure cached only once a fresh child of its own saw it too)."""
    from extraction_pipeline.core.pdf.parsing import parse_documents
    from extraction_pipeline_tests.support import pdf_bombs

    good = [pdf_samples.good(tmp_path, n) for n in (1, 2, 3)]
    bomb = pdf_bombs.nested_xobjects(tmp_path)
    changed = pdf_samples.good(tmp_path / "changed", 4)
    options = ParseOptions(timeout_seconds=60, limits=EngineOptions(memory_mb=300))
    _parse(sqlite_ledger, good[2], timeout_seconds=60, limits=EngineOptions(memory_mb=300))  # already cached
    listed = [(sha256_of(path), str(path)) for path in (good[0], bomb, good[1], good[2])]
    listed.append(("0" * 64, str(changed)))  # its bytes are not the registered ones
    listed.append(listed[0])  # the same content twice: parsed once, the same verdict twice
    verdicts = parse_documents(sqlite_ledger, listed, options)
    assert [type(v).__name__ for v in verdicts] == [
        "ParsedDocument",
        "PermanentError",
        "ParsedDocument",
        "ParsedDocument",
        "PermanentError",
        "ParsedDocument",
    ]
    assert verdicts[5] is verdicts[0]
    assert "needs more memory than the limit of 300 MB" in str(verdicts[1])
    assert "does not match its registered sha256" in str(verdicts[4])
    assert [v.cache_hit for v in verdicts if isinstance(v, parsing.ParsedDocument)] == [False, False, True, False]
    # The second time, every parse comes from the cache, the bomb's failure included: no child at all.
    monkeypatch.setattr(parsing, "run_each", lambda *a, **k: pytest.fail("parsed again"))
    again = parse_documents(sqlite_ledger, listed[:4], options)
    assert [getattr(v, "cache_hit", None) for v in again] == [True, None, True, True]
    assert str(again[1]) == str(verdicts[1])


def test_crashing_parser_is_a_clean_permanent_error(tmp_path: Path) -> None:
    command = _script(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(PermanentError, match=r"parser crashed \(signal 11\)"):
        run_isolated(pdf_samples.good(tmp_path), timeout_seconds=30, limits=EngineOptions(), command=command)


def test_timed_out_content_is_not_parsed_again_unless_the_limit_grows(
    sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = pdf_samples.good(tmp_path)
    with pytest.raises(ParseTimeout, match=r"parse timed out after 0\.01 s"):
        _parse(sqlite_ledger, pdf, timeout_seconds=0.01)
    calls: list[float] = []
    real = run_isolated

    def counting(*args: object, **kwargs: float) -> dict[str, object]:
        calls.append(kwargs["timeout_seconds"])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parsing, "run_isolated", counting)
    with pytest.raises(PermanentError, match=r"parse timed out after 0\.01 s"):
        _parse(sqlite_ledger, pdf, timeout_seconds=0.01)  # same content, same limit: cached verdict
    assert calls == []
    assert _parse(sqlite_ledger, pdf, timeout_seconds=60).pages == 2  # a longer limit tries again
    assert calls == [60]


@pytest.mark.parametrize(
    ("make", "options", "reason"),
    [
        (lambda d: pdf_samples.write(d, "notes.pdf", b"just text, no PDF"), {}, "not a readable PDF"),
        (lambda d: pdf_samples.write(d, "empty.pdf", b""), {}, "empty file"),
        (
            lambda d: pdf_samples.write(d, "cut.pdf", pdf_samples.good(d).read_bytes()[:400]),
            {},
            "truncated or damaged PDF",
        ),
        (pdf_samples.encrypted, {}, "PDF is encrypted (password-protected)"),
        (pdf_samples.zero_pages, {}, "PDF has no pages"),
        (pdf_samples.scanned, {}, "no text layer (scanned PDF?)"),
        (pdf_samples.good, {"limits": EngineOptions(max_pages=1)}, "2 pages exceeds the limit of 1 pages"),
        (pdf_samples.good, {"limits": EngineOptions(max_bytes=100)}, "bytes exceeds the limit of 100 bytes"),
    ],
    ids=["not-pdf", "empty", "truncated", "encrypted", "zero-pages", "no-text", "too-many-pages", "too-big"],
)
def test_bad_input_gets_a_specific_permanent_error(
    sqlite_ledger: Ledger, tmp_path: Path, make: object, options: dict[str, object], reason: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(PermanentError) as error:
        _parse(sqlite_ledger, path, **options)
    assert reason in str(error.value)
    assert "Traceback" not in str(error.value) and "\n" not in str(error.value)


def test_registered_snapshot_survives_the_source_file_disappearing(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger.documents import get_document
    from extraction_pipeline.core.pdf.registration import register_pdf

    source = pdf_samples.good(tmp_path / "inbox")
    registered = register_pdf(sqlite_ledger, tmp_path / "store", "p", source)
    source.unlink()  # the analyst tidies up their downloads folder
    document = get_document(sqlite_ledger, registered.id)
    assert document is not None
    assert (document["filename"], document["pages"], document["size_bytes"]) == (
        "trial-001.pdf",
        2,
        registered.size_bytes,
    )
    parsed = parse_document(sqlite_ledger, sha256=document["sha256"], stored_path=document["stored_path"])
    assert parsed.pages == 2 and not parsed.cache_hit


def test_table_detection_mode_is_part_of_the_cache_key(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    pdf = pdf_samples.good(tmp_path)
    lines = _parse(sqlite_ledger, pdf)
    off = _parse(sqlite_ledger, pdf, limits=EngineOptions(table_detection="off"))
    assert (lines.cache_hit, off.cache_hit) == (False, False)
    assert (lines.parser_version, off.parser_version) == ("pymupdf-text+tables/3:lines", "pymupdf-text+tables/3:off")
    with pytest.raises(ValueError, match="table detection must be one of lines, layout, off"):
        EngineOptions(table_detection="magic")


class _RunCanceled(Exception):
    """Stands in for DagsterExecutionInterruptedError, which Dagster raises in the run worker's
    main thread from a signal handler when a run is canceled."""


def test_cancellation_while_parsing_kills_the_parser_group(tmp_path: Path) -> None:
    import signal

    pids = tmp_path / "pids"
    command = _script(
        tmp_path,
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(600)
        """,
    )

    def cancel(signum: int, frame: object) -> None:
        raise _RunCanceled

    previous = signal.signal(signal.SIGALRM, cancel)
    signal.setitimer(signal.ITIMER_REAL, 2.0)  # the cancellation arrives mid-parse
    try:
        with pytest.raises(_RunCanceled):
            run_isolated(pdf_samples.good(tmp_path), timeout_seconds=120, limits=EngineOptions(), command=command)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    parser_pid, grandchild_pid = map(int, pids.read_text().split())
    assert not _alive(parser_pid) and not _alive(grandchild_pid)
