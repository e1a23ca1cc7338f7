// The dashboard's entry: routes (`#/`, `#/failures`, `#/task/NAME`, `#/run/ID`, `#/cluster`,
// `#/audit`, each page's filter in the query of the hash), and a refresh of the page shown every
// few seconds, by polling the JSON API; no reload. When the node stops answering, the page says
// so, greys what it shows and says as of when (a named zone), until the node answers again.

import { get, token } from "./api.js";
import { h, patch, put } from "./dom.js";
import { drawAccess } from "./actions.js";
import { AuditPage, ClusterPage } from "./cluster.js";
import { FailuresPage, RunPage } from "./runs.js";
import { clock, relative } from "./format.js";
import { Overview, health } from "./overview.js";
import { TaskPage } from "./task.js";

const REFRESH_MS = 3000;
const view = document.getElementById("view");
const updated = document.getElementById("updated");
const alerts = document.getElementById("alerts");
const stale = document.getElementById("stale");
let page = null;
let onOverview = false;
let timer = null;
let generation = 0;
let lastGood = null;
let refreshes = 0;

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query ?? "");
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.remove("active");
  const nav = (name) => document.querySelector(`[data-nav=${name}]`)?.classList.add("active");
  onOverview = false;
  if (path.startsWith("/task/")) {
    nav("overview");
    const name = decodeURIComponent(path.slice("/task/".length));
    document.title = `${name} · scheduler`;
    return new TaskPage(view, name, params, refresh);
  }
  if (path.startsWith("/run/")) {
    nav("failures");
    const id = path.slice("/run/".length);
    document.title = `run #${id} · scheduler`;
    return new RunPage(view, id, refresh);
  }
  if (path === "/failures") {
    nav("failures");
    document.title = "failed runs · scheduler";
    return new FailuresPage(view, params);
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
  onOverview = true;
  return new Overview(view, params);
}

/** Beyond the overview (which leads with it), one line of what needs attention. */
function drawAlerts(tasks) {
  const n = { failing: 0, late: 0, refused: 0 };
  for (const t of tasks) for (const k of Object.keys(n)) if (health(t)[k]) n[k] += 1;
  const parts = [["failing", "failing"], ["late", "late or missed"], ["refused", "with a refused config entry"]]
    .filter(([k]) => n[k] > 0)
    .map(([k, words]) => h("a", { href: `#/?state=${k}`, "data-key": k }, `${n[k]} ${words}`));
  alerts.hidden = onOverview || parts.length === 0;
  patch(alerts, parts.length ? ["Needs attention: ", parts.map((p, i) => [i ? " · " : "", p])] : []);
}

function markStale(e) {
  document.body.dataset.stale = "true";
  const since = lastGood ? `${clock(lastGood)} (${relative(new Date(lastGood).toISOString(), Date.now())})` : "never";
  stale.hidden = false;
  patch(stale, h("strong", {}, "Not live: "), `${e.message}. What you see is as of ${since}; greyed until the node answers again.`);
  updated.textContent = lastGood ? `last update ${clock(lastGood)}` : "not updated";
  updated.classList.add("bad");
}

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  try {
    const tasks = await page.refresh();
    if (mine !== generation) return;
    drawAlerts(Array.isArray(tasks) ? tasks : (await get("/api/tasks")).tasks);
    lastGood = Date.now();
    updated.textContent = `updated ${clock(lastGood)}`;
    updated.classList.remove("bad");
    delete document.body.dataset.stale;
    stale.hidden = true;
    document.body.dataset.loaded = "true";
  } catch (e) {
    if (mine !== generation) return;
    if (e.status === 404 || e.status === 401 || e.status === 403) {
      updated.textContent = "";
      const hint = e.status === 404 ? null
        : token() ? "The node refused the admin token this tab holds: forget it (top right) and enter the right one."
          : "Enter the admin token (top right) to read this node's API.";
      put(view, h("p", { class: "notice bad", id: "refused" }, e.message), hint ? h("p", {}, hint) : null);
    } else {
      markStale(e);
    }
  } finally {
    if (mine === generation) {
      refreshes += 1;
      document.body.dataset.refreshes = String(refreshes);
      timer = setTimeout(refresh, REFRESH_MS);
    }
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
