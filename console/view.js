// A view: its SQL in each dialect (current version first), its schema, and every version
// with its own SQL.

import { catalogRoot, enc, get, nsFromPath, nsName, nsPath } from "./api.js";
import { fmtTime, h, pairs, section, show, table } from "./dom.js";
import { crumbs } from "./browse.js";
import { typeName } from "./table.js";

export async function viewPage(catalog, segment, name) {
  const levels = nsFromPath(segment);
  const root = await catalogRoot(catalog);
  const loaded = await get(`${root}/namespaces/${nsPath(levels)}/views/${enc(name)}`);
  const m = loaded.metadata;
  const versions = [...(m.versions || [])].sort((a, b) => b["version-id"] - a["version-id"]);
  const current = versions.find((v) => v["version-id"] === m["current-version-id"]) || versions[0];
  const schema = (m.schemas || []).find((s) => s["schema-id"] === (current && current["schema-id"])) || { fields: [] };
  show(
    crumbs(catalog, levels, name),
    h("h1", {}, `${nsName(levels)}.${name}`),
    section("Overview", pairs([
      ["UUID", m["view-uuid"]],
      ["Location", m.location],
      ["Metadata file", loaded["metadata-location"] || ""],
      ["Current version", current ? String(current["version-id"]) : "none"],
      ["Default namespace", current ? nsName(current["default-namespace"] || []) : ""],
    ])),
    section("SQL", current ? sqlBlocks(current, "current-sql") : h("p", { class: "muted" }, "No versions.")),
    section("Columns", table(["Id", "Name", "Type", "Doc"],
      (schema.fields || []).map((f) => [String(f.id), f.name, h("code", {}, typeName(f.type)), f.doc || ""]),
      { "data-testid": "view-schema" })),
    section("Versions", h("div", { "data-testid": "view-versions" }, versions.map((v) =>
      h("details", { open: v === current, "data-version-id": v["version-id"] },
        h("summary", {}, `Version ${v["version-id"]}`, v === current ? " (current)" : "", ` · ${fmtTime(v["timestamp-ms"])}`),
        pairs(Object.entries(v.summary || {})),
        sqlBlocks(v, null))))),
    section("Properties", pairs(Object.entries(m.properties || {}).sort())),
  );
}

/** One block per dialect. */
function sqlBlocks(version, testid) {
  const sql = (version.representations || []).filter((r) => r.type === "sql");
  if (sql.length === 0) return h("p", { class: "muted" }, "No SQL representation.");
  return h("div", { class: "sql", "data-testid": testid }, sql.map((r) =>
    h("div", { class: "dialect", "data-dialect": r.dialect },
      h("div", { class: "dialect-name" }, r.dialect),
      h("pre", {}, h("code", {}, r.sql)))));
}
