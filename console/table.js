// A table: what loadTable returns, laid out for people. Its schema with nested types,
// partition spec, sort order, properties, snapshots (a timeline chart and a table of
// their summaries), refs, the metadata log, and the policies that apply to it.

import { catalogRoot, enc, get, nsFromPath, nsName, nsPath } from "./api.js";
import { fmtBytes, fmtNum, fmtTime, h, pairs, section, show, table } from "./dom.js";
import { crumbs } from "./browse.js";
import { snapshotChart } from "./chart.js";
import { policiesSection } from "./policies.js";

export async function tablePage(catalog, segment, name) {
  const levels = nsFromPath(segment);
  const root = await catalogRoot(catalog);
  const [loaded, policies] = await Promise.all([
    get(`${root}/namespaces/${nsPath(levels)}/tables/${enc(name)}?snapshots=all`),
    policiesSection(catalog, levels, name),
  ]);
  const m = loaded.metadata;
  const schema = (m.schemas || []).find((s) => s["schema-id"] === m["current-schema-id"]) || m.schema || { fields: [] };
  const current = (m.snapshots || []).find((s) => s["snapshot-id"] === m["current-snapshot-id"]);
  const totals = (current && current.summary) || {};
  show(
    crumbs(catalog, levels, name),
    h("h1", {}, `${nsName(levels)}.${name}`),
    h("div", { class: "figures" },
      figure("Records", fmtNum(totals["total-records"] ?? 0), "records"),
      figure("Data files", fmtNum(totals["total-data-files"] ?? 0), "data-files"),
      figure("Size", fmtBytes(totals["total-files-size"] ?? 0), "size"),
      figure("Snapshots", fmtNum((m.snapshots || []).length), "snapshots"),
      figure("Format", `v${m["format-version"]}`, "format")),
    section("Overview", pairs([
      ["UUID", m["table-uuid"]],
      ["Location", m.location],
      ["Metadata file", loaded["metadata-location"] || ""],
      ["Last updated", fmtTime(m["last-updated-ms"])],
      ["Current snapshot", current ? String(current["snapshot-id"]) : "none"],
    ])),
    section(`Schema (id ${schema["schema-id"] ?? 0})`, schemaTable(schema)),
    h("div", { class: "cards" },
      section("Partition spec", partitionSpec(m, schema)),
      section("Sort order", sortOrder(m, schema))),
    section("Snapshots", snapshotChart(m.snapshots || []), snapshotTable(m)),
    section("Refs", refsTable(m.refs || {})),
    section("Metadata log", table(["When", "Metadata file"],
      [...(m["metadata-log"] || [])].reverse().map((e) => [fmtTime(e["timestamp-ms"]), h("code", {}, e["metadata-file"])]),
      { "data-testid": "metadata-log", empty: "No earlier metadata files." })),
    policies,
    section("Properties", pairs(Object.entries(m.properties || {}).sort())),
  );
}

function figure(label, value, id) {
  return h("div", { class: "figure", "data-testid": `figure-${id}` }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

/** Field rows, nested types indented under their parent (struct fields, list elements,
 *  map keys and values). */
function schemaTable(schema) {
  const rows = [];
  const walk = (fields, depth) => {
    for (const f of fields) {
      rows.push(fieldRow(f.id, f.name, f.type, f.required, f.doc, depth));
      nested(f.type, depth + 1);
    }
  };
  const nested = (type, depth) => {
    if (typeof type !== "object" || type === null) return;
    if (type.type === "struct") walk(type.fields, depth);
    if (type.type === "list") {
      rows.push(fieldRow(type["element-id"], "element", type.element, type["element-required"], "", depth));
      nested(type.element, depth + 1);
    }
    if (type.type === "map") {
      rows.push(fieldRow(type["key-id"], "key", type.key, true, "", depth));
      nested(type.key, depth + 1);
      rows.push(fieldRow(type["value-id"], "value", type.value, type["value-required"], "", depth));
      nested(type.value, depth + 1);
    }
  };
  walk(schema.fields || [], 0);
  const ids = new Set(schema["identifier-field-ids"] || []);
  for (const row of rows) if (ids.has(Number(row.dataset.fieldId))) row.classList.add("identifier");
  return table(["Id", "Name", "Type", "Required", "Doc"], rows, { "data-testid": "schema" });
}

function fieldRow(id, name, type, required, doc, depth) {
  const nameCell = h("td", { class: "field-name" }, name);
  nameCell.style.paddingLeft = `${0.6 + depth * 1.4}rem`;
  return h("tr", { "data-field-id": id, "data-depth": depth },
    h("td", {}, String(id)), nameCell, h("td", {}, h("code", {}, typeName(type))),
    h("td", {}, required ? "required" : "optional"), h("td", {}, doc || ""));
}

export function typeName(type) {
  if (typeof type === "string") return type;
  if (type.type === "struct") return "struct";
  if (type.type === "list") return `list<${typeName(type.element)}>`;
  if (type.type === "map") return `map<${typeName(type.key)}, ${typeName(type.value)}>`;
  return JSON.stringify(type);
}

function columnName(schema, id) {
  const find = (fields, prefix) => {
    for (const f of fields || []) {
      const path = prefix ? `${prefix}.${f.name}` : f.name;
      if (f.id === id) return path;
      if (typeof f.type === "object" && f.type.type === "struct") {
        const inner = find(f.type.fields, path);
        if (inner) return inner;
      }
    }
    return null;
  };
  return find(schema.fields, "") || `field ${id}`;
}

function partitionSpec(m, schema) {
  const spec = (m["partition-specs"] || []).find((s) => s["spec-id"] === m["default-spec-id"]);
  const fields = (spec && spec.fields) || [];
  if (fields.length === 0) return h("p", { class: "muted" }, "Unpartitioned.");
  return table(["Field", "Source column", "Transform"],
    fields.map((f) => [f.name, columnName(schema, f["source-id"]), h("code", {}, f.transform)]),
    { "data-testid": "partition-spec" });
}

function sortOrder(m, schema) {
  const order = (m["sort-orders"] || []).find((s) => s["order-id"] === m["default-sort-order-id"]);
  const fields = (order && order.fields) || [];
  if (fields.length === 0) return h("p", { class: "muted" }, "Unsorted.");
  return table(["Source column", "Transform", "Direction", "Nulls"],
    fields.map((f) => [columnName(schema, f["source-id"]), h("code", {}, f.transform), f.direction, f["null-order"]]),
    { "data-testid": "sort-order" });
}

/** Each snapshot's summary figures, newest first. */
function snapshotTable(m) {
  const snapshots = [...(m.snapshots || [])].sort((a, b) => b["timestamp-ms"] - a["timestamp-ms"]);
  const s = (snap, key) => fmtNum((snap.summary || {})[key] ?? "");
  return table(
    ["Snapshot", "When", "Operation", "Files +", "Files −", "Records +", "Records −", "Total records", "Parent"],
    snapshots.map((snap) => h("tr", { "data-snapshot-id": snap["snapshot-id"], class: snap["snapshot-id"] === m["current-snapshot-id"] ? "current" : "" },
      h("td", {}, h("code", {}, String(snap["snapshot-id"]))),
      h("td", {}, fmtTime(snap["timestamp-ms"])),
      h("td", {}, (snap.summary || {}).operation || ""),
      h("td", { class: "num" }, s(snap, "added-data-files")),
      h("td", { class: "num" }, s(snap, "deleted-data-files")),
      h("td", { class: "num" }, s(snap, "added-records")),
      h("td", { class: "num" }, s(snap, "deleted-records")),
      h("td", { class: "num" }, s(snap, "total-records")),
      h("td", {}, snap["parent-snapshot-id"] ? String(snap["parent-snapshot-id"]) : ""))),
    { "data-testid": "snapshots", empty: "No snapshots yet." });
}

function refsTable(refs) {
  const rows = Object.entries(refs).sort(([a], [b]) => (a === "main" ? -1 : b === "main" ? 1 : a.localeCompare(b)));
  return table(["Name", "Type", "Snapshot", "Retention"],
    rows.map(([name, r]) => [name, r.type, h("code", {}, String(r["snapshot-id"])), retention(r)]),
    { "data-testid": "refs", empty: "No refs." });
}

function retention(r) {
  const parts = [];
  if (r["max-ref-age-ms"]) parts.push(`ref age ${r["max-ref-age-ms"]} ms`);
  if (r["max-snapshot-age-ms"]) parts.push(`snapshot age ${r["max-snapshot-age-ms"]} ms`);
  if (r["min-snapshots-to-keep"]) parts.push(`keep ${r["min-snapshots-to-keep"]}`);
  return parts.join(", ") || "default";
}
