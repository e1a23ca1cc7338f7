// How instants, durations and outcomes read.

export function relative(iso, now = Date.now()) {
  if (!iso) return "—";
  const d = (Date.parse(iso) - now) / 1000;
  const a = Math.abs(d);
  const text = a < 1 ? "now" : a < 90 ? `${Math.round(a)} s` : a < 5400 ? `${Math.round(a / 60)} min`
    : a < 129600 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} days`;
  if (text === "now") return text;
  return d > 0 ? `in ${text}` : `${text} ago`;
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

/** An instant as wall time in `zone`, e.g. `2026-03-08 03:00:00 EDT`. */
export function inZone(iso, zone = "UTC") {
  if (!iso) return "—";
  const parts = Object.fromEntries(formatter(zone).formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName ?? ""}`.trim();
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

export function runSeconds(run, now = Date.now()) {
  if (!run.started_at) return null; // never started (handed over or cancelled before its tick)
  const end = run.finished_at ? Date.parse(run.finished_at) : now;
  return Math.max(0, (end - Date.parse(run.started_at)) / 1000);
}

/** The words of an outcome (a tick's, a run's). */
export function outcomeText(outcome, reason) {
  const words = {
    succeeded: "succeeded", failed: "failed", timed_out: "timed out", interrupted: "interrupted",
    lost: "lost", cancelled: "cancelled", running: "running", missed: "missed", due: "due",
    skipped: "skipped",
  };
  const w = words[outcome] ?? outcome;
  return reason ? `${w} (${reason.replaceAll("_", " ")})` : w;
}

/** The CSS class of an outcome. */
export function outcomeClass(outcome, reason) {
  return outcome === "skipped" ? `o-skipped r-${reason ?? "other"}` : `o-${outcome ?? "none"}`;
}
