// A job's history: charts of records, duration and lag per run over time
// (SVG drawn here, no library), and the runs table a page at a time.

import { api } from "./api.js";
import { bytes, cell, count, duration, h, statusCell, utc, utcMs } from "./dom.js";
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

// A round axis top for `max` (1, 2, 5 times a power of ten).
function niceMax(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= max);
}

// One chart: `values` ([time ms, value]) as bars over time, with its axis.
function timeChart(id, title, points, format, cls) {
  const W = 560, H = 170, L = 56, R = 10, T = 22, B = 26;
  const chart = svg("svg", { id, class: `chart ${cls}`, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  chart.append(svg("text", { x: L, y: 14, class: "chart-title" }, title));
  if (points.length === 0) return chart;
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const span = Math.max(t1 - t0, 1);
  const top = niceMax(Math.max(...points.map(([, v]) => v)));
  const x = (t) => L + (points.length === 1 ? (W - L - R) / 2 : ((t - t0) / span) * (W - L - R));
  const y = (v) => H - B - (v / top) * (H - T - B);
  for (const frac of [0, 0.5, 1]) {
    const v = top * frac;
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: L - 4, y: y(v) + 4, class: "axis", "text-anchor": "end" }, format(v)));
  }
  chart.append(svg("text", { x: L, y: H - 6, class: "axis" }, utcMs(t0)));
  if (points.length > 1) chart.append(svg("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, utcMs(t1)));
  const bar = Math.max(2, Math.min(14, (W - L - R) / points.length - 2));
  for (const [t, v, status] of points) {
    chart.append(svg("rect", {
      x: x(t) - bar / 2, y: y(v), width: bar, height: Math.max(H - B - y(v), 1),
      class: `bar bar-${status}`,
    }, svg("title", {}, `${utcMs(t)}: ${format(v)}`)));
  }
  return chart;
}

function secondsText(ms) {
  return ms >= 60000 ? `${(ms / 60000).toFixed(1)} min` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

// The chart of `runs` (newest first, as the API sends them): finished
// runs, oldest on the left.
function historyChart(runs) {
  // The charts are of syncs (a maintenance run reads no messages).
  const done = runs.filter((r) => r.finished_ms && r.kind !== "maintain").slice().reverse();
  return h("div", { class: "charts", id: "history-chart" },
    timeChart("chart-records", "Records per run", done.map((r) => [r.started_ms, r.records, r.status]), (v) => count(Math.round(v)), "records"),
    timeChart("chart-duration", "Duration per run", done.map((r) => [r.started_ms, r.duration_ms, r.status]), secondsText, "duration"),
    timeChart("chart-lag", "Consumer lag after each run", done.filter((r) => r.lag !== null && r.lag !== undefined)
      .map((r) => [r.started_ms, r.lag, r.status]), (v) => count(Math.round(v)), "lag"));
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
