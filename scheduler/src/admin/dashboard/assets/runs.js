// Runs: the run table the task page and the failed-runs page share, the recent failed runs of
// every task (`#/failures`, paged), and one run with its log at its own address (`#/run/ID`,
// the permalink every run id links to).

import { get, task as enc } from "./api.js";
import { h, patch, put, section, table } from "./dom.js";
import { FAILED, duration, inZone, outcomeClass, outcomeText, relative, runSeconds } from "./format.js";
import { cancelButton } from "./actions.js";

export const PAGE = 50;

/** Run statuses an operator filters by. */
export const STATUSES = ["running", "succeeded", "failed", "timed_out", "interrupted", "lost", "cancelled"];

/**
 * A table of runs, newest first; `showKey` adds the instance each ran (a link to that instance's
 * runs); `onLog(id)` adds a button opening a run's log in place.
 */
export function runTable(runs, { zone = "UTC", showTask = false, showKey = false, onLog = null, refresh = null } = {}) {
  const heads = ["Run", ...(showTask ? ["Task"] : []), ...(showKey ? ["Instance"] : []), "Tick", "Started", "Took", "Result", "Attempt", "Trigger", "Node", "Error", ""];
  return table(heads, runs.map((r) => h("tr", { dataset: { run: r.id, status: r.status, trigger: r.trigger, key: `run-${r.id}` } },
    h("td", { class: "num" }, h("a", { href: `#/run/${r.id}`, class: "permalink", title: "this run's own page (a link to share)" }, `#${r.id}`)),
    showTask ? h("td", {}, h("a", { href: `#/task/${encodeURIComponent(r.task)}` }, r.task)) : null,
    showKey ? h("td", { class: "instance-key" }, r.instance_key ? h("a", { href: `#/task/${encodeURIComponent(r.task)}?runkey=${encodeURIComponent(r.instance_key)}` }, r.instance_key) : h("span", { class: "muted" }, "the task's own")) : null,
    h("td", {}, inZone(r.scheduled_at, zone), shardNote(r)),
    h("td", {}, r.started_at ? relative(r.started_at) : h("span", { class: "muted" }, "never started")),
    h("td", { class: "num" }, duration(runSeconds(r))),
    h("td", {}, h("span", { class: `result ${outcomeClass(r.status)}` }, outcomeText(r.status)),
      r.ticks_collapsed > 1 ? h("div", { class: "small muted" }, `served ${r.ticks_collapsed} ticks`) : null,
      r.cancel_requested_by && r.status === "running" ? h("div", { class: "small muted cancel-note" }, `cancel asked by ${r.cancel_requested_by} ${relative(r.cancel_requested_at)}`) : null,
      r.status === "cancelled" && r.cancel_requested_by ? h("div", { class: "small muted" }, `cancelled by ${r.cancel_requested_by}`) : null),
    h("td", { class: "num" }, r.attempt),
    h("td", {}, r.trigger, r.triggered_by ? h("div", { class: "small muted" }, r.triggered_by) : null),
    h("td", { class: "node" }, r.node_id),
    h("td", { class: "error" }, r.error ?? ""),
    h("td", { class: "run-actions" },
      onLog ? h("button", { type: "button", class: "link", onclick: () => onLog(r.id) }, "log") : null,
      refresh ? cancelButton(r, refresh) : null))), { class: "runs" });
}

/** Which shard of its tick a sharded task's run ran (none for an ordinary task). */
function shardNote(r) {
  return r.shard_total > 1 ? h("div", { class: "small muted shard-note" }, `shard ${r.shard_index} of ${r.shard_total}`) : null;
}

/** Links to the newest page and the next older one. */
export function pager(hashOf, before, next) {
  return h("p", { class: "pager" },
    before ? h("a", { href: hashOf(null), id: "newest-runs" }, "← newest") : null,
    before ? h("span", { class: "muted" }, ` older than #${before} `) : null,
    next ? h("a", { href: hashOf(next), id: "older-runs" }, "older →") : h("span", { class: "muted small" }, " no older runs"));
}

/** The recent failed, timed-out and lost runs of every task, newest first, paged. */
export class FailuresPage {
  constructor(root, params) {
    this.root = root;
    this.before = Number(params.get("before")) || null;
    put(root, h("p", { class: "muted" }, "Loading…"));
  }

  async refresh() {
    // One read per failed status (the API filters by one), merged: the page is the newest
    // PAGE of their union, and the next page starts below its last id.
    const cursor = this.before ? `&cursor=${this.before}` : "";
    const pages = await Promise.all(FAILED.map((st) => get(`/api/runs?status=${st}&limit=${PAGE}${cursor}`)));
    const runs = pages.flatMap((p) => p.runs).sort((a, b) => b.id - a.id);
    const shown = runs.slice(0, PAGE);
    const more = runs.length > PAGE || pages.some((p) => p.next_cursor !== null);
    const next = more && shown.length ? shown[shown.length - 1].id : null;
    patch(this.root,
      h("h1", {}, "Failed runs, all tasks"),
      h("p", { class: "muted" }, "Runs that failed, timed out or were lost, newest first. Times in UTC; a run's id is its permalink."),
      section(this.before ? `Failed runs older than #${this.before}` : `Latest ${PAGE} failed runs`,
        shown.length === 0 ? h("p", { class: "muted", id: "no-failures" }, "No failed run.")
          : h("div", { id: "failures" }, runTable(shown, { showTask: true, showKey: shown.some((r) => r.instance_key) })),
        pager((id) => (id ? `#/failures?before=${id}` : "#/failures"), this.before, next)));
    return null;
  }
}

/** One run at its own address: what it was, how it ended, its log. */
export class RunPage {
  constructor(root, id, refreshAll) {
    this.root = root;
    this.id = id;
    this.refreshAll = refreshAll;
    put(root, h("p", { class: "muted" }, "Loading…"));
  }

  async refresh() {
    const { run: r, log } = await get(`/api/runs/${encodeURIComponent(this.id)}`);
    patch(this.root,
      h("p", {}, h("a", { href: `#/task/${enc(r.task)}` }, `← ${r.task}`)),
      h("h1", {}, `Run #${r.id} `, h("span", { class: `result ${outcomeClass(r.status)}`, id: "run-status" }, outcomeText(r.status))),
      section("Run", h("dl", { id: "run" },
        h("dt", {}, "Task"), h("dd", {}, h("a", { href: `#/task/${enc(r.task)}` }, r.task)),
        r.instance_key ? [h("dt", {}, "Instance"), h("dd", { id: "run-instance" }, h("a", { href: `#/task/${enc(r.task)}?runkey=${encodeURIComponent(r.instance_key)}` }, r.instance_key))] : null,
        h("dt", {}, "Tick"), h("dd", {}, inZone(r.scheduled_at)),
        r.shard_total > 1 ? [h("dt", {}, "Shard"), h("dd", { id: "run-shard" }, `${r.shard_index} of ${r.shard_total} (`,
          h("a", { href: `#/task/${enc(r.task)}?tick=${encodeURIComponent(r.scheduled_at)}` }, "the tick's shards"), ")")] : null,
        h("dt", {}, "Started"), h("dd", {}, r.started_at ? `${inZone(r.started_at)} (${relative(r.started_at)})` : "never (handed over or cancelled before its tick)"),
        h("dt", {}, "Ended"), h("dd", {}, r.finished_at ? `${inZone(r.finished_at)} (${relative(r.finished_at)})` : "still running"),
        h("dt", {}, "Took"), h("dd", {}, duration(runSeconds(r))),
        h("dt", {}, "Attempt"), h("dd", {}, `${r.attempt} (${r.trigger}${r.triggered_by ? `, by ${r.triggered_by}` : ""})`),
        h("dt", {}, "Node"), h("dd", {}, r.node_id),
        r.cancel_requested_by ? [h("dt", {}, "Cancel"), h("dd", {}, `asked by ${r.cancel_requested_by} ${relative(r.cancel_requested_at)}`)] : null,
        r.error ? [h("dt", { class: "bad" }, "Error"), h("dd", { class: "bad error-text" }, r.error)] : null),
      h("p", {}, cancelButton(r, this.refreshAll))),
      section("Log", log.text ? h("pre", { class: "log", id: "run-log" }, log.text) : h("p", { class: "muted" }, "The handler logged nothing."),
        log.truncated ? h("p", { class: "muted small" }, `${log.lines} lines; the capture stopped at its bound.`) : null));
    return null;
  }
}
