// One task: state and actions, its strip, lateness and duration charts, runs with their logs,
// next fire times with DST changes marked, the config entry and its origin, the policies.

import { get, task as enc } from "./api.js";
import { h, put, section, table } from "./dom.js";
import { lineChart, tickStrip } from "./charts.js";
import { duration, inZone, offset, outcomeClass, outcomeText, relative, runSeconds } from "./format.js";
import { actionBar, cancelButton } from "./actions.js";
import { legend, stateOf } from "./overview.js";

const RUNS = 50;
const STRIP = 60;

export class TaskPage {
  constructor(root, name, refreshAll) {
    this.name = name;
    this.refreshAll = refreshAll;
    this.openRun = null;
    this.root = root;
    this.parts = {
      head: h("div", { class: "task-head" }),
      strip: h("div", { class: "card" }),
      charts: h("div", { class: "charts" }),
      runs: h("div", { class: "card", id: "runs" }),
      side: h("div", { class: "side" }),
    };
    put(root,
      h("p", {}, h("a", { href: "#/" }, "← all tasks")),
      this.parts.head,
      this.parts.strip,
      h("div", { class: "columns" }, h("div", { class: "main-col" }, this.parts.charts, this.parts.runs), this.parts.side));
  }

  async refresh() {
    const n = enc(this.name);
    const [detail, ticks, config] = await Promise.all([
      get(`/api/tasks/${n}?count=12&runs=${RUNS}`),
      get(`/api/ticks?task=${n}&count=${STRIP}`),
      get("/api/config"),
    ]);
    this.draw(detail, ticks.tasks[0], config);
    if (this.openRun) await this.showLog(this.openRun, false);
  }

  draw(detail, strip, config) {
    const t = detail.task;
    const st = stateOf(t);
    const zone = t.timezone;
    const p = this.parts;
    put(p.head,
      h("h1", {}, t.name, " ", h("span", { class: `badge s-${st.replace(" ", "-")}`, id: "task-state" }, st)),
      h("p", { class: "lead" }, t.cron_in_words, " ", h("code", {}, t.cron), " in ", zone,
        t.state.next_run_at && st === "enabled" ? ` · next run ${relative(t.state.next_run_at)} (${inZone(t.state.next_run_at, zone)})` : ""),
      t.state.pause ? h("p", { class: "notice", id: "pause-notice" },
        `Paused by ${t.state.pause.by} ${relative(t.state.pause.at)}: “${t.state.pause.reason}”`,
        t.state.pause.until ? ` — until ${inZone(t.state.pause.until, zone)} (${relative(t.state.pause.until)})` : " — until resumed") : null,
      t.state.missed_since ? h("p", { class: "notice bad" }, `Overdue since ${inZone(t.state.missed_since, zone)}: no run started in time (open missed-run alert).`) : null,
      t.state.lock ? h("p", { class: "muted" }, `Running on ${t.state.lock.owner}; lock expires ${relative(t.state.lock.expires_at)}.`) : null,
      t.state.manual_at ? h("p", { class: "muted" }, `A manual run is queued (asked ${relative(t.state.manual_at)}).`) : null,
      t.state.retry_at ? h("p", { class: "muted" }, `A retry is due ${relative(t.state.retry_at)}.`) : null,
      actionBar(t, this.refreshAll));

    const ticks = strip?.ticks ?? [];
    put(p.strip, h("h2", {}, `Last ${STRIP} expected ticks`), h("div", { class: "scroll" }, tickStrip(ticks, zone)), legend(),
      tickSummary(ticks));

    const runs = detail.recent_runs;
    const scheduled = runs.filter((r) => r.trigger !== "manual" && r.attempt === 1 && r.started_at);
    put(p.charts,
      section("Lateness (start − tick)", lineChart(scheduled.map((r) => ({ at: Date.parse(r.scheduled_at), value: Math.max(0, (Date.parse(r.started_at) - Date.parse(r.scheduled_at)) / 1000) })), { label: "lateness over time" })),
      section("Duration", lineChart(runs.filter((r) => r.started_at).map((r) => ({ at: Date.parse(r.started_at), value: runSeconds(r), cls: outcomeClass(r.status) })), { label: "duration over time" })));

    put(p.runs, h("h2", {}, `Runs (latest ${RUNS})`),
      runs.length === 0 ? h("p", { class: "muted" }, "No runs yet.") : h("div", { class: "scroll" }, table(
        ["Run", "Tick", "Started", "Duration", "Result", "Node", "Attempt", "Trigger", "Error", ""],
        runs.map((r) => h("tr", { dataset: { run: r.id, status: r.status, trigger: r.trigger } },
          h("td", { class: "num" }, `#${r.id}`),
          h("td", {}, inZone(r.scheduled_at, zone)),
          h("td", {}, relative(r.started_at)),
          h("td", { class: "num" }, duration(runSeconds(r))),
          h("td", {}, h("span", { class: `result ${outcomeClass(r.status)}` }, outcomeText(r.status)),
            r.ticks_collapsed > 1 ? h("div", { class: "small muted" }, `served ${r.ticks_collapsed} ticks`) : null,
            r.cancel_requested_by && r.status === "running" ? h("div", { class: "small muted cancel-note" }, `cancel asked by ${r.cancel_requested_by} ${relative(r.cancel_requested_at)}`) : null),
          h("td", {}, r.node_id),
          h("td", { class: "num" }, r.attempt),
          h("td", {}, r.trigger, r.triggered_by ? h("div", { class: "small muted" }, r.triggered_by) : null),
          h("td", { class: "error" }, r.error ?? ""),
          h("td", {}, h("button", { type: "button", class: "link", onclick: () => this.showLog(r.id, true) }, "log"),
            cancelButton(r, this.refreshAll)))),
        { class: "runs" })),
      h("div", { id: "log" }));

    put(p.side,
      section("Next fire times", nextTimes(detail.next_fire_times, zone)),
      section("Config entry", configEntry(t, config)),
      section("Policies", policies(t)));
  }

  async showLog(id, scroll) {
    this.openRun = id;
    const el = this.root.querySelector("#log");
    if (!el) return;
    try {
      const r = await get(`/api/runs/${id}`);
      put(el, h("h3", {}, `Log of run #${id} `, h("button", { type: "button", class: "link", onclick: () => { this.openRun = null; el.replaceChildren(); } }, "close")),
        r.run.error ? h("p", { class: "bad" }, r.run.error) : null,
        r.log.text ? h("pre", { class: "log" }, r.log.text) : h("p", { class: "muted" }, "The handler logged nothing."),
        r.log.truncated ? h("p", { class: "muted small" }, `${r.log.lines} lines; the capture stopped at its bound.`) : null);
      if (scroll) el.scrollIntoView({ block: "nearest" });
    } catch (e) {
      put(el, h("p", { class: "bad" }, `Could not read the log of run #${id}: ${e.message}`));
    }
  }
}

function tickSummary(ticks) {
  const counts = new Map();
  for (const t of ticks) {
    const k = outcomeText(t.outcome, t.reason);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return h("p", { class: "small muted", id: "tick-summary" }, [...counts].map(([k, n]) => `${n} ${k}`).join(" · ") || "No expected ticks in the window yet.");
}

function nextTimes(times, zone) {
  if (times.length === 0) return h("p", { class: "muted" }, "The schedule cannot be read.");
  let previous = offset(new Date().toISOString(), zone);
  return h("ol", { class: "times" }, times.map((at) => {
    const o = offset(at, zone);
    const changed = o !== previous;
    const from = previous;
    previous = o;
    return h("li", { class: changed ? "dst" : "" }, inZone(at, zone), h("span", { class: "small muted" }, ` ${relative(at)}`),
      changed ? h("div", { class: "small dst-note" }, `clocks change before this run: ${from} → ${o}`) : null);
  }));
}

function configEntry(t, config) {
  const entry = config.document?.tasks.find((e) => e.name === t.name);
  const kinds = {
    config: "an entry of the config document", not_in_config: "registered in the binary, absent from the config: not scheduled",
    orphaned: "in neither the config nor this binary", database: "the node has no config: the row as stored",
  };
  return h("dl", {},
    h("dt", {}, "From"), h("dd", {}, kinds[t.origin.kind] ?? t.origin.kind),
    t.origin.source ? [h("dt", {}, "Source"), h("dd", {}, h("code", {}, t.origin.source))] : null,
    config.document ? [h("dt", {}, "Read"), h("dd", {}, `${relative(config.document.read_at)}${config.document.revision !== null ? `, version ${config.document.revision}` : ""}`)] : null,
    entry ? [h("dt", {}, "As loaded"), h("dd", {}, h("pre", { class: "entry" }, JSON.stringify(entry, null, 2)))] : null,
    h("dt", {}, "In force"), h("dd", {}, h("code", {}, t.cron), ` ${t.timezone}, ${t.enabled ? "enabled" : "disabled"}`),
    t.origin.refused ? [h("dt", { class: "bad" }, "Refused"), h("dd", { class: "bad", id: "refusal" }, `${t.origin.refused} (the task keeps its last valid schedule)`)] : null);
}

function policies(t) {
  const p = t.policy;
  if (!p) return h("p", { class: "muted" }, "Not registered in this node's binary.");
  return h("dl", {},
    h("dt", {}, "Timeout"), h("dd", {}, p.timeout_seconds === null ? "none" : duration(p.timeout_seconds)),
    h("dt", {}, "Retries"), h("dd", {}, p.retries === 0 ? "none" : `${p.retries}, backoff ${duration(p.backoff_seconds)}`),
    h("dt", {}, "Misfire"), h("dd", {}, p.misfire === "skip" ? "skip ticks missed during an outage" : "run once for ticks missed during an outage"),
    h("dt", {}, "Recovery"), h("dd", {}, p.recovery === "never" ? "never re-run a lost run (at most once)" : "re-run a lost run once"),
    h("dt", {}, "Lock lifetime"), h("dd", {}, duration(p.lock_lifetime_seconds)),
    h("dt", {}, "Defined at"), h("dd", {}, h("code", {}, p.defined_at)));
}
