// A job's history: charts of records, duration and lag per run over time
// (SVG drawn here, no library), and the runs table a page at a time.

import { api } from "./api.js";
import { bytes, cell, duration, h, statusCell, utc, utcMs } from "./dom.js";
import { stopRefresh } from "./nav.js";
import { runMarks } from "./runs.js";

// Runs the chart shows (the newest), and runs per table page.
export const HISTORY_FETCH = 100;
const HISTORY_PAGE = 20;

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// The axis ticks for values up to `max`: 0, then steps of 1, 2 or 5
// times a power of ten, at most five of them, the last at or above `max`;
// whole steps only when `whole` (counts of messages).
export function ticks(max, whole) {
  if (!(max > 0)) return [0, 1];
  const p = 10 ** Math.floor(Math.log10(max / 5));
  let step = [1, 2, 5, 10].map((m) => m * p).find((s) => max / s <= 5);
  if (whole) step = Math.max(1, Math.round(step));
  const n = Math.ceil(max / step - 1e-9);
  return Array.from({ length: n + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

// A tick's number: thousands separated, compact past 10,000 (12K, 1.5M),
// with the decimals the ticks' `step` needs (0.05 -> two).
function axisNumber(v, step) {
  if (Math.abs(v) >= 10000) {
    return new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 }).format(v);
  }
  const decimals = step > 0 ? Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9))) : 2;
  return v.toLocaleString("en-US", { maximumFractionDigits: Math.max(decimals, 2) });
}

// One chart: `points` ([time ms, value, status]) as bars over time, on a
// value axis of nice ticks labelled with `unit`.
function timeChart(id, title, unit, points, whole, cls) {
  const W = 560, H = 170, L = 56, R = 10, T = 22, B = 26;
  const chart = svg("svg", { id, class: `chart ${cls}`, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title} (${unit})` });
  chart.append(svg("text", { x: L, y: 14, class: "chart-title" }, title),
    svg("text", { x: L - 4, y: 14, class: "axis axis-unit", "text-anchor": "end" }, unit));
  if (points.length === 0) return chart;
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const span = Math.max(t1 - t0, 1);
  const marks = ticks(Math.max(...points.map(([, v]) => v)), whole);
  const top = marks[marks.length - 1];
  const x = (t) => L + (points.length === 1 ? (W - L - R) / 2 : ((t - t0) / span) * (W - L - R));
  const y = (v) => H - B - (v / top) * (H - T - B);
  for (const v of marks) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: L - 4, y: y(v) + 4, class: "axis axis-tick", "text-anchor": "end" }, axisNumber(v, marks[1])));
  }
  chart.append(svg("text", { x: L, y: H - 6, class: "axis" }, utcMs(t0)));
  if (points.length > 1) chart.append(svg("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, utcMs(t1)));
  const bar = Math.max(2, Math.min(14, (W - L - R) / points.length - 2));
  for (const [t, v, status] of points) {
    chart.append(svg("rect", {
      x: x(t) - bar / 2, y: y(v), width: bar, height: Math.max(H - B - y(v), 1),
      class: `bar bar-${status}`,
    }, svg("title", {}, `${utcMs(t)}: ${axisNumber(v, marks[1] / 10)} ${unit}`)));
  }
  return chart;
}

// Bytes in the unit of the largest (B, KB, MB or GB; 1 KB = 1024 B, as
// the runs table counts them).
function bytesPoints(runs) {
  const largest = Math.max(0, ...runs.map((r) => r.bytes));
  const [unit, per] = [["GB", 2 ** 30], ["MB", 2 ** 20], ["KB", 2 ** 10], ["B", 1]]
    .find(([, n]) => largest >= n) || ["B", 1];
  return [unit, runs.map((r) => [r.started_ms, r.bytes / per, r.status])];
}

// Durations in seconds, or in minutes when the longest is two or more.
function durationPoints(runs) {
  const longest = Math.max(0, ...runs.map((r) => r.duration_ms));
  const [unit, per] = longest >= 120000 ? ["min", 60000] : ["s", 1000];
  return [unit, runs.map((r) => [r.started_ms, r.duration_ms / per, r.status])];
}

// The charts of `runs` (newest first, as the API sends them): finished
// runs, oldest on the left.
function historyChart(runs) {
  // The charts are of syncs (a maintenance run reads no messages).
  const done = runs.filter((r) => r.finished_ms && r.kind !== "maintain").slice().reverse();
  const [durationUnit, durations] = durationPoints(done);
  const [bytesUnit, read] = bytesPoints(done.filter((r) => r.bytes !== null && r.bytes !== undefined));
  const rate = (r) => (r.duration_ms > 0 ? (r.records * 1000) / r.duration_ms : 0);
  return h("div", { class: "charts", id: "history-chart" },
    timeChart("chart-records", "Records per run", "msg", done.map((r) => [r.started_ms, r.records, r.status]), true, "records"),
    timeChart("chart-rate", "Throughput per run", "msg/s", done.map((r) => [r.started_ms, rate(r), r.status]), false, "rate"),
    timeChart("chart-bytes", "Data read per run", bytesUnit, read, false, "bytes"),
    timeChart("chart-duration", "Duration per run", durationUnit, durations, false, "duration"),
    timeChart("chart-lag", "Consumer lag after each run", "msg", done.filter((r) => r.lag !== null && r.lag !== undefined)
      .map((r) => [r.started_ms, r.lag, r.status]), true, "lag"));
}

function runRow(r) {
  return h("tr", { class: "run" },
    h("td", {}, h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)),
    h("td", {}, utc(r.started)),
    h("td", {}, duration(r.duration_ms)),
    h("td", {}, r.kind === "maintain" ? `maintain, ${cell(r.trigger)}` : cell(r.trigger)),
    h("td", {}, statusCell(r.status), runMarks(r)),
    h("td", { class: "records" }, cell(r.records)),
    h("td", {}, bytes(r.bytes)));
}

// The chart, then the runs table a page at a time (the first page from
// `runs`, the others asked for with ?offset=).
export function historySection(jobId, runs) {
  if (runs.length === 0) return h("p", {}, "No runs yet.");
  const table = h("table", { id: "runs" });
  const pager = h("p", { class: "pager", id: "runs-pager" });
  const showPage = async (page) => {
    let rows = runs.slice(page * HISTORY_PAGE, (page + 1) * HISTORY_PAGE + 1);
    if (runs.length >= HISTORY_FETCH && (page + 1) * HISTORY_PAGE >= runs.length) {
      rows = await api("GET", `/api/jobs/${jobId}/runs?limit=${HISTORY_PAGE + 1}&offset=${page * HISTORY_PAGE}`);
    }
    const more = rows.length > HISTORY_PAGE;
    table.replaceChildren(
      h("tr", {}, ["Run", "Started", "Duration", "Trigger", "Status", "Records", "Bytes"].map((t) => h("th", {}, t))),
      ...rows.slice(0, HISTORY_PAGE).map(runRow));
    pager.replaceChildren(
      h("button", { type: "button", id: "runs-newer", disabled: page === 0, onclick: () => showPage(page - 1) }, "← Newer"),
      h("span", { id: "runs-page" }, ` page ${page + 1} `),
      h("button", { type: "button", id: "runs-older", disabled: !more, onclick: () => showPage(page + 1) }, "Older →"));
    // A page other than the first is not refreshed under the reader.
    if (page > 0) stopRefresh();
  };
  showPage(0);
  return h("div", {}, historyChart(runs), table, pager);
}
