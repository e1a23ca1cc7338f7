// Small inline SVG charts: a task's strip of expected ticks, and a line over time.

import { s } from "./dom.js";
import { duration, inZone, outcomeClass, outcomeText } from "./format.js";

const MARK = 7;
const GAP = 2;
const HEIGHT = 22;

/**
 * A strip of ticks, oldest left: each a mark coloured by outcome, as tall as its duration is
 * long next to the strip's longest (marks without a duration are full height).
 */
export function tickStrip(ticks, zone, slots = ticks.length) {
  const width = Math.max(slots, 1) * (MARK + GAP);
  const longest = Math.max(0.001, ...ticks.map((t) => t.duration_seconds ?? 0));
  const svg = s("svg", {
    class: "strip", width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img",
    "aria-label": `${ticks.length} recent ticks`,
  });
  const offset = (slots - ticks.length) * (MARK + GAP);
  ticks.forEach((t, i) => {
    const timed = t.duration_seconds !== null && t.duration_seconds !== undefined;
    const h = timed ? Math.max(6, Math.round((HEIGHT * t.duration_seconds) / longest)) : HEIGHT;
    const words = outcomeText(t.outcome, t.reason);
    const detail = [inZone(t.at, zone), words];
    if (timed) detail.push(duration(t.duration_seconds));
    if (t.attempts > 1) detail.push(`${t.attempts} attempts`);
    if (t.trigger === "manual") detail.push("manual");
    svg.append(s("rect", {
      x: offset + i * (MARK + GAP), y: HEIGHT - h, width: MARK, height: h, rx: 1.5,
      class: `mark ${outcomeClass(t.outcome, t.reason)}${t.trigger === "manual" ? " manual" : ""}`,
      "data-outcome": t.outcome, "data-reason": t.reason ?? "",
    }, s("title", {}, detail.join(" · "))));
  });
  return svg;
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
