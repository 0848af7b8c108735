"""Stored copies under documents/ are checked, not trusted by name: a replaced copy or a link is
refused when parsed (and that verdict is not cached), and registering again repairs it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import get_document
from extraction_pipeline.core.ledger.schema import parsed_documents
from extraction_pipeline.core.pdf import parsing
from extraction_pipeline.core.pdf.parsing import ParsedDocument, parse_document
from extraction_pipeline.core.pdf.registration import register_pdf, sha256_of
from extraction_pipeline_tests.support import pdf_samples


def _registered(ledger: Ledger, tmp_path: Path) -> tuple[Path, str, Path]:
    """(source, sha256, stored copy) of a freshly registered synthetic trial."""
    source = pdf_samples.good(tmp_path / "inbox")
    document = get_document(ledger, register_pdf(ledger, tmp_path / "documents", "p", source).id)
    assert document is not None
    return source, document["sha256"], Path(document["stored_path"])


def _parse(ledger: Ledger, sha256: str, stored: Path) -> ParsedDocument:
    return parse_document(ledger, sha256=sha256, stored_path=str(stored))


def _cached_rows(ledger: Ledger, sha256: str) -> int:
    with ledger.engine.connect() as conn:
        query = select(func.count()).select_from(parsed_documents).where(parsed_documents.c.sha256 == sha256)
        return int(conn.execute(query).scalar_one())


def _refusal(ledger: Ledger, sha256: str, stored: Path) -> str:
    with pytest.raises(PermanentError) as error:
        _parse(ledger, sha256, stored)
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    assert _cached_rows(ledger, sha256) == 0  # the content was never parsed: nothing to remember
    return message


def _other_pdf(tmp_path: Path) -> Path:
    return pdf_samples.good(tmp_path / "other", index=2)


def _same_bytes_elsewhere(tmp_path: Path, source: Path) -> Path:
    copy = tmp_path / "elsewhere" / "same.pdf"
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    return copy


@pytest.mark.parametrize(
    "tamper",
    [
        lambda stored, tmp: stored.write_bytes(_other_pdf(tmp).read_bytes()),
        lambda stored, tmp: stored.write_bytes(stored.read_bytes()[:300]),
    ],
    ids=["replaced-by-another-pdf", "truncated"],
)
def test_modified_copy_is_refused_uncached_and_readding_repairs_it(
    ledger: Ledger, tmp_path: Path, tamper: Callable[[Path, Path], object]
) -> None:
    source, sha256, stored = _registered(ledger, tmp_path)
    tamper(stored, tmp_path)
    message = _refusal(ledger, sha256, stored)
    assert message == (
        f"stored copy {stored.name} does not match its registered sha256"
        " (modified or replaced since it was added): re-add the PDF with documents add"
    )
    again = register_pdf(ledger, tmp_path / "documents", "p", source)
    assert not again.created and sha256_of(stored) == sha256
    parsed = _parse(ledger, sha256, stored)
    assert parsed.pages == 2 and not parsed.cache_hit and _cached_rows(ledger, sha256) == 1


@pytest.mark.parametrize("right_content", [True, False], ids=["link-to-same-bytes", "link-to-another-pdf"])
def test_copy_replaced_by_a_link_is_refused_before_the_parser_runs(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, right_content: bool
) -> None:
    source, sha256, stored = _registered(ledger, tmp_path)
    target = _same_bytes_elsewhere(tmp_path, source) if right_content else _other_pdf(tmp_path)
    stored.unlink()
    stored.symlink_to(target)

    def parser_must_not_run(*args: object, **kwargs: object) -> dict[str, object]:
        raise AssertionError("the parser ran on a linked stored copy")

    monkeypatch.setattr(parsing, "run_isolated", parser_must_not_run)
    message = _refusal(ledger, sha256, stored)
    assert message == f"stored copy {stored.name} is a symbolic link: refused (re-add the PDF with documents add)"


def test_missing_copy_is_a_one_line_permanent_error_not_cached(ledger: Ledger, tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger.schema import document_contents

    _, sha256, stored = _registered(ledger, tmp_path)
    stored.unlink()
    with ledger.engine.begin() as conn:  # nor in a shared ledger (see the test below)
        conn.execute(document_contents.delete())
    assert _refusal(ledger, sha256, stored) == f"stored copy of the document is missing: {stored}"


def test_a_directory_at_the_stored_path_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    _, sha256, stored = _registered(ledger, tmp_path)
    stored.unlink()
    stored.mkdir()
    assert "is not a regular file: refused" in _refusal(ledger, sha256, stored)


def _plant_link_to_other_pdf(stored: Path, tmp_path: Path, source: Path) -> None:
    stored.symlink_to(_other_pdf(tmp_path))


def _plant_link_to_same_bytes(stored: Path, tmp_path: Path, source: Path) -> None:
    stored.symlink_to(_same_bytes_elsewhere(tmp_path, source))


def _plant_dangling_link(stored: Path, tmp_path: Path, source: Path) -> None:
    stored.symlink_to(tmp_path / "nowhere.pdf")


def _plant_wrong_content(stored: Path, tmp_path: Path, source: Path) -> None:
    stored.write_bytes(_other_pdf(tmp_path).read_bytes())


def _plant_truncated(stored: Path, tmp_path: Path, source: Path) -> None:
    stored.write_bytes(source.read_bytes()[:300])


@pytest.mark.parametrize(
    "plant",
    [_plant_link_to_other_pdf, _plant_link_to_same_bytes, _plant_dangling_link, _plant_wrong_content, _plant_truncated],
    ids=["link-to-other-pdf", "link-to-same-bytes", "dangling-link", "wrong-content", "truncated"],
)
def test_registering_replaces_whatever_was_planted_at_the_stored_path(
    ledger: Ledger, tmp_path: Path, plant: Callable[[Path, Path, Path], None]
) -> None:
    source = pdf_samples.good(tmp_path / "inbox")
    sha256 = sha256_of(source)
    store = tmp_path / "documents"
    store.mkdir()
    stored = store / f"{sha256}.pdf"
    plant(stored, tmp_path, source)
    target = stored.resolve() if stored.is_symlink() else None
    target_bytes = target.read_bytes() if target is not None and target.exists() else None

    registered = register_pdf(ledger, store, "p", source)

    assert not stored.is_symlink() and stored.is_file() and sha256_of(stored) == sha256
    assert registered.size_bytes == source.stat().st_size
    if target is not None:  # the link was replaced, never written through
        assert (target.read_bytes() if target.exists() else None) == target_bytes
    assert sorted(p.name for p in store.iterdir()) == [stored.name]  # no .partial left behind
    assert _parse(ledger, sha256, stored).pages == 2


def test_registering_keeps_a_good_copy_in_place(ledger: Ledger, tmp_path: Path) -> None:
    source, _, stored = _registered(ledger, tmp_path)
    before = os.stat(stored)
    register_pdf(ledger, tmp_path / "documents", "other-project", source)
    after = os.stat(stored)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_linked_store_directory_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    real = tmp_path / "somewhere-else"
    real.mkdir()
    store = tmp_path / "documents"
    store.symlink_to(real)
    with pytest.raises(ConfigError) as error:
        register_pdf(ledger, store, "p", pdf_samples.good(tmp_path / "inbox"))
    assert str(error.value) == f"{store}: the documents store is a symbolic link: refused (make it a directory)"
    assert list(real.iterdir()) == []


def test_a_verified_copy_parses_once_then_comes_from_the_cache(ledger: Ledger, tmp_path: Path) -> None:
    _, sha256, stored = _registered(ledger, tmp_path)
    first = _parse(ledger, sha256, stored)
    assert first.pages == 2 and not first.cache_hit
    stored.unlink()  # a cache hit must not even read the stored copy
    second = _parse(ledger, sha256, stored)
    assert second.cache_hit and second.pages_text == first.pages_text


def test_a_machine_without_the_stored_copy_parses_from_a_shared_ledger(ledger: Ledger, tmp_path: Path) -> None:
    """A Celery worker has its own EXTRACTION_HOME: the stored copy's path does not exist there.
    A PostgreSQL ledger holds the bytes; a SQLite ledger (one machine) does not, and says so."""
    from extraction_pipeline.core.ledger.contents import has_content, is_shared

    _, sha256, stored = _registered(ledger, tmp_path)
    elsewhere = tmp_path / "another-home" / "documents" / stored.name  # nothing there
    if is_shared(ledger):
        assert has_content(ledger, sha256)
        parsed = _parse(ledger, sha256, elsewhere)
        assert parsed.sha256 == sha256 and not parsed.cache_hit and parsed.pages_text
    else:
        assert not has_content(ledger, sha256)
        assert _refusal(ledger, sha256, elsewhere).startswith("stored copy of the document is missing")


def test_init_puts_documents_registered_earlier_into_a_shared_ledger(ledger: Ledger, tmp_path: Path) -> None:
    from extraction_pipeline.core.ledger.contents import has_content, is_shared
    from extraction_pipeline.core.ledger.schema import document_contents
    from extraction_pipeline.core.pdf.registration import store_missing_contents

    _, sha256, stored = _registered(ledger, tmp_path)
    with ledger.engine.begin() as conn:  # as a ledger from before the bytes were kept
        conn.execute(document_contents.delete())
    other = get_document(ledger, register_pdf(ledger, tmp_path / "documents", "p", _other_pdf(tmp_path)).id)
    assert other is not None
    with ledger.engine.begin() as conn:
        conn.execute(document_contents.delete().where(document_contents.c.sha256 == other["sha256"]))
    Path(other["stored_path"]).unlink()  # this one's copy is on another machine
    if not is_shared(ledger):
        assert store_missing_contents(ledger) == (0, 0)  # a SQLite ledger keeps no bytes
        return
    assert store_missing_contents(ledger) == (1, 1)
    assert has_content(ledger, sha256) and not has_content(ledger, other["sha256"])
    assert store_missing_contents(ledger) == (0, 1)  # idempotent
    parsed = _parse(ledger, sha256, tmp_path / "nowhere" / stored.name)
    assert parsed.sha256 == sha256
