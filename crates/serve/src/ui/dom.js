// The page's building blocks: elements made from data (every text through
// DOM text nodes, never innerHTML, so nothing from the API can inject
// markup), the main area's content, banners and the formats of a cell.

const main = document.getElementById("main");

// An element with attributes (`on...` ones are listeners) and children.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function show(...nodes) {
  // No "null" text for a part a page leaves out.
  main.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

export function banner(kind, ...text) {
  return h("div", { class: `banner ${kind}` }, ...text);
}

export function errorBanner(e) {
  const problems = (e.body && e.body.problems) || [];
  return h("div", { class: "banner bad" }, e.message || String(e),
    problems.length > 1 ? h("ul", {}, problems.map((p) => h("li", {}, p))) : null);
}

// A value for a table cell: "-" for none (never "null" or "undefined").
export function cell(v) {
  return v === null || v === undefined || v === "" ? "-" : v;
}

export function utc(iso) {
  if (!iso) return "-";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace(/(\+00:00|Z)$/, " UTC");
}

export function utcMs(ms) {
  return ms ? utc(new Date(ms).toISOString()) : "-";
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// Bytes in human units (1 KB = 1024 bytes).
export function bytes(n) {
  if (n === null || n === undefined || n === "") return "-";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

// A count with thousands separators.
export function count(n) {
  return n === null || n === undefined || n === "" ? "-" : Number(n).toLocaleString("en-US");
}

// A labelled fact of an overview ("Schedule: every hour").
export function fact(label, ...value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", {}, ...value));
}

export function statusCell(status) {
  return h("span", { class: `status-${status}` }, status || "-");
}
