"""What may go into a workbook cell, for every sheet that writes one (the extraction sheets and the
synthesis sheets alike)."""

from __future__ import annotations

import re
from typing import Any

MAX_CELL_CHARS = 32_767
# The characters openpyxl rejects (its ILLEGAL_CHARACTERS_RE), without importing openpyxl here.
ILLEGAL_CHARACTERS = re.compile(r"[\000-\010]|[\013-\014]|[\016-\037]")


def cell_value(value: Any) -> Any:
    """Text as Excel can hold it: no control characters (openpyxl refuses them, and a PDF's text
    can contain them), at most 32,767 characters per cell."""
    if isinstance(value, str):
        return ILLEGAL_CHARACTERS.sub("", value)[:MAX_CELL_CHARS]
    return value


def as_text_cells(row_cells: Any) -> None:
    """Values that merely start like a formula (from a PDF, a model or a filename) stay text:
    a workbook must never execute content taken from a document."""
    for cell in row_cells:
        if cell.data_type == "f":
            cell.data_type = "s"


def write_row(sheet: Any, row: int, values: list[Any]) -> list[Any]:
    """Row ``row``, cells as Excel can hold them, text that starts like a formula kept as text
    (names and values come from papers and models); returns its cells. By coordinates:
    ``sheet.append``, ``sheet[n]`` and ``max_row`` scan every cell of the sheet, which made a
    12,000-value batch take over ten minutes to write."""
    cells = [sheet.cell(row=row, column=column, value=cell_value(value)) for column, value in enumerate(values, 1)]
    as_text_cells(cells)
    return cells
