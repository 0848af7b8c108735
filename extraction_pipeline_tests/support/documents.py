"""Registering a test's PDFs the way `documents add` does: one reading child for all of them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.pdf.registration import RegisteredDocument, register_pdfs


def register_all(ledger: Ledger, store_dir: Path, project: str, pdfs: Iterable[Path]) -> list[RegisteredDocument]:
    """Each of ``pdfs`` registered, in order; the first refusal is raised. One child reads them all
    (``register_pdfs``): a PDF child costs about 0.35 CPU-s to start, and the suite registers
    hundreds of PDFs."""
    registered = []
    for verdict in register_pdfs(ledger, store_dir, project, list(pdfs)):
        if isinstance(verdict, BaseException):
            raise verdict
        registered.append(verdict)
    return registered
