// A task's instances on its page (`GET /api/tasks/NAME/instances`): each with its key, who owns
// it (config or run time), its schedule, state, next run, last result and its strip of expected
// ticks (`ticks`, by its own schedule, each with its run, `waiting` or `missed`: drawn as the
// task's own strip), filterable by a part of the key (kept in the page's address, `?key=`) and paged by
// key (`?after=`). One request per refresh for the page shown, whatever the number of
// instances.

import { get, task as enc } from "./api.js";
import { h, section, table } from "./dom.js";
import { tickStrip } from "./charts.js";
import { inZone, outcomeClass, outcomeText, relative } from "./format.js";

/** Instances per page. */
export const INSTANCE_PAGE = 50;
/** Latest expected ticks on each instance's strip. */
export const INSTANCE_TICKS = 20;

/** The read of one page of `name`'s instances, filtered by `key`, after key `after`. */
export function instancesPath(name, key, after) {
  const p = new URLSearchParams({ limit: String(INSTANCE_PAGE), ticks: String(INSTANCE_TICKS) });
  if (key) p.set("key", key);
  if (after) p.set("cursor", after);
  return `/api/tasks/${enc(name)}/instances?${p}`;
}

/** Reads the page; a node without the read (an older one) shows none. */
export async function readInstances(name, key, after) {
  return get(instancesPath(name, key, after));
}

function stateWords(i) {
  if (i.removed) return ["removed", "removed: its run in flight finishes"];
  if (i.paused) return ["paused", `paused by ${i.pause?.by ?? "an operator"}`];
  if (!i.enabled) return ["disabled", "disabled (its task, or its config entry)"];
  if (i.running) return ["running", `running on ${i.running.owner}`];
  if (i.last_run?.result && i.last_run.result !== "succeeded") return ["failing", `last run ${outcomeText(i.last_run.result)}`];
  return ["ok", "enabled"];
}

function row(i, runsOf) {
  const [state, words] = stateWords(i);
  return h("tr", { dataset: { instance: i.key, state, source: i.source, key: `instance-${i.key}` } },
    h("td", { class: "instance-key" }, h("a", { href: runsOf(i.key), title: "this instance's runs" }, h("code", {}, i.key)),
      i.source === "config" ? h("div", { class: "small muted" }, "from the config") : null),
    h("td", {}, h("span", { class: `badge s-${state}`, title: words }, state)),
    h("td", { class: "strip-cell" }, tickStrip(i.ticks ?? [], i.timezone, INSTANCE_TICKS),
      i.ticks_complete === false ? h("span", { class: "small muted", title: "older ticks are beyond what one read returns" }, " …") : null),
    h("td", {}, h("code", {}, i.cron), h("div", { class: "small muted" }, i.timezone)),
    h("td", { class: "next-run" }, i.enabled && !i.paused && i.next_run_at
      ? [inZone(i.next_run_at, i.timezone), h("div", { class: "small muted" }, relative(i.next_run_at))]
      : h("span", { class: "muted" }, i.paused ? "none while paused" : "none")),
    h("td", {}, i.last_run
      ? [h("span", { class: `result ${outcomeClass(i.last_run.result ?? "running")}` }, outcomeText(i.last_run.result ?? "running")),
        h("div", { class: "small muted" }, relative(i.last_run.started_at))]
      : h("span", { class: "muted" }, "never ran")),
    h("td", { class: "args" }, i.args === null ? h("span", { class: "muted" }, "none") : h("code", {}, JSON.stringify(i.args))));
}

/**
 * The instances card: a key filter (`onFilter(text)` when it changes), the page of instances
 * (each key a link to its runs, `runsOf(key)`), and links to the first and next pages
 * (`hashOf(after)`).
 */
export function instancesCard(t, page, { key, after, onFilter, hashOf, runsOf }) {
  const instances = page?.instances ?? [];
  const total = t.instances ?? instances.length;
  if (total === 0 && !key) return null;
  return section(`Instances (${total})`,
    h("div", { class: "runs-head" },
      h("p", { class: "small muted" }, "Schedules of this task of their own, each named by a key, run by its handler with their arguments."),
      h("label", {}, "Key ", h("input", {
        type: "search", id: "instance-filter", name: "key", value: key ?? "", placeholder: "part of a key",
        "aria-label": "filter instances by key", autocomplete: "off",
        onchange: (e) => onFilter(e.target.value.trim()),
      }))),
    instances.length === 0
      ? h("p", { class: "muted", id: "no-instances" }, key ? `No instance's key contains “${key}”.` : "No instances.")
      : table(["Key", "State", `Last ${INSTANCE_TICKS} expected ticks`, "Schedule", "Next run", "Last run", "Arguments"],
        instances.map((i) => row(i, runsOf)), { class: "runs instances", id: "instances" }),
    h("p", { class: "pager" },
      after ? h("a", { href: hashOf(null), id: "first-instances" }, "← first") : null,
      page?.next_cursor ? h("a", { href: hashOf(page.next_cursor), id: "more-instances" }, " more →") : null));
}
