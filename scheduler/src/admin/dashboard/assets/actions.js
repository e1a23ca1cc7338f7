// Actions for holders of the admin token: the token is entered once and kept in this tab's
// session storage; trigger, pause (with a reason and an expiry), resume, snoozing a task's alerts
// (with a reason and an end), backfilling a range of past ticks (a dry run is shown first) and
// cancelling a running run each ask for confirmation. Without a token the page says it is read-only and offers no action.

import { del, post, setToken, task as enc, token } from "./api.js";
import { h, put } from "./dom.js";

const dialog = () => document.getElementById("dialog");

/** Shows a modal form; resolves with its fields, or null when dismissed. */
function ask(title, fields, confirmLabel, danger = false, dismissLabel = "Cancel") {
  const d = dialog();
  return new Promise((resolve) => {
    const form = h("form", { method: "dialog" },
      h("h2", {}, title),
      fields,
      h("p", { class: "error-line bad", id: "dialog-error" }),
      h("div", { class: "buttons" },
        h("button", { type: "button", value: "cancel", id: "dialog-dismiss", onclick: () => { d.close(); } }, dismissLabel),
        h("button", { type: "submit", value: "ok", class: danger ? "primary danger" : "primary", id: "dialog-confirm" }, confirmLabel)));
    let answered = false;
    form.addEventListener("submit", (e) => {
      answered = true;
      resolve(Object.fromEntries(new FormData(form).entries()));
      e.preventDefault();
      d.close();
    });
    d.addEventListener("close", () => { if (!answered) resolve(null); }, { once: true });
    put(d, form);
    d.showModal();
    form.querySelector("input, select, textarea, button[type=submit]")?.focus();
  });
}

/** The header's access indicator: read-only with a way to enter the token, or a way to forget it. */
export function drawAccess(el, onChange) {
  if (token()) {
    put(el, h("span", { class: "badge s-enabled", id: "access-state" }, "actions enabled"), " ",
      h("button", { type: "button", class: "link", onclick: () => { setToken(null); onChange(); } }, "forget token"));
  } else {
    put(el, h("span", { class: "badge s-readonly", id: "access-state", title: "Enter the admin token to trigger, pause and resume" }, "read-only"), " ",
      h("button", { type: "button", id: "enter-token", onclick: async () => {
        const answer = await ask("Admin token", [
          h("p", {}, "The node's SCHEDULER_ADMIN_TOKEN (or its read-only SCHEDULER_ADMIN_VIEWER_TOKEN, which reads beyond loopback and cannot act). It is kept in this browser tab only (session storage) and sent with each request."),
          h("input", { type: "password", name: "token", required: true, minlength: 16, autocomplete: "off", "aria-label": "admin token", id: "token-input" }),
        ], "Use token");
        if (answer?.token) { setToken(answer.token.trim()); onChange(); }
      } }, "enter admin token"));
  }
}

async function act(path, body, refresh, method = post) {
  try {
    await method(path, body);
  } catch (e) {
    const hint = e.status === 401 ? " Check the token (forget it and enter it again)." : "";
    await ask("The action failed", [h("p", { class: "bad" }, `${e.message}.${hint}`)], "OK");
  }
  await refresh();
}

/** A task's action buttons (`snooze`: its snooze in force, if any), or a read-only note. */
export function actionBar(t, refresh, snooze = null) {
  if (!token()) {
    return h("p", { class: "muted small readonly-note" }, "Read-only: enter the admin token (top right) to trigger, pause or resume.");
  }
  const path = (what) => `/api/tasks/${enc(t.name)}/${what}`;
  const paused = Boolean(t.state.pause);
  return h("div", { class: "actions" },
    h("button", {
      type: "button", id: "trigger", disabled: paused, title: paused ? "Resume it first" : "Run it now, through the same locking as any run",
      onclick: async () => {
        const ok = await ask(`Run ${t.name} now?`, [h("p", {}, "It starts as soon as a node claims it (after a running one ends). The action is audited.")], "Run now");
        if (ok) await act(path("trigger"), undefined, refresh);
      },
    }, "Run now"),
    paused
      ? h("button", {
        type: "button", id: "resume",
        onclick: async () => {
          const ok = await ask(`Resume ${t.name}?`, [h("p", {}, "Ticks due meanwhile are not replayed: they stay recorded as skipped (paused).")], "Resume");
          if (ok) await act(path("resume"), undefined, refresh);
        },
      }, "Resume")
      : h("button", {
        type: "button", id: "pause",
        onclick: async () => {
          const answer = await ask(`Pause ${t.name}?`, [
            h("p", {}, "No new runs anywhere in the cluster until resumed or the pause expires; a running one finishes."),
            h("label", {}, "Reason ", h("input", { name: "reason", required: true, maxlength: 500, id: "pause-reason", placeholder: "why (shown to everyone)" })),
            h("label", {}, "For ", h("select", { name: "for", id: "pause-for" },
              h("option", { value: "" }, "until resumed"),
              [["15 minutes", 15], ["1 hour", 60], ["4 hours", 240], ["1 day", 1440], ["1 week", 10080]]
                .map(([label, minutes]) => h("option", { value: minutes }, label)))),
          ], "Pause", true);
          if (!answer) return;
          const body = { reason: answer.reason };
          if (answer.for) body.until = new Date(Date.now() + Number(answer.for) * 60000).toISOString();
          await act(path("pause"), body, refresh);
        },
      }, "Pause…"),
    snooze
      ? h("button", {
        type: "button", id: "unsnooze",
        onclick: async () => {
          const ok = await ask(`Lift the snooze of ${t.name}?`, [h("p", {}, "Its alerts are sent again from now on. The action is audited.")], "Lift the snooze");
          if (ok) await act(path("snooze"), undefined, refresh, del);
        },
      }, "Lift snooze")
      : h("button", {
        type: "button", id: "snooze",
        onclick: async () => {
          const answer = await ask(`Snooze the alerts of ${t.name}?`, [
            h("p", {}, "The task keeps running (this is not a pause). Its alerts are recorded in its incidents but not sent, nor reminded, until the snooze ends. The action is audited."),
            h("label", {}, "Reason ", h("input", { name: "reason", required: true, maxlength: 500, id: "snooze-reason", placeholder: "why (shown to everyone)" })),
            h("label", {}, "For ", h("select", { name: "for", id: "snooze-for" },
              [["1 hour", 60], ["15 minutes", 15], ["4 hours", 240], ["1 day", 1440], ["1 week", 10080]]
                .map(([label, minutes]) => h("option", { value: minutes }, label)))),
          ], "Snooze");
          if (!answer) return;
          const body = { reason: answer.reason, until: new Date(Date.now() + Number(answer.for) * 60000).toISOString() };
          await act(path("snooze"), body, refresh);
        },
      }, "Snooze alerts…"),
    h("button", {
      type: "button", id: "backfill", disabled: paused, title: paused ? "Resume it first" : "Run a range of its past ticks again",
      onclick: () => backfill(t, refresh),
    }, "Backfill…"));
}

/** Asks for a range, shows the dry run's ticks, and records the backfill once confirmed. */
async function backfill(t, refresh) {
  const zone = t.timezone ?? t.state?.timezone ?? "the task's zone";
  const range = await ask(`Backfill ${t.name}`, [
    h("p", {}, `Runs the ticks of its schedule in the range again, one at a time through the task's lock (never beside its own runs), recorded with trigger backfill. Instants are RFC 3339, or a date and time read in ${zone}.`),
    h("label", {}, "From ", h("input", { name: "from", required: true, id: "backfill-from", placeholder: "2026-03-01 or 2026-03-01T00:00:00Z" })),
    h("label", {}, "To ", h("input", { name: "to", required: true, id: "backfill-to", placeholder: "2026-03-02T00:00" })),
    h("label", {}, h("input", { type: "checkbox", name: "all", id: "backfill-all" }), " every tick (not only those without a succeeded run)"),
    h("label", {}, "At most ", h("input", { type: "number", name: "max_runs", min: 1, value: 1000, id: "backfill-max" }), " runs"),
  ], "Show what would run");
  if (!range) return;
  const body = { from: range.from.trim(), to: range.to.trim(), all: range.all === "on", max_runs: Number(range.max_runs) || 1000 };
  let plan;
  try {
    plan = await post(`/api/tasks/${enc(t.name)}/backfill`, { ...body, dry_run: true });
  } catch (e) {
    await ask("The backfill is refused", [h("p", { class: "bad" }, `${e.message}.`)], "OK");
    return;
  }
  if (plan.runs === 0) {
    await ask(`Nothing to backfill`, [h("p", {}, `All ${plan.ticks_in_range} ticks of the range already succeeded (tick "every tick" to run them again).`)], "OK");
    return;
  }
  const shown = plan.ticks.slice(0, 20);
  const ok = await ask(`Backfill ${plan.runs} ticks of ${t.name}?`, [
    h("p", {}, `Dry run: ${plan.runs} of the ${plan.ticks_in_range} ticks in the range would run (${plan.already_succeeded} already succeeded), one at a time, a second apart. The action is audited.`),
    h("ul", { class: "small", id: "backfill-ticks" }, shown.map((tick) => h("li", {}, tick)),
      plan.ticks.length > shown.length ? h("li", {}, `… and ${plan.ticks.length - shown.length} more`) : null),
  ], `Run ${plan.runs} ticks`, true);
  if (!ok) return;
  try {
    const done = await post(`/api/tasks/${enc(t.name)}/backfill`, body);
    await ask(`Backfill #${done.id} recorded`, [h("p", {}, `The nodes run its ${done.runs} ticks; its progress is at /api/backfills/${done.id} and in \`scheduler backfill status ${done.id}\`.`)], "OK");
  } catch (e) {
    await ask("The backfill failed", [h("p", { class: "bad" }, `${e.message}.`)], "OK");
  }
  await refresh();
}


/** A running run's cancel button (none without the token, or once a cancel was asked for). */
export function cancelButton(run, refresh) {
  if (!token() || run.status !== "running" || run.cancel_requested_by) return null;
  return h("button", {
    type: "button", class: "link danger-link", id: `cancel-${run.id}`, dataset: { cancel: run.id },
    title: "Stop this run on whichever node runs it",
    onclick: async () => {
      const ok = await ask(`Cancel run #${run.id} of ${run.task}?`, [
        h("p", {}, "Its handler is asked to stop at once and stopped by force if it has not returned 10 seconds later. The run is recorded as cancelled and its tick is not run again. The action is audited."),
      ], "Cancel the run", true, "Keep it running");
      if (ok) await act(`/api/runs/${run.id}/cancel`, undefined, refresh);
    },
  }, "cancel…");
}

/** A running backfill's cancel button (none without the token, or once it is over). */
export function backfillCancel(b, refresh) {
  if (!token() || b.state !== "running") return null;
  return h("button", {
    type: "button", class: "link danger-link", id: `cancel-backfill-${b.id}`,
    onclick: async () => {
      const ok = await ask(`Cancel backfill #${b.id}?`, [
        h("p", {}, `Its ${b.progress.pending} pending ticks will not run. A run of it that is running goes on (cancel it in the runs list). The action is audited.`),
      ], "Cancel the backfill", true, "Keep it");
      if (ok) await act(`/api/backfills/${b.id}/cancel`, undefined, refresh);
    },
  }, "cancel…");
}
