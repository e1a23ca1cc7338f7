// Building elements without HTML strings: text is always text (a task name or an error message
// can hold anything), and no inline style or script is ever made (the page's CSP forbids them).
//
// Pages draw by describing what they show (`h`, `s`) and `patch`ing it onto what is there: only
// what differs is changed, so a text selection, an open log, focus and scroll positions survive
// every refresh. A listener lives in the element's handler table (`__on`), so a kept element
// takes the new listener of its redrawn twin.

const SVG = "http://www.w3.org/2000/svg";

function listen(el, type, fn) {
  if (!el.__on) el.__on = {};
  if (!(type in el.__on)) el.addEventListener(type, (e) => el.__on[type]?.(e));
  el.__on[type] = fn;
}

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) listen(el, k.slice(2), v);
    else if (k === "dataset") {
      for (const [dk, dv] of Object.entries(v)) if (dv !== undefined && dv !== null) el.dataset[dk] = dv;
    } else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: `h("a", {href: "#/"}, "text", child, [more])`. */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG, tag), attrs, children);
}

/** Replaces the children of `el` (for content shown once, such as a dialog). */
export function put(el, ...children) {
  el.replaceChildren();
  return fill(el, {}, children);
}

/** What identifies an element among its siblings across redraws. */
function keyOf(node) {
  return node.nodeType === 1 ? (node.getAttribute("data-key") ?? node.id) || null : null;
}

function same(a, b) {
  return a.nodeType === b.nodeType && a.nodeName === b.nodeName && keyOf(a) === keyOf(b);
}

function patchAttributes(a, b) {
  for (const { name } of [...a.attributes]) if (!b.hasAttribute(name)) a.removeAttribute(name);
  for (const { name, value } of b.attributes) if (a.getAttribute(name) !== value) a.setAttribute(name, value);
  // A form field the operator is using keeps what they typed.
  if ((a.tagName === "INPUT" || a.tagName === "TEXTAREA") && a !== document.activeElement && a.value !== b.value) a.value = b.value;
  if (a.tagName === "SELECT" && a !== document.activeElement) a.value = b.value;
  for (const type of Object.keys(a.__on ?? {})) if (!b.__on?.[type]) a.__on[type] = undefined;
  for (const [type, fn] of Object.entries(b.__on ?? {})) listen(a, type, fn);
}

function patchNode(a, b) {
  if (a.nodeType === 3 || a.nodeType === 8) {
    if (a.data !== b.data) a.data = b.data;
    return;
  }
  patchAttributes(a, b);
  // An element another part of the page fills (an open log) keeps its children.
  if (b.hasAttribute("data-own")) return;
  patchChildren(a, [...b.childNodes]);
}

function patchChildren(el, wanted) {
  const keyed = new Map();
  for (const c of el.childNodes) {
    const k = keyOf(c);
    if (k !== null) keyed.set(k, c);
  }
  let i = 0;
  for (const next of wanted) {
    const here = el.childNodes[i];
    const k = keyOf(next);
    let match = here && same(here, next) ? here : null;
    if (!match && k !== null) {
      const found = keyed.get(k);
      if (found && same(found, next) && found.parentNode === el) {
        el.insertBefore(found, here ?? null);
        match = found;
      }
    }
    if (match) patchNode(match, next);
    else el.insertBefore(next, here ?? null);
    i += 1;
  }
  while (el.childNodes.length > i) el.lastChild.remove();
}

/** Makes `el`'s children what `children` describe, changing only what differs. */
export function patch(el, ...children) {
  const wanted = fill(el.namespaceURI === SVG ? document.createElementNS(SVG, "g") : document.createElement("div"), {}, children);
  patchChildren(el, [...wanted.childNodes]);
  return el;
}

/** A `<section>` with a heading. */
export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/**
 * A table from headings and rows of cells; each cell carries its column's heading
 * (`data-label`), which a narrow screen shows beside it instead of the header row.
 */
export function table(heads, rows, attrs) {
  for (const tr of rows.flat(Infinity)) {
    if (!(tr instanceof Element)) continue;
    [...tr.children].forEach((td, i) => {
      if (heads[i] && !td.hasAttribute("data-label")) td.setAttribute("data-label", heads[i]);
    });
  }
  const cls = `stack ${attrs?.class ?? ""}`.trim();
  return h("table", { ...(attrs ?? {}), class: cls },
    h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows));
}
