// How instants, durations and outcomes read. Relative times count from the node's clock (the
// offset learnt from its answers), so a browser whose clock is off does not shift them.

let skew = 0;

/** Learns the node's clock from an instant it just reported as its now. */
export function learnClock(iso) {
  if (iso) skew = Date.parse(iso) - Date.now();
}

/** The node's now, as best known. */
export function nodeNow() {
  return Date.now() + skew;
}

/** A span of seconds in words: `4 s`, `3 min`, `5 h`, `12 days`, `4 months`, `11 years`. */
export function span(seconds) {
  const a = Math.abs(seconds);
  if (a < 90) return `${Math.round(a)} s`;
  if (a < 5400) return `${Math.round(a / 60)} min`;
  if (a < 129600) return `${Math.round(a / 3600)} h`;
  if (a < 45 * 86400) return `${Math.round(a / 86400)} days`;
  if (a < 548 * 86400) return `${Math.round(a / (30.44 * 86400))} months`;
  const years = a / (365.25 * 86400);
  return `${years < 10 ? years.toFixed(1) : Math.round(years)} years`;
}

export function relative(iso, now = nodeNow()) {
  if (!iso) return "—";
  const d = (Date.parse(iso) - now) / 1000;
  if (Math.abs(d) < 1) return "now";
  return d > 0 ? `in ${span(d)}` : `${span(d)} ago`;
}

const formats = new Map();
function formatter(zone) {
  let f = formats.get(zone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat("en-CA", {
        timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
      });
    } catch {
      f = formatter("UTC");
    }
    formats.set(zone, f);
  }
  return f;
}

function parts(iso, zone) {
  return Object.fromEntries(formatter(zone).formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
}

/** An instant as wall time in `zone`, e.g. `2026-03-08 03:00:00 EDT`. */
export function inZone(iso, zone = "UTC") {
  if (!iso) return "—";
  const p = parts(iso, zone);
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName ?? ""}`.trim();
}

/** The browser's zone, by its IANA name (what the page's clock times are in). */
export function browserZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
}

/** A time of day in the browser's zone, named: `11:32:04 Europe/Paris`. */
export function clock(ms) {
  const zone = browserZone();
  const p = parts(new Date(ms).toISOString(), zone);
  return `${p.hour}:${p.minute}:${p.second} ${zone}`;
}

const offsets = new Map();
/** The zone's UTC offset at an instant, e.g. `GMT-05:00`. */
export function offset(iso, zone = "UTC") {
  let f = offsets.get(zone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" });
    } catch {
      f = new Intl.DateTimeFormat("en-US", { timeZone: "UTC", timeZoneName: "longOffset" });
    }
    offsets.set(zone, f);
  }
  return f.formatToParts(new Date(iso)).find((p) => p.type === "timeZoneName")?.value ?? "";
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function runSeconds(run, now = nodeNow()) {
  if (!run.started_at) return null; // never started (handed over or cancelled before its tick)
  const end = run.finished_at ? Date.parse(run.finished_at) : now;
  return Math.max(0, (end - Date.parse(run.started_at)) / 1000);
}

/** The words of an outcome (a tick's, a run's). */
export function outcomeText(outcome, reason) {
  const words = {
    succeeded: "succeeded", failed: "failed", timed_out: "timed out", interrupted: "interrupted",
    lost: "lost", cancelled: "cancelled", running: "running", missed: "missed", due: "due",
    waiting: "waiting for its limit", skipped: "skipped",
  };
  const w = words[outcome] ?? outcome;
  return reason ? `${w} (${reason.replaceAll("_", " ")})` : w;
}

/** The CSS class of an outcome. */
export function outcomeClass(outcome, reason) {
  return outcome === "skipped" ? `o-skipped r-${reason ?? "other"}` : `o-${outcome ?? "none"}`;
}

/** Run statuses that mean the work did not get done. */
export const FAILED = ["failed", "timed_out", "lost"];

/**
 * The task of a row named in an alert, and its instance's key: an instance's row `task/key`
 * (or its shard's `task/key[i]`) is `{task, key}`; a shard's or a node's row (`task[i]`,
 * `task[@node]`) and a task's own are `{task, key: null}` (as the node's `shard::split_row`).
 */
export function splitRow(row) {
  const slash = row.indexOf("/");
  const key = slash > 0 ? row.slice(slash + 1).split("[")[0] : "";
  if (key) return { task: row.slice(0, slash), key };
  const bracket = row.indexOf("[");
  return { task: bracket > 0 ? row.slice(0, bracket) : row, key: null };
}

/** The page of a row named in an alert: its task's, filtered to its instance if it is one's. */
export function rowHash(row) {
  const { task, key } = splitRow(row);
  return `#/task/${encodeURIComponent(task)}${key ? `?key=${encodeURIComponent(key)}` : ""}`;
}
