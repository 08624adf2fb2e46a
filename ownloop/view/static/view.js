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
    const index = steps.findIndex(function (s) { return "#" + s.id === location.hash; });
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
