// The review form: a value's quote on its page, readable and sharp on any screen, with the keyboard.
(function () {
  const cells = [...document.querySelectorAll(".cell[data-path]")];
  const image = document.getElementById("page-image");
  const panel = document.getElementById("page-panel");
  const caption = document.getElementById("page-caption");
  const wholePage = document.getElementById("whole-page");
  let at = Math.max(0, cells.findIndex((c) => c.classList.contains("current")));

  // Two views of the page: "quote" (the default) zooms until the quoted line is LINE_PX high (a
  // table's 7 pt text is 5 px on a whole page beside the form) and scrolls it into view; "page"
  // shows the page's whole width, still scrolled to the quote. z (or the button) switches; − / +
  // zoom from either, out as far as the whole page in the panel.
  const LINE_PX = 16, SMALL_PX = 12.5;
  let view = "quote";
  let zoom = 2; // the image's width in panel widths; before any highlight is known, a usual one
  let rects = []; // the highlight's line parts, in pixels of the page at the server's default size
  let texts = []; // what each of them covers
  let shownUrl = null;
  let asking = 0; // the latest request: an earlier one's answer (the same address, less sharp) is dropped

  // The page's width at the server's default size (learned from the first image; a letter page
  // is 918 px there), and the scale to ask for: the image's width in device pixels against it.
  let base = 918;
  function width() { return panel.clientWidth || 600; }
  function scale() {
    const wanted = (window.devicePixelRatio || 1) * zoom * width() / base;
    return Math.min(4, Math.max(1, Math.ceil(wanted * 2) / 2));
  }

  // Readable, and no closer: what is around the quote (its row's label, its column's header) is
  // what a reviewer checks it against. A quote wider than the panel (a table row) is shown whole
  // if its lines stay at least SMALL_PX high that way.
  function quoteZoom() {
    if (!rects.length) return 1;
    const line = Math.min(...rects.map((r) => r[3] - r[1]));
    const across = Math.max(...rects.map((r) => r[2])) - Math.min(...rects.map((r) => r[0]));
    const readable = LINE_PX * base / (line * width());
    const whole = (width() - 48) * base / (across * width());
    return Math.max(1, whole * line * width() / base >= SMALL_PX ? Math.min(readable, whole) : readable);
  }
  function smallest() {
    const tall = (image.naturalHeight / image.naturalWidth) || 1.414;
    return Math.min(1, panel.clientHeight / (tall * width()));
  }

  // The part of the highlight kept in view: the one that prints the value (a table row quoted
  // whole is wider than the panel at a readable size), else the quote's start.
  function skeleton(text) { return text.normalize("NFKC").toLowerCase().replace(/[^\p{L}\p{N}]/gu, ""); }
  function valuePart() {
    const value = skeleton((cells[at] && cells[at].textContent) || "");
    return rects[Math.max(0, value ? texts.findIndex((t) => skeleton(t).includes(value)) : -1)];
  }

  function layout() {
    if (view === "quote") zoom = quoteZoom();
    else if (view === "page") zoom = smallest(); // the whole page in the panel, where the quote sits on it
    image.style.width = (zoom * 100) + "%";
    panel.classList.toggle("zoomed", zoom > 1);
    panel.dataset.view = view;
    if (wholePage) wholePage.textContent = view === "page" ? "zoom to the quote" : "whole page";
    if (!rects.length) return;
    // The highlighted quote in view, a third down the panel; across, the whole quote (or, wider
    // than the panel, the value's part of it) with what is left of it (a table row's label, a
    // sentence's start), up to half a panel's width.
    const ratio = image.getBoundingClientRect().width / base;
    const left = Math.min(...rects.map((r) => r[0])) * ratio;
    const top = Math.min(...rects.map((r) => r[1])) * ratio;
    const right = Math.max(...rects.map((r) => r[2])) * ratio;
    const part = valuePart().map((v) => v * ratio);
    const w = panel.clientWidth, h = panel.clientHeight, margin = 24;
    const [from, to] = right - left <= w - 2 * margin ? [left, right] : [part[0], part[2]];
    const x = Math.min(Math.max(left - margin - w / 2, to + margin - w), from - margin);
    let y = top - h / 3;
    y = Math.min(Math.max(y, part[3] + margin - h), part[1] - margin);
    panel.scrollLeft = Math.max(0, x);
    panel.scrollTop = Math.max(0, y);
  }

  // After a change of zoom: laid out at once, and asked again when the image has too few pixels.
  function relayout() {
    layout();
    if (scale() > Number(image.dataset.scale || 0)) load(shownUrl || image.dataset.src);
  }

  async function load(url) {
    if (!url) return;
    shownUrl = url;
    const mine = ++asking;
    const sep = url.includes("?") ? "&" : "?";
    const asked = scale();
    const response = await fetch(url + sep + "scale=" + asked, { credentials: "same-origin" });
    if (!response.ok || mine !== asking) return;
    const found = JSON.parse(response.headers.get("x-highlight-rects") || "[]").map((r) => r.map((v) => v / asked));
    const covered = JSON.parse(response.headers.get("x-highlight-texts") || "[]");
    const probe = new Image();
    probe.onload = () => {
      if (mine !== asking) { URL.revokeObjectURL(probe.src); return; }
      base = probe.naturalWidth / asked;
      rects = found;
      texts = covered;
      if (view === "quote") zoom = quoteZoom();
      // Too few pixels for this quote's zoom on this screen: asked again, sharper, before it is shown.
      if (scale() > asked && asked < 4) { URL.revokeObjectURL(probe.src); load(url); return; }
      const old = image.src;
      image.onload = () => {
        image.onload = null;
        if (old.startsWith("blob:") && old !== image.src) URL.revokeObjectURL(old);
        image.dataset.url = url; // what it shows, and how sharp: a zoom asks again only for more
        image.dataset.scale = asked;
        image.dataset.rects = JSON.stringify(found.map((r) => r.map((v) => v * asked))); // in its own pixels
        image.dataset.texts = JSON.stringify(covered);
        layout();
      };
      image.src = probe.src;
    };
    probe.src = URL.createObjectURL(await response.blob());
  }

  function show(i, focus) {
    if (!cells.length) return;
    at = Math.min(Math.max(i, 0), cells.length - 1);
    const cell = cells[at];
    cells.forEach((c) => c.classList.toggle("current", c === cell));
    document.querySelectorAll(".detail").forEach((d) => { d.hidden = d.dataset.path !== cell.dataset.path; });
    if (focus) cell.focus({ preventScroll: true });
    cell.scrollIntoView({ block: "nearest" });
    if (caption) caption.textContent = cell.dataset.caption;
    load(cell.dataset.img);
    history.replaceState(null, "", cell.getAttribute("href"));
  }

  // j / k go from value to value: an empty field the model left (a "—" to set) is clicked, not stepped on.
  function step(direction) {
    for (let i = at + direction; i >= 0 && i < cells.length; i += direction) {
      if (!cells[i].classList.contains("settable")) return i;
    }
    return at;
  }

  function detail() {
    return cells[at] && document.querySelector(`.detail[data-path="${CSS.escape(cells[at].dataset.path)}"]`);
  }

  function zoomBy(factor) {
    view = "custom";
    zoom = Math.min(8, Math.max(smallest(), zoom * factor));
    relayout();
  }
  function toggleView() {
    view = view === "page" ? "quote" : "page"; // from a zoom of one's own too: the button says "whole page"
    relayout();
  }

  cells.forEach((cell, i) => cell.addEventListener("click", (event) => { event.preventDefault(); show(i, true); }));
  document.getElementById("zoom-in")?.addEventListener("click", () => zoomBy(1.25));
  document.getElementById("zoom-out")?.addEventListener("click", () => zoomBy(0.8));
  wholePage?.addEventListener("click", toggleView);
  window.addEventListener("resize", relayout);

  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input,textarea,select") || event.ctrlKey || event.metaKey || event.altKey) return;
    const panelNow = detail();
    if (event.key === "j") show(step(1), true);
    else if (event.key === "k") show(step(-1), true);
    // A possibly-missed item has no approve / not reported / correct forms: these keys skip it.
    else if (event.key === "a" && panelNow) panelNow.querySelector("form.approve button")?.click();
    else if (event.key === "x" && panelNow) panelNow.querySelector("form.not-reported button")?.click();
    else if (event.key === "c" && panelNow) { event.preventDefault(); panelNow.querySelector("form.correct [name=value]")?.focus(); }
    else if (event.key === "r") {
      // An outcome is a group of rows (its numbers, then its comparisons): any cell of it will do.
      const row = cells[at] && cells[at].closest("[data-outcome]");
      const button = row && row.querySelector("form.approve-row button");
      if (button) button.click();
    } else if (event.key === "n") { const next = document.getElementById("next-document"); if (next) location.href = next.href; }
    else if (event.key === "z") toggleView();
  });

  if (cells.length) show(at, false); else load(image.dataset.src);
})();
