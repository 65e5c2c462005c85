// topicberg web UI: a small front end over the JSON API (/api/...).
// No framework, no network beyond this server. Every text goes through
// DOM text nodes (never innerHTML), so nothing from the API can inject markup.
"use strict";

let csrf = null;
const main = document.getElementById("main");

// ---- DOM and API helpers -------------------------------------------------

function h(tag, attrs, ...children) {
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

function show(...nodes) {
  // No "null" text for a part a page leaves out.
  main.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

class ApiFailure extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
  // A 401 means the session ended: show the login page. Not for the
  // login itself, whose 401 is a wrong password for its form to show.
  if (res.status === 401 && path !== "/api/login") { csrf = null; route(); throw new ApiFailure(401, data); }
  if (!res.ok) throw new ApiFailure(res.status, data);
  return data;
}

function banner(kind, ...text) {
  return h("div", { class: `banner ${kind}` }, ...text);
}

function errorBanner(e) {
  const problems = (e.body && e.body.problems) || [];
  return h("div", { class: "banner bad" }, e.message || String(e),
    problems.length > 1 ? h("ul", {}, problems.map((p) => h("li", {}, p))) : null);
}

// A message for the next page drawn ("Saved"), shown once.
let flash = null;
function takeFlash() {
  const f = flash;
  flash = null;
  return f ? banner("ok", f) : null;
}

// A value for a table cell: "-" for none (never "null" or "undefined").
function cell(v) {
  return v === null || v === undefined || v === "" ? "-" : v;
}

function utc(iso) {
  if (!iso) return "-";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace(/(\+00:00|Z)$/, " UTC");
}

function utcMs(ms) {
  return ms ? utc(new Date(ms).toISOString()) : "-";
}

function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// Bytes in human units (1 KB = 1024 bytes).
function bytes(n) {
  if (n === null || n === undefined || n === "") return "-";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

// A count with thousands separators.
function count(n) {
  return n === null || n === undefined || n === "" ? "-" : Number(n).toLocaleString("en-US");
}

function statusCell(status) {
  return h("span", { class: `status-${status}` }, status || "-");
}

// ---- routing -------------------------------------------------------------

let refreshTimer = null;

async function route() {
  clearTimeout(refreshTimer);
  if (!csrf) {
    try {
      const s = await fetch("/api/session", { credentials: "same-origin" });
      if (s.status === 503) return setupPage();
      if (!s.ok) return loginPage();
      csrf = (await s.json()).csrf;
    } catch (e) {
      return show(errorBanner(e));
    }
  }
  document.getElementById("nav").hidden = false;
  const parts = (location.hash.replace(/^#\/?/, "") || "jobs").split("/");
  const section = parts[0] === "runs" || parts[0] === "import" ? "jobs" : parts[0];
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.getAttribute("href") === `#/${section}`);
  }
  try {
    if (parts[0] === "jobs" && parts.length === 1) return await jobsPage();
    if (parts[0] === "jobs" && parts[1] === "new") return await jobForm(null);
    if (parts[0] === "jobs" && parts[2] === "edit") return await jobForm(+parts[1]);
    if (parts[0] === "jobs" && parts[2] === "streams") return await streamsPage(+parts[1], parts[3] === "first");
    if (parts[0] === "jobs" && parts[2] === "tables") return await tablePage(+parts[1], decodeURIComponent(parts[3]));
    if (parts[0] === "jobs") return await jobPage(+parts[1]);
    if (parts[0] === "runs") return await runPage(+parts[1]);
    if (parts[0] === "import") return importPage();
    if (parts[0] === "sources") return await piecesPage("source", parts[1]);
    if (parts[0] === "destinations") return await piecesPage("destination", parts[1]);
    show(h("h1", {}, "Not found"));
  } catch (e) {
    if (e.status !== 401) show(errorBanner(e));
  }
}

window.addEventListener("hashchange", route);
// Every script is loaded (they sit at the end of the page) before this.
document.addEventListener("DOMContentLoaded", route);

// Shows `hash`: a new hash renders through "hashchange", the same one is
// rendered again here (never both: a page renders once per action).
function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}
document.getElementById("logout").addEventListener("click", async () => {
  try { await api("POST", "/api/logout"); } catch (_) { /* logged out anyway */ }
  csrf = null;
  document.getElementById("nav").hidden = true;
  location.hash = "#/jobs";
  loginPage();
});

// ---- login and setup -----------------------------------------------------

function loginPage() {
  document.getElementById("nav").hidden = true;
  const msg = h("div", { id: "login-result" }, takeFlash());
  const user = h("input", { type: "text", id: "username", value: "admin", autocomplete: "username" });
  const pass = h("input", { type: "password", id: "password", autocomplete: "current-password" });
  show(
    h("h1", {}, "Log in"),
    h("form", {
      class: "card", id: "login-form",
      onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          const r = await api("POST", "/api/login", { username: user.value, password: pass.value });
          csrf = r.csrf;
          route();
        } catch (e) { msg.replaceChildren(errorBanner(e)); }
      },
    },
      h("label", { for: "username" }, "User"), user,
      h("label", { for: "password" }, "Password"), pass,
      h("p", {}, h("button", { class: "primary", type: "submit", id: "login" }, "Log in")),
      msg),
  );
}

function setupPage() {
  document.getElementById("nav").hidden = true;
  const msg = h("div", { id: "setup-result" });
  const token = h("input", { type: "text", id: "setup-token", autocomplete: "off" });
  const pass = h("input", { type: "password", id: "new-password", autocomplete: "new-password" });
  show(
    h("h1", {}, "Set the admin password"),
    h("form", {
      class: "card", id: "setup-form",
      onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          await api("POST", "/api/setup", { password: pass.value, setup_token: token.value.trim() });
          flash = "Admin password set: log in.";
          loginPage();
        } catch (e) { msg.replaceChildren(errorBanner(e)); }
      },
    },
      h("label", { for: "setup-token" }, "Setup token ",
        h("span", { class: "hint" }, "printed in the service's log at start (or set TOPICBERG_ADMIN_PASSWORD and restart)")), token,
      h("label", { for: "new-password" }, "Password ", h("span", { class: "hint" }, "(at least 8 characters)")), pass,
      h("p", {}, h("button", { class: "primary", type: "submit" }, "Set password")),
      msg),
  );
}
