"""PDF text per page with a content-addressed cache (cache-aside).

Key = sha256 of the bytes + parser version: the same content is parsed once, in any batch or
project. This is deliberately the simple engine (plain PyMuPDF text, ~0.01 s/page); richer
parsing (tables, isolation, timeouts) replaces ``_parse_pages`` without changing callers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import parsed_documents

ENGINE = "pymupdf-text"
PARSER_VERSION = "pymupdf-text/1"


@dataclass(frozen=True)
class ParsedDocument:
    sha256: str
    pages_text: list[str]
    engine: str
    parser_version: str
    seconds: float
    cache_hit: bool

    @property
    def pages(self) -> int:
        return len(self.pages_text)

    @property
    def full_text(self) -> str:
        return "\n\n".join(self.pages_text)


def _parse_pages(path: Path) -> list[str]:
    import pymupdf  # lazy: see DESIGN.md §8 on import costs

    try:
        with pymupdf.open(path, filetype="pdf") as doc:
            if doc.needs_pass:
                raise PermanentError(f"{path.name}: PDF is encrypted (password-protected)")
            return [page.get_text("text") for page in doc]
    except PermanentError:
        raise
    except Exception as exc:
        raise PermanentError(f"{path.name}: PDF could not be parsed ({exc})", original=exc) from exc


def parse_document(ledger: Ledger, *, sha256: str, stored_path: str) -> ParsedDocument:
    """Return the parsed pages for this content, from the cache when present."""
    with ledger.engine.connect() as conn:
        row = (
            conn.execute(
                select(parsed_documents).where(
                    parsed_documents.c.sha256 == sha256, parsed_documents.c.parser_version == PARSER_VERSION
                )
            )
            .mappings()
            .first()
        )
    if row is not None:
        return ParsedDocument(sha256, json.loads(row["pages_json"]), row["engine"], PARSER_VERSION, 0.0, True)

    path = Path(stored_path)
    if not path.is_file():
        raise PermanentError(f"stored copy of the document is missing: {path}")
    started = time.perf_counter()
    pages_text = _parse_pages(path)
    seconds = round(time.perf_counter() - started, 4)
    if not any(text.strip() for text in pages_text):
        raise PermanentError(f"{path.name}: no text layer (scanned PDF?); OCR is not supported")
    try:
        with ledger.engine.begin() as conn:
            conn.execute(
                insert(parsed_documents).values(
                    sha256=sha256,
                    parser_version=PARSER_VERSION,
                    engine=ENGINE,
                    pages=len(pages_text),
                    seconds=seconds,
                    pages_json=json.dumps(pages_text, ensure_ascii=False),
                    created_at=utcnow(),
                )
            )
    except IntegrityError:
        pass  # a concurrent run cached the same content first; its pages equal ours
    return ParsedDocument(sha256, pages_text, ENGINE, PARSER_VERSION, seconds, False)
