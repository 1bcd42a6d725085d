// A generic table (Polaris's API for Delta, Hudi, CSV… tables beside Iceberg's): its
// format, base location, doc and properties, as the generic table endpoint returns them.

import { catalogRoot, enc, get, nsFromPath, nsName, nsPath } from "./api.js";
import { h, pairs, section, show } from "./dom.js";
import { crumbs } from "./browse.js";

/** The Polaris generic table API's path for a catalog (beside its `/v1/{prefix}`). */
export async function genericRoot(catalog) {
  return `/api/catalog/polaris${await catalogRoot(catalog)}`;
}

export async function genericPage(catalog, segment, name) {
  const levels = nsFromPath(segment);
  const root = await genericRoot(catalog);
  const { table: t } = await get(`${root}/namespaces/${nsPath(levels)}/generic-tables/${enc(name)}`);
  show(
    crumbs(catalog, levels, name),
    h("h1", {}, `${nsName(levels)}.${name}`),
    section("Overview", h("div", { "data-testid": "generic-overview" }, pairs([
      ["Format", t.format],
      ["Base location", t["base-location"] || ""],
      ["Doc", t.doc || ""],
    ]))),
    section("Properties", pairs(Object.entries(t.properties || {}).sort())),
  );
}
