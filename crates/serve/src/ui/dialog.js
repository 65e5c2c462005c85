// In-page dialogs instead of the browser's confirm/prompt/alert: a modal
// <dialog> (the browser keeps focus inside it, Escape cancels, screen
// readers announce it by its heading), its question as text, one field
// for a prompt, and buttons that say what they do. Each returns a promise;
// one dialog at a time (a new one closes the last as cancelled).

import { h } from "./dom.js";

let open = null;

function ask({ title, text, input, confirmLabel, danger, acknowledge }) {
  if (open) open.close("cancel");
  return new Promise((resolve) => {
    const id = `dialog-${Date.now()}`;
    const field = input
      ? h("input", { type: "text", id: `${id}-value`, value: input.value, autocomplete: "off" })
      : null;
    const cancel = h("button", { type: "button", class: "dialog-cancel", onclick: () => dialog.close("cancel") }, "Cancel");
    const ok = h("button", { type: "submit", class: danger ? "danger dialog-ok" : "primary dialog-ok", value: "ok" }, confirmLabel);
    const form = h("form", { method: "dialog" },
      h("h2", { id: `${id}-title` }, title),
      text ? h("p", { id: `${id}-text` }, text) : null,
      field ? [h("label", { for: field.id }, input.label), field] : null,
      h("div", { class: "dialog-buttons" }, acknowledge ? null : cancel, ok));
    const dialog = h("dialog", { class: "dialog", "aria-labelledby": `${id}-title`, "aria-describedby": text ? `${id}-text` : null }, form);
    dialog.addEventListener("close", () => {
      const value = dialog.returnValue === "ok" ? (field ? field.value.trim() : true) : (field ? null : false);
      dialog.remove();
      if (open === dialog) open = null;
      resolve(value);
    });
    document.body.append(dialog);
    open = dialog;
    dialog.showModal();
    (field || (danger ? cancel : ok)).focus();
  });
}

// true when the user confirmed, false when they cancelled.
export function confirmDialog(title, text, confirmLabel, { danger = false } = {}) {
  return ask({ title, text, confirmLabel, danger });
}

// The text the user entered (trimmed), or null when they cancelled.
export function promptDialog(title, label, value, confirmLabel) {
  return ask({ title, input: { label, value }, confirmLabel });
}

// A message the user acknowledges (an action failed).
export function messageDialog(title, text) {
  return ask({ title, text, confirmLabel: "OK", acknowledge: true }).then(() => undefined);
}
