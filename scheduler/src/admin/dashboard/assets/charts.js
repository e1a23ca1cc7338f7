// Small inline SVG charts: a task's strip of expected ticks, its legend, and a line over time.
//
// A strip reads without colour: every state has its own shape and place. Above the line, a run
// that did its work (solid) or is doing it (hollow); below the line, a tick that went wrong
// (failed: solid, timed out: broken, interrupted: short, lost: hollow, missed: a cross); on the
// line, a tick with no run of its own (skipped, each reason its own small sign; cancelled: a
// slash; due: a ring; waiting for its limit shared by tasks: an hourglass). A manual run carries a dot on top. Colour (Okabe-Ito's palette, safe for
// the common colour-vision deficiencies) only repeats what the shape says. Marks are all the
// same size: a tick's duration is in its tooltip, not its height.

import { h, s } from "./dom.js";
import { duration, inZone, outcomeText } from "./format.js";

const CELL = 10;
const HEIGHT = 28;
const MID = 14;

/** The glyph of an outcome (and skip reason): its shape's elements, and its name. */
function glyph(outcome, reason, x) {
  const up = (h, cls) => s("rect", { x: x + 1, y: MID - 1 - h, width: 7, height: h, class: cls });
  const down = (h, cls) => s("rect", { x: x + 1, y: MID + 1, width: 7, height: h, class: cls });
  const cx = x + 4.5;
  switch (outcome) {
    case "succeeded": return ["up-solid", [up(11, "g-fill")]];
    case "running": return ["up-hollow", [s("rect", { x: x + 1.75, y: MID - 11.25, width: 5.5, height: 9.5, class: "g-line" })]];
    case "failed": return ["down-solid", [down(11, "g-fill")]];
    case "timed_out": return ["down-broken", [down(4, "g-fill"), s("rect", { x: x + 1, y: MID + 7, width: 7, height: 5, class: "g-fill" })]];
    case "interrupted": return ["down-short", [down(5, "g-fill")]];
    case "lost": return ["down-hollow", [s("rect", { x: x + 1.75, y: MID + 1.75, width: 5.5, height: 9.5, class: "g-line" })]];
    case "missed": return ["down-cross", [s("path", { d: `M${x + 1.5} ${MID + 2.5}l6 8M${x + 7.5} ${MID + 2.5}l-6 8`, class: "g-line thick" })]];
    case "cancelled": return ["slash", [s("path", { d: `M${x + 1.5} ${MID + 5}l6 -10`, class: "g-line thick" })]];
    case "due": return ["ring", [s("circle", { cx, cy: MID, r: 2.6, class: "g-line" })]];
    case "waiting": return ["hourglass", [s("path", { d: `M${x + 1.5} ${MID - 4}h6l-6 8h6z`, class: "g-line" })]];
    case "skipped":
      switch (reason) {
        case "paused": return ["pause-bars", [s("rect", { x: x + 2, y: MID - 3.5, width: 2, height: 7, class: "g-fill" }), s("rect", { x: x + 5, y: MID - 3.5, width: 2, height: 7, class: "g-fill" })]];
        case "overlap": return ["square-hollow", [s("rect", { x: x + 2, y: MID - 2.5, width: 5, height: 5, class: "g-line" })]];
        case "misfire": return ["diamond", [s("path", { d: `M${cx} ${MID - 4}l3.5 4l-3.5 4l-3.5 -4z`, class: "g-fill" })]];
        case "disabled": return ["dash", [s("rect", { x: x + 1, y: MID - 1, width: 7, height: 2, class: "g-fill" })]];
        case "invalid_schedule": return ["triangle", [s("path", { d: `M${cx} ${MID - 4}l4 7h-8z`, class: "g-fill" })]];
        case "retry_gave_way": return ["dot", [s("circle", { cx, cy: MID, r: 2.4, class: "g-fill" })]];
        case "calendar": return ["box-cross", [s("rect", { x: x + 1.5, y: MID - 3, width: 6, height: 6, class: "g-line" }), s("path", { d: `M${x + 1.5} ${MID - 3}l6 6`, class: "g-line" })]];
        default: return ["ring-small", [s("circle", { cx, cy: MID, r: 1.6, class: "g-line" })]];
      }
    default: return ["unknown", [s("circle", { cx, cy: MID, r: 1.6, class: "g-line" })]];
  }
}

function markClass(outcome, reason) {
  return `g g-${outcome}${reason ? ` g-r-${reason}` : ""}`;
}

/**
 * A sharded tick's shards, folded: "97/100 shards done, 2 failed, 3 running". A broadcast's
 * tick counts its nodes: "3/3 nodes ran", "2 of 3 nodes ran, 1 not run" (a node counted at the
 * tick with no run of it by its missed grace).
 */
export function shardWords(sh) {
  if (sh.broadcast) {
    const whole = sh.done === sh.total;
    return [whole ? `${sh.done}/${sh.total} nodes ran` : `${sh.done} of ${sh.total} nodes ran`,
      sh.failed ? `${sh.failed} failed` : null, sh.running ? `${sh.running} running` : null,
      sh.pending ? `${sh.pending} not started` : null, sh.not_run ? `${sh.not_run} not run` : null]
      .filter(Boolean).join(", ");
  }
  return [`${sh.done}/${sh.total} shards done`, sh.failed ? `${sh.failed} failed` : null,
    sh.running ? `${sh.running} running` : null, sh.pending ? `${sh.pending} not started` : null]
    .filter(Boolean).join(", ");
}

/** How full a waited-for limit is, and by whom: "2 of 2 held: syncOrders on node-a, rebuildCubes on node-b". */
export function heldWords(w) {
  const size = w.size === null || w.size === undefined ? "not declared" : `${w.held} of ${w.size} held`;
  const named = w.holders.map((x) => `${x.row} on ${x.node}`);
  if (w.held > named.length) named.push(`${w.held - named.length} more`);
  return `${size}${named.length ? `: ${named.join(", ")}` : ""}`;
}

/**
 * What a waiting tick waits for: "limit warehouse-db (2 of 2 held: syncOrders on node-a,
 * rebuildCubes on node-b) since ...".
 */
function waitWords(w, zone) {
  return `limit ${w.limit} (${heldWords(w)}) since ${inZone(w.since, zone)}`;
}

/** What a tick's tooltip says. */
function tickWords(t, zone) {
  const words = [inZone(t.at, zone), outcomeText(t.outcome, t.reason)];
  if (t.shards) words.push(shardWords(t.shards));
  if (t.waiting) words.push(waitWords(t.waiting, zone));
  if (t.duration_seconds !== null && t.duration_seconds !== undefined) {
    words.push(`${t.outcome === "running" ? "running for" : "took"} ${duration(t.duration_seconds)}`);
  }
  if (t.late_seconds !== null && t.late_seconds !== undefined) words.push(`started ${duration(t.late_seconds)} late`);
  if (t.attempts > 1) words.push(`${t.attempts} attempts`);
  if (t.trigger === "manual") words.push("manual run");
  if (t.trigger === "backfill") words.push("backfill run");
  if (t.run_id) words.push(`run #${t.run_id}`);
  return words.join(" · ");
}

/**
 * A strip of ticks, oldest left, `slots` wide (the newest at the right edge). A sharded tick is
 * one mark (its outcome folded from its shards'); `shardLink(tick)`, if given, makes such a mark
 * a link to its shards.
 */
export function tickStrip(ticks, zone, slots = ticks.length, { shardLink = null } = {}) {
  const width = Math.max(slots, 1) * CELL;
  const svg = s("svg", {
    class: "strip", width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img",
    "aria-label": `${ticks.length} recent ticks: ${summary(ticks)}`,
  }, s("line", { x1: 0, x2: width, y1: MID, y2: MID, class: "baseline" }));
  const offset = (slots - ticks.length) * CELL;
  ticks.forEach((t, i) => {
    const x = offset + i * CELL;
    const [name, shapes] = glyph(t.outcome, t.reason, x);
    const mark = s("g", {
      class: `mark ${markClass(t.outcome, t.reason)}${t.trigger === "manual" ? " manual" : ""}${t.shards ? " sharded" : ""}`,
      "data-outcome": t.outcome, "data-reason": t.reason ?? "", "data-glyph": name, "data-key": t.at,
      "data-shards-done": t.shards?.done, "data-shards-total": t.shards?.total,
    },
    s("title", {}, tickWords(t, zone)),
    // The whole cell answers the pointer, not only the glyph's pixels.
    s("rect", { x, y: 0, width: CELL, height: HEIGHT, class: "hit" }),
    shapes,
    t.trigger === "manual" ? s("circle", { cx: x + 4.5, cy: 1.8, r: 1.6, class: "manual-dot" }) : null);
    svg.append(t.shards && shardLink ? s("a", { href: shardLink(t), class: "shard-link", "data-key": `a-${t.at}` }, mark) : mark);
  });
  return svg;
}

function summary(ticks) {
  const counts = new Map();
  for (const t of ticks) {
    const k = outcomeText(t.outcome, t.reason);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${n} ${k}`).join(", ") || "none";
}

/** Every state a strip can show, in the legend's order. */
export const STATES = [
  ["succeeded"], ["running"], ["failed"], ["timed_out"], ["interrupted"], ["lost"], ["missed"],
  ["cancelled"], ["due"], ["waiting"], ["skipped", "overlap"], ["skipped", "misfire"], ["skipped", "paused"],
  ["skipped", "disabled"], ["skipped", "retry_gave_way"], ["skipped", "invalid_schedule"],
  ["skipped", "calendar"],
];

/** One legend entry's sample glyph. */
export function sample(outcome, reason, manual = false) {
  const [name, shapes] = glyph(outcome, reason, 0);
  return s("svg", { class: "sample", width: CELL, height: HEIGHT, viewBox: `0 0 ${CELL} ${HEIGHT}`, "aria-hidden": "true" },
    s("line", { x1: 0, x2: CELL, y1: MID, y2: MID, class: "baseline" }),
    s("g", { class: `mark ${markClass(outcome, reason)}`, "data-glyph": manual ? "manual-dot" : name },
      manual ? s("circle", { cx: 4.5, cy: 1.8, r: 1.6, class: "manual-dot" }) : shapes));
}

/**
 * A line chart of `points` ({at: ms, value, cls}) with its max labelled; `unit` formats values.
 */
export function lineChart(points, { label, unit = duration, width = 360, height = 90 } = {}) {
  const pad = { l: 46, r: 8, t: 8, b: 16 };
  const svg = s("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  if (points.length === 0) {
    svg.append(s("text", { x: width / 2, y: height / 2, class: "axis", "text-anchor": "middle" }, "no runs yet"));
    return svg;
  }
  const t0 = Math.min(...points.map((p) => p.at));
  const t1 = Math.max(...points.map((p) => p.at));
  const vmax = Math.max(0.001, ...points.map((p) => p.value));
  const x = (t) => pad.l + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (width - pad.l - pad.r);
  const y = (v) => pad.t + (1 - v / vmax) * (height - pad.t - pad.b);
  svg.append(
    s("line", { x1: pad.l, x2: width - pad.r, y1: y(0), y2: y(0), class: "axis-line" }),
    s("line", { x1: pad.l, x2: width - pad.r, y1: y(vmax), y2: y(vmax), class: "grid-line" }),
    s("text", { x: pad.l - 4, y: y(vmax) + 4, class: "axis", "text-anchor": "end" }, unit(vmax)),
    s("text", { x: pad.l - 4, y: y(0) + 4, class: "axis", "text-anchor": "end" }, "0"),
  );
  const sorted = [...points].sort((a, b) => a.at - b.at);
  svg.append(s("polyline", { class: "series", points: sorted.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ") }));
  for (const p of sorted) {
    svg.append(s("circle", { cx: x(p.at), cy: y(p.value), r: 2.5, class: `dot ${p.cls ?? ""}` },
      s("title", {}, `${new Date(p.at).toISOString()} · ${unit(p.value)}`)));
  }
  return svg;
}

/** What the marks of a strip mean: every state's shape, and how to read a mark's details. */
export function legend() {
  const words = (o, r) => (o === "skipped" ? `skipped: ${r.replaceAll("_", " ")}` : outcomeText(o, r));
  return h("div", { class: "legend", id: "legend", role: "note", "aria-label": "legend" },
    h("p", { class: "legend-how small muted" },
      "Each mark is one expected tick, oldest left. Above the line: it ran and did its work. Below: it went wrong. "
      + "On the line: it got no run of its own. Hover a mark (or focus the strip) for its time, outcome, how long it took and its attempts; every mark has the same size whatever it took. "
      + "A sharded task's tick is one mark: running until every shard has ended, then done only if every shard did, else its worst shard's ending; its tooltip counts its shards, and a click lists them. "
      + "A broadcast task's tick counts its nodes (one run on each node alive at the tick): a node with no run of it by its missed grace did not run it."),
    h("ul", { class: "legend-items" },
      STATES.map(([o, r]) => h("li", { class: "legend-item", dataset: { state: r ? `${o}:${r}` : o } }, sample(o, r), words(o, r))),
      h("li", { class: "legend-item", dataset: { state: "manual" } }, sample("succeeded", null, true), "manual run (dot on top)")));
}
