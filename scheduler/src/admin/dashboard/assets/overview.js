// Every task at a glance: state, schedule, next run, last result, lateness and its strip of
// expected ticks. Two requests per refresh (`/api/tasks`, `/api/ticks`) whatever the number of
// tasks; rows whose data did not change are kept as they are.

import { get } from "./api.js";
import { h, put } from "./dom.js";
import { tickStrip } from "./charts.js";
import { duration, inZone, outcomeClass, outcomeText, relative } from "./format.js";

const STATES = ["all", "enabled", "paused", "disabled", "failing", "missed", "not scheduled"];
const SORTS = { name: "name", next: "next run", failure: "last failure", state: "state" };
export const STRIP = 30;
const MANY = 200;
const SLOW_STRIPS_MS = 15000;

/** What a task is, in one word. */
export function stateOf(t) {
  if (t.state.pause) return "paused";
  if (t.origin.kind === "orphaned") return "orphaned";
  if (!t.enabled) return "disabled";
  if (t.origin.kind === "not_in_config") return "not scheduled";
  return "enabled";
}

function failing(t) {
  return t.state.consecutive_failures > 0 || ["failed", "timed_out", "lost"].includes(t.state.last_result);
}

function matches(t, filter) {
  const st = filter.state;
  if (st === "failing" && !failing(t)) return false;
  if (st === "missed" && !t.state.missed_since) return false;
  if (!["all", "failing", "missed"].includes(st) && stateOf(t) !== st) return false;
  if (filter.q && !t.name.toLowerCase().includes(filter.q.toLowerCase())) return false;
  return true;
}

const order = {
  name: (a, b) => a.name.localeCompare(b.name),
  next: (a, b) => (Date.parse(a.state.next_run_at ?? "9999") - Date.parse(b.state.next_run_at ?? "9999")) || order.name(a, b),
  failure: (a, b) => (b.state.consecutive_failures - a.state.consecutive_failures)
    || (Number(failing(b)) - Number(failing(a)))
    || (Date.parse(b.state.last_finished_at ?? 0) - Date.parse(a.state.last_finished_at ?? 0)) || order.name(a, b),
  state: (a, b) => stateOf(a).localeCompare(stateOf(b)) || order.name(a, b),
};

/** The filter as the URL holds it. */
export function readFilter(params) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : "all";
  const sort = params.get("sort") in SORTS ? params.get("sort") : "name";
  return { state, sort, q: params.get("q") ?? "" };
}

function writeFilter(filter) {
  const p = new URLSearchParams();
  if (filter.state !== "all") p.set("state", filter.state);
  if (filter.sort !== "name") p.set("sort", filter.sort);
  if (filter.q) p.set("q", filter.q);
  const q = p.toString();
  history.replaceState(null, "", `#/${q ? `?${q}` : ""}`);
}

export class Overview {
  constructor(root, params) {
    this.filter = readFilter(params);
    this.rows = new Map();
    this.data = null;
    const select = (name, options, value) => h("select", {
      name, "aria-label": name,
      onchange: (e) => { this.filter[name] = e.target.value; writeFilter(this.filter); this.draw(); },
    }, Object.entries(options).map(([k, v]) => h("option", { value: k, selected: k === value }, v)));
    this.count = h("span", { class: "muted", id: "task-count" });
    this.body = h("tbody", {});
    put(root,
      h("div", { class: "toolbar" },
        h("input", {
          type: "search", name: "q", placeholder: "Filter by name", value: this.filter.q, "aria-label": "filter by name",
          oninput: (e) => { this.filter.q = e.target.value; writeFilter(this.filter); this.draw(); },
        }),
        h("label", {}, "State ", select("state", Object.fromEntries(STATES.map((x) => [x, x])), this.filter.state)),
        h("label", {}, "Sort by ", select("sort", SORTS, this.filter.sort)),
        this.count,
        h("span", { class: "spacer" }),
        legend()),
      h("div", { class: "scroll" },
        h("table", { class: "tasks", id: "tasks" },
          h("thead", {}, h("tr", {}, ["Task", "State", "Schedule", "Next run", "Last result", "Late", `Last ${STRIP} expected ticks, oldest → newest`]
            .map((x) => h("th", { scope: "col" }, x)))),
          this.body)));
  }

  async refresh() {
    // The strips weigh about 150 bytes a tick: with many tasks they are read less often than
    // the task list (every refresh up to MANY tasks, else every SLOW_STRIPS_MS).
    const many = (this.data?.tasks.length ?? 0) > MANY;
    const stale = !this.strips || !many || Date.now() - this.stripsAt >= SLOW_STRIPS_MS;
    const [tasks, ticks] = await Promise.all([
      get("/api/tasks"),
      stale ? get(`/api/ticks?count=${STRIP}`) : null,
    ]);
    if (ticks) {
      this.strips = new Map(ticks.tasks.map((t) => [t.task, t]));
      this.stripsAt = Date.now();
    }
    this.data = { tasks: tasks.tasks, strips: this.strips };
    this.draw();
    return tasks.tasks;
  }

  draw() {
    if (!this.data) return;
    const { tasks, strips } = this.data;
    const shown = tasks.filter((t) => matches(t, this.filter)).sort(order[this.filter.sort]);
    this.count.textContent = `${shown.length} of ${tasks.length} tasks`;
    const rows = shown.map((t) => this.row(t, strips.get(t.name)));
    this.body.replaceChildren(...rows);
    if (shown.length === 0) this.body.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, tasks.length ? "No task matches the filter." : "No tasks yet.")));
  }

  row(t, strip) {
    // Relative times change every second; the rest only with the data.
    const key = JSON.stringify([t, strip, Math.floor(Date.now() / 5000)]);
    const cached = this.rows.get(t.name);
    if (cached?.key === key) return cached.tr;
    const st = stateOf(t);
    const ticks = strip?.ticks ?? [];
    const last = [...ticks].reverse().find((x) => x.late_seconds !== null && x.late_seconds !== undefined);
    const tr = h("tr", { dataset: { task: t.name, state: st } },
      h("td", {}, h("a", { href: `#/task/${encodeURIComponent(t.name)}`, class: "task-name" }, t.name),
        t.origin.refused ? h("div", { class: "bad small" }, "config entry refused") : null),
      h("td", {}, h("span", { class: `badge s-${st.replace(" ", "-")}` }, st),
        t.state.pause ? h("div", { class: "small muted" }, t.state.pause.reason) : null,
        t.state.missed_since ? h("div", { class: "small bad" }, `missed since ${relative(t.state.missed_since)}`) : null),
      h("td", {}, h("div", {}, t.cron_in_words), h("code", { class: "small" }, t.cron), h("span", { class: "small muted" }, ` ${t.timezone}`)),
      h("td", {}, t.state.next_run_at && st !== "paused" && st !== "disabled"
        ? [h("div", {}, relative(t.state.next_run_at)), h("div", { class: "small muted" }, inZone(t.state.next_run_at, t.timezone))]
        : h("span", { class: "muted" }, "—")),
      h("td", {}, t.state.last_result
        ? [h("span", { class: `result ${outcomeClass(t.state.last_result)}` }, outcomeText(t.state.last_result)),
          h("div", { class: "small muted" }, relative(t.state.last_finished_at ?? t.state.last_started_at)),
          t.state.consecutive_failures > 1 ? h("div", { class: "small bad" }, `${t.state.consecutive_failures} failures in a row`) : null]
        : h("span", { class: "muted" }, "never ran")),
      h("td", { class: "num" }, last ? duration(last.late_seconds) : "—"),
      h("td", { class: "strip-cell" }, tickStrip(ticks, t.timezone, STRIP),
        strip && !strip.complete ? h("span", { class: "small muted", title: "older ticks are beyond what one read returns" }, " …") : null));
    this.rows.set(t.name, { key, tr });
    return tr;
  }
}

/** What the colours of a strip mean. */
export function legend() {
  const items = [
    ["succeeded"], ["failed"], ["timed_out"], ["interrupted"], ["lost"], ["cancelled"], ["running"],
    ["skipped", "paused"], ["skipped", "overlap"], ["skipped", "misfire"], ["missed"],
  ];
  return h("span", { class: "legend", "aria-label": "legend" },
    items.map(([o, r]) => h("span", { class: "legend-item" },
      h("span", { class: `swatch ${outcomeClass(o, r)}` }), outcomeText(o, r))));
}
