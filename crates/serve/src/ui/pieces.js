// Sources (the job file's [source]) and destinations ([destination]):
// every setting as a labelled field with short help, grouped as the
// job file's schema says (GET /api/forms).

import { confirmDialog } from "./dialog.js";
import { api } from "./api.js";
import { banner, errorBanner, h, show } from "./dom.js";
import { go, setFlash, takeFlash } from "./nav.js";
import { applyFields, field, fieldset, jobFileForms, showProblems, showWhatApplies } from "./forms.js";

export async function piecesPage(kind, selected) {
  const plural = `${kind}s`;
  const [list, forms] = await Promise.all([api("GET", `/api/${plural}`), jobFileForms()]);
  const current = selected && selected !== "new" ? list.find((p) => p.id === +selected) : null;
  show(
    h("h1", {}, kind === "source" ? "Sources (Kafka)" : "Destinations (Iceberg)"),
    h("table", {},
      h("tr", {}, h("th", {}, "Name"), h("th", {}, kind === "source" ? "Brokers" : "Catalog")),
      list.map((p) => h("tr", {},
        h("td", {}, h("a", { href: `#/${plural}/${p.id}` }, p.name)),
        h("td", {}, kind === "source" ? p.bootstrap_servers : `${p.catalog || "sql"} ${p.uri || p.warehouse || p.path || ""}`)))),
    h("p", {}, h("a", { class: "button", href: `#/${plural}/new`, id: `new-${kind}` }, `New ${kind}`)),
    selected ? pieceForm(kind, current, forms[kind]) : null);
}

function pieceForm(kind, current, form) {
  const plural = `${kind}s`;
  const groups = form.groups.map((g) => [g.title, g.fields.map((s) => field(kind, s, current))]);
  const fields = groups.flatMap(([, fs]) => fs);
  // The SASL, TLS and OAuth fields of the protocol chosen; the catalog's.
  showWhatApplies(fields);
  const name = field(kind, { key: "name", label: "Name", help: "how jobs refer to it" }, current);
  const msg = h("div", { id: `${kind}-result` }, takeFlash());
  // The piece to send, or null when a field cannot be sent (its problem
  // is shown next to it). Starts from what is stored, so fields nobody
  // changed (and settings of an imported job) are kept.
  const body = () => {
    const out = {};
    for (const [k, v] of Object.entries(current || {})) if (k !== "id") out[k] = v;
    out.name = name.input.value;
    if (applyFields(fields, out, !current)) {
      msg.replaceChildren(banner("bad", "Not saved: fix the fields marked below."));
      return null;
    }
    return out;
  };
  const resolve = (path) => {
    const m = new RegExp(`^${kind}\\.(\\w+)$`).exec(path);
    if (path === "name") return name;
    return m ? fields.find((f) => f.spec.key === m[1]) || null : null;
  };
  const save = async (piece) => {
    if (current) return api("PUT", `/api/${plural}/${current.id}`, piece);
    return api("POST", `/api/${plural}`, piece);
  };
  return h("form", {
    class: "card", id: `${kind}-form`, novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      const piece = body();
      if (!piece) return;
      try {
        const saved = await save(piece);
        setFlash(`Saved ${saved.name}.`);
        go(`#/${plural}/${saved.id}`);
      } catch (e) { if (e.status !== 401) showProblems(e, msg, resolve); }
    },
  },
    h("h2", {}, current ? `Edit ${current.name}` : `New ${kind}`),
    name.el,
    groups.map(([title, fs]) => fieldset(title, fs)),
    h("p", { class: "actions" },
      h("button", { class: "primary", type: "submit", id: `${kind}-save` }, "Save"),
      h("button", {
        type: "button", id: `${kind}-test`,
        onclick: async () => {
          // Tests what the form shows, saved or not (the stored secrets
          // of this piece are used where the form keeps them).
          const piece = body();
          if (!piece) return;
          // A save just before may have drawn the form again: the result
          // goes to the form on the page.
          const shown = () => document.getElementById(`${kind}-result`) || msg;
          shown().replaceChildren(h("p", {}, "Testing…"));
          try {
            if (current) piece.id = current.id;
            const r = await api("POST", `/api/${plural}/test`, piece);
            const steps = r.steps || [];
            const ok = steps.every((s) => s.ok);
            shown().replaceChildren(banner(ok ? "ok" : "bad", ok ? "Connection OK" : "Connection failed"),
              h("ul", {}, steps.map((s) => [
                h("li", { class: s.ok ? "ok" : "bad" }, `${s.step}: ${s.message}`),
                (s.warnings || []).map((w) => h("li", { class: "warn" }, `${s.step}: warning: ${w}`))])));
          } catch (e) { if (e.status !== 401) showProblems(e, shown(), resolve); }
        },
      }, "Test connection"),
      current ? h("button", {
        type: "button", id: `${kind}-delete`,
        onclick: async () => {
          if (!(await confirmDialog(`Delete ${kind} ${current.name}?`, "This cannot be undone.", `Delete ${kind}`, { danger: true }))) return;
          try { await api("DELETE", `/api/${plural}/${current.id}`); setFlash(`Deleted ${current.name}.`); go(`#/${plural}`); }
          catch (e) { msg.replaceChildren(errorBanner(e)); }
        },
      }, "Delete") : null),
    msg);
}
