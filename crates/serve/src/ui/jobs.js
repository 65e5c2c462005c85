// Jobs: the list, a job's overview page, its form, clone, delete, import.

import { api, postText } from "./api.js";
import { banner, bytes, cell, count, duration, fact, h, show, statusCell, utc, utcMs } from "./dom.js";
import { confirmDialog, messageDialog, promptDialog } from "./dialog.js";
import { go, redraw, refreshIn, setFlash, takeFlash } from "./nav.js";
import { HISTORY_FETCH, historySection } from "./chart.js";
import { scheduleBuilder } from "./schedule.js";
import { applyFields, field, fieldset, formFields, formSpec, inWords, jobFileForms, showProblems } from "./forms.js";

function jobActions(job, after) {
  const act = (label, path, id, opts = {}) => h("button", {
    type: "button", id, disabled: !!opts.disabled, title: opts.title || null,
    onclick: async (ev) => {
      if (opts.confirm && !(await confirmDialog(opts.confirm.title, opts.confirm.text, opts.confirm.label, { danger: true }))) return;
      ev.target.disabled = true;
      try {
        const answer = await api("POST", path);
        // A run started: its page shows it live.
        if (opts.toRun && answer && answer.run_id) return go(`#/runs/${answer.run_id}`);
      } catch (e) { if (e.status !== 401) await messageDialog("That did not work", e.message); }
      after();
    },
  }, label);
  const continuous = job.mode === "continuous";
  const follower = job.follower;
  return h("span", { class: "actions" },
    // A continuous job is started and stopped; a scheduled one syncs now.
    continuous
      ? (follower
        ? act("Stop", `/api/jobs/${job.id}/stop`, `stop-${job.id}`,
          { disabled: follower.stopping, title: "commit what was read, leave the consumer group and stop (stays stopped after a restart)" })
        : act("Start", `/api/jobs/${job.id}/start`, `start-${job.id}`, { title: "follow the topics continuously" }))
      // Sync Now waits for the run in progress to end.
      : act("Sync Now", `/api/jobs/${job.id}/sync`, `sync-${job.id}`,
        { disabled: job.running, title: job.running ? "a run is in progress" : null, toRun: true }),
    act("Maintain Now", `/api/jobs/${job.id}/maintain`, `maintain-${job.id}`,
      { disabled: job.running, toRun: true, title: job.running ? "a run is in progress" : "compact the tables, expire old snapshots, remove orphan files" }),
    continuous ? null : job.paused
      ? act("Resume", `/api/jobs/${job.id}/resume`, `resume-${job.id}`)
      : act("Pause", `/api/jobs/${job.id}/pause`, `pause-${job.id}`),
    job.running ? act("Cancel", `/api/jobs/${job.id}/cancel`, `cancel-${job.id}`,
      { confirm: { title: `Cancel the run of ${job.name}?`, text: "It commits nothing and deletes the files it wrote.", label: "Cancel run" } }) : null);
}

// A job's last run of a kind: its status and when it started, or "-".
function lastRun(run) {
  return run ? [statusCell(run.status), " ", h("span", { class: "hint" }, utc(run.started))] : "-";
}

// The first steps, while there is no job: each says whether it is done
// and links to where it is done.
async function firstSteps() {
  const [sources, destinations] = await Promise.all([api("GET", "/api/sources"), api("GET", "/api/destinations")]);
  const step = (done, text, link, label) => h("li", { class: done ? "step-done" : "step-todo" },
    h("span", { class: "badge" }, done ? "done" : "to do"), " ", text, " ",
    done ? null : h("a", { href: link }, label));
  const next = !sources.length ? "#/sources/new" : !destinations.length ? "#/destinations/new" : "#/jobs/new";
  return h("div", { class: "card", id: "first-steps" },
    h("h2", {}, "Get started"),
    h("p", {}, "A job copies Kafka topics into Iceberg tables: it reads from a source (your Kafka cluster) and writes to a destination (an Iceberg catalog and its storage)."),
    h("ol", { class: "steps" },
      step(sources.length > 0, "Add a source: your brokers and how to log in; Test connection tells you whether they answer.", "#/sources/new", "Add a source"),
      step(destinations.length > 0, "Add a destination: the embedded catalog needs only a folder; a REST catalog its URL and login.", "#/destinations/new", "Add a destination"),
      step(false, "Create a job: pick its topics (each one's columns come from a sample of its messages), then Sync Now.", "#/jobs/new", "New job")),
    h("p", {}, h("a", { class: "button primary", href: next, id: "first-step" }, "Start"),
      " or ", h("a", { href: "#/import" }, "import a job file"), "."));
}

export async function jobsPage() {
  const jobs = await api("GET", "/api/jobs");
  const rows = jobs.map((j) => h("tr", { id: `job-${j.id}` },
    h("td", {}, h("a", { href: `#/jobs/${j.id}` }, j.name)),
    h("td", {}, j.mode === "continuous" ? [h("span", { class: "badge" }, "continuous"), " ", followState(j)]
      : [j.schedule ? `${j.schedule} (UTC)` : "manual", j.paused ? " — paused" : ""]),
    h("td", {}, utc(j.next_run)),
    // A run in progress is its kind's last run, stored as running.
    h("td", { class: "last-sync" }, lastRun(j.last_run)),
    h("td", {}, j.follower ? count(j.follower.report.records) : j.last_run ? count(j.last_run.records) : "-"),
    h("td", { class: "last-maintain" }, lastRun(j.last_maintain)),
    h("td", {}, jobActions(j, redraw))));
  show(
    h("h1", {}, "Jobs"),
    takeFlash(),
    h("p", { class: "actions" }, h("a", { class: "button", href: "#/jobs/new", id: "new-job" }, "New job"),
      h("a", { class: "button", href: "#/import", id: "import-job" }, "Import job file")),
    jobs.length === 0 ? await firstSteps() :
      h("table", {},
        h("tr", {}, ["Job", "Schedule", "Next run", "Last sync", "Records", "Last maintenance", ""].map((t) => h("th", {}, t))),
        rows));
  if (jobs.some((j) => j.running || j.follower)) refreshIn(2000);
}

// A continuous job's state in words: following, stopping or stopped.
function followState(job) {
  if (job.follower) return h("span", { class: "status-running" }, job.follower.stopping ? "stopping" : "following");
  return h("span", { class: "status-cancelled" }, job.paused ? "stopped" : "starting");
}

// A continuous job's follower, live: its rounds, commits and last error.
function followerCard(job) {
  const f = job.follower;
  const r = f ? f.report : null;
  const ago = (ms) => (ms ? [utcMs(ms), ` (${duration(Date.now() - ms)} ago)`] : "not yet");
  return h("div", { class: "card", id: "follower" }, h("h2", {}, "Continuous"),
    fact("State", followState(job)),
    fact("Commit interval", job.sync && job.sync.commit_interval ? job.sync.commit_interval : "5s (default)"),
    r ? [
      fact("Since", utcMs(r.started_ms)),
      fact("Rounds", h("span", { id: "follower-rounds" }, count(r.rounds)), ` (${count(r.committing_rounds)} committed, ${count(r.failed_rounds)} failed)`),
      fact("Snapshots", h("span", { id: "follower-snapshots" }, count(r.snapshots)), perMinute(r.snapshots, r.started_ms)),
      fact("Records written", h("span", { id: "follower-records" }, count(r.records))),
      fact("Last commit", h("span", { id: "follower-last-commit" }, ago(r.last_commit_ms))),
      fact("Consumer group", r.group_protocol ? `member (${r.group_protocol} protocol)` : "joining"),
      fact("Maintenance", h("span", { id: "follower-maintenance" },
        `${count(r.maintenance_passes)} passes, ${count(r.files_compacted)} files compacted, ${count(r.snapshots_expired)} snapshots expired`)),
      r.spill_limit_bytes > 0 ? fact("Buffered locally", h("span", { id: "follower-buffered" }, spillState(r))) : null,
      r.last_error ? h("p", { class: "field-error", id: "follower-error" }, `Last round failed: ${r.last_error}`) : null,
      (r.warnings || []).length ? h("div", { class: "banner warn", id: "follower-warnings" },
        h("ul", {}, r.warnings.map((w) => h("li", {}, w)))) : null,
      followerTables(r.tables || []),
      h("p", {}, h("a", { href: `#/runs/${f.run_id}` }, `run #${f.run_id}`), " (its log)"),
    ] : h("p", {}, job.paused ? "Stopped: Start follows the topics again from the offsets the tables hold." : "Starting."));
}

// " (N a minute since it started)": a follower's commit rate.
function perMinute(n, startedMs) {
  const minutes = (Date.now() - startedMs) / 60000;
  if (!startedMs || minutes <= 0) return null;
  const rate = n / minutes;
  return h("span", { class: "hint", id: "follower-per-minute" }, ` (${rate < 10 ? rate.toFixed(1) : Math.round(rate)} a minute since it started)`);
}

// The local spill in words: what it holds of its bound, and whether the
// follower is reading ahead (its tables cannot commit) or paused (full).
function spillState(r) {
  const held = `${bytes(r.buffered_bytes)} of the ${Math.round(r.spill_limit_bytes / 1e6)} MB allowed (sync.spill_mb)`;
  if (r.buffered_bytes >= r.spill_limit_bytes) return `${held}: full, fetching paused until the tables commit`;
  if (r.buffered_bytes > 0) return `${held}: reading ahead while the tables cannot commit`;
  return `${held} (used while the catalog or the store is down)`;
}

// Each table's live figures: how far behind Kafka it is visible (now minus
// the newest committed message's timestamp), its last commit, rows, files.
function followerTables(tables) {
  if (tables.length === 0) return null;
  const now = Date.now();
  const since = (ms) => (ms ? `${duration(Math.max(0, now - ms))} ago` : "not yet");
  const avg = (t) => (t.data_files > 0 ? bytes(Math.round(t.data_file_bytes / t.data_files)) : "-");
  return h("table", { id: "follower-tables" },
    h("tr", {}, ["Table", "Visibility lag", "Last commit", "Commit took", "Rows", "Files (average)", "Retries", "Dead letters / skipped", "Buffered"]
      .map((t) => h("th", {}, t))),
    tables.map((t) => h("tr", { id: `follower-table-${t.table}` },
      h("td", {}, t.table),
      h("td", { class: "visibility-lag" }, t.newest_committed_ms ? duration(Math.max(0, now - t.newest_committed_ms)) : "-"),
      h("td", {}, since(t.last_commit_ms)),
      h("td", {}, duration(t.last_commit_duration_ms)),
      h("td", {}, count(t.records)),
      h("td", {}, `${count(t.data_files)} (${avg(t)})`),
      h("td", {}, count(t.commit_retries)),
      h("td", {}, `${count(t.dead_letters)} / ${count(t.skipped)}`),
      h("td", { class: "buffered" }, bytes(t.buffered_bytes || 0)))));
}

// The consumer group's members (this service's follower, workers on other
// machines), each with its partitions: asked of Kafka
// when the button is pressed, and kept across the page's refreshes.
const membersSeen = new Map();
function groupMembers(id) {
  const box = h("div", { id: "group-members" });
  const draw = (seen) => {
    if (!seen) return box.replaceChildren(h("p", { class: "hint" }, "Ask Kafka which members of the job's consumer group read which partitions."));
    if (seen.error) return box.replaceChildren(banner("bad", seen.error));
    const a = seen.answer;
    box.replaceChildren(
      h("p", {}, `Group ${a.group}: ${a.state} (${a.protocol} protocol), ${a.members.length} member${a.members.length === 1 ? "" : "s"}, as of ${utcMs(seen.at)}.`),
      ...(a.members.length === 0 ? [] : [h("table", { id: "members" },
        h("tr", {}, ["Client", "Host", "Partitions"].map((t) => h("th", {}, t))),
        a.members.map((m) => h("tr", { class: "member" },
          h("td", {}, m.client_id), h("td", {}, m.host), h("td", { class: "cols member-partitions" }, partitionsText(m.partitions)))))]));
  };
  draw(membersSeen.get(id));
  const ask = async (ev) => {
    const button = ev.currentTarget;
    button.disabled = true;
    try { membersSeen.set(id, { answer: await api("GET", `/api/jobs/${id}/members`), at: Date.now() }); }
    catch (e) { if (e.status !== 401) membersSeen.set(id, { error: e.message, at: Date.now() }); }
    finally { button.disabled = false; }
    // The page may have been drawn again meanwhile: its box shows it.
    const shown = document.getElementById("group-members");
    if (shown && shown !== box) redraw(); else draw(membersSeen.get(id));
  };
  return [h("h2", {}, "Consumer group"),
    h("p", { class: "actions" }, h("button", { type: "button", id: "show-members", onclick: ask }, "Show who reads which partitions")), box];
}

// `[[topic, partition], ...]` as "orders: 0, 2; customers: 1".
function partitionsText(partitions) {
  const byTopic = new Map();
  for (const [topic, p] of partitions) byTopic.set(topic, [...(byTopic.get(topic) || []), p]);
  return [...byTopic].map(([topic, ps]) => `${topic}: ${ps.join(", ")}`).join("; ") || "none";
}

// The tables the last successful run wrote (a routed stream's several
// tables among them), each linked to its page.
function writtenTables(id, last) {
  const tables = (last && last.tables) || [];
  if (tables.length === 0) return null;
  return [h("h2", {}, "Tables"),
    h("p", { class: "hint" }, `Written by the last successful run (#${last.id}).`),
    h("table", { id: "written-tables" },
      h("tr", {}, ["Table", "Topic", "Records in that run"].map((t) => h("th", {}, t))),
      // The report names a table with its namespace; its page, without.
      tables.map((t) => ({ ...t, name: String(t.table).split(".").pop() })).map((t) => h("tr", {},
        h("td", {}, h("a", { class: "written-table", href: `#/jobs/${id}/tables/${encodeURIComponent(t.name)}` }, t.name)),
        h("td", {}, cell(t.topic)), h("td", {}, count(t.records)))))];
}

// The table a topic goes to when its stream names none (the job file's
// rule: lower case, characters other than a-z, 0-9 and _ as _).
function tableOf(topic) {
  return topic.toLowerCase().replace(/[^a-z0-9_]/g, "_");
}

// A labelled line of the overview.
export async function jobPage(id) {
  const [job, runs, overview] = await Promise.all([
    api("GET", `/api/jobs/${id}`),
    api("GET", `/api/jobs/${id}/runs?limit=${HISTORY_FETCH}`),
    api("GET", `/api/jobs/${id}/overview`),
  ]);
  const [source, destination] = await Promise.all([
    api("GET", `/api/sources/${job.source_id}`).catch(() => null),
    api("GET", `/api/destinations/${job.destination_id}`).catch(() => null),
  ]);
  const warnings = (job.warnings || []).map((w) => banner("warn", w));
  const waiting = job.paused && (job.streams || []).length === 0;
  const streams = job.streams || [];
  const last = overview.last_success;
  const lag = overview.lag;
  show(
    h("h1", {}, `Job ${job.name}`),
    takeFlash(),
    waiting ? banner("warn", "Paused until its streams are saved: ",
      h("a", { href: `#/jobs/${id}/streams/first`, id: "choose-streams" }, "choose its streams")) : null,
    ...warnings,
    h("p", { class: "actions" }, jobActions(job, redraw), " ",
      h("a", { class: "button", href: `#/jobs/${id}/streams`, id: "streams" }, "Streams"),
      h("a", { class: "button", href: `#/jobs/${id}/edit`, id: "edit-job" }, "Edit"),
      h("button", { type: "button", id: "clone-job", onclick: () => cloneJob(job) }, "Clone"),
      h("a", { class: "button", href: `/api/jobs/${id}/export`, download: `${job.name}.toml` }, "Export job TOML"),
      h("button", { type: "button", id: "delete-job", class: "danger", onclick: () => deleteJob(job) }, "Delete")),
    h("div", { class: "overview", id: "overview" },
      h("div", { class: "card" }, h("h2", {}, "Source"),
        source ? [fact("Name", h("a", { href: `#/sources/${source.id}` }, source.name)),
          fact("Brokers", cell(source.bootstrap_servers)),
          source.topic_pattern ? fact("Topic pattern", source.topic_pattern) : null] : "-"),
      h("div", { class: "card" }, h("h2", {}, "Destination"),
        destination ? [fact("Name", h("a", { href: `#/destinations/${destination.id}` }, destination.name)),
          fact("Catalog", destination.catalog === "rest" ? `REST ${cell(destination.uri)}` : "embedded"),
          fact("Namespace", job.namespace || `${job.name}_topics (default)`)] : "-"),
      job.mode === "continuous" ? followerCard(job) : null,
      h("div", { class: "card" }, h("h2", {}, job.mode === "continuous" ? "Maintenance" : "Schedule"),
        job.mode === "continuous" ? null : h("p", {}, "Schedule: ", job.schedule ? `${job.schedule} (UTC)` : "manual only",
          job.paused ? " — paused" : "", " · next run: ", utc(job.next_run)),
        h("p", { id: "maintain-schedule" }, "Maintenance: ", job.maintain_schedule ? `${job.maintain_schedule} (UTC)` : "by hand only (Maintain Now)"),
        fact("Last success", last ? [utc(last.finished), " (", h("a", { href: `#/runs/${last.id}` }, `run #${last.id}`), ")"] : "never", ""),
        fact("Target engines", (job.target_engines || []).join(", ") || "(default)"))),
    h("h2", {}, "Streams"),
    streams.length === 0 ? h("p", {}, "None ticked: every topic the source's pattern selects.") :
      h("table", { id: "overview-streams" },
        h("tr", {}, ["Topic", "Table", "Mode", "Dedup keys", "Invalid messages", "Lag (messages)"].map((t) => h("th", {}, t))),
        streams.map((s) => {
          const l = lag && lag.find((t) => t.topic === s.topic);
          return h("tr", {},
            h("td", {}, s.topic),
            // A routed stream's table is a template: its tables are below.
            h("td", {}, (s.table || "").includes("{")
              ? [h("code", { class: "route" }, s.table), " (routed)"]
              : h("a", { class: "table-link", href: `#/jobs/${id}/tables/${encodeURIComponent(s.table || tableOf(s.topic))}` },
                s.table || tableOf(s.topic))),
            h("td", {}, s.mode || "append"),
            h("td", {}, (s.dedup_keys || []).join(", ") || "-"), h("td", {}, s.on_invalid || "fail"),
            h("td", { class: "lag" }, l ? count(l.lag) : "-"));
        })),
    writtenTables(id, last),
    groupMembers(id),
    h("h2", {}, "Consumer lag"),
    job.current_run ? h("p", { class: "hint", id: "lag-before-run" }, "Measured after the last run; a run is in progress: ",
      h("a", { href: `#/runs/${job.current_run}` }, `its live figures`), ".") : null,
    lag === null || lag === undefined
      ? h("p", { id: "lag" }, "Measured after each run (not yet since the service started).")
      : h("table", { id: "lag" },
        h("tr", {}, ["Topic", "Lag (messages)", "Per partition"].map((t) => h("th", {}, t))),
        lag.map((t) => h("tr", { class: "topic-lag" }, h("td", {}, t.topic), h("td", { class: "lag" }, count(t.lag)),
          h("td", { class: "cols" }, t.partitions.map((p) => `${p.partition}: ${count(p.lag)}`).join(", "))))),
    h("h2", {}, "History"),
    historySection(id, runs));
  if (job.running || job.follower || runs.some((r) => r.status === "running")) refreshIn(2000);
  else if (job.schedule && !job.paused) refreshIn(5000);
}

// A copy of the job under a new name, paused until its streams are
// checked (its source and destination are shared).
async function cloneJob(job) {
  const name = await promptDialog(`Clone job ${job.name}`, "Name of the copy", `${job.name}_copy`, "Clone");
  if (!name) return;
  const body = { ...job, name, paused: true };
  for (const k of ["id", "running", "current_run", "next_run", "last_run", "last_maintain", "warnings", "follower"]) delete body[k];
  try {
    const saved = await api("POST", "/api/jobs", body);
    setFlash(`Cloned ${job.name} as ${saved.name}; it is paused until you resume it.`);
    go(`#/jobs/${saved.id}`);
  } catch (e) { if (e.status !== 401) await messageDialog("That did not work", e.message); }
}

async function deleteJob(job) {
  if (!(await confirmDialog(`Delete job ${job.name}?`, "Its run history goes with it; its tables stay in the catalog. This cannot be undone.", "Delete job", { danger: true }))) return;
  try {
    await api("DELETE", `/api/jobs/${job.id}`);
    setFlash(`Deleted job ${job.name}.`);
    go("#/jobs");
  } catch (e) { if (e.status !== 401) await messageDialog("That did not work", e.message); }
}

export function importPage() {
  const msg = h("div", { id: "import-result" });
  const text = h("textarea", { id: "import-text", rows: 16, placeholder: "name = \"orders\"\n[source]\nbootstrap_servers = ..." });
  const file = h("input", { type: "file", id: "import-file", accept: ".toml,text/plain",
    onchange: async () => { if (file.files[0]) text.value = await file.files[0].text(); } });
  show(
    h("h1", {}, "Import a job file"),
    h("form", {
      class: "card", id: "import-form",
      onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          const data = await postText("/api/jobs/import", text.value);
          const unset = data.warnings || [];
          setFlash(unset.length ? `Imported ${data.name}. ${unset.join(" ")}` : `Imported ${data.name}.`);
          go(`#/jobs/${data.id}`);
        } catch (e) {
          msg.replaceChildren(banner("bad", "Not imported: ", inWords(e.message),
            ((e.body && e.body.problems) || []).length > 1 ? h("ul", {}, e.body.problems.map((p) => h("li", {}, inWords(p)))) : null));
        }
      },
    },
      h("div", { class: "field" }, h("label", { for: "import-file" }, "Job file (TOML)"), file,
        h("div", { class: "hint help" }, "what topicberg sync -c reads, or an export; it creates the job with its own source and destination")),
      text,
      h("p", {}, h("button", { class: "primary", type: "submit", id: "import-save" }, "Import")),
      msg));
}

// ---- the job form -----------------------------------------------------------

export async function jobForm(id) {
  const [sources, destinations, job, forms] = await Promise.all([
    api("GET", "/api/sources"),
    api("GET", "/api/destinations"),
    id ? api("GET", `/api/jobs/${id}`) : Promise.resolve(null),
    jobFileForms(),
  ]);
  const msg = h("div", { id: "job-result" });
  const name = field("job", formSpec(forms.job, "name"), job);
  const source = h("select", { id: "job-source" }, sources.map((s) => h("option", { value: s.id }, s.name)));
  const destination = h("select", { id: "job-destination" }, destinations.map((d) => h("option", { value: d.id }, d.name)));
  if (job) { source.value = job.source_id; destination.value = job.destination_id; }
  const schedule = field("job", { key: "schedule", label: "Schedule (UTC)", help: "a cron expression (min hour dom month dow), \"every N minutes\", \"every N hours\", \"daily at HH:MM\", or empty for manual only" },
    job || { schedule: "every 60 minutes" });
  // Keyed job_mode: a stream's `mode` (append / upsert) is another field.
  const mode = field("job", { key: "job_mode", label: "Mode", type: "select",
    options: [["scheduled", "scheduled: a sync on the schedule (and Sync Now)"], ["continuous", "continuous: follow the topics, a commit every commit interval (Sync tuning)"]],
    help: "a continuous job follows its topics from the service's start to Stop, seconds behind Kafka; it has no schedule" },
  { job_mode: job ? job.mode : "scheduled" });
  const builder = scheduleBuilder(schedule);
  const showSchedule = () => { schedule.el.hidden = builder.hidden = mode.input.value === "continuous"; };
  mode.input.addEventListener("change", showSchedule);
  showSchedule();
  // destination.namespace: stored on the job (its destination is shared).
  const namespace = field("job", formSpec(forms.destination, "namespace"), job);
  const enginesSpec = formSpec(forms.job, "target_engines");
  const names = enginesSpec.options.map(([e]) => e);
  const engines = names.map((e) => h("label", { class: "hint inline" },
    h("input", { type: "checkbox", value: e, checked: job && (job.target_engines || []).includes(e) }), ` ${e}`));
  // Entries the boxes cannot show (a release: "trino<480") are kept in a
  // text field, so a save never drops them.
  const versions = field("job", { key: "engine_versions", label: "Engines with a release",
    help: "comma-separated, e.g. trino<480, clickhouse>=26.10 (read the delete-format matrix in the book, docs/src/reference/engines.md)" },
    { engine_versions: ((job && job.target_engines) || []).filter((e) => !names.includes(e)).join(", ") });
  const enginesError = h("div", { class: "field-error", id: "job-target_engines-error" });
  const sync = formFields(forms.sync).map((s) => field("sync", s, job ? job.sync : null));
  const maintainSchedule = field("job", { key: "maintain_schedule", label: "Maintenance schedule (UTC)",
    help: "when to compact, expire snapshots and remove orphans, as the schedule above (e.g. daily at 03:00); empty: by hand only (Maintain Now). Never at the same time as this job's sync." },
  job || { maintain_schedule: "" });
  const maintain = formFields(forms.maintain).map((s) => field("maintain", s, job ? job.maintain : null));
  const top = [name, mode, schedule, namespace, maintainSchedule];
  const resolve = (path) => {
    if (path === "mode") return mode;
    if (["name", "schedule", "maintain_schedule"].includes(path)) return top.find((f) => f.spec.key === path);
    const mm = /^maintain\.(\w+)$/.exec(path);
    if (mm) return maintain.find((f) => f.spec.key === mm[1]) || null;
    if (path === "destination.namespace") return namespace;
    if (/^target_engines/.test(path)) return { setError: (t) => enginesError.replaceChildren(t) };
    const m = /^sync\.(\w+)$/.exec(path);
    return m ? sync.find((f) => f.spec.key === m[1]) || null : null;
  };
  show(
    h("h1", {}, job ? `Edit job ${job.name}` : "New job"),
    h("form", {
      class: "card", id: "job-form", novalidate: true,
      onsubmit: async (ev) => {
        ev.preventDefault();
        for (const f of top) f.setError("");
        enginesError.replaceChildren();
        const syncTable = { ...(job ? job.sync : {}) };
        const maintainTable = { ...(job ? job.maintain : {}) };
        const badSync = applyFields(sync, syncTable, !job);
        if (applyFields(maintain, maintainTable, !job) || badSync) {
          msg.replaceChildren(banner("bad", "Not saved: fix the fields marked above."));
          return;
        }
        const body = {
          name: name.input.value,
          source_id: +source.value,
          destination_id: +destination.value,
          mode: mode.input.value,
          // A continuous job has no schedule: the field is hidden, not sent.
          schedule: mode.input.value === "continuous" ? "" : schedule.input.value,
          namespace: namespace.input.value || null,
          target_engines: engines.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value)
            .concat(versions.input.value.split(",").map((e) => e.trim()).filter((e) => e)),
          sync: syncTable,
          maintain: maintainTable,
          maintain_schedule: maintainSchedule.input.value,
          streams: job ? job.streams : [],
          // A new job waits, paused, until its streams are saved: its
          // schedule must not sync every matching topic meanwhile.
          paused: job ? job.paused : true,
        };
        try {
          const saved = job ? await api("PUT", `/api/jobs/${job.id}`, body) : await api("POST", "/api/jobs", body);
          setFlash(job ? `Saved job ${saved.name}.` : `Saved job ${saved.name}; it stays paused until its streams are saved.`);
          go(job ? `#/jobs/${saved.id}/streams` : `#/jobs/${saved.id}/streams/first`);
        } catch (e) { if (e.status !== 401) showProblems(e, msg, resolve); }
      },
    },
      name.el,
      h("div", { class: "field" }, h("label", { for: "job-source" }, "Source"), source),
      h("div", { class: "field" }, h("label", { for: "job-destination" }, "Destination"), destination),
      mode.el, schedule.el, builder, namespace.el,
      h("div", { class: "field" }, h("label", {}, enginesSpec.label), h("div", {}, engines),
        h("div", { class: "hint help" }, enginesSpec.help), enginesError),
      versions.el,
      h("details", {}, h("summary", {}, "Sync tuning"), fieldset("Sync tuning", sync, "The defaults suit most jobs.")),
      h("details", { id: "maintain-settings" }, h("summary", {}, "Table maintenance"),
        maintainSchedule.el, scheduleBuilder(maintainSchedule), fieldset("Table maintenance", maintain, "What Maintain Now and the maintenance schedule do; the defaults suit most jobs.")),
      h("p", {}, h("button", { class: "primary", type: "submit", id: "job-save" }, "Save and choose streams")),
      msg));
}
