"""A PDF page as a PNG image with a quote's source span highlighted on it.

The span comes from grounding: (source, start, end) in the page's text or in one of its tables'
text, as the parse engine produced them. For page text the engine's text is PyMuPDF's
``get_text("text")``, whose lines come in the same order as ``get_text("rawdict")``'s, so each
character's offset is found by locating its line in the text, and the characters inside the span
are highlighted. A table span is found by its letters and digits among the page's characters,
row by row (a table's text is rebuilt from cells, so it has no offsets on the page).

Rendering reads an untrusted PDF, so the web layer calls ``render_isolated``: a child process with
a hard timeout and the memory cap, like the parse step, so a page that hangs, crashes or
exhausts MuPDF costs one image.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseTimeout, cpu_cap, isolated_command, out_of_memory, run_child
from extraction_pipeline.core.verification.grounding import skeleton

HIGHLIGHT_FILL = (1.0, 0.85, 0.0)
HIGHLIGHT_EDGE = (0.9, 0.45, 0.0)
HIGHLIGHT_OPACITY = 0.45
DEFAULT_ZOOM = 1.5
# A screen with two or three device pixels per CSS pixel, and a reviewer zooming in, needs more
# pixels than 1.5 (a letter page at 1.5 is 918 px wide: blurry on a high-density screen).
MIN_ZOOM, MAX_ZOOM = 1.0, 6.0
RENDER_TIMEOUT_SECONDS = 30.0
# How a span is drawn: part of every cached image's key and of its address (web/review.py), so a
# change of what a highlight covers (2: the quoted characters, not whole words) is never served
# from a cache that holds the old drawing.
DRAWING = 2
WORKER_MODULE = "extraction_pipeline.core.review.page_image"


@dataclass(frozen=True)
class Span:
    source: str  # "text" or "table N"
    start: int
    end: int
    text: str  # the span's text (page text or table text between start and end)
    # Where the place is not all of start..end (an outcome printed as a column: its cells), the
    # stretches of the page text to highlight.
    cells: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class _Char:
    """One character of the page as PyMuPDF places it, with its offset in the page's text."""

    c: str
    box: tuple[float, float, float, float]
    line: tuple[int, int]  # (block, line): one highlight rectangle per line
    at: int  # offset in ``get_text("text")``; -1 when its line was not found there


def _chars(page: Any) -> list[_Char]:
    """Every character of the page in reading order, each with its own box. Per character, not
    per word: a table set with letter spacing has one-letter "words", and a "word" may hold more
    than the quote ("25.78±3.30" when the quote is "25.78"), so only characters cover exactly
    the quoted text. Lines are located in the page text as the parse engine reads it (the flags
    of plain text extraction, so each line reads as it does there)."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    text = page.get_text("text")
    found: list[_Char] = []
    cursor = 0
    for block in page.get_text("rawdict", flags=import_pymupdf().TEXTFLAGS_TEXT)["blocks"]:
        for number, line in enumerate(block.get("lines", ())):
            chars = [char for span in line["spans"] for char in span["chars"]]
            joined = "".join(char["c"] for char in chars)
            start = text.find(joined, cursor) if joined.strip() else -1
            if start >= 0:
                cursor = start + len(joined)
            for offset, char in enumerate(chars):
                at = start + offset if start >= 0 else -1
                x0, y0, x1, y1 = char["bbox"]
                found.append(_Char(char["c"], (x0, y0, x1, y1), (block["number"], number), at))
    return found


def _find_run(chars: list[_Char], skeletons: list[str], target: str, first: int = 0) -> list[int]:
    """The shortest run of consecutive characters whose skeletons, joined, contain ``target``:
    its letters and digits, and the signs between them on their lines (a sign alone on a line in
    between, such as a column's "%", is another cell's)."""
    if not target:
        return []
    joined, owners = "", []
    for index in range(first, len(skeletons)):
        joined += skeletons[index]
        owners.extend([index] * len(skeletons[index]))
    at = joined.find(target)
    if at == -1:
        return []
    matched = owners[at : at + len(target)]
    lines = {chars[index].line for index in matched}
    return [index for index in range(matched[0], matched[-1] + 1) if chars[index].line in lines]


def _beside(chars: list[_Char], index: int, signs: str, direction: int) -> list[int]:
    """The characters ``signs`` next to ``chars[index]`` on its line, going ``direction`` (-1: to
    the left), as far as they match. Spaces are stepped over: a letter-spaced line has one after
    every character."""
    taken, line = [], chars[index].line
    for sign in signs:
        index += direction
        while 0 <= index < len(chars) and not chars[index].c.strip() and chars[index].line == line:
            index += direction
        if not (0 <= index < len(chars)) or chars[index].c != sign or chars[index].line != line:
            break
        taken.append(index)
    return taken


def _widened(chars: list[_Char], run: list[int], text: str) -> list[int]:
    """``run`` (found by letters and digits) with the quote's own leading and trailing signs
    beside it on the same line: the "(" of "(19", the "%" of "95%"."""
    quoted = "".join(text.split())
    body = [i for i, c in enumerate(quoted) if skeleton(c)]
    if not run or not body:
        return run
    before = _beside(chars, run[0], quoted[: body[0]][::-1], -1)
    after = _beside(chars, run[-1], quoted[body[-1] + 1 :], 1)
    return sorted({*before, *run, *after})


def _closed(chars: list[_Char], indexes: list[int]) -> list[int]:
    """``indexes`` with the brackets they open closed: a grounded span ends at its last letter or
    digit, so the span of "25.78±3.30 (19)" is "25.78±3.30 (19"."""
    if not indexes:
        return indexes
    text = "".join(chars[i].c for i in indexes)
    missing = "".join(close * (text.count(open_) - text.count(close)) for open_, close in ("()", "[]"))
    return [*indexes, *_beside(chars, indexes[-1], missing, 1)]


def _table_span_chars(chars: list[_Char], span: Span) -> list[int]:
    skeletons = [skeleton(char.c) for char in chars]
    whole = _find_run(chars, skeletons, skeleton(span.text))
    if whole:
        return _widened(chars, whole, span.text)
    chosen: list[int] = []
    for row in span.text.splitlines():
        found = _find_run(chars, skeletons, skeleton(row))
        if not found:
            for cell in row.split("\t"):
                found += _find_run(chars, skeletons, skeleton(cell), chosen[-1] + 1 if chosen else 0)
        chosen.extend(found)
    return sorted(set(chosen))


def highlight_lines(page: Any, span: Span) -> list[tuple[tuple[float, float, float, float], str]]:
    """The rectangles (PDF points) of the characters that make up ``span`` on ``page``, one per
    line — the first quoted character to the last, nothing of a word beyond them — each with the
    text it covers (a viewer finds the value inside a quote wider than its screen by it)."""
    chars = _chars(page)
    if span.source == "text":
        stretches = span.cells or ((span.start, span.end),)
        indexes = [i for i, char in enumerate(chars) if any(s <= char.at < e for s, e in stretches)]
    else:
        indexes = _table_span_chars(chars, span)
    indexes = _closed(chars, indexes)
    lines: dict[tuple[int, int], tuple[list[float], list[str]]] = {}  # (block, line) -> box, its text
    for index in indexes:
        char = chars[index]
        x0, y0, x1, y1 = char.box
        if char.line not in lines:
            if not char.c.strip():
                continue  # a line's part starts at its first quoted character, never a space
            lines[char.line] = ([x0, y0, x1, y1], [])
        box, text = lines[char.line]
        text.append(char.c)
        if char.c.strip():  # a space at the end of a line's part is not highlighted
            box[:] = [min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1)]
    return [((box[0], box[1], box[2], box[3]), "".join(text).strip()) for box, text in lines.values()]


class Drawn(NamedTuple):
    png: bytes
    rects: list[list[float]]  # each highlighted line's part, in image pixels
    texts: list[str]  # what each of them covers (the first 200 characters)


def draw(pdf: Path, page_number: int, span: Span | None, zoom: float = DEFAULT_ZOOM) -> Drawn:
    """1-based ``page_number`` of ``pdf`` as a PNG, ``span`` highlighted on it."""
    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()
    with pymupdf.open(pdf, filetype="pdf") as doc:
        if not 1 <= page_number <= doc.page_count:
            raise PermanentError(f"page {page_number} is not in this PDF ({doc.page_count} pages)")
        page = doc[page_number - 1]
        lines = highlight_lines(page, span) if span else []
        for (x0, y0, x1, y1), _text in lines:
            page.draw_rect(
                pymupdf.Rect(x0 - 1, y0 - 1, x1 + 1, y1 + 1),
                color=HIGHLIGHT_EDGE,
                fill=HIGHLIGHT_FILL,
                fill_opacity=HIGHLIGHT_OPACITY,
                width=0.6,
            )
        pixmap = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        scaled = [[round(v * zoom, 1) for v in box] for box, _text in lines]
        return Drawn(pixmap.tobytes("png"), scaled, [text[:200] for _box, text in lines])


def render(
    pdf: Path, page_number: int, span: Span | None, zoom: float = DEFAULT_ZOOM
) -> tuple[bytes, list[list[float]]]:
    """(PNG bytes, highlighted rectangles in image pixels) for 1-based ``page_number``."""
    drawn = draw(pdf, page_number, span, zoom)
    return drawn.png, drawn.rects


def render_isolated(
    pdf: Path,
    page_number: int,
    span: Span | None,
    *,
    zoom: float = DEFAULT_ZOOM,
    timeout_seconds: float = RENDER_TIMEOUT_SECONDS,
    memory_mb: int = EngineOptions.memory_mb,
) -> Drawn:
    """``draw`` in a child process in its own session, under the memory cap, killed (with
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
        return Drawn(out.with_suffix(".png").read_bytes(), payload["rects"], payload["texts"])


def main(argv: list[str]) -> int:
    pdf, out, spec = Path(argv[0]), Path(argv[1]), json.loads(argv[2])
    span = Span(**spec["span"]) if spec.get("span") else None
    try:
        zoom = min(max(float(spec.get("zoom") or DEFAULT_ZOOM), MIN_ZOOM), MAX_ZOOM)
        drawn = draw(pdf, int(spec["page"]), span, zoom)
    except Exception as exc:  # one clean line for the page, whatever MuPDF raised
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        reason = out_of_memory(exc) or first_line
        out.with_suffix(".json").write_text(json.dumps({"error": f"cannot render the page ({reason})"}))
        return 3
    out.with_suffix(".png").write_bytes(drawn.png)
    tmp = out.with_suffix(".partial")
    tmp.write_text(json.dumps({"rects": drawn.rects, "texts": drawn.texts}))
    os.replace(tmp, out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
