// Browsing: catalogs, then namespaces (a tree that loads each level when opened), then
// the tables, views and generic tables of a namespace. Lists show only what the user may see: the
// server filters catalogs, and a namespace the user may not list says so.

import { catalogRoot, enc, get, listAll, nsName, nsPath, nsFromPath } from "./api.js";
import { h, notice, pairs, section, show, table } from "./dom.js";
import { genericRoot } from "./generic.js";
import { policiesSection } from "./policies.js";

export async function catalogsPage() {
  const { catalogs } = await get("/api/management/v1/catalogs");
  show(
    h("h1", {}, "Catalogs"),
    catalogs.length === 0
      ? notice("info", "You see no catalogs. An administrator can grant you a catalog role.")
      : h("div", { class: "cards" }, catalogs.map((c) =>
        h("a", { class: "card link-card", href: `#/c/${enc(c.name)}`, "data-testid": "catalog" },
          h("h2", {}, c.name),
          pairs([
            ["Type", c.type || "INTERNAL"],
            ["Location", (c.properties && c.properties["default-base-location"]) || ""],
            ["Storage", (c.storageConfigInfo && c.storageConfigInfo.storageType) || ""],
          ])))),
  );
}

/** Links every catalog page has: the catalog, dropped objects, roles. */
export function catalogTabs(catalog, current) {
  const tab = (href, label, key) => h("a", { href, class: key === current ? "current" : "" }, label);
  return h("nav", { class: "tabs" },
    tab(`#/c/${enc(catalog)}`, "Namespaces", "namespaces"),
    tab(`#/c/${enc(catalog)}/dropped`, "Dropped", "dropped"),
    tab(`#/c/${enc(catalog)}/roles`, "Roles and grants", "roles"));
}

/** Where we are: catalog › namespace levels › object. */
export function crumbs(catalog, levels = [], last = null) {
  const parts = [h("a", { href: "#/" }, "Catalogs"), h("a", { href: `#/c/${enc(catalog)}` }, catalog)];
  levels.forEach((_, i) => {
    parts.push(h("a", { href: `#/c/${enc(catalog)}/ns/${nsPath(levels.slice(0, i + 1))}` }, levels[i]));
  });
  if (last) parts.push(h("span", {}, last));
  return h("nav", { class: "crumbs" }, parts.flatMap((p, i) => (i ? [" › ", p] : [p])));
}

export async function catalogPage(catalog) {
  const root = await catalogRoot(catalog);
  const record = await get(`/api/management/v1/catalogs/${enc(catalog)}`).catch(() => null);
  show(
    crumbs(catalog),
    h("h1", {}, catalog),
    catalogTabs(catalog, "namespaces"),
    section("Namespaces", await namespaceTree(catalog, root, [])),
    record && section("Properties", pairs(Object.entries(record.properties || {}))),
  );
}

/** One level of the namespace tree: each child a <details> that loads its own children. */
async function namespaceTree(catalog, root, parent) {
  let children;
  try {
    const query = parent.length ? `?parent=${nsPath(parent)}` : "";
    children = await listAll(`${root}/namespaces${query}`, "namespaces");
  } catch (e) {
    return notice("error", e.message);
  }
  if (children.length === 0) return h("p", { class: "muted" }, parent.length ? "No child namespaces." : "No namespaces yet.");
  return h("ul", { class: "tree" }, children.map((levels) => {
    const body = h("div", { class: "tree-body" });
    const details = h("details", {},
      h("summary", {}, h("a", { href: `#/c/${enc(catalog)}/ns/${nsPath(levels)}`, "data-testid": "namespace" }, levels[levels.length - 1])),
      body);
    details.addEventListener("toggle", async () => {
      if (details.open && !body.hasChildNodes()) body.append(await namespaceTree(catalog, root, levels));
    });
    return h("li", {}, details);
  }));
}

export async function namespacePage(catalog, segment) {
  const levels = nsFromPath(segment);
  const root = await catalogRoot(catalog);
  const ns = nsPath(levels);
  const generic = await genericRoot(catalog);
  const [info, tables, views, generics, children, policies] = await Promise.all([
    get(`${root}/namespaces/${ns}`),
    listOrError(`${root}/namespaces/${ns}/tables`, "identifiers"),
    listOrError(`${root}/namespaces/${ns}/views`, "identifiers"),
    listOrError(`${generic}/namespaces/${ns}/generic-tables`, "identifiers"),
    listOrError(`${root}/namespaces?parent=${ns}`, "namespaces"),
    policiesSection(catalog, levels),
  ]);
  const kinds = {
    t: ["table", "No tables."],
    v: ["view", "No views."],
    g: ["generic-table", "No generic tables."],
  };
  const objects = (list, kind) =>
    list instanceof Error
      ? notice("error", list.message)
      : table(["Name"], list.map((id) => [
        h("a", { href: `#/c/${enc(catalog)}/${kind}/${ns}/${enc(id.name)}`, "data-testid": kinds[kind][0] }, id.name),
      ]), { empty: kinds[kind][1] });
  show(
    crumbs(catalog, levels),
    h("h1", {}, nsName(levels)),
    h("div", { class: "cards" },
      section("Tables", objects(tables, "t")),
      section("Views", objects(views, "v")),
      // Most namespaces hold none: the section shows only when there are some.
      !(generics instanceof Error) && generics.length > 0 && section("Generic tables", objects(generics, "g")),
      section("Child namespaces", children instanceof Error
        ? notice("error", children.message)
        : table(["Name"], children.map((l) => [h("a", { href: `#/c/${enc(catalog)}/ns/${nsPath(l)}` }, l[l.length - 1])]), { empty: "None." }))),
    policies,
    section("Properties", pairs(Object.entries(info.properties || {}))),
  );
}

/** A list, or the error that refused it (shown in place: other parts may still load). */
function listOrError(path, key) {
  return listAll(path, key).catch((e) => e);
}
