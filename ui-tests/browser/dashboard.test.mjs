// The dashboard in headless Chromium (Debian's package, driven by playwright-core: no browser
// download) against a real node: the dashboard_demo example, started by scripts/dashboard-test,
// which passes DASHBOARD_URL, DASHBOARD_TOKEN and SCREENSHOTS.
//
// It checks what the page shows (every task, strips with succeeded, failed, timed-out and
// skipped ticks, the refused config entry, DST changes in the next fire times, read-only without
// the token), then with the token triggers a task and sees its run appear, pauses one and sees
// its ticks skipped (`paused`), resumes it, cancels a running run and sees it recorded
// `cancelled`, and finds each action in the audit trail. Screenshots of
// each page, light and dark, go to SCREENSHOTS for review.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const base = process.env.DASHBOARD_URL;
const token = process.env.DASHBOARD_TOKEN;
const shots = process.env.SCREENSHOTS ?? "../../target/dashboard-screenshots";
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
assert.ok(base && token, "run through scripts/dashboard-test (DASHBOARD_URL and DASHBOARD_TOKEN)");

let browser;
let context;
let page;
const problems = [];

before(async () => {
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  // Anything the page tries to load from elsewhere fails the test.
  await context.route((url) => !url.href.startsWith(base), (route) => {
    problems.push(`request to ${route.request().url()}`);
    return route.abort();
  });
  page = await context.newPage();
  // The browser logs failed requests as errors: the wrong-token step makes some on purpose.
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of 401/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
});

after(async () => {
  await browser?.close();
});

const row = (name) => page.locator(`#tasks tr[data-task="${name}"]`);
const marks = (name, outcome, reason) =>
  row(name).locator(`rect.mark[data-outcome="${outcome}"]${reason ? `[data-reason="${reason}"]` : ""}`);

async function eventually(what, check, seconds = 45) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if (await check()) return;
    } catch { /* not there yet */ }
    assert.ok(Date.now() < deadline, `timed out waiting for: ${what}`);
    await page.waitForTimeout(250);
  }
}

async function shoot(name) {
  // A full-page shot of a scrolled page draws the sticky header where the view was.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
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

test("the overview shows every task, read-only, with strips of what became of each tick", async () => {
  await page.goto(`${base}/#/`);
  for (const name of ["demo.succeeds", "demo.flaky", "demo.slow", "demo.times_out", "demo.on_demand", "demo.monthly"]) {
    await row(name).waitFor();
  }
  assert.equal(await page.locator("#access-state").textContent(), "read-only");
  await eventually("succeeded, failed, timed-out and overlap-skipped ticks", async () =>
    (await marks("demo.succeeds", "succeeded").count()) >= 3
    && (await marks("demo.flaky", "failed").count()) >= 1
    && (await marks("demo.times_out", "timed_out").count()) >= 1
    && (await marks("demo.slow", "skipped", "overlap").count()) >= 1);
  assert.match(await row("demo.monthly").textContent(), /America\/New_York/);
  assert.match(await row("demo.succeeds").locator("td").nth(2).textContent(), /every 2 seconds/);
  await shoot("overview-light");

  // The filter lives in the URL: a reload keeps it.
  await page.locator("select[name=state]").selectOption("failing");
  assert.match(page.url(), /state=failing/);
  await page.reload();
  await page.waitForSelector("body[data-loaded=true]");
  await eventually("only failing tasks", async () => (await row("demo.succeeds").count()) === 0 && (await row("demo.flaky").count()) === 1);
  assert.equal(await page.locator("select[name=state]").inputValue(), "failing");
  await page.goto(`${base}/#/?q=slow`);
  await eventually("filtered by name", async () => (await page.locator("#tasks tr[data-task]").count()) === 1);
});

test("the task page shows runs, logs, charts, next fire times with DST marked, config and policies", async () => {
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
  await shoot("task-flaky");

  await page.goto(`${base}/#/task/demo.monthly`);
  await page.waitForSelector("ol.times li");
  assert.ok(await page.locator("ol.times li.dst").count() >= 1, "a DST change is marked");
  await shoot("task-monthly-dst");
});

test("nodes, the last reconcile with its refusal, and the audit trail", async () => {
  await page.goto(`${base}/#/cluster`);
  await page.waitForSelector("#nodes tr[data-node]");
  assert.match(await page.locator("#nodes").textContent(), /this node/);
  assert.match(await page.locator("#reconcile").textContent(), /demo\.retired/);
  assert.match(await page.locator("#reconcile").textContent(), /no task with this name is registered/);
  await shoot("cluster");
});

test("with the token: trigger a task and see its run; pause one and see its ticks skipped; cancel a running run", async () => {
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
  await page.locator("#pause-for").selectOption({ label: "1 hour" });
  await shoot("pause-dialog");
  await page.locator("#dialog-confirm").click();
  await eventually("paused", async () => (await page.locator("#task-state").textContent()) === "paused");
  assert.match(await page.locator("#pause-notice").textContent(), /checking the partner's report by hand/);

  await page.goto(`${base}/#/`);
  await eventually("paused ticks in the strip", async () => (await marks("demo.succeeds", "skipped", "paused").count()) >= 2);
  assert.equal(await row("demo.succeeds").getAttribute("data-state"), "paused");
  await shoot("overview-paused");

  await page.goto(`${base}/#/task/demo.succeeds`);
  await page.locator("#resume").click();
  await page.locator("#dialog-confirm").click();
  await eventually("resumed", async () => (await page.locator("#task-state").textContent()) === "enabled");
  // The skipped ticks are now recorded by the store, and still shown so.
  await eventually("the recorded skips", async () => /skipped \(paused\)/.test(await page.locator("#tick-summary").textContent()));

  // Cancel a running run from the task's run list: confirmed, then recorded `cancelled` by
  // whoever holds the token (demo.slow runs 5 s every 2 s, and honours ctx.cancelled()).
  await page.goto(`${base}/#/task/demo.slow`);
  const cancel = page.locator('table.runs tr[data-status="running"] button[data-cancel]').first();
  await eventually("a running run with a cancel button", async () => (await cancel.count()) === 1);
  const id = await cancel.getAttribute("data-cancel");
  await cancel.click();
  assert.match(await page.locator("#dialog h2").textContent(), new RegExp(`Cancel run #${id}`));
  await shoot("cancel-dialog");
  await page.locator("#dialog-confirm").click();
  const cancelled = page.locator(`table.runs tr[data-run="${id}"]`);
  await eventually("the run recorded cancelled", async () => (await cancelled.getAttribute("data-status")) === "cancelled");
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
  assert.deepEqual(problems, []);
});
