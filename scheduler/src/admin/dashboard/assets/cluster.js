// The cluster: nodes with heartbeats and running handlers, the config and the last reconcile
// report, open alerts; and the audit trail of operator actions.

import { get } from "./api.js";
import { h, patch, put, section, table } from "./dom.js";
import { inZone, relative } from "./format.js";

export class ClusterPage {
  constructor(root) {
    this.root = root;
    put(root, h("p", { class: "muted" }, "Loading…"));
  }

  async refresh() {
    const [nodes, config, tasks, deliveries] = await Promise.all([
      get("/api/nodes"), get("/api/config"), get("/api/tasks"), get("/api/deliveries?limit=20"),
    ]);
    const missed = tasks.tasks.filter((t) => t.state.missed_since);
    patch(this.root,
      h("h1", {}, "Nodes & config"),
      section("Open alerts", missed.length === 0 ? h("p", { class: "muted", id: "no-alerts" }, "No task is overdue.")
        : table(["Task", "Overdue since"], missed.map((t) => h("tr", {},
          h("td", {}, h("a", { href: `#/task/${encodeURIComponent(t.name)}` }, t.name)),
          h("td", { class: "bad" }, `${inZone(t.state.missed_since)} (${relative(t.state.missed_since)})`))))),
      section("Nodes", table(["Node", "Host / pid", "Version", "Database", "Started", "Heartbeat", "Running", "Tasks registered"],
        nodes.nodes.map((n) => h("tr", { class: n.stopped_at ? "stopped" : "", dataset: { node: n.node_id, key: n.node_id } },
          h("td", {}, n.node_id, n.this_node ? h("span", { class: "badge s-enabled" }, "this node") : null),
          h("td", {}, `${n.hostname} / ${n.pid}`),
          h("td", {}, n.version),
          h("td", { class: "small" }, n.database_server ?? h("span", { class: "muted" }, "—")),
          h("td", {}, relative(n.started_at)),
          h("td", {}, n.stopped_at ? h("span", { class: "muted" }, `stopped ${relative(n.stopped_at)}`) : relative(n.heartbeat_at)),
          h("td", {}, n.running ? `${n.running}: ${n.running_tasks.join(", ")}` : "idle"),
          h("td", { class: "small" }, n.tasks.join(", ")))), { id: "nodes" })),
      section("Config", configView(config)),
      section("Last reconcile", reconcile(config.last_reconcile)),
      section("Webhook deliveries (latest 20)", deliveries.deliveries.length === 0
        ? h("p", { class: "muted" }, "None: no webhook is configured, or no alert was sent yet.")
        : table(["When", "Event", "Attempt", "Node", "Answer", "Took"], deliveries.deliveries.map((d) => h("tr", {},
          h("td", {}, relative(d.at)), h("td", {}, `${d.kind} #${d.event_id}`), h("td", { class: "num" }, d.attempt),
          h("td", {}, d.node_id), h("td", { class: d.error || (d.status ?? 0) >= 300 ? "bad" : "" }, d.error ?? `HTTP ${d.status}`),
          h("td", { class: "num" }, `${d.duration_ms} ms`))))));
    return tasks.tasks;
  }
}

function configView(c) {
  if (!c.source) return h("p", { class: "muted" }, "This node reads no config: the tasks are as stored.");
  return h("dl", {},
    h("dt", {}, "Source"), h("dd", {}, h("code", {}, c.source)),
    c.last_error ? [h("dt", { class: "bad" }, "Latest read failed"), h("dd", { class: "bad" }, `${c.last_error} (the last good document stays in force)`)] : null,
    c.document ? [h("dt", {}, "Last read"), h("dd", {}, `${relative(c.document.read_at)}, ${c.document.tasks.length} entries${c.document.revision !== null ? `, version ${c.document.revision}` : ""}`)] : null,
    c.applied ? [h("dt", {}, "Applied in the cluster"), h("dd", {}, `${c.applied.revision !== null ? `version ${c.applied.revision}, ` : ""}by ${c.applied.applied_by}, digest `, h("code", {}, c.applied.digest.slice(0, 12)))] : null);
}

function reconcile(r) {
  if (!r) return h("p", { class: "muted" }, "No reconcile yet.");
  const list = (label, names) => names.length ? [h("dt", {}, label), h("dd", {}, names.join(", "))] : null;
  return h("div", { id: "reconcile" },
    h("p", {}, h("strong", {}, r.outcome), ` ${relative(r.at)}`, r.recorded ? " (recorded by this node)" : "", `; ${r.unchanged} entries unchanged.`),
    r.stale ? h("p", { class: "bad" }, `The document (version ${r.stale.version}) is older than the applied one (${r.stale.current}): refused whole.`) : null,
    h("dl", {},
      list("Created", r.created), list("Enabled", r.enabled), list("Disabled", r.disabled), list("Updated", r.updated),
      list("Not in config", r.absent), list("Orphaned", r.orphaned), list("Repaired", r.repaired), list("Kept paused", r.paused)),
    r.refused.length ? table(["Refused entry", "Why"], r.refused.map((x) => h("tr", {}, h("td", {}, x.task), h("td", { class: "bad" }, x.reason))), { class: "refused" }) : null);
}

export class AuditPage {
  constructor(root) {
    this.root = root;
    put(root, h("p", { class: "muted" }, "Loading…"));
  }

  async refresh() {
    const audit = await get("/api/audit?limit=200");
    patch(this.root, h("h1", {}, "Audit trail"),
      section("Operator actions, newest first",
        audit.entries.length === 0 ? h("p", { class: "muted" }, "No action yet.") : table(["When", "Who", "What", "Task", "Detail", "From"],
          audit.entries.map((e) => h("tr", { dataset: { action: e.action, key: e.id } },
            h("td", {}, inZone(e.at), h("div", { class: "small muted" }, relative(e.at))),
            h("td", {}, e.actor), h("td", {}, e.action),
            h("td", {}, h("a", { href: `#/task/${encodeURIComponent(e.task)}` }, e.task)),
            h("td", {}, e.detail), h("td", { class: "small" }, e.source))), { id: "audit" })));
  }
}
