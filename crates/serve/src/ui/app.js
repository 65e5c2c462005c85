// topicberg web UI: a small front end over the JSON API (/api/...), no
// framework and no network beyond this server. This module is the page's
// one script (`index.html` loads it as a module): it routes a location
// (`#/jobs/3`, `#/runs/7`, ...) to its page and draws login and setup; the
// other modules import what they use, so the load order is the imports'.

import { api, hasSession, setSession } from "./api.js";
import { errorBanner, h, show } from "./dom.js";
import { onRoute, setFlash, stopRefresh, takeFlash } from "./nav.js";
import { importPage, jobForm, jobPage, jobsPage } from "./jobs.js";
import { piecesPage } from "./pieces.js";
import { runPage } from "./runs.js";
import { streamsPage } from "./streams.js";
import { tablePage } from "./tables.js";

// ---- routing -------------------------------------------------------------

async function route() {
  stopRefresh();
  if (!hasSession()) {
    try {
      const s = await fetch("/api/session", { credentials: "same-origin" });
      if (s.status === 503) return setupPage();
      if (!s.ok) return loginPage();
      setSession((await s.json()).csrf);
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

onRoute(route);
window.addEventListener("hashchange", route);
// A module runs once the page is parsed and its imports are loaded.
route();

document.getElementById("logout").addEventListener("click", async () => {
  try { await api("POST", "/api/logout"); } catch (_) { /* logged out anyway */ }
  setSession(null);
  document.getElementById("nav").hidden = true;
  location.hash = "#/jobs";
  loginPage();
});

// ---- login and setup -----------------------------------------------------

const COOKIE_DROPPED = "The password was right, but this browser did not keep the session cookie, "
  + "so every page would ask you to log in again. Open the page over HTTPS (a TLS proxy named with "
  + "--trusted-proxy) or at localhost, or start topicberg serve with --allow-plain-http on a trusted network.";

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
          // A browser that dropped the cookie would land here again with
          // no word: say so instead.
          const kept = await fetch("/api/session", { credentials: "same-origin" });
          if (kept.status === 401) return msg.replaceChildren(errorBanner(new Error(COOKIE_DROPPED)));
          setSession(r.csrf);
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
          setFlash("Admin password set: log in.");
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
