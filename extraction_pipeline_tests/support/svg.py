"""Reading the synthesis pictures' SVG as the page and its styles address it: groups by class (a
study's square, a judgement's circle, a summary bar), their tooltips, the texts drawn, the links."""

from __future__ import annotations

import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def parse(text: str) -> ET.Element:
    """The drawing's root element (our own pictures: nothing hostile to parse)."""
    return ET.fromstring(text)  # noqa: S314


def classed(svg: ET.Element, css_class: str) -> list[ET.Element]:
    """The groups with exactly this class."""
    return [g for g in svg.iter(f"{SVG}g") if g.get("class") == css_class]


def titles(svg: ET.Element) -> list[str]:
    """The tooltips, in drawing order."""
    return [title.text or "" for title in svg.iter(f"{SVG}title")]


def texts(svg: ET.Element) -> list[str]:
    """Every text drawn, one string per text element."""
    return ["".join(text.itertext()) for text in svg.iter(f"{SVG}text")]


def study_links(svg: ET.Element) -> list[str]:
    """The addresses the study labels link to, top down."""
    return [a.get(XLINK_HREF, "") for group in classed(svg, "study-link") for a in group.iter(f"{SVG}a")]
