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
