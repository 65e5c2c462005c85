// The job form's schedule builder: common schedules to pick from (they
// fill the schedule field, which stays editable), and the next start
// times as the service reads what the field holds, updated as one types.

import { api } from "./api.js";
import { h, utc } from "./dom.js";
import { inWords } from "./forms.js";

const COMMON = [
  ["", "Manual only (Sync Now)"],
  ["every 15 minutes", "Every 15 minutes"],
  ["every hour", "Every hour"],
  ["every 6 hours", "Every 6 hours"],
  ["daily at 02:00", "Daily at 02:00 UTC"],
  ["0 6 * * 1-5", "Weekdays at 06:00 UTC"],
  ["@weekly", "Weekly (Sunday 00:00 UTC)"],
];

// The builder under `schedule` (a field of forms.js): returns its element.
export function scheduleBuilder(schedule) {
  const id = `${schedule.input.id}-common`;
  const pick = h("select", { id },
    h("option", { value: "-" }, "(pick one to fill the schedule)"),
    COMMON.map(([value, text]) => h("option", { value }, text)));
  const next = h("div", { class: "hint", id: `${schedule.input.id}-next`, "aria-live": "polite" });
  let timer = null;
  let asked = 0;
  const refresh = async () => {
    const text = schedule.input.value;
    const mine = ++asked;
    try {
      const answer = await api("GET", `/api/schedules/next?schedule=${encodeURIComponent(text)}`);
      if (mine !== asked) return;
      schedule.setError("");
      next.replaceChildren(answer.next.length
        ? `Next runs: ${answer.next.map(utc).join(", ")}`
        : "Manual: runs start with Sync Now only.");
    } catch (e) {
      if (mine !== asked) return;
      next.replaceChildren();
      // Only a schedule the service cannot read is the field's problem.
      if (e.status === 400) schedule.setError(inWords(e.message.replace(/^schedule: /, "")));
    }
  };
  schedule.input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 300); });
  pick.addEventListener("change", () => {
    if (pick.value === "-") return;
    schedule.input.value = pick.value;
    pick.value = "-";
    refresh();
  });
  refresh();
  return h("div", { class: "field schedule-builder" },
    h("label", { for: id }, "Common schedules"), pick, next);
}
