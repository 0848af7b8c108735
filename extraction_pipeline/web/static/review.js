// The review form: a value's quote on its page, sharp on any screen, with the keyboard.
(function () {
  const cells = [...document.querySelectorAll(".cell[data-path]")];
  const image = document.getElementById("page-image");
  const panel = document.getElementById("page-panel");
  const caption = document.getElementById("page-caption");
  let at = Math.max(0, cells.findIndex((c) => c.classList.contains("current")));
  let zoom = 1;
  let shownUrl = null;

  // Pixels the image needs: the panel's width in device pixels, zoomed, against the page's width
  // at the server's default size (learned from the first image; a letter page is 918 px there).
  let base = 918;
  function scale() {
    const wanted = (window.devicePixelRatio || 1) * zoom * (panel.clientWidth || 600) / base;
    return Math.min(4, Math.max(1, Math.ceil(wanted * 2) / 2));
  }

  async function load(url) {
    if (!url) return;
    shownUrl = url;
    const sep = url.includes("?") ? "&" : "?";
    const asked = scale();
    const response = await fetch(url + sep + "scale=" + asked, { credentials: "same-origin" });
    if (!response.ok || shownUrl !== url) return;
    const rects = JSON.parse(response.headers.get("x-highlight-rects") || "[]");
    const blob = await response.blob();
    const old = image.src;
    image.onload = () => {
      if (old.startsWith("blob:")) URL.revokeObjectURL(old);
      base = image.naturalWidth / asked;
      // Bring the highlighted quote into view inside the page panel.
      if (rects.length) {
        const ratio = image.clientWidth / image.naturalWidth;
        const top = Math.min(...rects.map((r) => r[1])) * ratio;
        const left = Math.min(...rects.map((r) => r[0])) * ratio;
        panel.scrollTop = Math.max(0, top - panel.clientHeight / 3);
        panel.scrollLeft = Math.max(0, left - 40);
      }
    };
    image.src = URL.createObjectURL(blob);
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

  cells.forEach((cell, i) => cell.addEventListener("click", (event) => { event.preventDefault(); show(i, true); }));
  document.getElementById("zoom-in")?.addEventListener("click", () => { zoom = Math.min(3, zoom + 0.5); apply(); });
  document.getElementById("zoom-out")?.addEventListener("click", () => { zoom = Math.max(1, zoom - 0.5); apply(); });
  function apply() {
    panel.classList.toggle("zoomed", zoom > 1);
    image.style.width = zoom > 1 ? (zoom * 100) + "%" : "";
    load(shownUrl || image.dataset.src);
  }

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
  });

  if (cells.length) show(at, false); else load(image.dataset.src);
})();
