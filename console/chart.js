// The snapshot timeline: one column per snapshot in commit order, records added above the
// axis and records deleted below it, and the table's total records as a line. Plain SVG
// (a few shapes need no charting library); each column's tooltip carries its figures.

import { fmtNum, fmtTime, h } from "./dom.js";

const W = 760;
const H = 220;
const PAD = { left: 56, right: 56, top: 16, bottom: 36 };

export function snapshotChart(snapshots) {
  const list = [...snapshots].sort((a, b) => a["timestamp-ms"] - b["timestamp-ms"] || a["sequence-number"] - b["sequence-number"]);
  if (list.length === 0) return h("p", { class: "muted" }, "No snapshots to chart.");
  const n = (s, key) => Number((s.summary || {})[key] || 0);
  const added = list.map((s) => n(s, "added-records"));
  const deleted = list.map((s) => n(s, "deleted-records"));
  const totals = list.map((s) => n(s, "total-records"));
  const maxBar = Math.max(1, ...added, ...deleted);
  const maxTotal = Math.max(1, ...totals);
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const mid = PAD.top + plotH / 2;
  const step = plotW / list.length;
  const barW = Math.max(2, Math.min(36, step * 0.6));
  const x = (i) => PAD.left + step * (i + 0.5);
  const bar = (v) => (v / maxBar) * (plotH / 2);
  const yTotal = (v) => PAD.top + plotH - (v / maxTotal) * plotH;

  const columns = list.map((s, i) => {
    const summary = s.summary || {};
    const tip = [
      `snapshot ${s["snapshot-id"]} (${summary.operation || "?"})`,
      fmtTime(s["timestamp-ms"]),
      `records +${fmtNum(added[i])} −${fmtNum(deleted[i])}, total ${fmtNum(totals[i])}`,
      `data files +${fmtNum(n(s, "added-data-files"))} −${fmtNum(n(s, "deleted-data-files"))}`,
    ].join("\n");
    return h("svg:g", { class: "column", "data-snapshot-id": s["snapshot-id"] },
      h("svg:title", {}, tip),
      h("svg:rect", { x: x(i) - step / 2, y: PAD.top, width: step, height: plotH, class: "hover" }),
      h("svg:rect", { x: x(i) - barW / 2, y: mid - bar(added[i]), width: barW, height: bar(added[i]), class: "added" }),
      h("svg:rect", { x: x(i) - barW / 2, y: mid, width: barW, height: bar(deleted[i]), class: "deleted" }));
  });
  const line = list.map((_, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${yTotal(totals[i]).toFixed(1)}`).join(" ");
  const label = (i) => fmtTime(list[i]["timestamp-ms"]).slice(0, 19);
  const ticks = list.length === 1 ? [0] : [0, list.length - 1];

  return h("figure", { class: "chart" },
    h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `Timeline of ${list.length} snapshots`, "data-testid": "snapshot-chart" },
      h("svg:line", { x1: PAD.left, x2: W - PAD.right, y1: mid, y2: mid, class: "axis" }),
      h("svg:text", { x: PAD.left - 6, y: PAD.top + 10, class: "tick end" }, `+${fmtNum(maxBar)}`),
      h("svg:text", { x: PAD.left - 6, y: PAD.top + plotH, class: "tick end" }, `−${fmtNum(maxBar)}`),
      h("svg:text", { x: W - PAD.right + 6, y: PAD.top + 10, class: "tick total" }, fmtNum(maxTotal)),
      h("svg:text", { x: W - PAD.right + 6, y: PAD.top + plotH, class: "tick total" }, "0"),
      columns,
      h("svg:path", { d: line, class: "total" }),
      list.map((_, i) => h("svg:circle", { cx: x(i), cy: yTotal(totals[i]), r: 3, class: "total" })),
      ticks.map((i) => h("svg:text", { x: x(i), y: H - 12, class: "tick middle" }, label(i)))),
    h("figcaption", {},
      h("span", { class: "key added" }, "records added"),
      h("span", { class: "key deleted" }, "records deleted"),
      h("span", { class: "key total" }, "total records (right scale)")));
}
