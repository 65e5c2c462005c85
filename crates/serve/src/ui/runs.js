// A run's page: its error first, what it has to say (dead letters, schema
// changes, skipped or expired messages), each table, and the log with a
// search and a level filter.

import { confirmDialog, messageDialog } from "./dialog.js";
import { api } from "./api.js";
import { banner, bytes, cell, count, duration, fact, h, show, statusCell, utc } from "./dom.js";
import { redraw, refreshIn } from "./nav.js";
import { followProgress } from "./progress.js";

// The notes of a run worth a mark, as [class, text] (empty: nothing to say).
function runNotes(run) {
  const n = run.notes || {};
  const out = [];
  if (n.dead_letter_records > 0) out.push(["dlq", `${count(n.dead_letter_records)} dead letters written`]);
  if (n.schema_changes > 0) out.push(["schema", `${count(n.schema_changes)} schema change${n.schema_changes === 1 ? "" : "s"}`]);
  if (n.skipped_records > 0) out.push(["skipped", `${count(n.skipped_records)} invalid messages skipped`]);
  if (n.expired_messages > 0) out.push(["expired", `${count(n.expired_messages)} messages expired before they were read`]);
  return out;
}

// The marks next to a run's status in the history.
export function runMarks(run) {
  const notes = runNotes(run);
  return notes.length === 0 ? null
    : h("span", { class: "marks" }, notes.map(([cls, text]) => h("span", { class: `mark mark-${cls}`, title: text }, ` ⚑ ${text}`)));
}

// Lines of `log` with `text` in them (any case) at `level` or above.
const LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
function filterLog(lines, text, level) {
  const needle = text.trim().toLowerCase();
  const min = LEVELS.indexOf(level);
  return lines.filter((line) => {
    if (needle && !line.toLowerCase().includes(needle)) return false;
    if (min > 0) {
      const m = /^\S+\s+(TRACE|DEBUG|INFO|WARN|ERROR)\b/.exec(line);
      if (m && LEVELS.indexOf(m[1]) < min) return false;
    }
    return true;
  });
}

// Cancels the run in progress (its job's one run): it commits nothing.
function cancelButton(run) {
  return h("button", {
    type: "button", id: "run-cancel", class: "danger",
    onclick: async (ev) => {
      if (!(await confirmDialog(`Cancel run #${run.id}?`, "It commits nothing and deletes the files it wrote.", "Cancel run", { danger: true }))) return;
      ev.target.disabled = true;
      try { await api("POST", `/api/jobs/${run.job_id}/cancel`); } catch (e) { if (e.status !== 401) await messageDialog("Could not cancel", e.message); }
      redraw();
    },
  }, "Cancel run");
}

export async function runPage(id) {
  const run = await api("GET", `/api/runs/${id}`);
  const log = await fetch(`/api/runs/${id}/log`, { credentials: "same-origin" }).then((r) => r.text());
  const tables = run.tables || [];
  const notes = runNotes(run);
  const split = (text) => (text ? text.replace(/\n$/, "").split("\n") : []);
  let lines = split(log);
  // Focusable: a box that scrolls must be reachable by keyboard.
  const pre = h("pre", { class: "log", id: "log", tabindex: "0", "aria-label": "the run's log" });
  const search = h("input", { type: "search", id: "log-search", placeholder: "search the log", "aria-label": "search the log", value: runPage.search || "" });
  const level = h("select", { id: "log-level", "aria-label": "log level" },
    [["", "all levels"], ["INFO", "INFO and above"], ["WARN", "WARN and ERROR"], ["ERROR", "ERROR only"]].map(([v, t]) => h("option", { value: v }, t)));
  level.value = runPage.level || "";
  const shownCount = h("span", { class: "hint", id: "log-count" });
  const render = () => {
    // Kept across the page's own refreshes of a running run.
    runPage.search = search.value;
    runPage.level = level.value;
    const kept = filterLog(lines, search.value, level.value);
    pre.replaceChildren(lines.length === 0 ? "(empty)" : kept.join("\n") || "(no line matches)");
    shownCount.replaceChildren(kept.length === lines.length ? `${lines.length} lines` : `${kept.length} of ${lines.length} lines`);
  };
  search.addEventListener("input", render);
  level.addEventListener("change", render);
  render();
  const running = run.status === "running";
  // A follower's run (a continuous job) shows its totals, not tables.
  const maintenance = run.kind === "maintain" || run.kind === "follow";
  const progress = running && !maintenance ? h("div", { id: "run-progress" }, h("p", { class: "hint" }, "reading the progress...")) : null;
  show(
    h("h1", {}, run.kind === "follow" ? `Follower run #${run.id}` : run.kind === "maintain" ? `Maintenance run #${run.id}` : `Run #${run.id}`),
    run.error ? banner("bad", run.error) : null,
    // Said before any table (a named topic missing, with missing_topics =
    // "wait"; a topic_pattern that matches nothing).
    ((run.report && run.report.warnings) || []).map((w) => banner("warn", w)),
    notes.length && run.status === "succeeded" ? h("div", { class: "banner warn", id: "run-notes" }, "Succeeded, with something to say: ", notes.map(([, t]) => t).join("; ")) : null,
    h("p", {}, h("a", { href: `#/jobs/${run.job_id}` }, "← job"), " · ",
      statusCell(run.status), " · started ", utc(run.started), " · ", duration(run.duration_ms),
      " · ", run.trigger),
    running && run.kind !== "follow" ? h("p", { class: "actions" }, cancelButton(run)) : null,
    progress ? h("h2", {}, "Progress") : null,
    progress,
    run.kind === "maintain" ? maintenanceTables(run.report) : null,
    run.kind === "follow" && run.report ? followerTotals(run.report) : null,
    running || maintenance ? null : h("div", { class: "facts", id: "run-figures" },
      // A cancelled run committed nothing: its figures would read as "0".
      run.status === "cancelled" ? fact("Committed", "nothing (cancelled; its files were deleted)") : null,
      fact("Records", run.status === "cancelled" ? "-" : count(run.records)),
      fact("Read from Kafka", run.status === "cancelled" ? "-" : bytes(run.bytes)),
      fact("Dead letters", count((run.notes || {}).dead_letter_records)),
      fact("Schema changes", count((run.notes || {}).schema_changes)),
      fact("Skipped", count((run.notes || {}).skipped_records)),
      fact("Expired", count((run.notes || {}).expired_messages))),
    running || maintenance ? null : h("table", { id: "tables" },
      h("tr", {}, ["Topic", "Table", "Status", "Records", "Bytes", "Data files", "Notes", "Commit report", "Error"].map((t) => h("th", {}, t))),
      tables.map((t) => h("tr", {},
        h("td", {}, cell(t.topic)), h("td", {}, cell(t.table)), h("td", {}, statusCell(t.status)),
        h("td", {}, count(t.records)), h("td", {}, bytes(t.bytes)),
        h("td", {}, cell(t.data_files), t.data_file_bytes ? ` (${bytes(t.data_file_bytes)})` : ""),
        h("td", { class: "cols notes" }, tableNotes(t)),
        h("td", { class: "cols commit" }, t.commit ? Object.entries(t.commit).filter(([, v]) => v !== null && v !== undefined)
          .map(([k, v]) => `${k}=${v}`).join(", ") : "-"),
        h("td", { class: "bad" }, t.error || "")))),
    h("h2", {}, "Log ", h("a", { class: "button", href: `/api/runs/${id}/log`, download: `run-${id}.log` }, "Download")),
    h("p", { class: "log-tools" }, search, " ", level, " ", shownCount),
    pre);
  if (!running) return;
  if (maintenance) { refreshIn(2000); return; }
  // The log follows every third second.
  let ticks = 0;
  followProgress(id, progress, async () => {
    ticks += 1;
    if (ticks % 3 !== 0) return;
    const text = await fetch(`/api/runs/${id}/log`, { credentials: "same-origin" }).then((r) => r.text());
    lines = split(text);
    render();
  });
}

// A follower's totals, from its start to its stop.
function followerTotals(r) {
  return h("div", { class: "facts", id: "follower-totals" },
    fact("Rounds", count(r.rounds)), fact("Snapshots", count(r.snapshots)),
    fact("Records written", count(r.records)), fact("Superseded", count(r.superseded)),
    fact("Failed rounds", count(r.failed_rounds)));
}

// A table's own notes on the run page.
function tableNotes(t) {
  const out = [];
  if (t.dead_letter_records > 0) out.push(`${count(t.dead_letter_records)} dead letters → ${t.dead_letter_table || "dead-letter table"}`);
  for (const c of t.schema_changes || []) out.push(`schema: ${c}`);
  if (t.skipped_records > 0) out.push(`${count(t.skipped_records)} skipped`);
  if (t.expired_messages > 0) out.push(`${count(t.expired_messages)} expired`);
  if (t.note) out.push(t.note);
  const ops = t.change_operations;
  if (ops) {
    const said = [["created", "inserted"], ["read", "snapshot reads"], ["updated", "updated"], ["deleted", "deleted"],
      ["truncated", "truncates"], ["unstated", "without an operation"]]
      .filter(([k]) => ops[k] > 0).map(([k, words]) => `${count(ops[k])} ${words}`);
    out.push(h("span", { class: "change-operations" }, `changes: ${said.join(", ") || "none"}`));
  }
  return out.length ? out.map((o) => h("div", {}, o)) : "-";
}

// A maintenance run's tables: files before and after, what each step did.
function maintenanceTables(report) {
  if (!report) return null;
  const steps = (t) => {
    const out = [];
    const kv = (o) => Object.entries(o).filter(([, v]) => v !== null && typeof v !== "object")
      .map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`).join(", ");
    if (t.compaction) out.push(`compaction: ${kv(t.compaction)}`);
    if (t.expiry) out.push(`expiry: ${kv(t.expiry)}`);
    if (t.orphans) out.push(`orphans: ${kv(t.orphans)}`);
    return out.length ? out.map((o) => h("div", {}, o)) : "-";
  };
  const stat = (s, k) => (s && s[k] !== undefined ? count(s[k]) : "-");
  return h("table", { id: "maintenance-tables" },
    h("tr", {}, ["Table", "Data files", "Delete files", "Snapshots", "Steps", "Error"].map((t) => h("th", {}, t))),
    (report.tables || []).map((t) => h("tr", {},
      h("td", {}, t.table),
      h("td", {}, `${stat(t.before, "data_files")} → ${stat(t.after, "data_files")}`),
      h("td", {}, `${stat(t.before, "delete_files")} → ${stat(t.after, "delete_files")}`),
      h("td", {}, `${stat(t.before, "snapshots")} → ${stat(t.after, "snapshots")}`),
      h("td", { class: "cols" }, steps(t)),
      h("td", { class: "bad" }, t.error || ""))));
}
