// The streams page: the topics the source offers, ticked or not, each
// with its mode, keys, formats (the fields the job file's schema places
// in the streams table) and (under "More") every other setting of its
// [[streams]] entry.

import { api } from "./api.js";
import { banner, cell, errorBanner, h, show } from "./dom.js";
import { go, setFlash, takeFlash } from "./nav.js";
import { applyFields, field, formFields, formSpec, jobFileForms, showProblems } from "./forms.js";

export async function streamsPage(id, first) {
  const saved = takeFlash();
  const [job, forms] = await Promise.all([api("GET", `/api/jobs/${id}`), jobFileForms()]);
  const formats = formSpec(forms.stream, "value_format").options;
  const modes = formSpec(forms.stream, "mode").options.filter(([v]) => v);
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
    // Each control named for its topic (a screen reader reads a row's
    // controls without the table's headings).
    const tick = h("input", { type: "checkbox", class: "tick", checked: !!configured, "aria-label": `sync ${t.topic}` });
    const mode = h("select", { class: "mode", "aria-label": `mode of ${t.topic}` }, modes.map(([v]) => h("option", { value: v }, v)));
    mode.value = (configured && configured.mode) || t.mode || "append";
    const keyNames = ["_kafka_key", ...t.columns.map((c) => c.name)];
    const storedKeys = (configured && configured.dedup_keys) || t.dedup_keys || [];
    for (const k of storedKeys) if (!keyNames.includes(k)) keyNames.push(k);
    const keys = h("select", { class: "keys", multiple: true, size: Math.min(6, keyNames.length), "aria-label": `dedup keys of ${t.topic}` },
      keyNames.map((n) => h("option", { value: n }, n)));
    for (const k of storedKeys) {
      const o = [...keys.options].find((x) => x.value === k);
      if (o) o.selected = true;
    }
    const formatSelect = (cls, value, what) => {
      const select = h("select", { class: cls, "aria-label": `${what} of ${t.topic}` },
        formats.map(([f]) => h("option", { value: f }, f || "(default)")));
      select.value = value || "";
      return select;
    };
    const valueFormat = formatSelect("value-format", configured && configured.value_format, "value format");
    const keyFormat = formatSelect("key-format", configured && configured.key_format, "key format");
    const shown = { mode: mode.value, keys: [...keys.selectedOptions].map((o) => o.value).sort().join("\n"),
      value_format: valueFormat.value, key_format: keyFormat.value };
    const fmt = t.upsert_delete_format;
    const invalid = t.invalid_messages > 0
      ? h("div", { class: "bad invalid" },
        `${t.invalid_messages} of ${t.invalid_messages + t.sampled_messages} sampled messages cannot become rows (left out of the columns; the sync ${t.on_invalid === "fail" ? "fails on them" : t.on_invalid === "dlq" ? "writes them to the dead-letter table" : "skips them"}): ${t.invalid_example}`)
      : null;
    const more = formFields(forms.stream).map((spec) => field(`stream-${t.topic}`, spec, configured || null));
    const keysError = h("div", { class: "field-error" });
    return {
      topic: t.topic, configured, tick, mode, keys, valueFormat, keyFormat, shown, more, keysError,
      settings: h("tr", { class: "stream-settings", id: `settings-${t.topic}` }, h("td", {}), h("td", { colspan: 8 },
        h("details", {}, h("summary", {}, `More settings of ${t.topic}`), h("div", { class: "grid" }, more.map((f) => f.el))))),
      row: h("tr", { id: `stream-${t.topic}` },
        h("td", {}, tick), h("td", {}, t.topic), h("td", {}, t.partitions),
        h("td", { class: "cols" }, t.columns.map((c) => `${c.name}: ${c.type}`).join(", ") || "-", invalid),
        h("td", {}, valueFormat, h("div", { class: "hint" }, `reads ${t.value_format}: ${t.value_format_reason}`)),
        h("td", {}, keyFormat),
        h("td", {}, mode), h("td", {}, keys, keysError),
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
      rows.map((r) => [r.row, r.settings])),
    notOffered.length === 0 ? null : h("p", { id: "streams-not-offered" },
      "Streams of this job the source does not offer now (kept as they are): ",
      notOffered.map((s) => s.topic).join(", ")),
    h("p", {}, h("button", {
      class: "primary", type: "button", id: "streams-save",
      onclick: async () => {
        const ticked = rows.filter((r) => r.tick.checked);
        let unsendable = 0;
        const streams = ticked.map((r) => {
          // The stored entry's other settings (on_invalid, columns, table,
          // delete_format, ...) are kept: this page does not show them; a
          // shown setting the user did not change is kept as stored.
          const s = { ...(r.configured || {}), topic: r.topic };
          if (!r.configured || r.mode.value !== r.shown.mode) s.mode = r.mode.value;
          const keys = [...r.keys.selectedOptions].map((o) => o.value);
          if (r.mode.value === "upsert") {
            if (!r.configured || !s.dedup_keys || keys.slice().sort().join("\n") !== r.shown.keys) s.dedup_keys = keys;
          } else if (s.mode === "append") { delete s.dedup_keys; delete s.delete_format; }
          for (const [key, select] of [["value_format", r.valueFormat], ["key_format", r.keyFormat]]) {
            if (r.configured && select.value === r.shown[key]) continue;
            if (select.value) s[key] = select.value; else delete s[key];
          }
          // The settings under "More": only those the user changed.
          unsendable += applyFields(r.more, s, false);
          return s;
        }).concat(notOffered);
        for (const r of rows) r.keysError.replaceChildren();
        if (unsendable) {
          msg.replaceChildren(banner("bad", "Not saved: fix the fields marked above."));
          return;
        }
        // streams[i] of a problem is ticked[i] (the others are kept as
        // they are, after them).
        const resolve = (path) => {
          const m = /^streams\[(\d+)\]\.(\w+)$/.exec(path);
          const r = m && ticked[+m[1]];
          if (!r) return null;
          if (m[2] === "dedup_keys") return { setError: (t) => r.keysError.replaceChildren(t) };
          const f = r.more.find((x) => x.spec.key === m[2]);
          if (f) { f.el.closest("details").open = true; return f; }
          return null;
        };
        const body = { ...job, namespace: namespace.value === found.namespace ? job.namespace : namespace.value, streams };
        if (first) body.paused = false;
        try {
          await api("PUT", `/api/jobs/${id}`, body);
          setFlash(first ? "Streams saved; the job's schedule is on." : "Streams saved.");
          go(`#/jobs/${id}`);
        } catch (e) { if (e.status !== 401) showProblems(e, msg, resolve); }
      },
    }, "Save streams")),
    msg);
}
