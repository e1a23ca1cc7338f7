// The dashboard's entry: routes (`#/`, `#/task/NAME`, `#/cluster`, `#/audit`, the overview's
// filter in the query of the hash), and a refresh of the page shown every few seconds, by
// polling the JSON API; no reload.

import { get, token } from "./api.js";
import { h, put } from "./dom.js";
import { drawAccess } from "./actions.js";
import { AuditPage, ClusterPage } from "./cluster.js";
import { Overview } from "./overview.js";
import { TaskPage } from "./task.js";

const REFRESH_MS = 3000;
const view = document.getElementById("view");
const updated = document.getElementById("updated");
const alerts = document.getElementById("alerts");
let page = null;
let timer = null;
let generation = 0;

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query ?? "");
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.remove("active");
  const nav = (name) => document.querySelector(`[data-nav=${name}]`)?.classList.add("active");
  if (path.startsWith("/task/")) {
    nav("overview");
    const name = decodeURIComponent(path.slice("/task/".length));
    document.title = `${name} · scheduler`;
    return new TaskPage(view, name, refresh);
  }
  if (path === "/cluster") {
    nav("cluster");
    document.title = "nodes & config · scheduler";
    return new ClusterPage(view);
  }
  if (path === "/audit") {
    nav("audit");
    document.title = "audit trail · scheduler";
    return new AuditPage(view);
  }
  nav("overview");
  document.title = "tasks · scheduler";
  return new Overview(view, params);
}

function drawAlerts(tasks) {
  const missed = tasks.filter((t) => t.state.missed_since);
  alerts.hidden = missed.length === 0;
  put(alerts, missed.length ? [`${missed.length} open missed-run alert${missed.length > 1 ? "s" : ""}: `,
    missed.map((t, i) => [i ? ", " : "", h("a", { href: `#/task/${encodeURIComponent(t.name)}` }, t.name)])] : []);
}

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  try {
    const tasks = await page.refresh();
    if (mine !== generation) return;
    drawAlerts(Array.isArray(tasks) ? tasks : (await get("/api/tasks")).tasks);
    updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
    updated.classList.remove("bad");
    document.body.dataset.loaded = "true";
  } catch (e) {
    if (mine !== generation) return;
    updated.textContent = e.status === 404 ? "" : `not updated: ${e.message}`;
    updated.classList.add("bad");
    if (e.status === 404 || e.status === 401 || e.status === 403) {
      const hint = e.status === 404 ? null
        : token() ? "The node refused the admin token this tab holds: forget it (top right) and enter the right one."
          : "Enter the admin token (top right) to read this node's API.";
      put(view, h("p", { class: "notice bad", id: "refused" }, e.message), hint ? h("p", {}, hint) : null);
    }
  } finally {
    if (mine === generation) timer = setTimeout(refresh, REFRESH_MS);
  }
}

function show() {
  page = route();
  refresh();
}

const access = document.getElementById("access");
function drawHeader() {
  drawAccess(access, () => { drawHeader(); show(); });
}
drawHeader();
window.addEventListener("hashchange", show);
// Hidden tabs do not poll; a tab shown again refreshes at once.
document.addEventListener("visibilitychange", () => {
  if (document.hidden) clearTimeout(timer);
  else refresh();
});
show();
