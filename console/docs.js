// The API reference: the OpenAPI documents Floe serves (/openapi), read in the browser.
// Operations by tag, each with its parameters, request body and responses; schemas are
// linked by name and listed below with their properties. Works offline: the documents
// come from this server.

import { get } from "./api.js";
import { h, show, table } from "./dom.js";

export async function docsPage(chosen) {
  const { documents } = await get("/openapi");
  const current = documents.find((d) => d.name === chosen) || documents[0];
  const doc = await get(current.url);
  show(
    h("h1", {}, "API reference"),
    h("nav", { class: "tabs" }, documents.map((d) =>
      h("a", { href: "#/docs", class: d === current ? "current" : "", onclick: (e) => { e.preventDefault(); docsPage(d.name); } }, d.title))),
    h("p", {}, h("a", { href: current.url, download: current.name }, `Download ${current.name}`), ` · OpenAPI ${doc.openapi} · version ${doc.info.version}`),
    h("h2", {}, doc.info.title),
    doc.info.description && h("p", { class: "prose" }, doc.info.description),
    operationsByTag(doc).map(([tag, ops]) => h("section", { class: "card" }, h("h2", {}, tag), ops.map((o) => operation(doc, o)))),
    h("section", { class: "card" }, h("h2", {}, "Schemas"),
      Object.entries((doc.components && doc.components.schemas) || {}).map(([name, s]) =>
        h("details", { id: `schema-${name}`, class: "schema" }, h("summary", {}, h("code", {}, name)), schemaBody(doc, s)))),
  );
}

function operationsByTag(doc) {
  const tags = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of ["get", "put", "post", "delete", "head", "patch"]) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || "Other";
      if (!tags.has(tag)) tags.set(tag, []);
      tags.get(tag).push({ path, method, op, shared: item.parameters || [] });
    }
  }
  return [...tags.entries()];
}

function operation(doc, { path, method, op, shared }) {
  const params = [...shared, ...(op.parameters || [])].map((p) => resolve(doc, p));
  const body = op.requestBody && resolve(doc, op.requestBody);
  return h("details", { class: "operation", "data-operation": `${method.toUpperCase()} ${path}` },
    h("summary", {}, h("span", { class: `method ${method}` }, method.toUpperCase()), h("code", {}, path), h("span", { class: "muted" }, op.summary || "")),
    op.description && h("p", { class: "prose" }, op.description),
    params.length > 0 && table(["Parameter", "In", "Required", "Type", "Description"], params.map((p) => [
      h("code", {}, p.name), p.in, p.required ? "yes" : "", typeOf(doc, p.schema || {}), p.description || ""])),
    body && h("p", {}, "Request body: ", contentSchemas(doc, body.content)),
    table(["Status", "Description", "Body"], Object.entries(op.responses || {}).map(([status, r]) => {
      const response = resolve(doc, r);
      return [status, response.description || "", contentSchemas(doc, response.content)];
    })));
}

function contentSchemas(doc, content) {
  return Object.entries(content || {}).map(([type, c]) => h("span", {}, typeOf(doc, c.schema || {}), ` (${type}) `));
}

/** A schema's properties, or its composition. */
function schemaBody(doc, s) {
  const parts = [];
  if (s.description) parts.push(h("p", { class: "prose" }, s.description));
  for (const key of ["allOf", "oneOf", "anyOf"]) {
    if (s[key]) parts.push(h("p", {}, `${key}: `, s[key].map((x) => h("span", {}, typeOf(doc, x), " "))));
  }
  if (s.enum) parts.push(h("p", {}, "One of: ", s.enum.map((v) => h("code", { class: "chip" }, String(v)))));
  const props = Object.entries(s.properties || {});
  const required = new Set(s.required || []);
  if (props.length) {
    parts.push(table(["Property", "Type", "Required", "Description"], props.map(([name, p]) => [
      h("code", {}, name), typeOf(doc, p), required.has(name) ? "yes" : "", p.description || ""])));
  }
  return parts;
}

/** A schema's type in a line, with links to named schemas. */
function typeOf(doc, s) {
  if (s.$ref) {
    const name = s.$ref.split("/").pop();
    return h("a", { href: "#/docs", class: "ref", onclick: (e) => { e.preventDefault(); openSchema(name); } }, name);
  }
  if (s.type === "array") return h("span", {}, "array of ", typeOf(doc, s.items || {}));
  for (const key of ["allOf", "oneOf", "anyOf"]) {
    if (s[key]) return h("span", {}, `${key}(`, s[key].map((x, i) => [i ? ", " : "", typeOf(doc, x)]), ")");
  }
  return h("span", {}, [s.type || "any", s.format ? ` (${s.format})` : ""].join(""));
}

function openSchema(name) {
  const el = document.getElementById(`schema-${name}`);
  if (!el) return;
  el.open = true;
  el.scrollIntoView({ block: "start" });
}

/** A parameter, body or response by reference, followed to its definition. */
function resolve(doc, x) {
  let item = x;
  for (let hops = 0; item && item.$ref && hops < 10; hops += 1) {
    item = item.$ref.slice(2).split("/").reduce((node, key) => (node ? node[key] : undefined), doc);
  }
  return item || {};
}
