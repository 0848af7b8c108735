"""What a paper is, read from real PDFs written with PyMuPDF: the metadata's title and first author
where they are real, else the title in the first page's largest type; the year the first page
prints most; and a registered document keeps them for the lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

from extraction_pipeline.core.export.meta_csv import study_label
from extraction_pipeline.core.extraction.grounded import fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.documents import get_document
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.pdf.bibliography import Bibliography, bibliography, first_author_surname
from extraction_pipeline.core.pdf.registration import register_pdf

TITLE = "Haloperidol dose combined with dexamethasone for nausea after gynaecological laparoscopy"
BODY = (
    "Background. Postoperative nausea and vomiting is common after laparoscopy. Methods. In 2014 "
    "and 2015, 150 women were randomized. Trials 2016, 17:120. Received 3 May 2016."
)


def _pdf(path: Path, *, metadata: dict[str, str] | None = None, title_size: float = 18) -> Path:
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 40, 539, 120), TITLE, fontsize=title_size, fontname="helv")
        page.insert_textbox(pymupdf.Rect(56, 140, 539, 400), BODY, fontsize=10, fontname="helv")
        if metadata:
            doc.set_metadata(metadata)
        doc.save(path)
    return path


def _read(path: Path) -> Bibliography:
    with pymupdf.open(path) as doc:
        first: dict[str, Any] = doc[0].get_text("dict")
        return bibliography(doc.metadata or {}, first, 2026)


def test_the_metadata_says_what_the_paper_is_when_it_names_it(tmp_path: Path) -> None:
    described = _read(
        _pdf(
            tmp_path / "a.pdf",
            metadata={"title": "Dexamethasone and haloperidol in PONV", "author": "Jin Joo, Kim Lee"},
        )
    )
    assert described == Bibliography("Dexamethasone and haloperidol in PONV", "Joo", 2016)


def test_a_title_the_metadata_lacks_is_the_first_pages_largest_type(tmp_path: Path) -> None:
    for placeholder in ({}, {"title": "Untitled", "author": "Unknown"}, {"title": "TPM14126 844..853"}):
        described = _read(_pdf(tmp_path / "b.pdf", metadata=placeholder or None))
        assert described.title == TITLE and described.first_author == "" and described.year == 2016
    # Nothing in larger type than the text: no title is guessed.
    assert _read(_pdf(tmp_path / "c.pdf", title_size=10)).title == ""


@pytest.mark.parametrize(
    ("listed", "surname"),
    [
        ("John M Wiecha", "Wiecha"),
        ("Karatzanos E; Smith J", "Karatzanos"),
        ("J. Jason van Steenburgh", "van Steenburgh"),
        ("Eleftherios Karatzanos {et al.}", "Karatzanos"),
        ("Maren Schmidt, Rahel Eckardt", "Schmidt"),
        ("Unknown", ""),
        ("", ""),
    ],
)
def test_thefirst_author_surnames_surname_from_the_author_lists_forms(listed: str, surname: str) -> None:
    assert first_author_surname(listed) == surname


def test_a_registered_document_keeps_what_the_paper_is(tmp_path: Path) -> None:
    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}")
    pdf = _pdf(tmp_path / "joo.pdf", metadata={"title": "Dexamethasone and haloperidol in PONV", "author": "Jin Joo"})
    registered = register_pdf(ledger, tmp_path / "documents", "p", pdf)
    row = get_document(ledger, registered.id)
    assert row is not None and (row["title"], row["first_author"], row["year"]) == (
        "Dexamethasone and haloperidol in PONV",
        "Joo",
        2016,
    )
    # A study the form has no id for is labelled by its paper in the CSV and the pictures, not by
    # its file name; the form's id, once set, wins.
    batch = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[registered.id])
    [item] = batch_item_rows(ledger, batch.id)
    assert study_label({}, {}, item) == "Joo 2016"
    named = fields_of({"fields": {"metadata.study_id": {"value": "Joo 2016a", "status": "verified"}}})
    assert study_label(named, {}, item) == "Joo 2016a"
    assert study_label({}, {}, {**item, "first_author": None}) == "joo.pdf"
    ledger.dispose()


def test_a_ledger_from_before_these_columns_gets_them_and_keeps_its_documents(tmp_path: Path) -> None:
    """An existing ledger (no title, first_author, year) is upgraded in place on connect."""
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'old.db'}"
    ledger = Ledger.connect(url)
    registered = register_pdf(ledger, tmp_path / "documents", "p", _pdf(tmp_path / "old.pdf"))
    with ledger.engine.begin() as conn:
        for column in ("title", "first_author", "year"):
            conn.execute(text(f'ALTER TABLE documents DROP COLUMN "{column}"'))
        conn.execute(text("UPDATE ledger_meta SET value = 'an older release' WHERE key = 'schema'"))
    ledger.dispose()
    upgraded = Ledger.connect(url)
    row = get_document(upgraded, registered.id)
    assert row is not None and row["filename"] == "old.pdf" and row["title"] is None
    again = register_pdf(
        upgraded,
        tmp_path / "documents",
        "p",
        _pdf(tmp_path / "new.pdf", metadata={"title": "A new paper in the old ledger"}),
    )
    new_row = get_document(upgraded, again.id)
    assert new_row is not None and new_row["title"] == "A new paper in the old ledger"
    upgraded.dispose()


def test_the_year_falls_back_to_the_pdfs_creation_date_and_odd_metadata_is_cleaned() -> None:
    empty: dict[str, Any] = {"blocks": []}
    assert bibliography({"creationDate": "D:20200315120000+01'00'"}, empty, 2026).year == 2020
    assert bibliography({"creationDate": "D:20990315"}, empty, 2026).year is None  # not yet
    odd = bibliography({"title": "A trial\x00 of\x00 drug A in adults", "author": "Ann\x00 Lee"}, empty, 2026)
    assert "\x00" not in odd.title + odd.first_author and odd.first_author == "Lee"
