// One task: state and actions, its strip, its instances (`instances.js`: filtered by key, each
// with its strip of expected ticks), its runs (filtered by status and by instance key, paged, each
// with a permalink and its log opened in place), lateness and duration charts, next fire times with
// DST changes marked, the config entry and its origin, the policies. Every refresh patches what
// changed only: a selected error message or an open log stays as it is.

import { get, task as enc } from "./api.js";
import { h, patch, put, section, table } from "./dom.js";
import { legend, lineChart, shardWords, tickStrip } from "./charts.js";
import { duration, inZone, offset, outcomeClass, outcomeText, relative, runSeconds, splitRow } from "./format.js";
import { actionBar, backfillCancel } from "./actions.js";

/** The snooze in force for `name` in an `/api/incidents` answer, if any. */
const snoozeOf = (incidents, name) => incidents?.snoozes?.find((s) => s.task === name) ?? null;
import { failedTicks, nextRun, shardLink, stateOf } from "./overview.js";
import { PAGE, STATUSES, pager, runTable } from "./runs.js";
import { instancesCard, readInstances } from "./instances.js";

const STRIP = 60;

export class TaskPage {
  constructor(root, name, params, refreshAll) {
    this.name = name;
    this.refreshAll = refreshAll;
    this.status = STATUSES.includes(params.get("status")) ? params.get("status") : "";
    this.before = Number(params.get("before")) || null;
    this.tick = params.get("tick");
    // The instances' key filter and page; the runs of one instance (`runkey`).
    this.key = params.get("key") ?? "";
    this.after = params.get("after");
    this.runKey = params.get("runkey") ?? "";
    this.openRun = null;
    this.root = root;
    this.parts = {
      head: h("div", { class: "task-head" }),
      strip: h("div", { class: "card" }),
      shards: h("div", { id: "shards" }),
      instances: h("div", { id: "instances-card" }),
      charts: h("div", { class: "charts" }),
      runs: h("div", { class: "card", id: "runs" }),
      log: h("div", { id: "log" }),
      side: h("div", { class: "side" }),
    };
    put(root,
      h("p", {}, h("a", { href: "#/" }, "← all tasks")),
      this.parts.head,
      this.parts.strip,
      this.parts.shards,
      this.parts.instances,
      h("div", { class: "columns" }, h("div", { class: "main-col" }, this.parts.runs, this.parts.log, this.parts.charts), this.parts.side));
  }

  hash({ status = this.status, before = this.before, key = this.key, after = this.after, runKey = this.runKey } = {}) {
    const p = new URLSearchParams();
    if (status) p.set("status", status);
    if (before) p.set("before", before);
    if (this.tick) p.set("tick", this.tick);
    if (key) p.set("key", key);
    if (after) p.set("after", after);
    if (runKey) p.set("runkey", runKey);
    const q = p.toString();
    return `#/task/${enc(this.name)}${q ? `?${q}` : ""}`;
  }

  async refresh() {
    const n = enc(this.name);
    const filter = `${this.status ? `&status=${this.status}` : ""}${this.before ? `&cursor=${this.before}` : ""}${this.runKey ? `&key=${encodeURIComponent(this.runKey)}` : ""}`;
    const [detail, ticks, config, runs, incidents, backfills, instances, limits] = await Promise.all([
      get(`/api/tasks/${n}?count=12&runs=${PAGE}`),
      get(`/api/ticks?task=${n}&count=${STRIP}`),
      get("/api/config"),
      get(`/api/runs?task=${n}&limit=${PAGE}${filter}`),
      // Its instances' incidents too (named by their rows, `task/key`): the read's task filter
      // matches one row's name exactly.
      get("/api/incidents?state=open&limit=1000"),
      get(`/api/backfills?task=${n}&limit=3`),
      readInstances(this.name, this.key, this.after),
      get("/api/limits").catch(() => null),
    ]);
    this.limits = limits?.limits ?? [];
    this.incidents = { ...incidents, incidents: incidents.incidents.filter((i) => splitRow(i.task).task === this.name) };
    this.backfills = backfills;
    this.instances = instances;
    this.draw(detail, ticks.tasks[0], config, runs);
    if (this.openRun) await this.showLog(this.openRun, false);
    return null;
  }

  draw(detail, strip, config, page) {
    const t = detail.task;
    const st = stateOf(t);
    const zone = t.timezone;
    const p = this.parts;
    const next = nextRun(t);
    const failed = failedTicks(t);
    patch(p.head,
      h("h1", {}, t.name, " ", h("span", { class: `badge s-${st.replace(" ", "-")}`, id: "task-state" }, st)),
      h("p", { class: "lead" }, t.cron_in_words, " ", h("code", {}, t.cron), " in ", zone),
      h("p", { class: "lead", id: "next-run" }, "Next run: ", h("strong", { class: next.bad ? "bad" : "" }, next.text), ` (${next.detail})`),
      failed && t.state.consecutive_failures > 0 ? h("p", { class: "notice bad", id: "failing-note" },
        `${failed[0].toUpperCase()}${failed.slice(1)} (${t.state.consecutive_failures} failed attempt${t.state.consecutive_failures > 1 ? "s" : ""}). Last error: `,
        h("span", { class: "error-text" }, t.state.last_error ?? "none recorded")) : null,
      t.state.pause ? h("p", { class: "notice", id: "pause-notice" },
        `Paused by ${t.state.pause.by} ${relative(t.state.pause.at)}: “${t.state.pause.reason}”`,
        t.state.pause.until ? ` — until ${inZone(t.state.pause.until, zone)} (${relative(t.state.pause.until)})` : " — until resumed") : null,
      t.state.missed_since ? h("p", { class: "notice bad" }, `Overdue since ${inZone(t.state.missed_since, zone)}: no run started in time (open missed-run alert).`) : null,
      ...(this.incidents?.incidents ?? []).map((i) => h("p", { class: "notice bad", dataset: { incident: i.id } },
        `Open incident${splitRow(i.task).key ? ` of instance ${splitRow(i.task).key}` : ""}: ${i.kind}, ${i.count} alert${i.count > 1 ? "s" : ""} since ${inZone(i.opened_at, zone)} (last ${relative(i.last_seen_at)}; `,
        i.notified_at ? `sent ${relative(i.notified_at)}${i.reminders ? `, ${i.reminders} reminder${i.reminders > 1 ? "s" : ""}` : ""})` : "held back, not sent)")),
      snoozeOf(this.incidents, t.name) ? h("p", { class: "notice", id: "snooze-notice" },
        `Alerts snoozed by ${snoozeOf(this.incidents, t.name).by} until ${inZone(snoozeOf(this.incidents, t.name).until, zone)}: “${snoozeOf(this.incidents, t.name).reason}” (the task keeps running)`) : null,
      t.state.lock ? h("p", { class: "muted" }, t.state.lock.rows > 1
        ? `${t.state.lock.rows} of its shards or nodes running, one on ${t.state.lock.owner} (lock expires ${relative(t.state.lock.expires_at)}).`
        : `Running on ${t.state.lock.owner}; lock expires ${relative(t.state.lock.expires_at)}.`) : null,
      ...limitNotes(this.limits, t.name, zone),
      t.state.manual_at ? h("p", { class: "muted" }, `A manual run is queued (asked ${relative(t.state.manual_at)}).`) : null,
      t.state.retry_at ? h("p", { class: "muted" }, `A retry is due ${relative(t.state.retry_at)}.`) : null,
      ...(this.backfills ?? []).filter((b) => b.state === "running" || Date.now() - Date.parse(b.requested_at) < 3600000)
        .map((b) => h("p", { class: "muted", dataset: { backfill: b.id } },
          `Backfill #${b.id} (${b.state}) of ${inZone(b.from, zone)} – ${inZone(b.to, zone)} by ${b.requested_by}: `,
          `${b.progress.succeeded} succeeded, ${b.progress.failed} failed, ${b.progress.running} running, ${b.progress.pending} pending of ${b.progress.total}`,
          b.progress.cancelled ? `, ${b.progress.cancelled} cancelled` : "", " ",
          backfillCancel(b, this.refreshAll))),
      actionBar(t, this.refreshAll, snoozeOf(this.incidents, t.name)));

    const ticks = strip?.ticks ?? [];
    patch(p.strip, h("h2", {}, `Last ${STRIP} expected ticks`), tickStrip(ticks, zone, STRIP, { shardLink: shardLink(t.name) }),
      tickSummary(ticks), legend());
    // A sharded task: the shards of the tick chosen in the strip (`?tick=`), else of the latest.
    const sharded = ticks.filter((x) => x.shards);
    const chosen = sharded.find((x) => x.at === this.tick) ?? sharded[sharded.length - 1];
    patch(p.shards, chosen ? shardTable(chosen, zone, this.tick && chosen.at !== this.tick) : null);
    patch(p.instances, instancesCard(t, this.instances, {
      key: this.key, after: this.after,
      onFilter: (key) => { location.hash = this.hash({ key, after: null }); },
      hashOf: (after) => this.hash({ after }),
      runsOf: (key) => this.hash({ runKey: key, before: null }),
    }));

    const recent = detail.recent_runs;
    // A backfilled run serves a past tick: its lateness says nothing about the schedule.
    const scheduled = recent.filter((r) => r.trigger !== "manual" && r.trigger !== "backfill" && r.attempt === 1 && r.started_at);
    // Counted from the tick's start (`starts_at`: the tick shifted by its jitter), as the strip
    // and the metrics count it: a jittered tick's offset is not lateness.
    const due = (r) => Date.parse(r.starts_at ?? r.scheduled_at);
    patch(p.charts,
      section("Lateness (start − tick's start)", lineChart(scheduled.map((r) => ({ at: Date.parse(r.scheduled_at), value: Math.max(0, (Date.parse(r.started_at) - due(r)) / 1000) })), { label: "lateness over time" })),
      section("Duration", lineChart(recent.filter((r) => r.started_at).map((r) => ({ at: Date.parse(r.started_at), value: runSeconds(r), cls: outcomeClass(r.status) })), { label: "duration over time" })));

    const runs = page.runs;
    patch(p.runs,
      h("div", { class: "runs-head" },
        h("h2", {}, `${this.before ? `Runs older than #${this.before}` : `Runs (latest ${PAGE})`}${this.runKey ? ` of instance ${this.runKey}` : ""}`),
        this.runKey ? h("a", { href: this.hash({ runKey: "", before: null }), id: "all-runs" }, "all runs") : null,
        h("label", {}, "Status ", h("select", {
          name: "status", id: "run-status-filter", "aria-label": "run status",
          onchange: (e) => { location.hash = this.hash({ status: e.target.value, before: null }); },
        }, h("option", { value: "", selected: !this.status }, "any"),
        STATUSES.map((s) => h("option", { value: s, selected: s === this.status }, s.replace("_", " ")))))),
      runs.length === 0 ? h("p", { class: "muted", id: "no-runs" }, `No ${this.status ? `${this.status.replace("_", " ")} ` : ""}run${this.before ? ` older than #${this.before}` : this.status ? "" : " yet"}.`)
        : runTable(runs, { zone, showKey: t.instances > 0 || runs.some((r) => r.instance_key), onLog: (id) => this.showLog(id, true), refresh: this.refreshAll }),
      pager((before) => this.hash({ before }), this.before, page.next_cursor));

    patch(p.side,
      section("Next fire times", nextTimes(t, detail.next_fire_times, zone)),
      section("Config entry", configEntry(t, config)),
      section("Policies", policies(t)));
  }

  async showLog(id, scroll) {
    this.openRun = id;
    const el = this.parts.log;
    try {
      const r = await get(`/api/runs/${id}`);
      patch(el, h("div", { class: "card", "data-key": `log-${id}` },
        h("h3", {}, `Log of run `, h("a", { href: `#/run/${id}` }, `#${id}`), " ",
          h("button", { type: "button", class: "link", onclick: () => { this.openRun = null; el.replaceChildren(); } }, "close")),
        r.run.error ? h("p", { class: "bad error-text" }, r.run.error) : null,
        r.log.text ? h("pre", { class: "log" }, r.log.text) : h("p", { class: "muted" }, "The handler logged nothing."),
        r.log.truncated ? h("p", { class: "muted small" }, `${r.log.lines} lines; the capture stopped at its bound.`) : null));
      if (scroll) el.scrollIntoView({ block: "nearest" });
    } catch (e) {
      patch(el, h("p", { class: "bad" }, `Could not read the log of run #${id}: ${e.message}`));
    }
  }
}

/**
 * A sharded tick's shards: how many are done, then each shard's latest run (or none yet). A
 * broadcast's tick lists its nodes' runs; an index with no run past the missed grace is a node
 * that did not run it.
 */
function shardTable(tick, zone, gone) {
  const sh = tick.shards;
  const byIndex = new Map(sh.runs.map((r) => [r.index, r]));
  const rows = [];
  const missing = sh.not_run ? "not_run" : "pending";
  for (let i = 0; i < sh.total; i += 1) {
    const r = byIndex.get(i);
    rows.push(r
      ? h("tr", { dataset: { shard: i, status: r.status, key: `shard-${i}` } },
        h("td", { class: "num" }, String(i)),
        h("td", {}, h("a", { href: `#/run/${r.run_id}`, class: "permalink" }, `#${r.run_id}`)),
        h("td", {}, h("span", { class: `result ${outcomeClass(r.status)}` }, outcomeText(r.status))),
        h("td", { class: "node" }, r.node_id),
        h("td", { class: "num" }, r.attempts),
        h("td", { class: "num" }, r.late_seconds === undefined ? "—" : duration(r.late_seconds)))
      : h("tr", { dataset: { shard: i, status: missing, key: `shard-${i}` } },
        h("td", { class: "num" }, String(i)), h("td", { class: "muted", colspan: 5 },
          missing === "not_run" ? "not run: its node, counted at the tick, did not start it" : "not started yet")));
  }
  const nodes = new Set(sh.runs.map((r) => r.node_id)).size;
  return h("section", { class: "card", "data-key": "shards" },
    h("h2", {}, `${sh.broadcast ? "Nodes" : "Shards"} of the tick at ${inZone(tick.at, zone)}`),
    gone ? h("p", { class: "small muted" }, "The tick chosen is no longer in the strip: the latest is shown.") : null,
    h("p", { id: "shard-summary", dataset: { shardsDone: sh.done, shardsTotal: sh.total } },
      h("span", { class: `result ${outcomeClass(tick.outcome)}` }, outcomeText(tick.outcome)), ` — ${shardWords(sh)}${sh.broadcast ? "" : `, on ${nodes} node${nodes === 1 ? "" : "s"}`}.`),
    table([sh.broadcast ? "Index" : "Shard", "Run", "Result", "Node", "Attempts", "Started after tick"], rows, { class: "runs shards", id: "shard-runs" }));
}

function tickSummary(ticks) {
  const counts = new Map();
  for (const t of ticks) {
    const k = t.outcome === "skipped" ? `skipped (${t.reason?.replaceAll("_", " ")})` : t.outcome.replace("_", " ");
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return h("p", { class: "small muted", id: "tick-summary" }, [...counts].map(([k, n]) => `${n} ${k}`).join(" · ") || "No expected ticks in the window yet.");
}

function nextTimes(t, times, zone) {
  // A paused or disabled task runs at none of its schedule's times: say so instead of
  // listing them; a pause with an end lists the times after it.
  const until = t.state.pause?.until;
  if (t.state.pause && !until) return h("p", { class: "muted", id: "no-next-times" }, "None while paused: it runs again once resumed.");
  if (!t.enabled || t.origin.kind === "not_in_config") return h("p", { class: "muted", id: "no-next-times" }, "None: the task is not scheduled.");
  if (times.length === 0) return h("p", { class: "muted" }, "The schedule cannot be read, or never fires again.");
  const shown = until ? times.filter((at) => at >= until) : times;
  let previous = offset(new Date().toISOString(), zone);
  return [
    until ? h("p", { class: "small muted" }, `Paused until ${inZone(until, zone)}; from then:`) : null,
    h("ol", { class: "times" }, shown.map((at) => {
      const o = offset(at, zone);
      const changed = o !== previous;
      const from = previous;
      previous = o;
      return h("li", { class: changed ? "dst" : "" }, inZone(at, zone), h("span", { class: "small muted" }, ` ${relative(at)}`),
        changed ? h("div", { class: "small dst-note" }, `clocks change before this run: ${from} → ${o}`) : null);
    })),
  ];
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
    h("dt", {}, "Owners"), h("dd", { id: "owners" }, t.owners.length ? `${t.owners.join(", ")}${t.default_owners ? " (the node's default owners)" : ""}` : "nobody (no owners in its entry, no default owners)"),
    h("dt", {}, "Labels"), h("dd", { id: "labels" }, Object.keys(t.labels).length ? Object.entries(t.labels).map(([k, v]) => h("code", { class: "label" }, `${k}=${v}`)).flatMap((el, i) => i ? [" ", el] : [el]) : "none"),
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

/** What the task waits for or holds of the limits shared by tasks (`/api/limits`). */
function limitNotes(limits, name, zone) {
  const holders = (l) => l.holders.map((x) => `${x.row} on ${x.node}`).join(", ") || "none";
  const size = (l) => (l.size == null ? "not declared" : `${l.holders.length} of ${l.size} held`);
  const notes = [];
  for (const l of limits) {
    for (const w of l.waiting.filter((x) => x.task === name)) {
      notes.push(h("p", { class: "notice", dataset: { limitWaiting: l.name } },
        `${w.row} is waiting for limit ${l.name} (${size(l)}: ${holders(l)}) since ${inZone(w.since, zone)} (${relative(w.since)})`,
        w.due_at ? `; its tick of ${inZone(w.due_at, zone)} starts late or is skipped by its misfire rule.` : "."));
    }
    const mine = l.holders.filter((x) => x.task === name);
    if (mine.length) {
      notes.push(h("p", { class: "muted", dataset: { limitHeld: l.name } },
        `Holds ${mine.length} share${mine.length > 1 ? "s" : ""} of limit ${l.name} (${size(l)}).`));
    }
  }
  return notes;
}
