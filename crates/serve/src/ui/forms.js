// Labelled fields with short help, and validation errors shown next to
// their field (all at once, in the UI's words). A field is described by a
// spec {key, label, help, type, options, unset, min, separator, numeric,
// new_default}: `key` is the job file's name (and the input's id suffix),
// `label` what the user reads. The specs of the job file's fields come from
// the service (GET /api/forms), which makes them from the job file's
// schema: no script lists them.

import { api } from "./api.js";
import { banner, h } from "./dom.js";

// The forms of the job file's tables ({job, source, destination, stream,
// sync, maintain}, each {groups: [{title, fields}], placed: {place:
// [fields]}}), fetched once.
let formsLoaded = null;
export function jobFileForms() {
  if (!formsLoaded) formsLoaded = api("GET", "/api/forms").catch((e) => { formsLoaded = null; throw e; });
  return formsLoaded;
}

// A form's fields in order, those placed on another page left out.
export function formFields(form) {
  return form.groups.flatMap((g) => g.fields);
}

// The spec of `key`, wherever the form puts it.
export function formSpec(form, key) {
  return formFields(form).concat(...Object.values(form.placed)).find((s) => s.key === key);
}

// Every label, by job-file key: used to put the validator's messages in
// the UI's words.
const LABELS = {};

// A field on the page for `spec`, showing `stored` (a piece, a stream, the
// [sync] table). `read()` is the value to send (undefined: leave out),
// `changed()` whether the user changed it, `setError(text)` shows a
// problem under it.
export function field(prefix, spec, stored) {
  LABELS[spec.key] = spec.label;
  const id = `${prefix}-${spec.key}`;
  const value = stored ? stored[spec.key] : undefined;
  let input;
  // A yes/no field with a default: a toggle showing what applies (the
  // stored value, else the default); untouched, it sends nothing.
  const toggle = spec.type === "bool" && spec.default_on !== undefined;
  if (toggle) {
    input = h("input", { type: "checkbox", role: "switch", id, class: `${spec.key} toggle` });
    input.checked = value === undefined || value === null ? spec.default_on : value === true;
  } else if (spec.type === "select" || spec.type === "bool") {
    const options = spec.type === "bool" ? [["", spec.unset || "(default)"], ["true", "yes"], ["false", "no"]]
      : spec.options;
    input = h("select", { id, class: spec.key }, options.map(([v, text]) => h("option", { value: v }, text)));
    // Unset: the empty choice ("(default: ...)"); a new form may start
    // with another.
    input.value = value === undefined || value === null ? (stored ? "" : spec.new_default ?? "") : String(value);
  } else if (spec.type === "textarea") {
    input = h("textarea", { id, class: spec.key, rows: 3 });
    input.value = value ?? "";
  } else if (spec.type === "secret") {
    const set = value && value.set;
    input = h("input", { type: "password", id, class: spec.key, autocomplete: "off", placeholder: set ? "(set: leave empty to keep)" : "" });
  } else if (spec.type === "list") {
    // Items are comma separated, or by spec.separator when an item may
    // hold a comma (a partition transform such as bucket(16, id)).
    const sep = spec.separator || ",";
    input = h("input", { type: "text", id, class: spec.key, value: Array.isArray(value) ? value.join(`${sep} `) : "" });
  } else {
    input = h("input", { type: spec.type === "number" ? "number" : "text", id, class: spec.key, min: spec.type === "number" ? spec.min ?? 1 : null, value: value ?? "" });
  }
  if (spec.placeholder && spec.type !== "secret") input.placeholder = spec.placeholder;
  // An empty input says what it means: "(default: 10s)".
  else if (input.tagName !== "SELECT" && !toggle && spec.unset && spec.unset.startsWith("(default")) input.placeholder = spec.unset;
  const shown = toggle ? String(input.checked) : input.value;
  const now = () => (toggle ? String(input.checked) : input.value);
  const secretSet = spec.type === "secret" && !!(value && value.set);
  const error = h("div", { class: "field-error", id: `${id}-error` });
  const wrap = h("div", { class: "field" },
    toggle ? null : h("label", { for: id }, spec.label, spec.type === "secret" ? h("span", { class: "hint" }, " (write-only)") : null),
    toggle ? h("label", { for: id, class: "toggle-label" }, input, " ", spec.label,
      h("span", { class: "hint" }, ` ${spec.default_on ? "(default: on)" : "(default: off)"}`)) : input,
    spec.help ? h("div", { class: "hint help" }, spec.help) : null, error);
  return {
    spec, input, el: wrap,
    changed: () => now() !== shown,
    // Whether it holds something (a value typed or stored, a secret set).
    holds: () => secretSet || (toggle ? input.checked !== spec.default_on : input.value !== ""),
    setError: (text) => {
      error.replaceChildren(text || "");
      wrap.classList.toggle("has-error", !!text);
      // A problem is never hidden with its field.
      if (text) wrap.hidden = false;
      const folded = text ? wrap.closest("details") : null;
      if (folded) folded.open = true;
    },
    // The value to send, or undefined for "leave it out"; throws the
    // problem (in words) when the input cannot be what the field takes.
    read: () => {
      const v = input.value;
      switch (spec.type) {
        case "secret": return v ? v : undefined;
        case "textarea": return v ? v : undefined;
        case "number": {
          if (!v.trim()) return undefined;
          const n = Number(v);
          if (!Number.isInteger(n) || n < (spec.min ?? 1)) throw new Error(`must be a whole number of ${spec.min ?? 1} or more`);
          return n;
        }
        case "bool":
          // Untouched and unset: left out (the default applies).
          if (toggle) return now() === shown && (value === undefined || value === null) ? undefined : input.checked;
          return v === "" ? undefined : v === "true";
        case "list": {
          const items = v.split(spec.separator || ",").map((s) => s.trim()).filter((s) => s);
          return items.length ? items : undefined;
        }
        case "select": return v === "" ? undefined : (spec.numeric ? Number(v) : v);
        default: return v.trim() ? v.trim() : undefined;
      }
    },
  };
}

// Writes the fields the user changed into `out` (a copy of what is
// stored): a field left as shown keeps its stored value (issue 16: a save
// never changes what the user did not touch). Returns the problems of
// fields whose input cannot be sent, by field.
export function applyFields(fields, out, isNew) {
  const problems = [];
  for (const f of fields) {
    f.setError("");
    const k = f.spec.key;
    if (f.spec.type === "secret") {
      const v = f.read();
      if (v !== undefined) out[k] = v;
      else if (out[k]) out[k] = { set: true };
      else delete out[k];
      continue;
    }
    if (!isNew && !f.changed()) continue;
    try {
      const v = f.read();
      if (v === undefined) delete out[k]; else out[k] = v;
    } catch (e) {
      problems.push([f, e.message]);
    }
  }
  for (const [f, text] of problems) f.setError(text);
  return problems.length;
}

// A validator's message in the UI's words: job-file keys become their
// labels, "key = value" examples become "Label: value", and advice about
// environment variables (the CLI's way to give a secret) goes.
export function inWords(text) {
  let out = String(text)
    .replace(/; set \w+ = "\$\{\w+\}" and export \w+/g, "; enter it")
    .replace(/\[\[streams\]\]( entries| entry)?/g, "ticked streams")
    .replace(/\b(source|destination|sync)\.(\w+)\b/g, (m, _t, k) => (LABELS[k] ? `“${LABELS[k]}”` : m));
  for (const [k, label] of Object.entries(LABELS)) {
    if (!k.includes("_")) continue;
    out = out.replace(new RegExp(`\\b${k} = `, "g"), `“${label}” = `).replace(new RegExp(`\\b${k}\\b`, "g"), `“${label}”`);
  }
  return out;
}

// The field path and message of one problem (`source.max_threads: must
// be ...`, `streams[2].on_invalid: ...`, `schedule: ...`).
function splitProblem(problem) {
  const m = /^((?:\[\w+\]|[a-z_]+(?:\[\d+\])?)(?:\.[a-z0-9_]+)*): ([\s\S]*)$/.exec(problem);
  return m ? [m[1], m[2]] : [null, problem];
}

// Shows an API error's problems next to their fields: `resolve(path)`
// gives the field of a path, or null; problems without a field (and the
// error itself when it has none) go to `msg`. Every problem at once.
export function showProblems(e, msg, resolve) {
  const problems = (e.body && e.body.problems && e.body.problems.length) ? e.body.problems
    : [e.message || String(e)];
  const rest = [];
  let shown = 0;
  for (const p of problems) {
    const [path, text] = splitProblem(p);
    const f = path ? resolve(path) : null;
    if (f) {
      f.setError(inWords(text));
      shown += 1;
    } else rest.push(path ? `${inWords(path.replace(/^(\w+)\.(\w+)$/, "$2"))}: ${inWords(text)}` : inWords(text));
  }
  msg.replaceChildren(banner("bad",
    shown ? `Not saved: ${shown === 1 ? "a field needs" : `${shown} fields need`} a fix (shown next to ${shown === 1 ? "it" : "each"}).` : "Not saved.",
    rest.length ? h("ul", {}, rest.map((r) => h("li", {}, r))) : null));
}

// Hides the fields that do not apply (spec.when: the SASL user under
// PLAINTEXT) unless they hold something, and again whenever a field that
// decides changes.
export function showWhatApplies(fields) {
  const byKey = new Map(fields.map((f) => [f.spec.key, f]));
  const update = () => {
    for (const f of fields) {
      const when = f.spec.when;
      const decider = when && byKey.get(when.key);
      if (!decider) continue;
      const applies = !decider.el.hidden && when.values.includes(decider.input.value);
      f.el.hidden = !applies && !f.holds() && !f.el.classList.contains("has-error");
    }
  };
  for (const key of new Set(fields.map((f) => f.spec.when && f.spec.when.key).filter(Boolean))) {
    const decider = byKey.get(key);
    if (decider) decider.input.addEventListener("change", update);
  }
  update();
}

// A group of fields under a heading.
export function fieldset(title, fields, note) {
  return h("fieldset", {}, h("legend", {}, title), note ? h("p", { class: "hint" }, note) : null, fields.map((f) => f.el));
}
