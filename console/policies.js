// Policies (Polaris's policy API) where they apply: the table-maintenance policies in
// force on a namespace or a table, each with its type, version and content, and whether
// it is attached there or inherited from above.

import { enc, get, nsName, nsPath } from "./api.js";
import { h, section, table } from "./dom.js";
import { genericRoot } from "./generic.js";

/** The "Policies" section of a namespace's page (no table) or a table's. Nothing when no
 *  policy applies, or when the server refuses to say: the rest of the page stands alone. */
export async function policiesSection(catalog, levels, tableName = null) {
  const root = await genericRoot(catalog);
  let query = `namespace=${nsPath(levels)}`;
  if (tableName) query += `&target-name=${enc(tableName)}`;
  let policies;
  try {
    policies = (await get(`${root}/applicable-policies?${query}`))["applicable-policies"] || [];
  } catch {
    return null;
  }
  if (policies.length === 0) return null;
  return section("Policies", table(["Policy", "Type", "Where", "Version", "Content"],
    policies.map((p) => h("tr", { "data-policy": `${nsName(p.namespace)}.${p.name}` },
      [`${nsName(p.namespace)}.${p.name}`, p["policy-type"], p.inherited ? "inherited" : "attached here",
        String(p.version), h("code", {}, p.content)].map((c) => h("td", {}, c)))),
    { "data-testid": "policies" }));
}
