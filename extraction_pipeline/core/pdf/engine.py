"""The parse engine: plain PyMuPDF text per page, plus tables on pages that announce one.

Why this engine: on the real corpus plain PyMuPDF text keeps more of the numbers meta-analysts
need than Markdown/HTML conversion does (88% vs 80–86.5% of the corpus's gold values), at ~0.01 s/page.
Tables are added on top — never instead — so conversion can only add numbers, not lose them.
Table detection (PyMuPDF's finder with its layout model, ~0.5 s/page) runs only on pages whose
text has a "Table N" caption, which keeps the median cost per page low.

Runs inside the isolated child process (see isolation.py); raises ``ParseFailure`` with a
specific, user-facing reason for every kind of bad input.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extraction_pipeline.core.pdf.bibliography import Bibliography, bibliography

ENGINE = "pymupdf-text+tables"
PARSER_VERSION = "pymupdf-text+tables/3"  # bump when the output of the engine changes (3: line boxes)
TABLE_DETECTION_MODES = ("lines", "layout", "off")
TABLE_CAPTION = re.compile(r"^\s*Table\s+[0-9IVX]+\b", re.MULTILINE | re.IGNORECASE)


class ParseFailure(Exception):
    """A permanent, specific reason why this PDF cannot be parsed."""


@dataclass(frozen=True)
class EngineOptions:
    """Limits and table detection. ``table_detection``: "lines" finds ruled tables (fast, the
    default); "layout" adds PyMuPDF's layout model, which finds unruled tables too but costs
    ~0.5 s per table page plus ~1 s per document to load; "off" skips tables."""

    max_pages: int = 300
    max_bytes: int = 200 * 1024 * 1024
    table_detection: str = "lines"
    # The child's memory cap (0: none). Parsing a 20-page paper with the layout model peaks near
    # 400 MB; a decompression bomb asks for gigabytes and is refused at the cap.
    memory_mb: int = 2048

    def __post_init__(self) -> None:
        if self.table_detection not in TABLE_DETECTION_MODES:
            raise ValueError(f"table detection must be one of {', '.join(TABLE_DETECTION_MODES)}")

    @property
    def parser_version(self) -> str:
        """The cache key's version part: a different engine output means a different key."""
        return f"{PARSER_VERSION}:{self.table_detection}"


# What PyMuPDF's import tries and we do without (a module set to None in sys.modules is skipped):
# its layout model (0.6 s of a 1.4 s import; ``_ensure_layout`` loads it later, only for pages
# that have a table to find) and pymupdf4llm (numpy and onnxruntime: 0.25 of the 0.36 CPU-s a
# PDF child process costs, paid by every registration, parse and page image).
_SKIPPED_AT_IMPORT = ("pymupdf.layout", "pymupdf4llm")


def import_pymupdf() -> Any:
    """Import PyMuPDF without the modules it would load for nothing (``_SKIPPED_AT_IMPORT``)."""
    if "pymupdf" not in sys.modules:
        for name in _SKIPPED_AT_IMPORT:
            sys.modules[name] = None  # type: ignore[assignment]
        try:
            import pymupdf
        finally:
            for name in _SKIPPED_AT_IMPORT:
                del sys.modules[name]
        # What importing pymupdf4llm sets for the whole process, set here since it is skipped: text
        # boxes without quad corrections (the line boxes the context check reads tables with) and
        # MuPDF's messages kept off stderr (a child's crash reason is read from its output).
        pymupdf.TOOLS.unset_quad_corrections(True)
        pymupdf.TOOLS.mupdf_display_errors(False)
        pymupdf.TOOLS.mupdf_display_warnings(False)
    return sys.modules["pymupdf"]


def _ensure_layout() -> None:
    pymupdf = import_pymupdf()
    if getattr(pymupdf, "_get_layout", None) is None:
        with contextlib.suppress(ImportError):  # without the model, tables come from ruling lines only
            import pymupdf.layout


def engine_version() -> str:
    return f"pymupdf {import_pymupdf().VersionBind}"


def _table_html(rows: list[list[Any]]) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup("<table></table>", "html.parser")
    table = soup.table
    assert table is not None
    for row in rows:
        tr = soup.new_tag("tr")
        for cell in row:
            td = soup.new_tag("td")
            td.string = " ".join(str(cell or "").split())
            tr.append(td)
        table.append(tr)
    return str(table)


def _table_text(rows: list[list[Any]]) -> str:
    return "\n".join("\t".join(" ".join(str(cell or "").split()) for cell in row) for row in rows)


def _tables(page: Any, page_number: int, mode: str) -> list[dict[str, Any]]:
    if mode == "layout":
        _ensure_layout()
    found = []
    for table in page.find_tables(use_layout=mode == "layout").tables:
        rows = [list(row) for row in table.extract()]
        if not any(any(str(c or "").strip() for c in row) for row in rows):
            continue
        found.append({"page": page_number, "html": _table_html(rows), "text": _table_text(rows)})
    return found


def _describe(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line[:300]}"


def _line_boxes(page: Any, text: str) -> list[list[float]]:
    """Where each line of ``text`` sits on the page: [x0, y0, x1, y1, start, end] with the line's
    offsets in ``text``. The context check reads a table's rows and columns from these (a row
    label is left of its numbers, a column header above them); most trial tables have no ruling
    lines, so the table finder sees none of them. Lines not found in the text are left out."""
    boxes: list[list[float]] = []
    cursor = 0
    # The flags of plain text extraction, so each line reads exactly as it does in ``text``.
    for block in page.get_text("dict", flags=import_pymupdf().TEXTFLAGS_TEXT)["blocks"]:
        for line in block.get("lines", ()):
            chars = "".join(span["text"] for span in line["spans"])
            if not chars.strip():
                continue
            start = text.find(chars, cursor)
            if start < 0:
                continue
            cursor = start + len(chars)
            x0, y0, x1, y1 = line["bbox"]
            boxes.append([round(x0, 1), round(y0, 1), round(x1, 1), round(y1, 1), start, cursor])
    return boxes


def _read_pages(doc: Any, limits: EngineOptions) -> tuple[list[str], list[dict[str, Any]], list[list[list[float]]]]:
    pages_text: list[str] = []
    tables: list[dict[str, Any]] = []
    layout: list[list[list[float]]] = []
    for number in range(1, doc.page_count + 1):
        try:
            page = doc[number - 1]
            text = page.get_text("text")
        except Exception as exc:
            raise ParseFailure(f"page {number} could not be read ({_describe(exc)})") from exc
        pages_text.append(text)
        try:
            layout.append(_line_boxes(page, text))
        except Exception:  # the boxes only refine checks: a page without them keeps its text
            layout.append([])
        if limits.table_detection != "off" and TABLE_CAPTION.search(text):
            # Tables add numbers on top of the page text; a page whose table cannot be
            # detected keeps its text, so a table failure never costs the document.
            with contextlib.suppress(Exception):
                tables.extend(_tables(page, number, limits.table_detection))
    return pages_text, tables, layout


def _open(path: Path, limits: EngineOptions) -> Any:
    """The PDF opened, after the checks that cost nothing: its size, then (before any page is
    read) encryption and the page count, so a page-count bomb is refused at once."""
    pymupdf = import_pymupdf()
    size = path.stat().st_size
    if size == 0:
        raise ParseFailure("empty file")
    if size > limits.max_bytes:
        raise ParseFailure(f"{size} bytes exceeds the limit of {limits.max_bytes} bytes")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # pymupdf raises several unrelated types for damaged files
        with path.open("rb") as handle:
            kind = "truncated or damaged PDF" if b"%PDF-" in handle.read(1024) else "not a readable PDF"
        raise ParseFailure(f"{kind} ({_describe(exc)})") from exc
    try:
        if doc.needs_pass:
            raise ParseFailure("PDF is encrypted (password-protected)")
        pages = int(doc.page_count)
        if pages == 0:
            raise ParseFailure("PDF has no pages")
        if pages > limits.max_pages:
            raise ParseFailure(f"{pages} pages exceeds the limit of {limits.max_pages} pages")
    except Exception as exc:
        doc.close()
        if isinstance(exc, ParseFailure):
            raise
        raise ParseFailure(f"not a readable PDF ({_describe(exc)})") from exc
    return doc


def inspect_pdf(path: Path, limits: EngineOptions) -> dict[str, Any]:
    """What registration needs: {pages, title, first_author, year}, after making sure the PDF has
    text to extract. Reads pages only up to the first with text (a normal paper costs one page's
    text), and the first page's type sizes (its title, where the metadata has none)."""
    doc = _open(path, limits)
    try:
        with doc:
            has_text = any(page.get_text().strip() for page in doc)
            pages = int(doc.page_count)
            described = _described(doc)
    except Exception as exc:  # MuPDF reports damage from many places (page tree, xref, streams)
        raise ParseFailure(f"damaged PDF ({_describe(exc)})") from exc
    if not has_text:
        raise ParseFailure("no text layer (scanned PDF?); OCR is not supported")
    return {"pages": pages, **asdict(described)}


def _described(doc: Any) -> Bibliography:
    """What the paper is, for lists; a PDF whose metadata or first page cannot be read that way is
    still registered, unlabelled (a label is never a reason to refuse a paper)."""
    try:
        first = doc[0].get_text("dict", flags=import_pymupdf().TEXTFLAGS_TEXT)  # no image bytes
        return bibliography(doc.metadata or {}, first, datetime.now(UTC).year)
    except Exception:  # any reading error: no label, never a refusal
        return Bibliography()


def read_text(path: Path, limits: EngineOptions) -> dict[str, Any]:
    """{pages_text}: the plain text the parse starts from, without tables (a quick estimate)."""
    doc = _open(path, limits)
    try:
        with doc:
            return {"pages_text": [page.get_text("text") for page in doc]}
    except Exception as exc:
        raise ParseFailure(f"damaged PDF ({_describe(exc)})") from exc


def parse_pdf(path: Path, limits: EngineOptions) -> dict[str, Any]:
    """Parse ``path`` into {pages_text, tables, layout, engine, engine_version, parser_version, seconds}."""
    started = time.perf_counter()
    doc = _open(path, limits)
    try:
        with doc:
            pages_text, tables, layout = _read_pages(doc, limits)
    except ParseFailure:
        raise
    except Exception as exc:  # MuPDF reports damage from many places (page tree, xref, streams)
        raise ParseFailure(f"damaged PDF ({_describe(exc)})") from exc
    if not any(text.strip() for text in pages_text):
        raise ParseFailure("no text layer (scanned PDF?); OCR is not supported")
    return {
        "pages_text": pages_text,
        "tables": tables,
        "layout": layout,
        "engine": ENGINE,
        "engine_version": engine_version(),
        "parser_version": limits.parser_version,
        "seconds": round(time.perf_counter() - started, 4),
    }
