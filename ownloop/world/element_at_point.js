// What is under the pointer at viewport point (x, y): the innermost element, found with
// elementFromPoint, descending into same-origin iframes and open shadow roots. Read by browser.py.
// Given {find: element} instead (an element as recorded), it finds that element again in the top
// document (a guarded replay's retarget): by role and accessible name, then by text, then by CSS
// path, then the nearest element of the same tag and role to the recorded box; only elements
// whose centre is in the viewport and reaches them (not covered) count. Returns the element, the
// level that matched it and its centre, or null.
(arg) => {
  const trim = (s) => (s || "").replace(/\s+/g, " ").trim().slice(0, 100);
  const INPUT_ROLES = {
    checkbox: "checkbox", radio: "radio", button: "button", submit: "button", reset: "button",
    image: "button", range: "slider", number: "spinbutton", search: "searchbox", hidden: "",
  };
  const TAG_ROLES = {
    button: "button", textarea: "textbox", h1: "heading", h2: "heading", h3: "heading",
    h4: "heading", h5: "heading", h6: "heading", ul: "list", ol: "list", menu: "list",
    li: "listitem", nav: "navigation", main: "main", header: "banner", footer: "contentinfo",
    aside: "complementary", form: "form", table: "table", tr: "row", td: "cell",
    th: "columnheader", dialog: "dialog", option: "option", progress: "progressbar",
    article: "article", section: "region", summary: "button", p: "paragraph", hr: "separator",
    fieldset: "group", details: "group", output: "status", meter: "meter", datalist: "listbox",
  };
  function role(el) {
    const explicit = trim(el.getAttribute("role")).split(" ")[0];
    if (explicit) return explicit;
    const tag = el.localName;
    if (tag === "a" || tag === "area") return el.hasAttribute("href") ? "link" : "";
    if (tag === "input") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      return type in INPUT_ROLES ? INPUT_ROLES[type] : "textbox";
    }
    if (tag === "select") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "img") return el.getAttribute("alt") === "" ? "presentation" : "img";
    return TAG_ROLES[tag] || "";
  }
  function name(el) {
    const root = el.getRootNode();
    const byId = (id) => (root.getElementById ? root.getElementById(id) : null)
      || el.ownerDocument.getElementById(id);
    const labelledby = el.getAttribute("aria-labelledby");
    if (labelledby) {
      const text = trim(labelledby.split(/\s+/).map((id) => {
        const n = byId(id);
        return n ? n.textContent : "";
      }).join(" "));
      if (text) return text;
    }
    const label = trim(el.getAttribute("aria-label"));
    if (label) return label;
    if (el.labels && el.labels.length) {
      const text = trim(Array.from(el.labels).map((l) => l.textContent).join(" "));
      if (text) return text;
    }
    const tag = el.localName;
    const type = (el.getAttribute("type") || "").toLowerCase();
    if (tag === "img" || tag === "area" || (tag === "input" && type === "image")) {
      const alt = trim(el.getAttribute("alt"));
      if (alt) return alt;
    }
    if (tag === "input" && ["button", "submit", "reset"].includes(type)) {
      const value = trim(el.value);
      if (value) return value;
    }
    const formField = ["input", "select", "textarea"].includes(tag);
    if (!formField && tag !== "html" && tag !== "body") {
      const text = trim(el.textContent);
      if (text) return text;
    }
    const title = trim(el.getAttribute("title"));
    if (title) return title;
    const placeholder = trim(el.getAttribute("placeholder"));
    if (placeholder) return placeholder;
    return formField && type !== "password" ? trim(el.value) : "";
  }
  function cssPath(el) {
    const parts = [];
    while (el && el.nodeType === 1) {
      let part = el.localName;
      if (el.id) {
        parts.unshift(part + "#" + CSS.escape(el.id));
        break;
      }
      const parent = el.parentElement;
      const siblings = parent ? parent.children : el.parentNode ? el.parentNode.children : [];
      const same = Array.from(siblings || []).filter((c) => c.localName === el.localName);
      if (same.length > 1) part += ":nth-of-type(" + (same.indexOf(el) + 1) + ")";
      parts.unshift(part);
      el = parent;
    }
    return parts.join(" > ");
  }
  function text(el) {
    const tag = el.localName;
    if (["input", "select", "textarea"].includes(tag)) {
      return (el.getAttribute("type") || "").toLowerCase() === "password" ? "" : trim(el.value);
    }
    return tag === "html" || tag === "body" ? "" : trim(el.innerText || el.textContent);
  }
  const round = (v) => Math.round(v * 100) / 100;
  function describe(el, ox, oy, frame) {
    const r = el.getBoundingClientRect();
    return {
      tag: el.localName, id: el.id || "", role: role(el), name: name(el), css_path: cssPath(el),
      bbox: [round(r.left + ox), round(r.top + oy), round(r.width), round(r.height)],
      frame: frame, text: text(el),
    };
  }
  if (!Array.isArray(arg)) return find(arg.find);
  function find(want) {
    const box = want.bbox || [0, 0, 0, 0];
    const wx = box[0] + box[2] / 2, wy = box[1] + box[3] / 2;
    const width = window.innerWidth, height = window.innerHeight;
    const reachable = (el) => {
      const r = el.getBoundingClientRect();
      if (r.width <= 0 || r.height <= 0) return null;
      const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
      if (cx < 0 || cy < 0 || cx >= width || cy >= height) return null;
      const hit = document.elementFromPoint(cx, cy);
      return hit && (hit === el || el.contains(hit)) ? [cx, cy] : null;
    };
    const sameKind = Array.from(document.querySelectorAll(CSS.escape(want.tag || "*")))
      .filter((el) => role(el) === (want.role || ""));
    const levels = [
      ["name_role", want.name ? sameKind.filter((el) => name(el) === want.name) : []],
      ["text", want.text ? sameKind.filter((el) => text(el) === want.text) : []],
      ["css_path", (() => {
        try {
          const el = want.css_path ? document.querySelector(want.css_path) : null;
          return el && el.localName === want.tag ? [el] : [];
        } catch (e) { return []; }
      })()],
      ["nearest", sameKind],
    ];
    for (const [level, found] of levels) {
      let best = null;
      for (const el of found) {
        const centre = reachable(el);
        if (!centre) continue;
        const d = Math.hypot(centre[0] - wx, centre[1] - wy);
        if (!best || d < best.d) best = { el, d, centre };
      }
      if (best) {
        return { element: describe(best.el, 0, 0, ""), match: level,
                 x: round(best.centre[0]), y: round(best.centre[1]) };
      }
    }
    return null;
  }
  const [x, y] = arg;
  let doc = document, ox = 0, oy = 0;
  const frames = [];
  let el = doc.elementFromPoint(x, y);
  for (let depth = 0; el && depth < 32; depth++) {
    if (el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(x - ox, y - oy);
      if (inner && inner !== el) {
        frames.push("shadow(" + cssPath(el) + ")");
        el = inner;
        continue;
      }
    }
    if (el.localName === "iframe" || el.localName === "frame") {
      let inner = null;
      try { inner = el.contentDocument; } catch (e) { inner = null; }
      if (inner) {
        const r = el.getBoundingClientRect();
        const style = getComputedStyle(el);
        ox += r.left + el.clientLeft + (parseFloat(style.paddingLeft) || 0);
        oy += r.top + el.clientTop + (parseFloat(style.paddingTop) || 0);
        frames.push("frame(" + cssPath(el) + ")");
        doc = inner;
        el = doc.elementFromPoint(x - ox, y - oy);
        continue;
      }
    }
    break;
  }
  if (!el) return null;
  return describe(el, ox, oy, frames.join(" >> "));
}
