"""The page image a reviewer sees next to a value: which page, which span, rendered once.

The span is the one grounding stored with the value (or with the reviewer's corrected quote). The
PDF is the registered copy, read only from the instance's document store, without following
links, and only if its bytes still hash to the registered digest. Images are cached by content
(digest, page, span), so each page view renders at most once.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import ConfigError, PermanentError
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import get_document
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.ledger.rows import DocumentRow
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import READD_HINT, copy_hashing, open_stored_copy
from extraction_pipeline.core.review.page_image import DEFAULT_ZOOM, DRAWING, Drawn, Span, render_isolated


@dataclass(frozen=True)
class PageImage:
    png: bytes
    page: int
    pages: int
    rects: list[list[float]]
    texts: list[str]  # what each rectangle covers


def anchor_of(entry: GroundedValue | None, grounding: dict[str, Any] | None) -> dict[str, Any] | None:
    """Where the value's quote is: the reviewer's re-grounded quote first, else the machine's."""
    for candidate in (grounding, entry.as_json() if entry else None):
        if candidate and candidate.get("page") and candidate.get("start") is not None:
            anchor = {key: candidate[key] for key in ("page", "source", "start", "end")}
            anchor["continued"] = candidate.get("continued")  # the second part of an interrupted quote
            anchor["cells"] = candidate.get("cells") or []  # a place that is not all of start..end
            return anchor
    return None


def _span_text(ledger: Ledger, document: DocumentRow, anchor: dict[str, Any], options: ParseOptions | None) -> str:
    parsed = parse_document(ledger, sha256=document["sha256"], stored_path=document["stored_path"], options=options)
    page, source, start, end = anchor["page"], str(anchor["source"]), int(anchor["start"]), int(anchor["end"])
    if source == "text":
        return str(parsed.pages_text[page - 1][start:end])
    number = int(source.split()[-1])
    return str(parsed.tables_on(page)[number - 1].text[start:end])


def page_image(
    ledger: Ledger,
    *,
    item_id: int,
    entry: GroundedValue | None,
    grounding: dict[str, Any] | None,
    page: int | None,
    documents_dir: Path,
    cache_dir: Path,
    options: ParseOptions | None = None,
    scale: float = 1.0,
) -> PageImage:
    """The page (``page``, else the value's own page, else 1) with the value's span highlighted
    when the span is on that page, rendered at ``scale`` times the default resolution (1 to 4, in
    steps of a half, so a few sizes of each page are cached, not one per window width)."""
    item = get_item(ledger, item_id)
    document = get_document(ledger, item["document_id"]) if item else None
    if document is None:
        raise ConfigError(f"unknown item {item_id}")
    anchor = anchor_of(entry, grounding)
    shown = page or (anchor["page"] if anchor else 1)
    if not 1 <= shown <= document["pages"]:
        raise ConfigError(f"page {shown} is not in this PDF ({document['pages']} pages)")
    span = None
    parts = [anchor, anchor.get("continued")] if anchor else []
    here = next((part for part in parts if part and part.get("page") == shown), None)
    if here is not None:
        text = _span_text(ledger, document, here, options)
        cells = tuple((int(cell[0]), int(cell[1])) for cell in here.get("cells") or ())
        span = Span(str(here["source"]), int(here["start"]), int(here["end"]), text, cells)
    scale = min(max(round(scale * 2) / 2, 1.0), 4.0)
    identity: list[Any] = [document["sha256"], shown, asdict(span) if span else None, scale, DRAWING]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    cached_png, cached_meta = cache_dir / f"{key}.png", cache_dir / f"{key}.json"
    if cached_png.is_file() and cached_meta.is_file():
        meta = json.loads(cached_meta.read_text())
        return PageImage(cached_png.read_bytes(), shown, document["pages"], meta["rects"], meta["texts"])
    memory_mb = (options or ParseOptions()).limits.memory_mb
    drawn = _render_registered(document, documents_dir, shown, span, DEFAULT_ZOOM * scale, memory_mb)
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached_png.write_bytes(drawn.png)
    cached_meta.write_text(json.dumps({"rects": drawn.rects, "texts": drawn.texts}))
    return PageImage(drawn.png, shown, document["pages"], drawn.rects, drawn.texts)


def _render_registered(
    document: DocumentRow, documents_dir: Path, page: int, span: Span | None, zoom: float, memory_mb: int
) -> Drawn:
    stored = Path(document["stored_path"])
    if not stored.resolve().is_relative_to(documents_dir.resolve()):
        raise PermanentError(f"the stored copy of {document['filename']} is outside the document store: refused")
    with tempfile.TemporaryDirectory(prefix="view-") as tmp:
        copy = Path(tmp) / "document.pdf"
        with open_stored_copy(stored) as source, copy.open("wb") as target:
            digest = copy_hashing(source, target)
        if digest != document["sha256"]:
            raise PermanentError(f"the stored copy of {document['filename']} has changed: {READD_HINT}")
        return render_isolated(copy, page, span, zoom=zoom, memory_mb=memory_mb)
