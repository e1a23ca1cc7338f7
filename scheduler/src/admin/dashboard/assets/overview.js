// Every task at a glance, health first: counts of failing, late, paused, refused and running
// tasks (each a filter), the open alerts (open incidents, refused config entries, overdue tasks), then the tasks
// sorted by what needs attention, each with its state, last result, whether it is on time now
// (or which limit its tick, or a shard's or instance's, waits for), its schedule and its strip of
// expected ticks. A task with instances says how many (running, failing), the latest run among
// them, and links to its page, which lists them with their strips; it counts as failing when one
// of them failed its last run. Three requests per refresh (`/api/tasks`,
// `/api/ticks`, `/api/config`) whatever the number of tasks; only what changed is redrawn.

import { get } from "./api.js";
import { h, patch, put } from "./dom.js";
import { heldWords, legend, shardWords, tickStrip } from "./charts.js";
import { FAILED, inZone, learnClock, nodeNow, outcomeClass, outcomeText, relative, rowHash, span, splitRow } from "./format.js";

export const STRIP = 30;
const MANY = 200;
const SLOW_STRIPS_MS = 15000;

/** What needs an operator, by task. Failing: its own last tick or one of its instances' last runs failed (the API's `failing`). */
export function health(t) {
  return {
    failing: t.failing,
    late: t.state.timeliness === "late" || Boolean(t.state.missed_since),
    paused: Boolean(t.state.pause),
    refused: Boolean(t.origin.refused),
    running: Boolean(t.state.lock),
  };
}

/** What a task is, in one word (its badge). */
export function stateOf(t) {
  const x = health(t);
  if (x.paused) return "paused";
  if (t.origin.kind === "orphaned") return "orphaned";
  if (!t.enabled) return "disabled";
  if (t.origin.kind === "not_in_config") return "not scheduled";
  if (x.failing) return "failing";
  if (x.late) return "late";
  if (x.running) return "running";
  return "ok";
}

const COUNTED = [
  ["failing", "failing", true], ["late", "late or missed", true], ["refused", "config refused", true],
  ["paused", "paused", false], ["running", "running", false],
];
const STATES = ["all", "failing", "late", "refused", "paused", "running", "disabled", "not scheduled", "orphaned"];
const SORTS = { attention: "needs attention", name: "name", next: "next run", failure: "failures in a row" };

function matches(t, filter) {
  const st = filter.state;
  const x = health(t);
  if (st in x) {
    if (!x[st]) return false;
  } else if (st !== "all" && stateOf(t) !== st) return false;
  if (filter.q && !t.name.toLowerCase().includes(filter.q.toLowerCase())) return false;
  return true;
}

/** How urgently a task needs someone: lower first. */
function rank(t) {
  const x = health(t);
  if (x.failing && !x.paused) return 0;
  if (x.late && !x.paused) return 1;
  if (x.refused) return 2;
  if (t.origin.kind === "orphaned") return 3;
  if (x.failing) return 4;
  if (x.paused) return 5;
  if (x.running) return 6;
  return 7;
}

const order = {
  name: (a, b) => a.name.localeCompare(b.name),
  attention: (a, b) => (rank(a) - rank(b))
    || (b.state.failed_ticks_in_a_row - a.state.failed_ticks_in_a_row)
    || ((b.state.overdue_seconds ?? 0) - (a.state.overdue_seconds ?? 0)) || order.name(a, b),
  next: (a, b) => (Date.parse(a.state.next_run_at ?? "9999") - Date.parse(b.state.next_run_at ?? "9999")) || order.name(a, b),
  failure: (a, b) => (b.state.failed_ticks_in_a_row - a.state.failed_ticks_in_a_row)
    || (Date.parse(b.state.last_finished_at ?? 0) - Date.parse(a.state.last_finished_at ?? 0)) || order.name(a, b),
};

/** The filter as the URL holds it. */
export function readFilter(params) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : "all";
  const sort = params.get("sort") in SORTS ? params.get("sort") : "attention";
  return { state, sort, q: params.get("q") ?? "" };
}

function filterHash(filter) {
  const p = new URLSearchParams();
  if (filter.state !== "all") p.set("state", filter.state);
  if (filter.sort !== "attention") p.set("sort", filter.sort);
  if (filter.q) p.set("q", filter.q);
  const q = p.toString();
  return `#/${q ? `?${q}` : ""}`;
}

/** "3 ticks failed in a row" (a tick and its retries count once). */
export function failedTicks(t) {
  const n = t.state.failed_ticks_in_a_row;
  if (!(n > 0)) return null;
  const more = t.state.failed_ticks_more ? "+" : "";
  return n === 1 && !more ? "last tick failed" : `${n}${more} ticks failed in a row`;
}

/** When the task runs next, said truly: `{text, detail, bad}`. */
export function nextRun(t) {
  const st = t.state;
  const zone = t.timezone;
  // Its due tick, or one of its shards' or instances' (unless its own is late), waits for a
  // share of its limit shared by tasks: say which, and who holds it.
  const w = st.waiting;
  const own = w?.row === t.name;
  if (w && st.timeliness !== "paused" && (own || st.timeliness !== "late")) {
    const others = w.rows > 1 ? ` and ${w.rows - 1} more of its rows` : "";
    return {
      text: `waits for its limit ${w.limit}`,
      detail: own ? `${heldWords(w)}; its tick was due ${relative(st.next_run_at)}`
        : `${w.row}${others} since ${relative(w.since)}; ${heldWords(w)}`,
      bad: own && st.timeliness === "late",
    };
  }
  // A task run through its instances: the next of theirs, when it comes before its own.
  const inst = t.instance_runs?.next_run_at;
  if (inst && st.timeliness === "on_time" && Date.parse(inst) < Date.parse(st.next_run_at)) {
    const due = Date.parse(inst) <= nodeNow();
    return { text: due ? "due now" : relative(inst), detail: `its instances' next tick, ${inZone(inst, zone)}` };
  }
  switch (st.timeliness) {
    case "paused":
      return { text: "none while paused", detail: st.pause?.until ? `pause ends ${inZone(st.pause.until, zone)}` : "until resumed" };
    case "on_time":
      return { text: relative(st.next_run_at), detail: inZone(st.next_run_at, zone) };
    case "due":
      return { text: "due now", detail: `tick ${inZone(st.next_run_at, zone)}` };
    case "waiting":
      return { text: "waits for the running run", detail: `its tick was due ${relative(st.next_run_at)}` };
    case "late":
      return { text: `late by ${span(st.overdue_seconds ?? 0)}`, detail: `tick due ${inZone(st.next_run_at, zone)}`, bad: true };
    default:
      return { text: "—", detail: !t.enabled ? "disabled" : t.origin.kind === "not_in_config" ? "not in the config" : "no next tick" };
  }
}

/** How a task's instances run: how many, running and failing (a link to its page, which lists them). */
function instanceCount(t) {
  const r = t.instance_runs;
  const words = [`${t.instances} instance${t.instances === 1 ? "" : "s"}`];
  if (r?.running) words.push(`${r.running} running`);
  return h("div", { class: "small instance-count" },
    h("a", { href: `#/task/${encodeURIComponent(t.name)}`, title: "its instances, on its page" }, words.join(", ")),
    r?.failing ? h("span", { class: "bad instance-failing" }, `, ${r.failing} failing`) : null);
}

/**
 * The run that started last among a task's instances: how it ended, when, and which instance.
 * Inline in place of the task's own last result, a line of its own (`prefix`) under it.
 */
function instanceLatest(t, prefix) {
  const l = t.instance_runs?.latest;
  if (!l) return null;
  const outcome = l.result ?? "running";
  return h(prefix ? "div" : "span", { class: "instance-latest", dataset: { instanceKey: l.key } },
    prefix ? h("span", { class: "small muted" }, prefix) : null,
    h("span", { class: `result ${outcomeClass(outcome)}` }, outcomeText(outcome)),
    h("span", { class: "small muted" }, ` ${relative(l.finished_at ?? l.started_at)} · instance `),
    h("code", { class: "small" }, l.key));
}

/** Where a sharded tick's shards are listed: its task's page, that tick selected. */
export const shardLink = (name) => (tick) => `#/task/${encodeURIComponent(name)}?tick=${encodeURIComponent(tick.at)}`;

/** The latest sharded tick of a strip, folded into a line linking to its shards. */
function latestShards(name, ticks) {
  const t = [...ticks].reverse().find((x) => x.shards);
  if (!t) return null;
  return h("div", { class: "small shard-summary", dataset: { shardsDone: t.shards.done, shardsTotal: t.shards.total } },
    h("a", { href: shardLink(name)(t) }, `latest tick: ${shardWords(t.shards)}`));
}

export class Overview {
  constructor(root, params) {
    this.filter = readFilter(params);
    this.rows = new Map();
    this.data = null;
    const select = (name, options, value) => h("select", {
      name, "aria-label": name,
      onchange: (e) => { this.filter[name] = e.target.value; this.go(); },
    }, Object.entries(options).map(([k, v]) => h("option", { value: k, selected: k === value }, v)));
    this.healthBar = h("nav", { class: "health", id: "health", "aria-label": "task health" });
    this.alerts = h("section", { class: "card incidents", id: "incidents", "aria-label": "open alerts" });
    this.count = h("span", { class: "muted", id: "task-count" });
    this.body = h("tbody", {});
    put(root,
      this.healthBar,
      this.alerts,
      h("div", { class: "toolbar" },
        h("input", {
          type: "search", name: "q", placeholder: "Filter by name", value: this.filter.q, "aria-label": "filter by name",
          oninput: (e) => { this.filter.q = e.target.value; this.go(); },
        }),
        h("label", {}, "Show ", select("state", Object.fromEntries(STATES.map((x) => [x, x])), this.filter.state)),
        h("label", {}, "Sort by ", select("sort", SORTS, this.filter.sort)),
        this.count),
      h("table", { class: "tasks", id: "tasks" },
        h("thead", {}, h("tr", {}, ["Task", "State", "Last result", "Next run", "Schedule", `Last ${STRIP} expected ticks`]
          .map((x) => h("th", { scope: "col" }, x)))),
        this.body),
      legend());
  }

  /** Keeps the filter in the URL (a reload, a link keep it) and redraws. */
  go() {
    history.replaceState(null, "", filterHash(this.filter));
    this.draw();
  }

  async refresh() {
    // The strips weigh about 150 bytes a tick: with many tasks they are read less often than
    // the task list (every refresh up to MANY tasks, else every SLOW_STRIPS_MS).
    const many = (this.data?.tasks.length ?? 0) > MANY;
    const stale = !this.strips || !many || Date.now() - this.stripsAt >= SLOW_STRIPS_MS;
    const [tasks, ticks, config, incidents] = await Promise.all([
      get("/api/tasks"),
      stale ? get(`/api/ticks?count=${STRIP}`) : null,
      get("/api/config"),
      get("/api/incidents?state=open"),
    ]);
    learnClock(tasks.at);
    if (ticks) {
      this.strips = new Map(ticks.tasks.map((t) => [t.task, t]));
      this.stripsAt = Date.now();
    }
    this.data = { tasks: tasks.tasks, strips: this.strips, config, incidents };
    this.draw();
    return tasks.tasks;
  }

  draw() {
    if (!this.data) return;
    const { tasks, strips, config, incidents } = this.data;
    const refused = config.last_reconcile?.refused ?? [];
    this.drawHealth(tasks, refused);
    this.drawAlerts(tasks, refused, config, incidents);
    const shown = tasks.filter((t) => matches(t, this.filter)).sort(order[this.filter.sort]);
    this.count.textContent = `${shown.length} of ${tasks.length} tasks`;
    // Relative times change every second; a row is rebuilt when its data or its 5-second
    // window changes, and patched onto the one shown (only what differs changes).
    const window = Math.floor(nodeNow() / 5000);
    const wanted = shown.map((t) => {
      const strip = strips.get(t.name);
      const key = JSON.stringify([t, strip, window]);
      const cached = this.rows.get(t.name);
      if (cached?.__key === key && cached.isConnected) return cached;
      const tr = this.row(t, strip);
      tr.__key = key;
      return tr;
    });
    if (wanted.length === 0) {
      wanted.push(h("tr", { "data-key": "none" }, h("td", { colspan: 6, class: "muted" }, tasks.length ? "No task matches the filter." : "No tasks yet.")));
    }
    patch(this.body, wanted);
    [...this.body.children].forEach((tr, i) => {
      tr.__key = wanted[i].__key;
      if (tr.dataset.task) this.rows.set(tr.dataset.task, tr);
    });
  }

  drawHealth(tasks, refused) {
    const counts = Object.fromEntries(COUNTED.map(([k]) => [k, 0]));
    for (const t of tasks) for (const [k, v] of Object.entries(health(t))) if (v) counts[k] += 1;
    // Refused entries of tasks without a row (a name no binary registers) count too.
    counts.refused = Math.max(counts.refused, new Set(refused.map((r) => r.task)).size);
    const link = (state, label, n, alarming) => h("a", {
      href: filterHash({ ...this.filter, state: this.filter.state === state ? "all" : state }),
      class: `count${n && alarming ? " alarm" : ""}${this.filter.state === state ? " active" : ""}`,
      "aria-current": this.filter.state === state ? "true" : null,
      dataset: { count: state, key: state },
    }, h("strong", {}, String(n)), " ", label);
    patch(this.healthBar,
      COUNTED.map(([k, label, alarming]) => link(k, label, counts[k], alarming)),
      link("all", "tasks in all", tasks.length, false));
  }

  drawAlerts(tasks, refused, config, incidents) {
    const items = [];
    const snoozed = new Map((incidents?.snoozes ?? []).map((s) => [s.task, s]));
    for (const i of incidents?.incidents ?? []) {
      // An instance's incident names its row (`task/key`): its link opens its task's page on it.
      const zone = tasks.find((t) => t.name === splitRow(i.task).task)?.timezone ?? "UTC";
      const snooze = snoozed.get(i.task);
      items.push(h("li", { "data-key": `incident:${i.id}`, dataset: { alert: "incident", incident: i.id } },
        h("strong", { class: "bad" }, `${i.kind}: `), h("a", { href: rowHash(i.task) }, i.task),
        ` ${i.count} time${i.count > 1 ? "s" : ""} since ${inZone(i.opened_at, zone)} (last ${relative(i.last_seen_at)}; `,
        i.notified_at ? `alert sent${i.reminders ? `, ${i.reminders} reminder${i.reminders > 1 ? "s" : ""}` : ""})` : "held back)",
        snooze ? h("span", { class: "muted" }, ` — snoozed until ${inZone(snooze.until, zone)}: “${snooze.reason}”`) : null));
    }
    if (config.last_error) {
      items.push(h("li", { class: "bad", "data-key": "config-error" }, `The latest config read failed: ${config.last_error} (the last good document stays in force).`));
    }
    for (const r of refused) {
      items.push(h("li", { "data-key": `refused:${r.task}`, dataset: { alert: "refused" } },
        h("strong", { class: "bad" }, "config entry refused: "), h("code", {}, r.task), ` — ${r.reason}`));
    }
    for (const t of tasks.filter((x) => x.state.missed_since || x.state.timeliness === "late")) {
      const link = h("a", { href: `#/task/${encodeURIComponent(t.name)}` }, t.name);
      items.push(h("li", { "data-key": `late:${t.name}`, dataset: { alert: "late" } }, h("strong", { class: "bad" }, "overdue: "), link,
        t.state.missed_since ? ` since ${inZone(t.state.missed_since, t.timezone)} (${relative(t.state.missed_since)}, missed-run alert)` : ` ${nextRun(t).text}`));
    }
    for (const t of tasks.filter((x) => x.origin.kind === "orphaned")) {
      items.push(h("li", { "data-key": `orphaned:${t.name}`, dataset: { alert: "orphaned" } }, h("strong", {}, "orphaned: "),
        h("a", { href: `#/task/${encodeURIComponent(t.name)}` }, t.name), ` in neither the config nor this binary since ${relative(t.state.orphaned_since)}`));
    }
    patch(this.alerts, h("h2", {}, "Open alerts"),
      items.length ? h("ul", { class: "alert-list" }, items)
        : h("p", { class: "muted", id: "no-alerts" }, "None: no open incident, no task overdue, no config entry refused."));
  }

  row(t, strip) {
    const st = stateOf(t);
    const ticks = strip?.ticks ?? [];
    const next = nextRun(t);
    const failed = failedTicks(t);
    const bad = FAILED.includes(t.state.last_result);
    return h("tr", { dataset: { task: t.name, state: st, key: t.name } },
      h("td", { "data-label": "Task" }, h("a", { href: `#/task/${encodeURIComponent(t.name)}`, class: "task-name" }, t.name),
        t.instances > 0 ? instanceCount(t) : null,
        t.origin.refused ? h("div", { class: "bad small", title: t.origin.refused }, "config entry refused") : null),
      h("td", { "data-label": "State" }, h("span", { class: `badge s-${st.replace(" ", "-")}` }, st),
        t.state.pause ? h("div", { class: "small muted" }, `“${t.state.pause.reason}”`) : null),
      h("td", { "data-label": "Last result", class: "last-result" }, t.state.last_result
        ? [h("span", { class: `result ${outcomeClass(t.state.last_result)}` }, outcomeText(t.state.last_result)),
          h("span", { class: "small muted" }, ` ${relative(t.state.last_finished_at ?? t.state.last_started_at)}`),
          failed && t.state.consecutive_failures > 0 ? h("div", { class: "small bad failed-ticks" }, failed) : null,
          bad && t.state.last_error ? h("div", { class: "small error clamp", title: t.state.last_error }, t.state.last_error) : null,
          instanceLatest(t, "its instances: ")]
        : instanceLatest(t) ?? h("span", { class: "muted" }, t.instances > 0 ? "no instance ran yet" : "never ran")),
      h("td", { "data-label": "Next run", class: "next-run" }, h("div", { class: next.bad ? "bad" : "" }, next.text),
        h("div", { class: "small muted" }, next.detail)),
      h("td", { "data-label": "Schedule" }, h("div", {}, t.cron_in_words), h("code", { class: "small" }, t.cron), h("span", { class: "small muted" }, ` ${t.timezone}`)),
      h("td", { class: "strip-cell", "data-label": `Last ${STRIP} ticks` }, tickStrip(ticks, t.timezone, STRIP, { shardLink: shardLink(t.name) }),
        strip && !strip.complete ? h("span", { class: "small muted", title: "older ticks are beyond what one read returns" }, " …") : null,
        latestShards(t.name, ticks),
        t.instances > 0 ? h("div", { class: "small instance-strips" },
          h("a", { href: `#/task/${encodeURIComponent(t.name)}` }, `its ${t.instances} instance${t.instances === 1 ? "'s strip" : "s' strips"} on its page`)) : null));
  }
}
