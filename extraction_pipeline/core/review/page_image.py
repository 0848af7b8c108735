"""A PDF page as a PNG image with a quote's source span highlighted on it.

The span comes from grounding: (source, start, end) in the page's text or in one of its tables'
text, as the parse engine produced them. For page text the engine's text is PyMuPDF's
``get_text("text")``, whose words come in the same order as ``get_text("words")``, so each word's
character range is found by walking the text and the words overlapping the span are highlighted.
A table span is found by its letters and digits among the page's words, row by row (a table's
text is rebuilt from cells, so it has no offsets on the page).

Rendering reads an untrusted PDF, so the web layer calls ``render_isolated``: a child process with
a hard timeout and the memory cap, like the parse step, so a page that hangs, crashes or
exhausts MuPDF costs one image.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseTimeout, cpu_cap, isolated_command, out_of_memory, run_child

HIGHLIGHT_FILL = (1.0, 0.85, 0.0)
HIGHLIGHT_EDGE = (0.9, 0.45, 0.0)
HIGHLIGHT_OPACITY = 0.45
DEFAULT_ZOOM = 1.5
# A screen with two or three device pixels per CSS pixel, and a reviewer zooming in, needs more
# pixels than 1.5 (a letter page at 1.5 is 918 px wide: blurry on a high-density screen).
MIN_ZOOM, MAX_ZOOM = 1.0, 6.0
RENDER_TIMEOUT_SECONDS = 30.0
WORKER_MODULE = "extraction_pipeline.core.review.page_image"


@dataclass(frozen=True)
class Span:
    source: str  # "text" or "table N"
    start: int
    end: int
    text: str  # the span's text (page text or table text between start and end)


def _skeleton(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isalnum())


def _text_span_words(page_text: str, words: list[Any], span: Span) -> list[int]:
    """Indexes of the words whose characters overlap [start, end) of the page text."""
    chosen, cursor = [], 0
    for index, word in enumerate(words):
        found = page_text.find(word[4], cursor)
        if found == -1:
            continue  # not where expected: the rest still maps
        cursor = found + len(word[4])
        if found < span.end and cursor > span.start:
            chosen.append(index)
        if found >= span.end:
            break
    return chosen


def _find_run(skeletons: list[str], target: str, first: int = 0) -> list[int]:
    """The shortest run of consecutive words whose skeletons, joined, contain ``target``."""
    if not target:
        return []
    joined, owners = "", []
    for index in range(first, len(skeletons)):
        joined += skeletons[index]
        owners.extend([index] * len(skeletons[index]))
    at = joined.find(target)
    if at == -1:
        return []
    return sorted(set(owners[at : at + len(target)]))


def _table_span_words(words: list[Any], span: Span) -> list[int]:
    skeletons = [_skeleton(word[4]) for word in words]
    whole = _find_run(skeletons, _skeleton(span.text))
    if whole:
        return whole
    chosen: list[int] = []
    for row in span.text.splitlines():
        found = _find_run(skeletons, _skeleton(row))
        if not found:
            for cell in row.split("\t"):
                found += _find_run(skeletons, _skeleton(cell), chosen[-1] + 1 if chosen else 0)
        chosen.extend(found)
    return sorted(set(chosen))


def highlight_rects(page: Any, span: Span) -> list[tuple[float, float, float, float]]:
    """Rectangles (PDF points) of the words that make up ``span`` on ``page``."""
    words = page.get_text("words")
    if span.source == "text":
        indexes = _text_span_words(page.get_text("text"), words, span)
    else:
        indexes = _table_span_words(words, span)
    lines: dict[tuple[int, int], list[float]] = {}  # one box per line: (block, line) -> x0, y0, x1, y1
    for index in indexes:
        x0, y0, x1, y1, _text, block, line = words[index][:7]
        box = lines.setdefault((block, line), [x0, y0, x1, y1])
        box[:] = [min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1)]
    return [(box[0], box[1], box[2], box[3]) for box in lines.values()]


def render(
    pdf: Path, page_number: int, span: Span | None, zoom: float = DEFAULT_ZOOM
) -> tuple[bytes, list[list[float]]]:
    """(PNG bytes, highlighted rectangles in image pixels) for 1-based ``page_number``."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()
    with pymupdf.open(pdf, filetype="pdf") as doc:
        if not 1 <= page_number <= doc.page_count:
            raise PermanentError(f"page {page_number} is not in this PDF ({doc.page_count} pages)")
        page = doc[page_number - 1]
        rects = highlight_rects(page, span) if span else []
        for x0, y0, x1, y1 in rects:
            page.draw_rect(
                pymupdf.Rect(x0 - 1, y0 - 1, x1 + 1, y1 + 1),
                color=HIGHLIGHT_EDGE,
                fill=HIGHLIGHT_FILL,
                fill_opacity=HIGHLIGHT_OPACITY,
                width=0.6,
            )
        pixmap = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        scaled = [[round(v * zoom, 1) for v in rect] for rect in rects]
        return pixmap.tobytes("png"), scaled


def render_isolated(
    pdf: Path,
    page_number: int,
    span: Span | None,
    *,
    zoom: float = DEFAULT_ZOOM,
    timeout_seconds: float = RENDER_TIMEOUT_SECONDS,
    memory_mb: int = EngineOptions.memory_mb,
) -> tuple[bytes, list[list[float]]]:
    """``render`` in a child process in its own session, under the memory cap, killed (with
    anything it started) on timeout (pdf/isolation.py)."""
    with tempfile.TemporaryDirectory(prefix="page-") as tmp:
        out = Path(tmp) / "page"
        spec = json.dumps({"page": page_number, "span": span.__dict__ if span else None, "zoom": zoom})
        try:
            ended = run_child(
                [*isolated_command(WORKER_MODULE, memory_mb, cpu_cap(timeout_seconds)), str(pdf), str(out), spec],
                timeout_seconds=timeout_seconds,
                what="rendering the page",
            )
        except ParseTimeout as exc:
            raise PermanentError(str(exc)) from None
        meta = out.with_suffix(".json")
        if not meta.exists():
            raise PermanentError(ended.crash_reason(memory_mb, "rendering the page"))
        payload = json.loads(meta.read_text())
        if "error" in payload:
            raise PermanentError(str(payload["error"]))
        return out.with_suffix(".png").read_bytes(), payload["rects"]


def main(argv: list[str]) -> int:
    pdf, out, spec = Path(argv[0]), Path(argv[1]), json.loads(argv[2])
    span = Span(**spec["span"]) if spec.get("span") else None
    try:
        zoom = min(max(float(spec.get("zoom") or DEFAULT_ZOOM), MIN_ZOOM), MAX_ZOOM)
        png, rects = render(pdf, int(spec["page"]), span, zoom)
    except Exception as exc:  # one clean line for the page, whatever MuPDF raised
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        reason = out_of_memory(exc) or first_line
        out.with_suffix(".json").write_text(json.dumps({"error": f"cannot render the page ({reason})"}))
        return 3
    out.with_suffix(".png").write_bytes(png)
    tmp = out.with_suffix(".partial")
    tmp.write_text(json.dumps({"rects": rects}))
    os.replace(tmp, out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
