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
  main.replaceChildren(...nodes);
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
  try {
    if (parts[0] === "jobs" && parts.length === 1) return await jobsPage();
    if (parts[0] === "jobs" && parts[1] === "new") return await jobForm(null);
    if (parts[0] === "jobs" && parts[2] === "edit") return await jobForm(+parts[1]);
    if (parts[0] === "jobs" && parts[2] === "streams") return await streamsPage(+parts[1], parts[3] === "first");
    if (parts[0] === "jobs") return await jobPage(+parts[1]);
    if (parts[0] === "runs") return await runPage(+parts[1]);
    if (parts[0] === "sources") return await piecesPage("source", parts[1]);
    if (parts[0] === "destinations") return await piecesPage("destination", parts[1]);
    show(h("h1", {}, "Not found"));
  } catch (e) {
    if (e.status !== 401) show(errorBanner(e));
  }
}

window.addEventListener("hashchange", route);

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

// ---- jobs ----------------------------------------------------------------

function jobActions(job, after) {
  const act = (label, path, id) => h("button", {
    type: "button", id,
    onclick: async (ev) => {
      ev.target.disabled = true;
      try { await api("POST", path); } catch (e) { alert(e.message); }
      after();
    },
  }, label);
  return h("span", { class: "actions" },
    act("Sync Now", `/api/jobs/${job.id}/sync`, `sync-${job.id}`),
    job.paused
      ? act("Resume", `/api/jobs/${job.id}/resume`, `resume-${job.id}`)
      : act("Pause", `/api/jobs/${job.id}/pause`, `pause-${job.id}`),
    job.running ? act("Cancel", `/api/jobs/${job.id}/cancel`, `cancel-${job.id}`) : null);
}

async function jobsPage() {
  const jobs = await api("GET", "/api/jobs");
  const rows = jobs.map((j) => h("tr", { id: `job-${j.id}` },
    h("td", {}, h("a", { href: `#/jobs/${j.id}` }, j.name)),
    h("td", {}, j.schedule ? `${j.schedule} (UTC)` : "manual", j.paused ? " — paused" : ""),
    h("td", {}, utc(j.next_run)),
    h("td", {}, j.running ? statusCell("running") : statusCell(j.last_run && j.last_run.status)),
    h("td", {}, j.last_run ? cell(j.last_run.records) : "-"),
    h("td", {}, jobActions(j, route))));
  show(
    h("h1", {}, "Jobs"),
    h("p", {}, h("a", { class: "button", href: "#/jobs/new", id: "new-job" }, "New job")),
    jobs.length === 0 ? h("p", {}, "No jobs yet: add a source and a destination, then a job.") :
      h("table", {},
        h("tr", {}, ["Job", "Schedule", "Next run", "Last run", "Records", ""].map((t) => h("th", {}, t))),
        rows));
  if (jobs.some((j) => j.running)) refreshTimer = setTimeout(route, 2000);
}

async function jobPage(id) {
  const [job, runs] = await Promise.all([
    api("GET", `/api/jobs/${id}`),
    api("GET", `/api/jobs/${id}/runs`),
  ]);
  const warnings = (job.warnings || []).map((w) => banner("warn", w));
  const waiting = job.paused && (job.streams || []).length === 0;
  show(
    h("h1", {}, `Job ${job.name}`),
    takeFlash(),
    waiting ? banner("warn", "Paused until its streams are saved: ",
      h("a", { href: `#/jobs/${id}/streams/first`, id: "choose-streams" }, "choose its streams")) : null,
    ...warnings,
    h("div", { class: "card" },
      h("p", {}, "Schedule: ", job.schedule ? `${job.schedule} (UTC)` : "manual only",
        job.paused ? " — paused" : "", " · next run: ", utc(job.next_run)),
      h("p", {}, "Target engines: ", (job.target_engines || []).join(", ") || "(default)"),
      h("p", {}, jobActions(job, route), " ",
        h("a", { class: "button", href: `#/jobs/${id}/streams`, id: "streams" }, "Streams"), " ",
        h("a", { class: "button", href: `#/jobs/${id}/edit` }, "Edit"), " ",
        h("a", { class: "button", href: `/api/jobs/${id}/export`, download: `${job.name}.toml` }, "Export job TOML"))),
    h("h2", {}, "History"),
    runs.length === 0 ? h("p", {}, "No runs yet.") :
      h("table", { id: "runs" },
        h("tr", {}, ["Run", "Started", "Duration", "Trigger", "Status", "Records", "Bytes"].map((t) => h("th", {}, t))),
        runs.map((r) => h("tr", { class: "run" },
          h("td", {}, h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)),
          h("td", {}, utc(r.started)),
          h("td", {}, duration(r.duration_ms)),
          h("td", {}, cell(r.trigger)),
          h("td", {}, statusCell(r.status)),
          h("td", { class: "records" }, cell(r.records)),
          h("td", {}, cell(r.bytes))))));
  if (job.running || runs.some((r) => r.status === "running")) refreshTimer = setTimeout(route, 2000);
  else if (job.schedule && !job.paused) refreshTimer = setTimeout(route, 5000);
}

async function runPage(id) {
  const run = await api("GET", `/api/runs/${id}`);
  const log = await fetch(`/api/runs/${id}/log`, { credentials: "same-origin" }).then((r) => r.text());
  const tables = run.tables || [];
  show(
    h("h1", {}, `Run #${run.id}`),
    run.error ? banner("bad", run.error) : null,
    h("p", {}, h("a", { href: `#/jobs/${run.job_id}` }, "← job"), " · ",
      statusCell(run.status), " · started ", utc(run.started), " · ", duration(run.duration_ms),
      " · ", run.trigger),
    h("table", { id: "tables" },
      h("tr", {}, ["Topic", "Table", "Status", "Records", "Bytes", "Data files", "Commit report", "Error"].map((t) => h("th", {}, t))),
      tables.map((t) => h("tr", {},
        h("td", {}, cell(t.topic)), h("td", {}, cell(t.table)), h("td", {}, statusCell(t.status)),
        h("td", {}, cell(t.records)), h("td", {}, cell(t.bytes)), h("td", {}, cell(t.data_files)),
        h("td", { class: "cols commit" }, t.commit ? Object.entries(t.commit).filter(([, v]) => v !== null && v !== undefined)
          .map(([k, v]) => `${k}=${v}`).join(", ") : "-"),
        h("td", { class: "bad" }, t.error || "")))),
    h("h2", {}, "Log ", h("a", { class: "button", href: `/api/runs/${id}/log`, download: `run-${id}.log` }, "Download")),
    h("pre", { class: "log", id: "log" }, log || "(empty)"));
  if (run.status === "running") refreshTimer = setTimeout(route, 2000);
}

// ---- sources and destinations ---------------------------------------------

const FIELDS = {
  source: [
    ["bootstrap_servers", "text", "host:port, comma separated"],
    ["topic_pattern", "text", "regex of the topics this source offers"],
    ["security_protocol", "select", "", ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]],
    ["sasl_mechanism", "select", "", ["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]],
    ["sasl_username", "text", ""],
    ["sasl_password", "secret", "write-only"],
    ["schema_registry_url", "text", "Confluent-compatible schema registry (http:// or https://), for Avro and Protobuf topics"],
    ["schema_registry_username", "text", "basic auth user (Confluent Cloud: the API key)"],
    ["schema_registry_password", "secret", "write-only (Confluent Cloud: the API secret)"],
    ["schema_registry_ca_pem", "textarea", "https with a private CA: its PEM text, or a file path"],
  ],
  destination: [
    ["catalog", "select", "rest: a REST catalog; sql: the embedded one", ["rest", "sql"]],
    ["uri", "text", "REST catalog URL"],
    ["warehouse", "text", ""],
    ["credential", "secret", "OAuth2 client_id:client_secret, write-only"],
    ["token", "secret", "bearer token, write-only"],
    ["s3_endpoint", "text", ""],
    ["s3_region", "text", ""],
    ["s3_access_key", "text", ""],
    ["s3_secret_key", "secret", "write-only"],
    ["path", "text", "sql catalog: its folder"],
  ],
};

async function piecesPage(kind, selected) {
  const plural = `${kind}s`;
  const list = await api("GET", `/api/${plural}`);
  const current = selected && selected !== "new" ? list.find((p) => p.id === +selected) : null;
  show(
    h("h1", {}, kind === "source" ? "Sources (Kafka)" : "Destinations (Iceberg)"),
    h("table", {},
      h("tr", {}, h("th", {}, "Name"), h("th", {}, kind === "source" ? "Brokers" : "Catalog")),
      list.map((p) => h("tr", {},
        h("td", {}, h("a", { href: `#/${plural}/${p.id}` }, p.name)),
        h("td", {}, kind === "source" ? p.bootstrap_servers : `${p.catalog || "sql"} ${p.uri || p.path || ""}`)))),
    h("p", {}, h("a", { class: "button", href: `#/${plural}/new`, id: `new-${kind}` }, `New ${kind}`)),
    selected ? pieceForm(kind, current) : null);
}

// What a job file means when a field is left out (shown for a stored
// piece that does not set it; never sent unless changed).
const DEFAULTS = { catalog: "sql", security_protocol: "PLAINTEXT", sasl_mechanism: "" };

function pieceForm(kind, current) {
  const plural = `${kind}s`;
  const inputs = {};
  const field = ([name, type, hint, options]) => {
    const id = `${kind}-${name}`;
    let input;
    if (type === "select") {
      input = h("select", { id }, options.map((o) => h("option", { value: o }, o || "(none)")));
      input.value = current ? (current[name] ?? DEFAULTS[name] ?? "") : options[0];
    } else if (type === "textarea") {
      input = h("textarea", { id, rows: 3 });
      input.value = (current && current[name]) ?? "";
    } else if (type === "secret") {
      const set = current && current[name] && current[name].set;
      input = h("input", { type: "password", id, autocomplete: "off", placeholder: set ? "(set: leave empty to keep)" : "" });
    } else {
      input = h("input", { type: "text", id, value: (current && current[name]) ?? "" });
    }
    // What the form showed: a field left as shown keeps its stored value.
    inputs[name] = [type, input, input.value];
    return [h("label", { for: id }, name, " ", h("span", { class: "hint" }, hint)), input];
  };
  const name = h("input", { type: "text", id: `${kind}-name`, value: current ? current.name : "" });
  const msg = h("div", { id: `${kind}-result` }, takeFlash());
  const body = () => {
    // Start from what is stored, so the fields this form does not show
    // (consumer_group, ssl_ca_pem, max_threads, ... from an imported job)
    // are kept; a set secret comes back as {set: true} and is kept too.
    // A shown field the user did not change is sent back as stored.
    const out = {};
    for (const [k, v] of Object.entries(current || {})) if (k !== "id" && k !== "name") out[k] = v;
    out.name = name.value;
    for (const [k, [type, input, shown]] of Object.entries(inputs)) {
      const v = input.value;
      if (type === "secret") {
        if (v) out[k] = v;
        else if (current && current[k]) out[k] = { set: true };
        else delete out[k];
      } else if (current && v === shown) {
        continue;
      } else if (v.trim()) out[k] = type === "textarea" ? v : v.trim();
      else delete out[k];
    }
    return out;
  };
  const save = async () => {
    if (current) return api("PUT", `/api/${plural}/${current.id}`, body());
    return api("POST", `/api/${plural}`, body());
  };
  return h("form", {
    class: "card", id: `${kind}-form`,
    onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const saved = await save();
        flash = `Saved ${saved.name}.`;
        go(`#/${plural}/${saved.id}`);
      } catch (e) { msg.replaceChildren(errorBanner(e)); }
    },
  },
    h("h2", {}, current ? `Edit ${current.name}` : `New ${kind}`),
    h("label", { for: `${kind}-name` }, "name"), name,
    FIELDS[kind].map(field),
    h("p", { class: "actions" },
      h("button", { class: "primary", type: "submit", id: `${kind}-save` }, "Save"),
      h("button", {
        type: "button", id: `${kind}-test`,
        onclick: async () => {
          // Tests what the form shows, saved or not (the stored secrets
          // of this piece are used where the form keeps them).
          msg.replaceChildren(h("p", {}, "Testing…"));
          try {
            const piece = body();
            if (current) piece.id = current.id;
            const r = await api("POST", `/api/${plural}/test`, piece);
            const steps = r.steps || [];
            const ok = steps.every((s) => s.ok);
            msg.replaceChildren(banner(ok ? "ok" : "bad", ok ? "Connection OK" : "Connection failed"),
              h("ul", {}, steps.map((s) => [
                h("li", { class: s.ok ? "ok" : "bad" }, `${s.step}: ${s.message}`),
                (s.warnings || []).map((w) => h("li", { class: "warn" }, `${s.step}: warning: ${w}`))])));
          } catch (e) { msg.replaceChildren(errorBanner(e)); }
        },
      }, "Test connection"),
      current ? h("button", {
        type: "button",
        onclick: async () => {
          if (!confirm(`Delete ${current.name}?`)) return;
          try { await api("DELETE", `/api/${plural}/${current.id}`); go(`#/${plural}`); }
          catch (e) { msg.replaceChildren(errorBanner(e)); }
        },
      }, "Delete") : null),
    msg);
}

// ---- job form and streams -------------------------------------------------

// A stream's value_format / key_format; "" leaves it to the default
// (the registry's subject for values, auto with a registry for keys).
const FORMATS = ["", "json", "avro", "protobuf", "auto"];

const ENGINES = ["spark", "trino", "duckdb", "databricks", "snowflake", "athena", "pyiceberg", "flink", "clickhouse"];

async function jobForm(id) {
  const [sources, destinations, job] = await Promise.all([
    api("GET", "/api/sources"),
    api("GET", "/api/destinations"),
    id ? api("GET", `/api/jobs/${id}`) : Promise.resolve(null),
  ]);
  const msg = h("div", { id: "job-result" });
  const name = h("input", { type: "text", id: "job-name", value: job ? job.name : "" });
  const source = h("select", { id: "job-source" }, sources.map((s) => h("option", { value: s.id }, s.name)));
  const destination = h("select", { id: "job-destination" }, destinations.map((d) => h("option", { value: d.id }, d.name)));
  if (job) { source.value = job.source_id; destination.value = job.destination_id; }
  const schedule = h("input", { type: "text", id: "job-schedule", value: job ? job.schedule : "every 60 minutes" });
  const namespace = h("input", { type: "text", id: "job-namespace", value: (job && job.namespace) || "" });
  const engines = ENGINES.map((e) => h("label", { class: "hint" },
    h("input", { type: "checkbox", value: e, checked: job && (job.target_engines || []).includes(e) }), ` ${e}`));
  show(
    h("h1", {}, job ? `Edit job ${job.name}` : "New job"),
    h("form", {
      class: "card", id: "job-form",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const body = {
          name: name.value,
          source_id: +source.value,
          destination_id: +destination.value,
          schedule: schedule.value,
          namespace: namespace.value || null,
          target_engines: engines.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value),
          sync: job ? job.sync : {},
          streams: job ? job.streams : [],
          // A new job waits, paused, until its streams are saved: its
          // schedule must not sync every matching topic meanwhile.
          paused: job ? job.paused : true,
        };
        try {
          const saved = job ? await api("PUT", `/api/jobs/${job.id}`, body) : await api("POST", "/api/jobs", body);
          flash = job ? `Saved job ${saved.name}.` : `Saved job ${saved.name}; it stays paused until its streams are saved.`;
          go(job ? `#/jobs/${saved.id}/streams` : `#/jobs/${saved.id}/streams/first`);
        } catch (e) { msg.replaceChildren(errorBanner(e)); }
      },
    },
      h("label", { for: "job-name" }, "name"), name,
      h("label", { for: "job-source" }, "source"), source,
      h("label", { for: "job-destination" }, "destination"), destination,
      h("label", { for: "job-schedule" }, "schedule ",
        h("span", { class: "hint" }, "UTC: a cron expression (min hour dom month dow), \"every N minutes\", \"every N hours\", \"daily at HH:MM\", or empty for manual only")),
      schedule,
      h("label", { for: "job-namespace" }, "namespace ", h("span", { class: "hint" }, "empty: <job name>_topics")), namespace,
      h("label", {}, "target engines ", h("span", { class: "hint" }, "decide the delete format of upsert tables")),
      h("div", {}, engines),
      h("p", {}, h("button", { class: "primary", type: "submit", id: "job-save" }, "Save and choose streams")),
      msg));
}

async function streamsPage(id, first) {
  const saved = takeFlash();
  const job = await api("GET", `/api/jobs/${id}`);
  let found;
  try {
    found = await api("GET", `/api/jobs/${id}/streams`);
  } catch (e) {
    if (e.status === 401) throw e;
    // The job is saved; only the topics could not be listed.
    return show(h("h1", {}, `Streams of ${job.name}`), saved, errorBanner(e),
      h("p", {}, h("a", { href: `#/jobs/${id}` }, "← job")));
  }
  const msg = h("div", { id: "streams-result" });
  const namespace = h("input", { type: "text", id: "streams-namespace", value: job.namespace || found.namespace });
  const offered = new Set(found.topics.map((t) => t.topic));
  // Streams of the job whose topic the source does not offer (now): kept
  // as they are.
  const notOffered = (job.streams || []).filter((s) => !offered.has(s.topic));
  const rows = found.topics.map((t) => {
    const configured = (job.streams || []).find((s) => s.topic === t.topic);
    const tick = h("input", { type: "checkbox", class: "tick", checked: !!configured });
    const mode = h("select", { class: "mode" }, h("option", { value: "append" }, "append"), h("option", { value: "upsert" }, "upsert"));
    mode.value = (configured && configured.mode) || t.mode || "append";
    const keyNames = ["_kafka_key", ...t.columns.map((c) => c.name)];
    const storedKeys = (configured && configured.dedup_keys) || t.dedup_keys || [];
    for (const k of storedKeys) if (!keyNames.includes(k)) keyNames.push(k);
    const keys = h("select", { class: "keys", multiple: true, size: Math.min(6, keyNames.length) },
      keyNames.map((n) => h("option", { value: n }, n)));
    for (const k of storedKeys) {
      const o = [...keys.options].find((x) => x.value === k);
      if (o) o.selected = true;
    }
    const formatSelect = (cls, value) => {
      const select = h("select", { class: cls },
        FORMATS.map((f) => h("option", { value: f }, f || "(default)")));
      select.value = value || "";
      return select;
    };
    const valueFormat = formatSelect("value-format", configured && configured.value_format);
    const keyFormat = formatSelect("key-format", configured && configured.key_format);
    const shown = { mode: mode.value, keys: [...keys.selectedOptions].map((o) => o.value).sort().join("\n"),
      value_format: valueFormat.value, key_format: keyFormat.value };
    const fmt = t.upsert_delete_format;
    const invalid = t.invalid_messages > 0
      ? h("div", { class: "bad invalid" },
        `${t.invalid_messages} of ${t.invalid_messages + t.sampled_messages} sampled messages cannot become rows (left out of the columns; the sync ${t.on_invalid === "fail" ? "fails on them" : t.on_invalid === "dlq" ? "writes them to the dead-letter table" : "skips them"}): ${t.invalid_example}`)
      : null;
    return {
      topic: t.topic, configured, tick, mode, keys, valueFormat, keyFormat, shown,
      row: h("tr", { id: `stream-${t.topic}` },
        h("td", {}, tick), h("td", {}, t.topic), h("td", {}, t.partitions),
        h("td", { class: "cols" }, t.columns.map((c) => `${c.name}: ${c.type}`).join(", ") || "-", invalid),
        h("td", {}, valueFormat, h("div", { class: "hint" }, `reads ${t.value_format}: ${t.value_format_reason}`)),
        h("td", {}, keyFormat),
        h("td", {}, mode), h("td", {}, keys),
        h("td", { class: "cols" }, fmt ? `${fmt.label} (v${fmt.format_version}): ${fmt.reason}` : h("span", { class: "bad" }, cell(t.upsert_delete_format_error)))),
    };
  });
  show(
    h("h1", {}, `Streams of ${job.name}`),
    saved,
    first ? banner("warn", "This job stays paused until its streams are saved.") : null,
    h("p", {}, "Topics matching ", h("code", {}, found.topic_pattern || "(the job's streams)"), "; columns inferred from a sample (Avro and Protobuf topics: from their schema at sync start)."),
    h("label", { for: "streams-namespace" }, "Iceberg namespace"), namespace,
    h("table", { id: "streams-table" },
      h("tr", {}, ["Sync", "Topic", "Partitions", "Columns", "Value format", "Key format", "Mode", "Dedup keys", "Upsert delete format"].map((t) => h("th", {}, t))),
      rows.map((r) => r.row)),
    notOffered.length === 0 ? null : h("p", { id: "streams-not-offered" },
      "Streams of this job the source does not offer now (kept as they are): ",
      notOffered.map((s) => s.topic).join(", ")),
    h("p", {}, h("button", {
      class: "primary", type: "button", id: "streams-save",
      onclick: async () => {
        const streams = rows.filter((r) => r.tick.checked).map((r) => {
          // The stored entry's other settings (on_invalid, columns, table,
          // delete_format, ...) are kept: this page does not show them; a
          // shown setting the user did not change is kept as stored.
          const s = { ...(r.configured || {}), topic: r.topic };
          if (!r.configured || r.mode.value !== r.shown.mode) s.mode = r.mode.value;
          const keys = [...r.keys.selectedOptions].map((o) => o.value);
          if (r.mode.value === "upsert") {
            if (!r.configured || !s.dedup_keys || keys.slice().sort().join("\n") !== r.shown.keys) s.dedup_keys = keys;
          } else if (s.mode === "append") { delete s.dedup_keys; delete s.delete_format; }
          for (const [field, select] of [["value_format", r.valueFormat], ["key_format", r.keyFormat]]) {
            if (r.configured && select.value === r.shown[field]) continue;
            if (select.value) s[field] = select.value; else delete s[field];
          }
          return s;
        }).concat(notOffered);
        const body = { ...job, namespace: namespace.value === found.namespace ? job.namespace : namespace.value, streams };
        if (first) body.paused = false;
        try {
          await api("PUT", `/api/jobs/${id}`, body);
          flash = first ? "Streams saved; the job's schedule is on." : "Streams saved.";
          go(`#/jobs/${id}`);
        } catch (e) { msg.replaceChildren(errorBanner(e)); }
      },
    }, "Save streams")),
    msg);
}

route();
