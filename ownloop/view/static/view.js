// ownloop view: move between steps with the keyboard (j / ArrowRight next, k / ArrowLeft back).
// Served as a file so the page's Content-Security-Policy can forbid every inline script.
"use strict";
(function () {
  const steps = Array.from(document.querySelectorAll("section.step"));
  if (!steps.length) return;
  const ticks = new Map();
  document.querySelectorAll("nav.timeline a.tick[data-step]").forEach(function (a) {
    ticks.set(a.dataset.step, a);
  });
  let current = -1;

  function show(index, scroll) {
    if (index < 0 || index >= steps.length) return;
    if (current >= 0) {
      steps[current].classList.remove("current");
      const old = ticks.get(steps[current].dataset.step);
      if (old) old.classList.remove("current");
    }
    current = index;
    const step = steps[index];
    step.classList.add("current");
    const tick = ticks.get(step.dataset.step);
    if (tick) tick.classList.add("current");
    document.body.dataset.step = step.dataset.step;
    if (scroll) {
      step.focus({ preventScroll: true });
      step.scrollIntoView({ block: "start" });
      history.replaceState(null, "", "#" + step.id);
    }
  }

  function fromHash() {
    // no step in the URL: the page's own start (a pair opens at its first divergent step)
    const wanted = location.hash || (document.body.dataset.start ? "#" + document.body.dataset.start : "");
    const index = steps.findIndex(function (s) { return "#" + s.id === wanted; });
    show(index >= 0 ? index : 0, index >= 0);
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName))) return;
    let move = 0;
    if (event.key === "j" || event.key === "ArrowRight") move = 1;
    else if (event.key === "k" || event.key === "ArrowLeft") move = -1;
    if (!move) return;
    event.preventDefault();
    show(Math.min(Math.max(current + move, 0), steps.length - 1), true);
  });
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();

// Screenshots: zoom to natural size, crop to the page's content, a magnifier at the pointer mark.
(function () {
  let overlay = null;

  function closeZoom() {
    if (overlay) { overlay.remove(); overlay = null; }
  }

  function zoom(figure) {
    closeZoom();
    const img = figure.querySelector(".frame img");
    overlay = document.createElement("div");
    overlay.className = "zoomed";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "screenshot at natural size; click or Escape to close");
    const holder = document.createElement("div");
    holder.className = "zoomed-frame";
    const big = document.createElement("img");
    big.src = img.src;
    big.alt = img.alt;
    big.width = img.naturalWidth || Number(figure.dataset.width);
    big.height = img.naturalHeight || Number(figure.dataset.height);
    holder.appendChild(big);
    const marks = figure.querySelector("svg.marks");
    if (marks) {  // the pointer marks at natural size too, over the whole screenshot
      const copy = marks.cloneNode(true);
      copy.setAttribute("viewBox", "0 0 " + figure.dataset.width + " " + figure.dataset.height);
      holder.appendChild(copy);
    }
    overlay.appendChild(holder);
    overlay.addEventListener("click", closeZoom);
    document.body.appendChild(overlay);
  }

  function setCrop(figure, box) {
    const frame = figure.querySelector(".frame");
    const img = frame.querySelector("img");
    const svg = frame.querySelector("svg.marks");
    if (!box) {
      frame.classList.remove("cropped");
      img.style.width = ""; img.style.marginLeft = ""; img.style.marginTop = "";
      frame.style.aspectRatio = "";
      if (svg) svg.setAttribute("viewBox", "0 0 " + figure.dataset.width + " " + figure.dataset.height);
      return;
    }
    frame.classList.add("cropped");
    frame.style.aspectRatio = box.width + " / " + box.height;
    img.style.width = (100 * box.image_width / box.width) + "%";
    img.style.marginLeft = (-100 * box.x / box.width) + "%";
    img.style.marginTop = (-100 * box.y / box.width) + "%";  // vertical margins are % of width
    if (svg) svg.setAttribute("viewBox", [box.x, box.y, box.width, box.height].join(" "));
  }

  // A crop never cuts the pointer mark off: the box grows to hold it (and a margin around it).
  function withMark(figure, box) {
    if (figure.dataset.markX === undefined) return box;
    const x = Number(figure.dataset.markX), y = Number(figure.dataset.markY), m = 40;
    const w = Number(figure.dataset.width), h = Number(figure.dataset.height);
    const left = Math.max(0, Math.min(box.x, x - m)), top = Math.max(0, Math.min(box.y, y - m));
    const right = Math.min(w, Math.max(box.x + box.width, x + m));
    const bottom = Math.min(h, Math.max(box.y + box.height, y + m));
    return {x: left, y: top, width: right - left, height: bottom - top, image_width: box.image_width};
  }

  function cropOne(figure, on) {
    const button = figure.querySelector("button.crop");
    if (button) button.setAttribute("aria-pressed", on ? "true" : "false");
    if (!on) { setCrop(figure, null); return; }
    fetch("/box/" + figure.dataset.sha).then(function (r) { return r.json(); }).then(function (box) {
      box = withMark(figure, box);
      if (!button || button.getAttribute("aria-pressed") === "true") setCrop(figure, box);
      figure.dataset.box = [box.x, box.y, box.width, box.height].join(",");
    });
  }

  // One toggle for every screenshot: cropping one crops them all, here and on the next pages
  // (until toggled back), since a page's background is the same from step to step.
  function crop(figure, button) {
    const on = button.getAttribute("aria-pressed") !== "true";
    try { sessionStorage.setItem("ownloop-crop", on ? "1" : ""); } catch (e) { /* private mode */ }
    cropOne(figure, on);
    document.querySelectorAll("figure.shot[data-sha]").forEach(function (other) {
      if (other !== figure) cropOne(other, on);
    });
  }

  // Cropped by default (a MiniWoB screenshot is mostly its grey background); toggling it off
  // keeps it off on the next pages.
  let remembered = "1";
  try {
    const stored = sessionStorage.getItem("ownloop-crop");
    if (stored !== null) remembered = stored;
  } catch (e) { /* private mode: the default */ }
  if (remembered) {
    document.querySelectorAll("figure.shot[data-sha]").forEach(function (f) { cropOne(f, true); });
  }

  const LENS = 3;  // magnification

  function placeLens(figure, lens, x, y) {
    // x, y in screenshot pixels; the lens shows the screenshot LENS times larger around them
    const img = figure.querySelector(".frame img");
    const scale = img.getBoundingClientRect().width / img.naturalWidth;
    const size = lens.offsetWidth;
    const frame = figure.querySelector(".frame").getBoundingClientRect();
    const r = img.getBoundingClientRect();
    // The lens sits beside the point it magnifies, never on it (the mark stays in sight), and
    // inside the frame (never over the buttons above it): right and above, else mirrored.
    const px = r.left - frame.left + x * scale, py = r.top - frame.top + y * scale;
    const gap = 16;
    let left = px + gap, top = py - size - gap;
    if (left + size > frame.width) left = px - gap - size;
    if (top < 0) top = py + gap;
    left = Math.max(0, Math.min(left, frame.width - size));
    top = Math.max(0, Math.min(top, frame.height - size));
    lens.style.left = left + "px";
    lens.style.top = top + "px";
    lens.style.backgroundSize = (img.naturalWidth * scale * LENS) + "px " + (img.naturalHeight * scale * LENS) + "px";
    lens.style.backgroundPosition = (size / 2 - x * scale * LENS) + "px " + (size / 2 - y * scale * LENS) + "px";
    lens.dataset.x = x; lens.dataset.y = y;
  }

  function magnify(figure, button) {
    const frame = figure.querySelector(".frame");
    let lens = frame.querySelector(".lens");
    const on = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", on ? "true" : "false");
    if (!on) { if (lens) lens.remove(); return; }
    const img = frame.querySelector("img");
    lens = document.createElement("div");
    lens.className = "lens";
    lens.style.backgroundImage = "url(\"" + img.src + "\")";
    frame.appendChild(lens);
    placeLens(figure, lens, Number(figure.dataset.markX), Number(figure.dataset.markY));
    frame.addEventListener("mousemove", function (event) {
      if (!lens.isConnected) return;
      const r = img.getBoundingClientRect();
      const scale = r.width / img.naturalWidth;
      placeLens(figure, lens, (event.clientX - r.left) / scale, (event.clientY - r.top) / scale);
    });
  }

  document.addEventListener("click", function (event) {
    const target = event.target;
    const figure = target.closest && target.closest("figure.shot");
    if (!figure) return;
    if (target.matches("button.zoom") || (target.matches(".frame img") && !figure.querySelector(".lens"))) {
      zoom(figure);
    } else if (target.matches("button.crop")) {
      crop(figure, target);
    } else if (target.matches("button.magnify")) {
      magnify(figure, target);
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") closeZoom();
  });
})();

// Compare: the paired bootstrap intervals not computed yet are asked for once the grid shows.
(function () {
  const pending = Array.from(document.querySelectorAll("td.interval[data-pending]"));
  if (!pending.length) return;
  const signed = function (v) { return (v >= 0 ? "+" : "") + v.toFixed(3); };
  fetch(pending[0].dataset.pending).then(function (r) { return r.json(); }).then(function (found) {
    pending.forEach(function (cell) {
      const interval = found[cell.dataset.run];
      if (!interval) return;
      cell.textContent = signed(interval[0]) + " to " + signed(interval[1]);
      cell.removeAttribute("data-pending");
    });
  });
})();
