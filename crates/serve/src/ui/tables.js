// The table page: one of a job's tables as its catalog has it.

import { api } from "./api.js";
import { banner, cell, count, fact, h, show, utcMs } from "./dom.js";

// A count, or "-" when the snapshot's summary does not say.
function number(n) {
  return n === null ? "-" : count(n);
}

export async function tablePage(jobId, table) {
  const t = await api("GET", `/api/jobs/${jobId}/tables/${encodeURIComponent(table)}`);
  show(
    h("h1", {}, `Table ${t.table}`),
    h("p", {}, h("a", { href: `#/jobs/${jobId}` }, "back to the job")),
    h("div", { class: "overview", id: "table-overview" },
      h("div", { class: "card" }, h("h2", {}, "Contents"),
        fact("Rows written", number(t.rows_written)),
        fact("Rows deleted", h("span", {}, number(t.rows_deleted), " ",
          h("span", { class: "hint" }, "(by position deletes and deletion vectors)"))),
        t.equality_deletes ? fact("Equality deletes", h("span", {}, count(t.equality_deletes), " ",
          h("span", { class: "hint" }, "(each deletes every earlier row of its key)"))) : null,
        fact("Data files", number(t.data_files)),
        fact("Delete files", number(t.delete_files))),
      h("div", { class: "card" }, h("h2", {}, "Table"),
        fact("Format version", `v${t.format_version}`),
        fact("Partitioned by", t.partition_by.length ? h("code", {}, t.partition_by.join(", ")) : "unpartitioned"),
        fact("Sorted by", t.sort_by.length ? h("code", {}, t.sort_by.join(", ")) : "unsorted"),
        fact("Schema versions", String(t.schema_versions)),
        fact("Location", h("code", {}, t.location)))),
    h("h2", {}, "Schema"),
    h("table", { id: "table-columns" },
      h("tr", {}, ["Id", "Column", "Type", "Required"].map((x) => h("th", {}, x))),
      t.columns.map((c) => h("tr", {}, h("td", {}, String(c.id)), h("td", {}, c.name),
        h("td", { class: "cols" }, c.type), h("td", {}, c.required ? "yes" : "no")))),
    h("h2", {}, "Schema history"),
    h("table", { id: "table-schema-history" },
      h("tr", {}, ["Schema", "Columns", "Added", "Type changed", "Dropped"].map((x) => h("th", {}, x))),
      t.schema_history.map((v) => h("tr", {}, h("td", {}, String(v.schema_id)), h("td", {}, String(v.columns)),
        h("td", { class: "cols" }, v.added.join(", ") || "-"), h("td", { class: "cols" }, v.changed.join(", ") || "-"),
        h("td", { class: "cols" }, v.dropped.join(", ") || "-")))),
    h("h2", {}, "Snapshots"),
    t.snapshots.length === 0 ? h("p", {}, "None yet.") :
      h("table", { id: "table-snapshots" },
        h("tr", {}, ["Snapshot", "Committed", "Operation", "Rows added", "Deletes added"].map((x) => h("th", {}, x))),
        t.snapshots.map((s) => h("tr", {}, h("td", { class: "snapshot-id" }, s.snapshot_id), h("td", {}, utcMs(s.timestamp_ms)),
          h("td", {}, s.operation), h("td", {}, s.added_records === null ? "-" : count(s.added_records)),
          h("td", {}, s.added_deletes === null ? "-" : count(s.added_deletes))))),
    deadLetters(t.dead_letters));
}

// The stream's dead-letter table: its newest messages, raw, with the error.
function deadLetters(d) {
  if (!d) return null;
  return [
    h("h2", {}, "Dead letters ", h("span", { class: "hint" }, `newest first, from ${d.table}`)),
    d.error ? banner("bad", `reading them failed: ${d.error}`) : null,
    d.rows.length === 0 && !d.error ? h("p", {}, "None.") : null,
    d.rows.length === 0 ? null : h("table", { id: "table-dead-letters" },
      h("tr", {}, ["Partition", "Offset", "Message time", "Error", "Field", "Key", "Value"].map((x) => h("th", {}, x))),
      d.rows.map((r) => h("tr", {},
        h("td", {}, cell(r.partition)), h("td", {}, cell(r.offset)),
        h("td", {}, r.timestamp_micros === null ? "-" : utcMs(Math.floor(r.timestamp_micros / 1000))),
        h("td", { class: "bad" }, cell(r.error)), h("td", {}, cell(r.error_field)),
        h("td", { class: "cols" }, cell(r.key)), h("td", { class: "cols" }, cell(r.value))))),
  ];
}
