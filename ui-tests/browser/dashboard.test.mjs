// The dashboard in headless Chromium (Debian's package, driven by playwright-core: no browser
// download) against a real node: the dashboard_demo example, started by scripts/dashboard-test,
// which passes DASHBOARD_URL, DASHBOARD_TOKEN, SCREENSHOTS and NODE_PID.
//
// It checks, as an operator at 3 a.m. would use it:
// - the overview leads with health: counts of failing, late, refused, paused and running tasks
//   that filter the list, the failing tasks first and above the fold, the refused config entry
//   among the open alerts; a page of recent failed runs across all tasks;
// - every label is true: "N ticks failed in a row" counts ticks, not retries; a task waiting
//   behind its running run says so instead of "4 s ago"; a paused task lists no next fire
//   times; no absurd "in 4048 days";
// - a refresh changes only what changed: a selected error message and an open log survive it;
//   runs have a permalink, a status filter and older pages;
// - strips and their legend read without colour: every state has its own shape (checked on the
//   legend's geometry) and screenshots under simulated colour-vision deficiencies;
// - a sharded task is one row whose ticks are one mark each, folded from the shards, and a mark
//   opens the list of that tick's shard runs; a broadcast's tick counts its nodes ("1/1 nodes ran");
// - a task's instances (declared in the demo's config, or made at run time from Rust): each with
//   its strip of expected ticks, its next run and arguments, filtered by key (kept in the address);
//   the task's history says which instance each run was;
// - a task failing through one of its instances alone (made at run time; its own runs succeed):
//   counted, badged and sorted as failing on the overview and in the needs-attention line; the
//   instance's open alert opens its task's page filtered to it, and the page lists it failing,
//   with its failed runs;
// - a tick waiting for a limit shared by tasks: an hourglass whose tooltip names the limit, how
//   full it is and its holder, and the task's page says it in words;
// - a node that stops answering (SIGSTOP) greys the page, which says since when, in a named zone;
// - the token's actions (trigger, pause, resume, cancel, snooze and its lifting, a backfill after
//   its dry run) and the audit trail, read-only without it;
// - at 390 px (a phone) no element is wider than the screen, on every page, and in a stacked table
//   every value (each of its lines) starts beside its column's name, never under it.
// Screenshots of each page (light, dark, phone, colour-vision simulations) go to SCREENSHOTS.
//
// ASSETS_FROM=<dir> serves the page's assets from that folder instead of the node's binary
// (with the node's own headers), for working on them without rebuilding the node.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { chromium } from "playwright-core";

const base = process.env.DASHBOARD_URL;
const token = process.env.DASHBOARD_TOKEN;
const nodePid = Number(process.env.NODE_PID);
const shots = process.env.SCREENSHOTS ?? "../../target/dashboard-screenshots";
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const assetsFrom = process.env.ASSETS_FROM;
assert.ok(base && token && nodePid, "run through scripts/dashboard-test (DASHBOARD_URL, DASHBOARD_TOKEN, NODE_PID)");

// The browser's zone, named on the page's clock times.
const ZONE = "Europe/Paris";
let browser;
let context;
let page;
const problems = [];

async function newContext(options) {
  const c = await browser.newContext({ timezoneId: ZONE, ...options });
  // Anything the page tries to load from elsewhere fails the test.
  await c.route((url) => !url.href.startsWith(base), (route) => {
    problems.push(`request to ${route.request().url()}`);
    return route.abort();
  });
  if (assetsFrom) {
    const types = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8", html: "text/html; charset=utf-8", svg: "image/svg+xml" };
    await c.route((url) => url.href.startsWith(`${base}/assets/`) || url.href === `${base}/`, async (route) => {
      const response = await route.fetch();
      const path = new URL(route.request().url()).pathname;
      const name = path === "/" ? "index.html" : path.slice("/assets/".length);
      const body = await readFile(`${assetsFrom}/${name}`);
      return route.fulfill({ response, status: 200, body, headers: { ...response.headers(), "content-type": types[name.split(".").pop()] } });
    });
  }
  return c;
}

function watch(p) {
  // The browser logs failed requests as errors: the wrong-token and stopped-node steps make
  // some on purpose.
  p.on("console", (m) => {
    if (m.type() === "error" && !/status of 401|ERR_|Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  return p;
}

before(async () => {
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  context = await newContext({ viewport: { width: 1440, height: 900 } });
  page = watch(await context.newPage());
});

after(async () => {
  // Whatever happened, the node runs on for the script to stop it.
  try { process.kill(nodePid, "SIGCONT"); } catch { /* gone */ }
  await browser?.close();
});

const row = (name) => page.locator(`#tasks tr[data-task="${name}"]`);
const marks = (name, outcome, reason) =>
  row(name).locator(`.mark[data-outcome="${outcome}"]${reason ? `[data-reason="${reason}"]` : ""}`);

async function eventually(what, check, seconds = 45, on = page) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if (await check()) return;
    } catch { /* not there yet */ }
    if (Date.now() >= deadline) {
      // A dialog left open (an action that failed) says why.
      const dialog = await on.locator("dialog[open]").textContent().catch(() => null);
      assert.fail(`timed out waiting for: ${what}${dialog ? ` (open dialog: ${dialog})` : ""}`);
    }
    await on.waitForTimeout(250);
  }
}

async function shoot(name, on = page) {
  // A full-page shot of a scrolled page draws the sticky header where the view was.
  await on.evaluate(() => window.scrollTo(0, 0));
  await on.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

/** Waits for `n` more refreshes of the page shown (each polls the API and patches the page). */
async function refreshes(n, on = page) {
  const now = Number(await on.locator("body").getAttribute("data-refreshes"));
  await eventually(`${n} refreshes`, async () => Number(await on.locator("body").getAttribute("data-refreshes")) >= now + n, 45, on);
}

async function api(path) {
  const r = await fetch(`${base}${path}`);
  assert.equal(r.status, 200, path);
  return r.json();
}

async function taskState(name) {
  return (await api("/api/tasks")).tasks.find((t) => t.name === name).state;
}

test("the page is served under a strict CSP and loads nothing from elsewhere", async () => {
  const response = await page.goto(`${base}/`);
  const csp = response.headers()["content-security-policy"];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  await page.waitForSelector("body[data-loaded=true]");
  assert.deepEqual(problems, []);
});

test("the overview leads with health: counts that filter, failing tasks first and above the fold, refused entries among the open alerts", async () => {
  await page.goto(`${base}/#/`);
  for (const name of ["demo.succeeds", "demo.flaky", "demo.broken", "demo.slow", "demo.times_out", "demo.on_demand", "demo.monthly", "demo.nightly"]) {
    await row(name).waitFor();
  }
  assert.equal(await page.locator("#access-state").textContent(), "read-only");
  await eventually("succeeded, failed, timed-out and overlap-skipped ticks", async () =>
    (await marks("demo.succeeds", "succeeded").count()) >= 3
    && (await marks("demo.broken", "failed").count()) >= 2
    && (await marks("demo.times_out", "timed_out").count()) >= 1
    && (await marks("demo.slow", "skipped", "overlap").count()) >= 1);
  assert.match(await row("demo.monthly").textContent(), /America\/New_York/);
  assert.match(await row("demo.succeeds").locator("td[data-label=Schedule]").textContent(), /every 2 seconds/);

  // The counts: failing tasks and the refused entry are counted and marked as alarms.
  const failing = page.locator("#health [data-count=failing]");
  await eventually("failing tasks counted", async () => Number(await failing.locator("strong").textContent()) >= 1);
  assert.match(await failing.getAttribute("class"), /alarm/);
  assert.equal(await page.locator("#health [data-count=refused] strong").textContent(), "1");
  assert.match(await page.locator("#incidents").textContent(), /config entry refused: demo\.retired/);
  assert.match(await page.locator("#incidents").textContent(), /no task with this name is registered/);

  // Sorted by what needs attention: the failing tasks come first, and the first is on screen
  // without scrolling.
  const states = await page.locator("#tasks tbody tr").evaluateAll((rows) => rows.map((r) => r.dataset.state));
  const firstOther = states.findIndex((s) => s !== "failing");
  assert.ok(firstOther > 0 && !states.slice(firstOther).includes("failing"), `failing first: ${states}`);
  assert.equal(await row("demo.broken").getAttribute("data-state"), "failing");
  const box = await row("demo.broken").boundingBox();
  assert.ok(box && box.y + box.height <= 900, `demo.broken above the fold: ${JSON.stringify(box)}`);
  await shoot("overview-light");

  // A count filters the list; the filter lives in the URL, so a reload keeps it.
  await failing.click();
  assert.match(page.url(), /state=failing/);
  await page.reload();
  await page.waitForSelector("body[data-loaded=true]");
  await eventually("only failing tasks", async () => (await row("demo.succeeds").count()) === 0 && (await row("demo.broken").count()) === 1);
  assert.equal(await page.locator("select[name=state]").inputValue(), "failing");
  await page.goto(`${base}/#/?q=slow`);
  await eventually("filtered by name", async () => (await page.locator("#tasks tr[data-task]").count()) === 1);
});

test("every label is true: failed ticks not attempts, waiting behind a running run, no absurd spans", async () => {
  await page.goto(`${base}/#/`);
  await row("demo.broken").waitFor();
  // demo.broken fails every attempt and retries each tick twice: its row counts ticks.
  await eventually("two failed ticks of demo.broken", async () => (await taskState("demo.broken")).failed_ticks_in_a_row >= 2);
  await eventually("the row counts ticks, not attempts", async () => {
    const st = await taskState("demo.broken");
    const text = await row("demo.broken").locator(".failed-ticks").textContent();
    return st.consecutive_failures > st.failed_ticks_in_a_row
      && text === `${st.failed_ticks_in_a_row} ticks failed in a row`;
  });
  // demo.slow runs 5 s every 2 s: its next tick falls due while it runs, and it waits.
  await eventually("demo.slow waits for its running run", async () =>
    /waits for the running run/.test(await row("demo.slow").locator(".next-run").textContent()));
  await eventually("demo.slow's detail says when its tick was due", async () =>
    /its tick was due \d+ s ago/.test(await row("demo.slow").locator(".next-run").textContent()));
  // A yearly task's next run reads in months, never in hundreds of days.
  assert.match(await row("demo.on_demand").locator(".next-run").textContent(), /in \d+ (days|months)/);
  assert.doesNotMatch(await page.locator("main").innerText(), /\d{3,} days/);
  await page.goto(`${base}/#/task/demo.broken`);
  await page.waitForSelector("#failing-note");
  assert.match(await page.locator("#failing-note").textContent(), /\d+ ticks failed in a row \(\d+ failed attempts\)/);
  assert.match(await page.locator("#failing-note").textContent(), /certificate expired/);
  await shoot("task-broken");
});

test("the task page: runs with permalinks, a status filter, logs; a refresh keeps a selection and an open log", async () => {
  await page.goto(`${base}/#/task/demo.flaky`);
  await page.waitForSelector("table.runs tr[data-run]");
  assert.match(await page.locator(".readonly-note").textContent(), /Read-only/);
  assert.equal(await page.locator("#trigger").count(), 0, "no action without the token");
  const failed = page.locator('table.runs tr[data-status="failed"]').first();
  await failed.waitFor();
  assert.match(await failed.textContent(), /upstream answered 503/);
  await failed.locator("button", { hasText: "log" }).click();
  await eventually("the run's log", async () => /upstream answered 503/.test(await page.locator("pre.log").textContent()));
  assert.equal(await page.locator("svg.chart").count(), 2);
  assert.match(await page.locator(".side").textContent(), /retries/i);

  // Select an error message, and mark the open log and the row (a property of the element
  // itself, which a patch leaves alone): refreshes patch the page, so the same elements stay,
  // and the selection with them.
  const id = await failed.getAttribute("data-run");
  const selected = await page.evaluate((run) => {
    const cell = document.querySelector(`table.runs tr[data-run="${run}"] td.error`);
    getSelection().selectAllChildren(cell);
    cell.closest("tr").marker = "kept";
    document.querySelector("pre.log").marker = "kept";
    return getSelection().toString();
  }, id);
  assert.match(selected, /upstream answered 503/);
  await refreshes(3);
  assert.equal(await page.evaluate(() => getSelection().toString()), selected, "the selection survives the refreshes");
  assert.equal(await page.locator(`table.runs tr[data-run="${id}"]`).evaluate((tr) => tr.marker), "kept", "the row was patched, not replaced");
  assert.equal(await page.locator("pre.log").evaluate((pre) => pre.marker), "kept", "the open log was not replaced");
  await shoot("task-flaky");

  // The status filter lives in the URL.
  await page.locator("#run-status-filter").selectOption("succeeded");
  await eventually("only succeeded runs", async () => {
    const statuses = await page.locator("table.runs tr[data-run]").evaluateAll((rows) => rows.map((r) => r.dataset.status));
    return statuses.length > 0 && statuses.every((s) => s === "succeeded");
  });
  assert.match(page.url(), /status=succeeded/);

  // A run's id is its permalink: the run, how it ended, its log.
  await page.goto(`${base}/#/task/demo.flaky?status=failed`);
  const link = page.locator("table.runs tr[data-status=failed] a.permalink").first();
  await link.waitFor();
  const runId = (await link.textContent()).slice(1);
  await link.click();
  assert.match(page.url(), new RegExp(`#/run/${runId}$`));
  await eventually("the run's own page", async () => (await page.locator("#run-status").textContent()) === "failed");
  assert.match(await page.locator("#run-log").textContent(), /upstream answered 503/);
  assert.match(await page.locator("#run").textContent(), /demo\.flaky/);
  await shoot("run-permalink");

  await page.goto(`${base}/#/task/demo.monthly`);
  await page.waitForSelector("ol.times li");
  assert.ok(await page.locator("ol.times li.dst").count() >= 1, "a DST change is marked");
  await shoot("task-monthly-dst");
});

test("a sharded task's tick is one mark folded from its shards; a click lists the tick's shard runs", async () => {
  await page.goto(`${base}/#/`);
  await row("demo.sharded").waitFor();
  assert.equal(await page.locator('#tasks tr[data-task^="demo.sharded["]').count(), 0, "its shards' rows are not tasks");
  const whole = row("demo.sharded").locator('.mark.sharded[data-outcome="succeeded"][data-shards-done="4"]');
  await eventually("a tick whose 4 shards succeeded", async () => (await whole.count()) >= 2);
  // One mark per tick: as many marks as distinct ticks.
  const keys = await row("demo.sharded").locator(".mark").evaluateAll((ms) => ms.map((m) => m.dataset.key));
  assert.equal(new Set(keys).size, keys.length, `one mark per tick: ${keys}`);
  assert.match(await whole.last().locator("title").textContent(), /succeeded · .*4\/4 shards done/);
  assert.match(await row("demo.sharded").locator(".shard-summary").textContent(), /latest tick: \d\/4 shards done/);

  // A click on a mark opens the task page on that tick's shards.
  const at = await whole.first().getAttribute("data-key");
  await row("demo.sharded").locator("a.shard-link", { has: page.locator(`.mark[data-key="${at}"]`) }).click();
  await eventually("the tick's shards", async () => (await page.locator("#shard-runs tr[data-shard]").count()) === 4);
  assert.ok(decodeURIComponent(page.url()).endsWith(`tick=${at}`), page.url());
  assert.match(await page.locator("#shard-summary").textContent(), /Succeeded — 4\/4 shards done, on 1 node/i);
  const statuses = await page.locator("#shard-runs tr[data-shard]").evaluateAll((rows) => rows.map((r) => `${r.dataset.shard}:${r.dataset.status}`));
  assert.deepEqual(statuses, ["0:succeeded", "1:succeeded", "2:succeeded", "3:succeeded"]);
  assert.match(await page.locator("table.runs:not(.shards)").textContent(), /shard \d of 4/);
  await shoot("task-sharded");

  // Each shard's run has its page, which names the shard and links back to its tick.
  await page.locator('#shard-runs tr[data-shard="2"] a.permalink').click();
  await eventually("the shard's run", async () => /2 of 4/.test(await page.locator("#run-shard").textContent()));
  await page.locator("#run-shard a").click();
  await eventually("back on the tick's shards", async () => (await page.locator("#shard-runs tr[data-shard]").count()) === 4);
  assert.ok(decodeURIComponent(page.url()).endsWith(`tick=${at}`), page.url());
  assert.deepEqual(problems, []);
});

test("a broadcast task's tick counts the nodes that ran it", async () => {
  await page.goto(`${base}/#/`);
  await row("demo.broadcast").waitFor();
  assert.equal(await page.locator('#tasks tr[data-task^="demo.broadcast["]').count(), 0, "its nodes' rows are not tasks");
  const whole = row("demo.broadcast").locator('.mark.sharded[data-outcome="succeeded"][data-shards-done="1"]');
  await eventually("a tick its node ran", async () => (await whole.count()) >= 1);
  assert.match(await whole.last().locator("title").textContent(), /succeeded · .*1\/1 nodes ran/);
  const at = await whole.last().getAttribute("data-key");
  await row("demo.broadcast").locator("a.shard-link", { has: page.locator(`.mark[data-key="${at}"]`) }).click();
  await eventually("the tick's nodes", async () => (await page.locator("#shard-runs tr[data-shard]").count()) === 1);
  assert.match(await page.locator("#shards h2").textContent(), /^Nodes of the tick/);
  assert.match(await page.locator("#shard-summary").textContent(), /Succeeded — 1\/1 nodes ran\./i);
  await shoot("task-broadcast");
  assert.deepEqual(problems, []);
});

test("a task's instances: each with its strip and next run, filtered by key; the history names each run's instance", async () => {
  await page.goto(`${base}/#/`);
  await eventually("the overview counts them", async () => /3 instances/.test(await row("demo.tenants").textContent()));
  await row("demo.tenants").locator("a.task-name").click();
  await page.waitForSelector("#instances tr[data-instance]");
  const instance = (key) => page.locator(`#instances tr[data-instance="${key}"]`);
  await eventually("three instances, with runs on their strips", async () =>
    (await page.locator("#instances tr[data-instance]").count()) === 3
    && (await instance("tenant-1").locator('.mark[data-outcome="succeeded"]').count()) >= 2
    && (await instance("acme").locator('.mark[data-outcome="succeeded"]').count()) >= 1);
  assert.match(await page.locator("#instances-card h2").textContent(), /Instances \(3\)/);
  assert.equal(await instance("tenant-1").getAttribute("data-source"), "config");
  assert.match(await instance("tenant-1").locator("td.args").textContent(), /\{"tenant":1\}/);
  assert.match(await instance("tenant-2").textContent(), /Asia\/Shanghai/);
  assert.match(await instance("tenant-1").locator(".next-run").textContent(), /in |now/);
  await shoot("task-instances");

  // Filtered by a part of the key; the filter lives in the URL.
  await page.locator("#instance-filter").fill("TENANT");
  await page.locator("#instance-filter").press("Enter");
  await eventually("only the tenants", async () => (await page.locator("#instances tr[data-instance]").count()) === 2);
  assert.match(page.url(), /key=TENANT/);
  assert.equal(await instance("acme").count(), 0);

  // The history names each run's instance; a key opens that instance's runs.
  await eventually("runs with their instance", async () => /tenant-|acme/.test(await page.locator("table.runs tr[data-run] td.instance-key").first().textContent()));
  await instance("tenant-2").locator("td.instance-key a").click();
  await eventually("the runs of tenant-2", async () => {
    const keys = await page.locator("table.runs tr[data-run] td.instance-key").allTextContents();
    return keys.length > 0 && keys.every((k) => k === "tenant-2");
  });
  assert.match(page.url(), /runkey=tenant-2/);
  assert.deepEqual(problems, []);
});

test("instances made at run time from Rust: each listed with its strip of runs, filtered by key, the filter kept in the address", async () => {
  // demo.advertisers' three instances are made by the demo's own code (`Schedules::upsert`) once
  // the node has started: none is declared in the config.
  await page.goto(`${base}/#/task/demo.advertisers`);
  const card = page.locator("#instances-card");
  const keys = () => card.locator("#instances td.instance-key a").allTextContents();
  // A row found by its key's link, as a reader finds it.
  const instance = (key) => card.getByRole("row").filter({ has: page.getByRole("link", { name: key, exact: true }) });
  await eventually("three instances, each with a run on its strip", async () => {
    if ((await keys()).join(" ") !== "adv-101 adv-102 brand-7") return false;
    for (const key of ["adv-101", "adv-102", "brand-7"]) {
      // The strip is an image whose name counts its ticks by outcome.
      const strip = instance(key).getByRole("img", { name: /recent ticks/ });
      if (!/\b\d+ succeeded\b/.test(await strip.getAttribute("aria-label", { timeout: 1000 }))) return false;
      if ((await instance(key).locator('.mark[data-outcome="succeeded"]').count()) < 1) return false;
    }
    return true;
  });
  assert.equal(await card.getByRole("heading").textContent(), "Instances (3)");
  const first = instance("adv-101");
  assert.equal(await first.locator("td[data-label=Schedule] code").textContent(), "*/2 * * * * *");
  assert.equal(await first.locator("td[data-label=Arguments]").textContent(), '{"advertiser":"adv-101"}');
  assert.doesNotMatch(await first.textContent(), /from the config/, "made at run time, not declared");
  assert.match(await instance("adv-102").locator("td[data-label=Schedule]").textContent(), /Europe\/Berlin/);
  assert.match(await first.locator("td[data-label=\"Last run\"]").textContent(), /succeeded/);
  await shoot("task-runtime-instances");

  // The filter narrows the list to the keys containing it, and lives in the address: a reload
  // keeps it, in the box and in the list.
  const filter = page.getByRole("searchbox", { name: "filter instances by key" });
  await filter.fill("adv");
  await filter.press("Enter");
  await eventually("only the adv- instances", async () => (await keys()).join(" ") === "adv-101 adv-102");
  assert.match(page.url(), /[?&]key=adv(&|$)/);
  await page.reload();
  await page.waitForSelector("body[data-loaded=true]");
  await eventually("still filtered after a reload", async () => (await keys()).join(" ") === "adv-101 adv-102");
  assert.equal(await filter.inputValue(), "adv");
  await shoot("task-runtime-instances-filtered");
  // A filter nothing matches says so; the count is still the task's.
  await filter.fill("nobody");
  await filter.press("Enter");
  await eventually("no instance", async () => (await card.locator("#no-instances").count()) === 1);
  assert.equal(await card.locator("#no-instances").textContent(), "No instance's key contains “nobody”.");
  assert.equal(await card.getByRole("heading").textContent(), "Instances (3)");
  assert.deepEqual(problems, []);
});

test("a task failing only through an instance made at run time: counted, badged and sorted as failing; its page lists that instance, failing, filterable", async () => {
  // demo.mirrors' own ticks succeed; of its two instances, made by the demo's code at run time
  // (`Schedules::upsert`, none declared in the config), `globex` fails every run.
  const name = "demo.mirrors";
  await page.goto(`${base}/#/`);
  await row(name).waitFor();
  await eventually(`${name} failing through its instance, its own runs succeeding`, async () =>
    (await row(name).getAttribute("data-state", { timeout: 1000 })) === "failing"
    && (await row(name).locator("td.last-result > .result").textContent({ timeout: 1000 })) === "succeeded"
    && /, 1 failing$/.test(await row(name).locator(".instance-count").textContent({ timeout: 1000 })));
  // Its own runs do not fail: no failed ticks, no error of its own; its badge says failing.
  assert.equal(await row(name).locator(".failed-ticks").count(), 0);
  assert.equal(await row(name).locator("td.last-result > .error").count(), 0);
  assert.equal(await row(name).locator("td[data-label=State] .badge").textContent(), "failing");
  assert.match(await row(name).locator(".instance-count").textContent(), /^2 instances(, [12] running)?, 1 failing$/);

  // Needs attention (the default order): among the failing tasks, all of them before any other.
  assert.equal(await page.locator("select[name=sort]").inputValue(), "attention");
  const order = await page.locator("#tasks tbody tr").evaluateAll((rows) => rows.map((r) => [r.dataset.task, r.dataset.state]));
  const at = order.findIndex(([task]) => task === name);
  const firstOther = order.findIndex(([, s]) => s !== "failing");
  assert.ok(at >= 0 && at < firstOther && !order.slice(firstOther).some(([, s]) => s === "failing"), `failing first: ${JSON.stringify(order)}`);
  await shoot("overview-instance-failing");

  // Counted: the failing count is the list its filter shows, and that list has the task. Read
  // from one drawing of the page (another task's failing comes and goes between refreshes).
  await page.locator("#health [data-count=failing]").click();
  assert.match(page.url(), /state=failing/);
  await eventually(`${name} under the failing filter`, async () => (await row(name).count()) === 1);
  const counted = await page.evaluate(() => ({
    count: Number(document.querySelector("#health [data-count=failing] strong").textContent),
    alarm: document.querySelector("#health [data-count=failing]").classList.contains("alarm"),
    shown: [...document.querySelectorAll("#tasks tr[data-task]")].map((r) => r.dataset.task),
    says: document.querySelector("#task-count").textContent,
  }));
  assert.ok(counted.shown.includes(name), JSON.stringify(counted));
  assert.equal(counted.count, counted.shown.length, `the count is the filtered list: ${JSON.stringify(counted)}`);
  assert.ok(counted.alarm, "counted as an alarm");
  assert.match(counted.says, new RegExp(`^${counted.count} of \\d+ tasks$`));

  // The needs-attention line of the other pages counts it among the failing tasks, and leads
  // to them.
  await page.goto(`${base}/#/task/demo.on_demand`);
  const attention = page.locator("#alerts a[data-key=failing]");
  await eventually("the needs-attention line", async () => /^\d+ failing$/.test(await attention.textContent({ timeout: 1000 })));
  await attention.click();
  await eventually(`${name} among the failing tasks`, async () => (await row(name).count()) === 1);

  // Its instance's open alert on the overview names the instance and opens it on its task's
  // page: the instances filtered to it, failing.
  await page.goto(`${base}/#/`);
  const alert = page.locator("#incidents li[data-alert=incident]", { hasText: `${name}/globex` });
  await eventually("globex's open alert", async () => (await alert.count()) === 1);
  assert.match(await alert.textContent(), /^run\.failed: demo\.mirrors\/globex \d+ times? since/);
  await alert.locator("a").click();
  await eventually("globex alone on its task's page", async () =>
    (await page.locator("#instances tr[data-instance]").evaluateAll((rows) => rows.map((r) => `${r.dataset.instance}:${r.dataset.state}`))).join(" ") === "globex:failing");
  assert.equal(new URL(page.url()).hash, `#/task/${name}?key=globex`);
  assert.equal(await page.locator("#instance-filter").inputValue(), "globex");
  // The task's page names its instance's open incident.
  await eventually("the incident on the task's page", async () =>
    /^Open incident of instance globex: run\.failed/.test(await page.locator(".task-head p[data-incident]").first().textContent({ timeout: 1000 })));

  // Its page, unfiltered: failing, and its instances list the failing one with its status.
  await page.locator("#instance-filter").fill("");
  await page.locator("#instance-filter").press("Enter");
  await page.waitForSelector('#instances tr[data-instance="initech"]');
  const instance = (key) => page.locator(`#instances tr[data-instance="${key}"]`);
  await eventually("globex failing, initech not", async () =>
    (await instance("globex").getAttribute("data-state", { timeout: 1000 })) === "failing"
    && (await instance("initech").getAttribute("data-state", { timeout: 1000 })) === "ok");
  assert.equal(await page.locator("#task-state").textContent(), "failing");
  assert.equal(await page.locator("#instances-card h2").textContent(), "Instances (2)");
  assert.equal(await instance("globex").locator("td:nth-child(2) .badge").textContent(), "failing");
  assert.match(await instance("globex").locator("td:nth-child(6)").textContent(), /^failed/);
  assert.match(await instance("initech").locator("td:nth-child(6)").textContent(), /^(succeeded|running)/);
  assert.doesNotMatch(await instance("globex").textContent(), /from the config/, "made at run time");
  await shoot("task-instance-failing");

  // Filtered by key (kept in the address): the failing instance alone.
  await page.locator("#instance-filter").fill("glob");
  await page.locator("#instance-filter").press("Enter");
  await eventually("only globex", async () =>
    (await page.locator("#instances tr[data-instance]").evaluateAll((rows) => rows.map((r) => `${r.dataset.instance}:${r.dataset.state}`))).join(" ") === "globex:failing");
  assert.match(page.url(), /[?&]key=glob(&|$)/);
  // Its failed runs: its key opens its runs, the status filter keeps the failed ones, each with its error.
  await instance("globex").locator("td.instance-key a").click();
  await page.locator("#run-status-filter").selectOption("failed");
  await eventually("globex's failed runs", async () => {
    const runs = await page.locator("table.runs tr[data-run]").evaluateAll((rows) =>
      rows.map((r) => `${r.dataset.status}|${r.querySelector("td.instance-key")?.textContent}|${r.querySelector("td.error")?.textContent}`));
    return runs.length > 0 && runs.every((r) => /^failed\|globex\|.*access key .* revoked/.test(r));
  });
  assert.match(page.url(), /runkey=globex/);
  assert.match(page.url(), /status=failed/);
  assert.deepEqual(problems, []);
});

test("on the overview, a task run only through its instances says how many, the latest run among them and when, and links to its page", async () => {
  // demo.advertisers (instances made from Rust) and demo.tenants (declared in the config) never
  // run themselves: their instances run every few seconds.
  await page.goto(`${base}/#/`);
  for (const name of ["demo.advertisers", "demo.tenants"]) {
    await row(name).waitFor();
    const latest = row(name).locator("td.last-result .instance-latest");
    let words = null;
    await eventually(`${name}'s latest instance run`, async () => {
      words = (await latest.textContent({ timeout: 1000 })).trim();
      return true;
    });
    const keys = name === "demo.tenants" ? "tenant-1|tenant-2|acme" : "adv-101|adv-102|brand-7";
    assert.match(words, new RegExp(`^(succeeded|running) (now|\\d+ s ago) · instance (${keys})$`), name);
    assert.doesNotMatch(await row(name).textContent(), /never ran/, name);
    assert.match(await row(name).locator(".instance-count").textContent(), /^3 instances\b/, name);
    // Its next run is its instances' next (seconds away), not its own yearly tick.
    assert.match(await row(name).locator(".next-run").textContent(), /^(due now|now|in \d+ s)its instances' next tick, /, name);
    assert.equal(await row(name).locator(".instance-count a").getAttribute("href"), `#/task/${name}`);
  }
  await shoot("overview-instances");
  await row("demo.advertisers").locator(".instance-count a").click();
  await page.waitForSelector("#instances tr[data-instance]");
  assert.equal(new URL(page.url()).hash, "#/task/demo.advertisers");
  assert.deepEqual(problems, []);
});

test("a tick waiting for a shared limit: an hourglass naming the limit, its size and its holder", async () => {
  // demo.warehouse_load holds warehouse-db (a limit of 1) for 8 s every 10 s; demo.warehouse_report
  // shares it, so its ticks wait most of the time. Read while one waits, whenever that is.
  await page.goto(`${base}/#/`);
  await row("demo.warehouse_report").waitFor();
  const waiting = marks("demo.warehouse_report", "waiting");
  let title = null;
  let glyph = null;
  let label = null;
  await eventually("a waiting tick on demo.warehouse_report's strip", async () => {
    glyph = await waiting.last().getAttribute("data-glyph", { timeout: 1000 });
    title = await waiting.last().locator("title").textContent({ timeout: 1000 });
    label = await row("demo.warehouse_report").getByRole("img", { name: /recent ticks/ }).getAttribute("aria-label", { timeout: 1000 });
    return true;
  });
  assert.equal(glyph, "hourglass");
  // Its tooltip (the mark's accessible name): waiting, for which limit, how full, held by whom.
  assert.match(title, /waiting for its limit · limit warehouse-db \(1 of 1 held: demo\.warehouse_load on dashboard-demo\) since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  assert.match(label, /\d+ waiting for its limit/);
  // Its row says what it waits for, not only how late it is.
  let next = null;
  await eventually("demo.warehouse_report's row names its limit", async () => {
    next = await row("demo.warehouse_report").locator(".next-run").textContent({ timeout: 1000 });
    return /^waits for its limit/.test(next);
  });
  assert.match(next, /^waits for its limit warehouse-db1 of 1 held: demo\.warehouse_load on dashboard-demo; its tick was due (now|\d+ s ago)$/);
  await shoot("overview-waiting");

  // The task's page says it in words, with the holder; the holder's page says it holds it.
  await page.goto(`${base}/#/task/demo.warehouse_report`);
  const notice = page.locator(".task-head").getByText(/is waiting for limit warehouse-db/);
  let words = null;
  await eventually("the waiting notice", async () => {
    words = await notice.first().textContent({ timeout: 1000 });
    return true;
  });
  // Since a time, then how long ago (not "since 7 s ago").
  assert.match(words, /^demo\.warehouse_report is waiting for limit warehouse-db \(1 of 1 held: demo\.warehouse_load on dashboard-demo\) since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|\d+ s ago)\)/);
  await eventually("an hourglass on the task's own strip", async () =>
    (await page.locator('.card .strip .mark[data-outcome="waiting"][data-glyph="hourglass"]').count()) >= 1);
  await shoot("task-waiting");
  await page.goto(`${base}/#/task/demo.warehouse_load`);
  await eventually("the holder's share", async () =>
    (await page.locator(".task-head").getByText("Holds 1 share of limit warehouse-db (1 of 1 held).", { exact: true }).count()) === 1);
  assert.deepEqual(problems, []);
});

test("recent failed runs of every task, on one page", async () => {
  await page.goto(`${base}/#/failures`);
  await page.waitForSelector("#failures table.runs tr[data-run]");
  const rows = await page.locator("#failures tr[data-run]").evaluateAll((trs) => trs.map((r) => ({ status: r.dataset.status, text: r.textContent })));
  assert.ok(rows.every((r) => ["failed", "timed_out", "lost"].includes(r.status)), JSON.stringify(rows.map((r) => r.status)));
  for (const name of ["demo.broken", "demo.flaky", "demo.times_out"]) {
    assert.ok(rows.some((r) => r.text.includes(name)), `${name} among the failed runs`);
  }
  const ids = await page.locator("#failures tr[data-run]").evaluateAll((trs) => trs.map((r) => Number(r.dataset.run)));
  assert.deepEqual(ids, [...ids].sort((a, b) => b - a), "newest first");
  await shoot("failures");
});

test("nodes, the last reconcile with its refusal, and the audit trail", async () => {
  await page.goto(`${base}/#/cluster`);
  await page.waitForSelector("#nodes tr[data-node]");
  assert.match(await page.locator("#nodes").textContent(), /this node/);
  assert.match(await page.locator("#reconcile").textContent(), /demo\.retired/);
  assert.match(await page.locator("#reconcile").textContent(), /no task with this name is registered/);
  await shoot("cluster");
});

test("with the token: trigger a task and see its run; pause one and see its ticks skipped and no next fire time; cancel a running run", async () => {
  await page.goto(`${base}/#/task/demo.on_demand`);
  // A wrong token is refused, even for reads, and the page says what to do.
  await page.locator("#enter-token").click();
  await page.locator("#token-input").fill("not-the-token-0123456789");
  await page.locator("#dialog-confirm").click();
  await eventually("the refusal", async () => /wrong admin token/.test(await page.locator("#refused").textContent()));
  await page.locator("#access button", { hasText: "forget token" }).click();
  await page.locator("#enter-token").click();
  await page.locator("#token-input").fill(token);
  await page.locator("#dialog-confirm").click();
  await eventually("actions enabled", async () => (await page.locator("#access-state").textContent()) === "actions enabled");

  await page.locator("#trigger").click();
  await page.locator("#dialog-confirm").click();
  await eventually("the manual run appears", async () =>
    (await page.locator('table.runs tr[data-trigger="manual"][data-status="succeeded"]').count()) === 1);
  await shoot("task-triggered");

  await page.goto(`${base}/#/task/demo.succeeds`);
  await page.locator("#pause").click();
  await page.locator("#pause-reason").fill("checking the partner's report by hand");
  await shoot("pause-dialog");
  await page.locator("#dialog-confirm").click();
  await eventually("paused", async () => (await page.locator("#task-state").textContent()) === "paused");
  assert.match(await page.locator("#pause-notice").textContent(), /checking the partner's report by hand/);
  // Paused until resumed: no next fire time is listed, and the next run says so.
  assert.match(await page.locator("#no-next-times").textContent(), /None while paused/);
  assert.equal(await page.locator("ol.times li").count(), 0);
  assert.match(await page.locator("#next-run").textContent(), /none while paused/);

  await page.goto(`${base}/#/`);
  await eventually("paused ticks in the strip", async () => (await marks("demo.succeeds", "skipped", "paused").count()) >= 2);
  assert.equal(await row("demo.succeeds").getAttribute("data-state"), "paused");
  assert.match(await row("demo.succeeds").locator(".next-run").textContent(), /none while paused/);
  assert.ok(Number(await page.locator("#health [data-count=paused] strong").textContent()) >= 1);
  await shoot("overview-paused");

  await page.goto(`${base}/#/task/demo.succeeds`);
  await page.locator("#resume").click();
  await page.locator("#dialog-confirm").click();
  await eventually("resumed", async () => (await page.locator("#task-state").textContent()) !== "paused");
  await page.waitForSelector("ol.times li");
  // The skipped ticks are now recorded by the store, and still shown so.
  await eventually("the recorded skips", async () => /skipped \(paused\)/.test(await page.locator("#tick-summary").textContent()));

  // Cancel a running run from the task's run list: confirmed, then recorded `cancelled` by
  // whoever holds the token (demo.slow runs 5 s every 2 s, and honours ctx.cancelled()).
  // The run chosen may end on its own before the confirmation reaches the node (a loaded
  // machine): the node answers that it is not running, and the test takes the next one. It may
  // end even before the click (a refresh takes its button away): the test takes the next one.
  await page.goto(`${base}/#/task/demo.slow`);
  const cancel = page.locator('table.runs tr[data-status="running"] button[data-cancel]').first();
  let cancelled = null;
  for (let attempt = 0; attempt < 5 && !cancelled; attempt += 1) {
    await eventually("a running run with a cancel button", async () => (await cancel.count()) === 1);
    const id = await cancel.getAttribute("data-cancel");
    // By its id: the list moves as runs start.
    const clicked = await page.locator(`button[data-cancel="${id}"]`).click({ timeout: 2000 }).then(() => true, () => false);
    if (!clicked) continue;
    assert.match(await page.locator("#dialog h2").textContent(), new RegExp(`Cancel run #${id}`));
    if (attempt === 0) await shoot("cancel-dialog");
    await page.locator("#dialog-confirm").click();
    const row = page.locator(`table.runs tr[data-run="${id}"]`);
    let ended = false;
    await eventually("the run recorded cancelled, or the node saying it had ended", async () => {
      if ((await row.getAttribute("data-status")) === "cancelled") return true;
      const failed = await page.locator("dialog[open] p.bad:not(.error-line)").textContent().catch(() => null);
      if (failed) {
        assert.match(failed, /not running|already|ended/i, "the only failure expected");
        await page.locator("#dialog-confirm").click();
        ended = true;
        return true;
      }
      return false;
    });
    if (!ended) cancelled = row;
  }
  assert.ok(cancelled, "a run was cancelled");
  assert.match(await cancelled.textContent(), /cancelled by dashboard/);
  assert.equal(await cancelled.locator("button[data-cancel]").count(), 0, "an ended run offers no cancel");
  await shoot("task-cancelled");

  await page.goto(`${base}/#/audit`);
  await page.waitForSelector("#audit tr[data-action]");
  for (const action of ["trigger", "pause", "resume", "cancel"]) {
    assert.equal(await page.locator(`#audit tr[data-action=${action}]`).count(), 1, action);
  }
  await shoot("audit");
  assert.deepEqual(problems, []);
});

test("with the token: snooze a task's alerts with a reason and lift it; backfill a range after its dry run", async () => {
  // demo.broken fails every tick: its incident is open, and its alerts are what an operator
  // snoozes while the feed is being fixed. The token is still in this tab's session if the
  // test before ran.
  await page.goto(`${base}/#/task/demo.broken`);
  await page.waitForSelector("#access-state");
  if ((await page.locator("#access-state").textContent()) !== "actions enabled") {
    await page.locator("#enter-token").click();
    await page.locator("#token-input").fill(token);
    await page.locator("#dialog-confirm").click();
  }
  await eventually("actions enabled", async () => (await page.locator("#access-state").textContent()) === "actions enabled");
  const reason = "the rate feed's certificate is being renewed";
  await page.locator("#snooze").click();
  assert.match(await page.locator("#dialog h2").textContent(), /Snooze the alerts of demo\.broken/);
  assert.match(await page.locator("#dialog").textContent(), /not a pause/);
  await page.locator("#snooze-reason").fill(reason);
  await page.locator("#snooze-for").selectOption("240");
  await shoot("snooze-dialog");
  await page.locator("#dialog-confirm").click();
  await eventually("the snooze notice", async () => (await page.locator("#snooze-notice").textContent()).includes(reason));
  assert.match(await page.locator("#snooze-notice").textContent(), /Alerts snoozed by dashboard \(admin-token\) until .*\(the task keeps running\)/);
  assert.equal(await page.locator("#unsnooze").count(), 1, "the snooze can be lifted");
  assert.notEqual(await page.locator("#task-state").textContent(), "paused", "a snooze is not a pause");
  // The API holds it: the reason, and an end 4 hours from when it was asked for.
  const snooze = (await api("/api/snoozes")).snoozes.find((x) => x.task === "demo.broken");
  assert.ok(snooze, "the snooze is listed by /api/snoozes");
  assert.equal(snooze.reason, reason);
  const hours = (Date.parse(snooze.until) - Date.now()) / 3600000;
  assert.ok(hours > 3.5 && hours <= 4.01, `until ${snooze.until}`);
  assert.equal((await taskState("demo.broken")).pause ?? null, null, "the task is not paused");
  // The open alerts name the snooze beside the task's incident.
  await page.goto(`${base}/#/`);
  await eventually("the incident says it is snoozed", async () =>
    (await page.locator("#incidents li[data-alert=incident]", { hasText: "demo.broken" }).first().textContent()).includes(`snoozed until`));
  await shoot("overview-snoozed");

  await page.goto(`${base}/#/task/demo.broken`);
  await page.locator("#unsnooze").click();
  assert.match(await page.locator("#dialog h2").textContent(), /Lift the snooze of demo\.broken/);
  await page.locator("#dialog-confirm").click();
  await eventually("the snooze lifted", async () => (await page.locator("#snooze-notice").count()) === 0 && (await page.locator("#snooze").count()) === 1);
  assert.equal((await api("/api/snoozes")).snoozes.find((x) => x.task === "demo.broken"), undefined, "no snooze listed");

  // Backfill demo.nightly (03:00 UTC) over two past days: the dry run lists its two ticks, the
  // confirmed backfill runs them with trigger backfill.
  const day = (ago) => new Date(Date.now() - ago * 86400000).toISOString().slice(0, 10);
  await page.goto(`${base}/#/task/demo.nightly`);
  await page.locator("#backfill").click();
  await page.locator("#backfill-from").fill(day(3));
  await page.locator("#backfill-to").fill(day(1));
  await page.locator("#dialog-confirm").click();
  await eventually("the dry run", async () => /Backfill 2 ticks of demo\.nightly/.test(await page.locator("#dialog h2").textContent()));
  assert.equal(await page.locator("#backfill-ticks li").count(), 2);
  await shoot("backfill-dry-run");
  await page.locator("#dialog-confirm").click();
  await eventually("the backfill recorded", async () => /Backfill #\d+ recorded/.test(await page.locator("#dialog h2").textContent()));
  await page.locator("#dialog-confirm").click();
  await eventually("both backfilled ticks ran", async () => {
    const [b] = await api("/api/backfills?task=demo.nightly&limit=1");
    return b?.progress.total === 2 && b.progress.succeeded === 2;
  }, 90);
  await eventually("the backfilled runs listed", async () =>
    (await page.locator('table.runs tr[data-trigger="backfill"][data-status="succeeded"]').count()) === 2);

  await page.goto(`${base}/#/audit`);
  await page.waitForSelector("#audit tr[data-action]");
  for (const action of ["snooze", "unsnooze", "backfill"]) {
    assert.equal(await page.locator(`#audit tr[data-action=${action}]`).count(), 1, action);
  }
  assert.deepEqual(problems, []);
});

test("the strip and its legend read without colour: every state has its own shape", async () => {
  await page.goto(`${base}/#/`);
  await row("demo.broken").waitFor();
  const legend = await page.locator("#legend .legend-item").evaluateAll((items) => items.map((li) => {
    // A glyph's geometry, its colour left out: what is left must tell every state apart.
    const g = li.querySelector("svg g");
    const shape = [...g.children].map((el) => [el.tagName, ...["x", "y", "width", "height", "d", "cx", "cy", "r"].map((a) => el.getAttribute(a)),
      getComputedStyle(el).fill === "none" ? "hollow" : "filled"].join(" ")).join("|");
    return { state: li.dataset.state, shape, text: li.textContent };
  }));
  const states = legend.map((l) => l.state);
  for (const s of ["succeeded", "running", "failed", "timed_out", "interrupted", "lost", "missed", "cancelled", "due", "waiting",
    "skipped:overlap", "skipped:misfire", "skipped:paused", "skipped:disabled", "skipped:retry_gave_way", "skipped:invalid_schedule", "manual"]) {
    assert.ok(states.includes(s), `${s} is in the legend`);
  }
  const shapes = new Map();
  for (const l of legend) {
    assert.ok(!shapes.has(l.shape), `${l.state} has the same shape as ${shapes.get(l.shape)}`);
    shapes.set(l.shape, l.state);
  }
  // What a mark's height means is said, and its tooltip has the duration.
  assert.match(await page.locator("#legend .legend-how").textContent(), /how long it took/);
  const title = await marks("demo.succeeds", "succeeded").last().locator("title").textContent();
  assert.match(title, /took \d+(\.\d+)? (ms|s)/);
  // The strip in every marks' own row: a mark of each task's strip is drawn on the right side
  // of the line (above for done, below for failed).
  const ys = await page.evaluate(() => {
    const y = (sel) => document.querySelector(`#tasks ${sel} :is(rect,path):not(.hit)`)?.getBBox().y;
    return { ok: y('.mark[data-outcome="succeeded"]'), bad: y('.mark[data-outcome="failed"]') };
  });
  assert.ok(ys.ok < 14 && ys.bad > 14, JSON.stringify(ys));
  const cdp = await context.newCDPSession(page);
  for (const type of ["achromatopsia", "deuteranopia", "protanopia"]) {
    await cdp.send("Emulation.setEmulatedVisionDeficiency", { type });
    await page.locator("#legend").scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${shots}/vision-${type}.png`, fullPage: true });
  }
  await cdp.send("Emulation.setEmulatedVisionDeficiency", { type: "none" });
  await cdp.detach();
});

test("runs page past the latest 50", async () => {
  // demo.succeeds runs every 2 s: wait until it has more than one page of runs.
  await eventually("more than 50 runs", async () => (await api("/api/runs?task=demo.succeeds&limit=51")).runs.length === 51, 150);
  await page.goto(`${base}/#/task/demo.succeeds`);
  await page.waitForSelector("table.runs tr[data-run]");
  await eventually("a link to older runs", async () => (await page.locator("#older-runs").count()) === 1);
  assert.equal(await page.locator("table.runs tr[data-run]").count(), 50);
  // The link names the last run of the page it was drawn with (the page moves on as runs come).
  const cursor = Number(new URLSearchParams((await page.locator("#older-runs").getAttribute("href")).split("?")[1]).get("before"));
  await page.locator("#older-runs").click();
  assert.match(page.url(), new RegExp(`before=${cursor}$`));
  await eventually("the older page", async () => {
    const ids = await page.locator("table.runs tr[data-run]").evaluateAll((rows) => rows.map((r) => Number(r.dataset.run)));
    return ids.length > 0 && ids.every((i) => i < cursor);
  });
  assert.match(await page.locator("#runs h2").textContent(), new RegExp(`older than #${cursor}`));
  assert.equal(await page.locator("#newest-runs").count(), 1);
  await shoot("task-older-runs");
});

test("a node that stops answering: the page greys and says since when, in a named zone; live again when it answers", async () => {
  await page.goto(`${base}/#/`);
  await row("demo.broken").waitFor();
  await refreshes(1);
  process.kill(nodePid, "SIGSTOP");
  try {
    await eventually("the page says it is not live", async () => (await page.locator("body").getAttribute("data-stale")) === "true", 60);
    const note = await page.locator("#stale").textContent();
    assert.match(note, new RegExp(`as of \\d\\d:\\d\\d:\\d\\d ${ZONE}`));
    assert.match(note, /did not answer within 10 s|does not answer/);
    assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector("main")).filter), "grayscale(1)");
    await shoot("node-stopped");
  } finally {
    process.kill(nodePid, "SIGCONT");
  }
  await eventually("live again", async () => (await page.locator("body").getAttribute("data-stale")) === null, 60);
  assert.match(await page.locator("#updated").textContent(), new RegExp(`updated \\d\\d:\\d\\d:\\d\\d ${ZONE}`));
});

test("dark mode", async () => {
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto(`${base}/#/`);
  await page.waitForSelector("body[data-loaded=true]");
  await row("demo.succeeds").waitFor();
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, "rgb(17, 20, 24)");
  await shoot("overview-dark");
  await page.goto(`${base}/#/task/demo.flaky`);
  await page.waitForSelector("table.runs tr[data-run]");
  await shoot("task-dark");
  await page.goto(`${base}/#/task/demo.advertisers`);
  await page.waitForSelector("#instances tr[data-instance]");
  await shoot("task-runtime-instances-dark");
  await page.goto(`${base}/#/task/demo.warehouse_report`);
  await page.waitForSelector("[data-limit-waiting=warehouse-db]");
  await shoot("task-waiting-dark");
  await page.emulateMedia({ colorScheme: "light" });
  assert.deepEqual(problems, []);
});

/**
 * A table stacked on a phone (one card per row, each cell's column name beside its value): in a
 * row every value starts at one x, and no line of a value (a zone under a cron, "2 s ago" under a
 * time, a wrapped error) starts left of it, under the column's name, where it reads as part of
 * the name.
 * A name wider than its place pushes its value right: such a cell is left out.
 */
function stackedMisalignments(p) {
  return p.evaluate(() => {
    const measure = document.createElement("canvas").getContext("2d");
    // Where a part starts: an inline element's box (a badge's border), a block's or a text's first
    // character.
    const rangeOf = (node) => {
      const range = document.createRange();
      range.selectNodeContents(node);
      return range;
    };
    const left = (node) => (node.nodeType === 1 && getComputedStyle(node).display !== "block" ? node : rangeOf(node)).getClientRects()[0]?.left ?? null;
    const out = [];
    for (const tr of document.querySelectorAll("table.stack tbody tr")) {
      let x = null;
      for (const td of tr.querySelectorAll(":scope > td[data-label]")) {
        if (td.classList.contains("strip-cell")) continue;
        const name = getComputedStyle(td, "::before");
        measure.font = `${name.fontWeight} ${name.fontSize} ${name.fontFamily}`;
        if (measure.measureText(td.dataset.label).width > parseFloat(name.minWidth)) continue;
        const parts = [...td.childNodes].filter((n) => (n.nodeType === 1 ? n.getClientRects().length > 0 : n.textContent.trim() !== ""));
        if (parts.length === 0 || left(parts[0]) === null) continue;
        const where = `${tr.closest("table").id || tr.closest("table").className} "${td.dataset.label}"`;
        const first = left(parts[0]);
        x ??= first;
        if (Math.abs(first - x) > 1.5) out.push(`${where}: value at ${Math.round(first)}, the row's others at ${Math.round(x)}`);
        // No line of it (a wrapped error, a second line) starts left of where its value starts.
        for (const n of parts) {
          const lines = n.nodeType === 1 && getComputedStyle(n).display !== "block" ? n.getClientRects() : rangeOf(n).getClientRects();
          for (const line of lines) {
            if (line.width > 0 && line.left < first - 1.5) {
              out.push(`${where}: a line of "${n.textContent.slice(0, 40)}" at ${Math.round(line.left)}, left of its value at ${Math.round(first)}`);
            }
          }
        }
      }
    }
    return [...new Set(out)].slice(0, 8);
  });
}

test("at 390 px (a phone) every page fits the screen: no element is wider than the viewport", async () => {
  const phone = await newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const p = watch(await phone.newPage());
  await p.goto(`${base}/`);
  await p.evaluate((t) => sessionStorage.setItem("scheduler.adminToken", t), token);
  const pages = [
    ["overview", "#/", "#tasks tr[data-task]"],
    ["task", "#/task/demo.flaky", "table.runs tr[data-run]"],
    ["task-paused-monthly", "#/task/demo.monthly", "ol.times li"],
    ["task-instances", "#/task/demo.tenants", "#instances tr[data-instance]"],
    ["task-runtime-instances", "#/task/demo.advertisers", "#instances tr[data-instance]"],
    ["task-waiting", "#/task/demo.warehouse_report", "[data-limit-waiting=warehouse-db]"],
    ["failures", "#/failures", "#failures tr[data-run]"],
    ["cluster", "#/cluster", "#nodes tr[data-node]"],
    ["audit", "#/audit", "#audit tr[data-action]"],
  ];
  for (const [name, hash, ready] of pages) {
    await p.goto(`${base}/${hash}`);
    await p.waitForSelector(ready);
    await p.waitForSelector("body[data-loaded=true]");
    if (name === "task") {
      await p.locator('table.runs tr[data-status="failed"] button', { hasText: "log" }).first().click();
      await p.waitForSelector("pre.log");
    }
    const wide = await p.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const out = [];
      for (const el of document.querySelectorAll("body *")) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.right > width + 0.5 || r.left < -0.5) {
          out.push(`${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ""}${[...el.classList].map((c) => `.${c}`).join("")} ${Math.round(r.left)}..${Math.round(r.right)}`);
        }
      }
      return { width, scroll: document.documentElement.scrollWidth, out: out.slice(0, 8) };
    });
    assert.equal(wide.width, 390, name);
    assert.ok(wide.scroll <= wide.width && wide.out.length === 0, `${name} at 390 px: ${JSON.stringify(wide)}`);
    assert.deepEqual(await stackedMisalignments(p), [], `${name} at 390 px: a table's values line up beside their names`);
    await shoot(`phone-${name}`, p);
    // What the phone shows first, without scrolling.
    await p.screenshot({ path: `${shots}/phone-${name}-screen.png` });
  }
  // The token button is on screen (it was off-screen at 597 px of header).
  const access = await p.locator("#access").boundingBox();
  assert.ok(access.x >= 0 && access.x + access.width <= 390, JSON.stringify(access));
  await phone.close();
  assert.deepEqual(problems, []);
});
