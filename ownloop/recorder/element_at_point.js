// What is under the pointer at viewport point (x, y): the innermost element, found with
// elementFromPoint, descending into same-origin iframes and open shadow roots. Read by browser.py.
([x, y]) => {
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
  const r = el.getBoundingClientRect();
  const round = (v) => Math.round(v * 100) / 100;
  return {
    tag: el.localName, id: el.id || "", role: role(el), name: name(el), css_path: cssPath(el),
    bbox: [round(r.left + ox), round(r.top + oy), round(r.width), round(r.height)],
    frame: frames.join(" >> "),
  };
}
