"""What the synthesis pictures share: text made safe for SVG, and SVG turned into PNG.

Study and outcome names come from papers and models: they are escaped, and the control characters
XML cannot hold (a PDF's text can contain them) are dropped, or the drawing would not parse.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def text(value: object) -> str:
    """``value`` as the content of an SVG element."""
    return escape(NOT_XML.sub("", str(value)))


def attribute(value: object) -> str:
    """``value`` as a quoted SVG attribute value."""
    return quoteattr(NOT_XML.sub("", str(value)))


PALETTE_COLOURS = 64  # the pictures use a handful of colours and their anti-aliasing


def to_png(svg: str, scale: float = 2.0) -> bytes:
    """The SVG as a PNG (PyMuPDF renders SVG like a one-page document), for the workbook. Stored
    with a palette: a third of the size of full colour, so a batch's pictures do not outweigh its
    data (three pictures: 175 KB in full colour, 75 KB with 64 colours)."""
    import io

    from PIL import Image

    from extraction_pipeline.core.pdf.engine import import_pymupdf

    pymupdf = import_pymupdf()
    with pymupdf.open(stream=svg.encode("utf-8"), filetype="svg") as document:
        pixmap = document[0].get_pixmap(matrix=pymupdf.Matrix(scale, scale))
        full = Image.open(io.BytesIO(pixmap.tobytes("png"))).convert("RGB")
    small = io.BytesIO()
    full.convert("P", palette=Image.Palette.ADAPTIVE, colors=PALETTE_COLOURS).save(small, format="PNG", optimize=True)
    return small.getvalue()
