"""Bad and good PDFs made on the fly for parse tests (no binary fixtures in the repo)."""

from __future__ import annotations

import os
from pathlib import Path

from extraction_pipeline.core.pdf.engine import import_pymupdf
from extraction_pipeline.core.synthetic import make_trial, write_report

# Real trial PDFs with gold values, kept beside the project (or wherever EXTRACTION_CORPUS says).
CORPUS = Path(os.environ.get("EXTRACTION_CORPUS") or Path(__file__).resolve().parents[3] / "shared" / "corpus")


def good(directory: Path, index: int = 1) -> Path:
    return write_report(make_trial(index), directory)


def encrypted(directory: Path) -> Path:
    pymupdf = import_pymupdf()
    path = directory / "encrypted.pdf"
    with pymupdf.open(good(directory)) as doc:
        doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="secret")
    return path


def scanned(directory: Path) -> Path:
    """A page with only a drawing: no text layer, like a scan without OCR."""
    pymupdf = import_pymupdf()
    path = directory / "scanned.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.draw_rect(pymupdf.Rect(50, 50, 300, 300), color=(0, 0, 0), fill=(0.5, 0.5, 0.5))
        doc.save(path)
    return path


def zero_pages(directory: Path) -> Path:
    path = directory / "zero-pages.pdf"
    body = (
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
        b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
    )
    xref_at = len(body)
    path.write_bytes(
        body
        + b"xref\n0 3\n0000000000 65535 f \n0000000009 00000 n \n0000000058 00000 n \n"
        + b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n"
        + str(xref_at).encode()
        + b"\n%%EOF\n"
    )
    return path


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path
