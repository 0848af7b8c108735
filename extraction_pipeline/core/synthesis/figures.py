"""What the synthesis pictures share: a matplotlib figure made without pyplot, text made safe to
draw, and the figure written as SVG (the batch page, downloads), PNG (the workbook, downloads) or
PDF (downloads).

Figures are made with ``Figure()`` and written by a canvas of their own, never through pyplot:
pyplot keeps a current figure in global state, and the web server draws for several requests at
once. matplotlib is imported inside the functions: it costs a second of CPU, and every Dagster run
and command would pay it at import.

SVG text stays text (``svg.fonttype`` "none"): the page's links, a search in the browser and the
tests find a study's name. The SVG writer has no classes nor tooltips; ``mark`` gives an artist
both, through its gid, and ``svg_text`` turns the gid into a ``class`` and a ``<title>``.
"""

from __future__ import annotations

import functools
import io
import json
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure

Format = Literal["svg", "png", "pdf"]
MEDIA_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}
FONT_SIZE = 9  # points; 12 px on a screen, the page's own small text
PNG_DPI = 192  # twice a screen's 96 dpi: sharp when shown at the figure's size (the workbook)
PRINT_DPI = 300  # a journal's minimum for line art with text: the PNG a reader downloads
SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
MARK = "mark:"  # a gid starting so holds a class and a title (``mark``)
NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
SPACES = re.compile(r"\s+")


@functools.cache
def _configured() -> None:
    """Settings every drawing shares, set once before the first (matplotlib reads them when
    writing, and offers no other way): text as text in SVG, TrueType in PDF so its text can be
    searched and copied."""
    import matplotlib

    matplotlib.rcParams.update({"svg.fonttype": "none", "pdf.fonttype": 42, "font.size": FONT_SIZE})


def new_figure(width: float, height: float) -> Figure:
    """A white figure of ``width`` × ``height`` inches."""
    _configured()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), facecolor="#ffffff")


def clean(value: object) -> str:
    """``value`` as one line of text to draw: study and outcome names come from papers and models,
    and the control characters XML cannot hold (a PDF's text can contain them) would break the SVG."""
    return SPACES.sub(" ", NOT_XML.sub("", str(value))).strip()


def mark(artist: Artist, css_class: str, title: str | None = None) -> None:
    """Give ``artist`` a class and a tooltip in the SVG (the page's styles, its tests, a hover)."""
    artist.set_gid(MARK + json.dumps([css_class, clean(title) if title is not None else None]))


def render(figure: Figure, fmt: Format, dpi: int = PNG_DPI) -> bytes:
    """``figure`` as a file in ``fmt``; a PNG at ``dpi`` dots per inch (recorded in the file, so
    a word processor places it at the figure's size)."""
    if fmt == "svg":
        return svg_text(figure).encode("utf-8")
    buffer = io.BytesIO()
    if fmt == "png":
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(figure).print_figure(buffer, format="png", dpi=dpi)
    else:
        from matplotlib.backends.backend_pdf import FigureCanvasPdf

        # No creation date: the same picture is the same file.
        FigureCanvasPdf(figure).print_figure(buffer, format="pdf", metadata={"CreationDate": None})
    return buffer.getvalue()


def svg_text(figure: Figure) -> str:
    """``figure`` as an ``<svg>`` element, to include in a page as it is or to save as a file.

    matplotlib names every group (``text_1``, ``patch_2``): two pictures on one page would repeat
    those ids, so they are dropped (nothing refers to them); marked groups get their class and
    title. Links open in the same tab, as the page's other links do."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buffer = io.StringIO()
    FigureCanvasSVG(figure).print_figure(buffer, format="svg", metadata={"Date": None})
    ET.register_namespace("", SVG)
    ET.register_namespace("xlink", XLINK)
    root = ET.fromstring(buffer.getvalue())  # noqa: S314 (matplotlib's output, every text escaped by it)
    for metadata in root.findall(f"{{{SVG}}}metadata"):
        root.remove(metadata)
    for group in root.iter(f"{{{SVG}}}g"):
        gid = group.attrib.pop("id", "")
        if gid.startswith(MARK):
            css_class, title = json.loads(gid[len(MARK) :])
            group.set("class", css_class)
            if title is not None:
                tooltip = ET.Element(f"{{{SVG}}}title")
                tooltip.text = title
                group.insert(0, tooltip)
    for link in root.iter(f"{{{SVG}}}a"):
        link.attrib.pop("target", None)
    return ET.tostring(root, encoding="unicode")
