// A running run's live progress on its page: per table and partition, the
// offsets read of those planned, bytes, elapsed time, rate and time left,
// polled from /api/runs/{id}/progress every second.

import { api } from "./api.js";
import { bytes, count, fact, h, statusCell } from "./dom.js";
import { redraw, refreshIn } from "./nav.js";

// "12 s", "3 min 5 s", "1 h 2 min".
function eta(ms) {
  if (ms === null || ms === undefined) return "-";
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function percent(read, planned) {
  return planned > 0 ? Math.min(100, Math.floor((read * 100) / planned)) : 100;
}

// A bar filled to read / planned. The fill's width is set through the
// CSSOM: the page's Content-Security-Policy (default-src 'self') blocks
// inline style attributes, so a `style="width: .."` would be dropped and
// the fill would take the whole bar.
// `what` names it for a screen reader ("orders partition 2").
export function bar(read, planned, what) {
  const p = percent(read, planned);
  const fill = h("span", { class: "progress-fill" });
  fill.style.width = `${p}%`;
  return h("span", { class: "progress-bar", role: "progressbar", "aria-valuenow": p, "aria-valuemin": 0, "aria-valuemax": 100,
    "aria-label": `${what}: offsets read` }, fill);
}

const PHASES = { planning: "planning (offsets, tables)", reading: "reading", committing: "committing", finished: "finished" };

// The progress section's content for one snapshot.
function progressView(p) {
  const rows = [];
  for (const t of p.tables) {
    rows.push(h("tr", { class: "progress-table" },
      h("td", {}, t.topic), h("td", {}, "all"), h("td", {}, statusCell(t.status)),
      h("td", {}, bar(t.read, t.planned, t.topic), ` ${percent(t.read, t.planned)}%`),
      h("td", {}, `${count(t.read)} of ${count(t.planned)}`), h("td", {}, bytes(t.bytes)), h("td", {}, eta(t.eta_ms))));
    for (const part of t.partitions) {
      rows.push(h("tr", { class: "progress-partition" },
        h("td", {}, ""), h("td", {}, String(part.partition)), h("td", {}, ""),
        h("td", {}, bar(part.read, part.planned, `${t.topic} partition ${part.partition}`), ` ${percent(part.read, part.planned)}%`),
        h("td", {}, `${count(part.read)} of ${count(part.planned)}`), h("td", {}, bytes(part.bytes)), h("td", {}, "")));
    }
  }
  return [
    h("div", { class: "facts" },
      fact("Phase", PHASES[p.phase] || p.phase),
      fact("Read", `${count(p.read)} of ${count(p.planned)} (${percent(p.read, p.planned)}%)`),
      fact("Bytes", bytes(p.bytes)), fact("Elapsed", eta(p.elapsed_ms)),
      fact("Rate", `${count(p.rate_per_s)} messages/s`), fact("Time left", eta(p.eta_ms))),
    p.tables.length === 0 ? h("p", { class: "hint" }, "Planning: the tables and their partitions show once their offsets are read.")
      : h("table", { id: "progress-tables" },
        h("tr", {}, ["Topic", "Partition", "Status", "Progress", "Offsets read", "Bytes", "Time left"].map((c) => h("th", {}, c))),
        rows),
  ];
}

// Polls the run's progress into `section` every second; `onTick` runs at
// each poll (the log's refresh); when the run ends the page is drawn again.
export function followProgress(runId, section, onTick) {
  const here = location.hash;
  const tick = async () => {
    if (location.hash !== here) return;
    let answer;
    try {
      answer = await api("GET", `/api/runs/${runId}/progress`);
    } catch (e) {
      return;
    }
    if (location.hash !== here) return;
    if (answer.status !== "running") return redraw();
    if (answer.progress) section.replaceChildren(...progressView(answer.progress));
    await onTick();
    if (location.hash === here) refreshIn(1000, tick);
  };
  refreshIn(0, tick);
}
