"""The review page's layout as a browser lays it out: the boxes the layout tests and the journey
assert on (the window, the form's pane and table, the page image and its highlight), in CSS pixels."""

from __future__ import annotations

from typing import Any

SIZES = ((1366, 768), (1920, 1080))  # a laptop's screen and a desktop's
READABLE_PX = 12  # the quoted line's height on screen, at least

# Every box the assertions read, in CSS pixels of the viewport ([left, top, right, bottom]). The
# highlight's boxes come from the image's own pixels (review.js keeps them on the image), scaled
# as the image is shown; "visible" is what of the image the panel and the window show.
BOXES = """() => {
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const image = document.getElementById("page-image"), panel = document.getElementById("page-panel");
  const form = document.getElementById("form"), table = document.getElementById("outcomes-scroll");
  const shown = box(image), ratio = image.getBoundingClientRect().width / image.naturalWidth;
  const inner = panel.getBoundingClientRect();
  const view = [inner.left + panel.clientLeft, inner.top + panel.clientTop,
                inner.left + panel.clientLeft + panel.clientWidth, inner.top + panel.clientTop + panel.clientHeight];
  const visible = [Math.max(shown[0], view[0], 0), Math.max(shown[1], view[1], 0),
                   Math.min(shown[2], view[2], innerWidth), Math.min(shown[3], view[3], innerHeight)];
  const highlight = JSON.parse(image.dataset.rects || "[]").map((r) =>
    [shown[0] + r[0] * ratio, shown[1] + r[1] * ratio, shown[0] + r[2] * ratio, shown[1] + r[3] * ratio]);
  const height = (el) => (el ? el.getBoundingClientRect().height : 0);
  const nums = [...document.querySelectorAll("#outcomes td.arm-numbers .nums")].map(
    (n) => [height(n), height(n.querySelector(".cell"))]);
  const root = document.documentElement;
  return {
    page: [root.scrollWidth, root.scrollHeight, innerWidth, innerHeight],
    form: [form.scrollWidth, form.clientWidth], pane: box(form),
    table: [table.scrollWidth, table.clientWidth], tableBox: box(document.getElementById("outcomes")),
    ends: [...document.querySelectorAll("#outcomes .cell[data-path$='.p_value'], #outcomes .approve-row button")]
      .map(box),
    pages: [...document.querySelectorAll(".zoom a")].map(box),
    nums, view: panel.dataset.view, image: shown, panel: view, visible, highlight,
    texts: JSON.parse(image.dataset.texts || "[]"),
    sharp: image.naturalWidth >= (shown[2] - shown[0]) * devicePixelRatio - 1,  // never enlarged
  };
}"""


def boxes(page: Any, view: str) -> dict[str, Any]:
    """The page's boxes once review.js has laid out the current value's image in ``view``
    ("quote" or "page")."""
    page.wait_for_function(
        "(view) => { const i = document.getElementById('page-image'), p = document.getElementById('page-panel');"
        " const cell = document.querySelector('.cell.current');"
        " return p.dataset.view === view && i.complete && i.dataset.url === cell.dataset.img; }",
        arg=view,
    )
    return dict(page.evaluate(BOXES))


def inside(inner: list[float], outer: list[float], slack: float = 0.5) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def line_heights(boxes: dict[str, Any]) -> list[float]:
    return [box[3] - box[1] for box in boxes["highlight"]]
