"""The parsed document: text per page, tables per page, and a character map.

The *searchable text* is every page's text followed by the plain text of that page's tables.
``locate(start, end)`` maps any span of it back to (page, start, end) in that page's text or
table, which is what grounding and the workbook cite.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, TypeVar

_T = TypeVar("_T")

SEGMENT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ParsedTable:
    page: int  # 1-based
    html: str  # normalized <table> (BeautifulSoup)
    text: str  # cells separated by tabs, rows by newlines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Location:
    page: int  # 1-based
    source: str  # "text" or "table N" (1-based within the page)
    start: int  # offsets within that page's text or that table's text
    end: int


@dataclass(frozen=True)
class _Segment:
    start: int
    end: int
    page: int
    source: str


@dataclass(frozen=True)
class ParsedDocument:
    sha256: str
    pages_text: list[str]
    tables: list[ParsedTable] = field(default_factory=list)
    # Per page, each text line's box and offsets: [x0, y0, x1, y1, start, end] (engine._line_boxes).
    # Empty for a parse cached before boxes were kept: the checks then read the text alone.
    layout: list[list[list[float]]] = field(default_factory=list)
    engine: str = ""
    engine_version: str = ""
    parser_version: str = ""
    seconds: float = 0.0
    cache_hit: bool = False

    @property
    def pages(self) -> int:
        return len(self.pages_text)

    @property
    def full_text(self) -> str:
        return SEGMENT_SEPARATOR.join(self.pages_text)

    def tables_on(self, page: int) -> list[ParsedTable]:
        return [table for table in self.tables if table.page == page]

    @cached_property
    def _derived(self) -> dict[Hashable, Any]:
        return {}

    def derived(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """What a reader of this document derives from it (a page's lines with their rows, the
        place of a printed number), built once per document: the checks ask about the same page
        and the same number for many values. ``build`` must depend on the document alone."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]  # type: ignore[no-any-return]

    @cached_property
    def _segments(self) -> tuple[str, list[_Segment]]:
        # Built once per document: grounding locates every quote against it.
        parts: list[str] = []
        segments: list[_Segment] = []
        offset = 0
        for page, text in enumerate(self.pages_text, start=1):
            pieces = [("text", text)] + [(f"table {n}", t.text) for n, t in enumerate(self.tables_on(page), start=1)]
            for source, piece in pieces:
                segments.append(_Segment(offset, offset + len(piece), page, source))
                parts.append(piece)
                offset += len(piece) + len(SEGMENT_SEPARATOR)
        return SEGMENT_SEPARATOR.join(parts), segments

    @cached_property
    def _segment_starts(self) -> list[int]:
        return [segment.start for segment in self._segments[1]]

    @property
    def searchable_text(self) -> str:
        return self._segments[0]

    def locate(self, start: int, end: int) -> Location | None:
        """Where a span of ``searchable_text`` comes from; None outside any segment. A span that
        runs past its segment is clipped to it (a quote never spans two pages)."""
        segments = self._segments[1]
        index = bisect.bisect_right(self._segment_starts, start) - 1
        if index < 0 or start > segments[index].end:
            return None
        segment = segments[index]
        return Location(segment.page, segment.source, start - segment.start, min(end, segment.end) - segment.start)

    def metadata(self) -> dict[str, Any]:
        """What the parse step reports (UI metadata, `parse --json`)."""
        return {
            "pages": self.pages,
            "tables": len(self.tables),
            "engine": self.engine,
            "engine_version": self.engine_version,
            "seconds": self.seconds,
            "cache": "hit" if self.cache_hit else "miss",
        }
