// Managing access with Polaris's model: principals hold principal roles, principal roles
// hold catalog roles, catalog roles hold grants. The pages call the management API, which
// refuses what the user may not do (the menu shows Security only to those who may).

import { call, enc, get } from "./api.js";
import { fmtTime, form, h, notice, section, show, table } from "./dom.js";
import { catalogTabs, crumbs } from "./browse.js";

const M = "/api/management/v1";

export async function securityPage() {
  const [{ principals }, { roles }] = await Promise.all([get(`${M}/principals`), get(`${M}/principal-roles`)]);
  const heldBy = await Promise.all(principals.map((p) =>
    get(`${M}/principals/${enc(p.name)}/principal-roles`).then((r) => r.roles.map((x) => x.name), () => [])));
  const created = h("div", { id: "created-credentials" });
  show(
    h("h1", {}, "Security"),
    section("Principals",
      table(["Name", "Client id", "Created", "Principal roles", ""], principals.map((p, i) => [
        p.name,
        h("code", {}, p.clientId || ""),
        fmtTime(p.createTimestamp),
        h("span", {}, heldBy[i].map((r) => h("span", { class: "chip" }, r,
          h("button", { class: "link", title: `Revoke ${r} from ${p.name}`, onclick: () => run(null, "DELETE", `${M}/principals/${enc(p.name)}/principal-roles/${enc(r)}`) }, "×")))),
        p.name === "root" ? "" : h("button", { class: "danger", onclick: () => run(`Delete principal ${p.name}?`, "DELETE", `${M}/principals/${enc(p.name)}`) }, "Delete"),
      ]), { "data-testid": "principals" }),
      created,
      form([{ name: "name", label: "New principal", required: true }], "Create", async (v) => {
        const r = await call("POST", `${M}/principals`, { principal: { name: v.name } });
        await securityPage();
        // The secret is shown this once: the server keeps only its hash.
        document.getElementById("created-credentials").replaceChildren(notice("ok",
          `Created ${r.principal.name}. Its credentials are shown only now: `,
          h("code", { "data-testid": "new-client-id" }, r.credentials.clientId), " / ",
          h("code", { "data-testid": "new-client-secret" }, r.credentials.clientSecret)));
      }, { id: "create-principal" }),
      form([
        { name: "principal", label: "Principal", options: principals.map((p) => p.name) },
        { name: "role", label: "gets principal role", options: roles.map((r) => r.name) },
      ], "Assign", (v) => act("PUT", `${M}/principals/${enc(v.principal)}/principal-roles`, { principalRole: { name: v.role } }),
      { id: "assign-principal-role" })),
    section("Principal roles",
      table(["Name", "Catalog roles", ""], await Promise.all(roles.map(async (r) => [
        r.name,
        await catalogRolesOf(r.name),
        r.name === "service_admin" ? "" : h("button", { class: "danger", onclick: () => run(`Delete principal role ${r.name}?`, "DELETE", `${M}/principal-roles/${enc(r.name)}`) }, "Delete"),
      ])), { "data-testid": "principal-roles" }),
      form([{ name: "name", label: "New principal role", required: true }], "Create",
        (v) => act("POST", `${M}/principal-roles`, { principalRole: { name: v.name } }), { id: "create-principal-role" })),
  );
}

/** "catalog/role" chips for the catalog roles a principal role holds, in every catalog. */
async function catalogRolesOf(principalRole) {
  const { catalogs } = await get(`${M}/catalogs`);
  const held = await Promise.all(catalogs.map((c) =>
    get(`${M}/principal-roles/${enc(principalRole)}/catalog-roles/${enc(c.name)}`).then((r) => r.roles.map((x) => `${c.name}/${x.name}`), () => [])));
  return h("span", {}, held.flat().map((x) => h("span", { class: "chip" }, x)));
}

export async function catalogRolesPage(catalog) {
  const [{ roles }, { roles: principalRoles }, privileges] = await Promise.all([
    get(`${M}/catalogs/${enc(catalog)}/catalog-roles`),
    get(`${M}/principal-roles`).catch(() => ({ roles: [] })),
    privilegeEnums(),
  ]);
  const grants = await Promise.all(roles.map((r) => get(`${M}/catalogs/${enc(catalog)}/catalog-roles/${enc(r.name)}/grants`).then((g) => g.grants)));
  show(
    crumbs(catalog),
    h("h1", {}, `${catalog}: roles and grants`),
    catalogTabs(catalog, "roles"),
    roles.map((r, i) => section(`Catalog role ${r.name}`,
      table(["On", "Privilege", ""], grants[i].map((g) => [on(g), h("code", {}, g.privilege),
        h("button", { class: "link", onclick: () => run(null, "POST", `${M}/catalogs/${enc(catalog)}/catalog-roles/${enc(r.name)}/grants`, { grant: g }) }, "Revoke")]),
      { "data-testid": `grants-${r.name}`, empty: "No grants." }),
      grantForm(catalog, r.name, privileges))),
    section("New catalog role",
      form([{ name: "name", label: "Name", required: true }], "Create",
        (v) => act("POST", `${M}/catalogs/${enc(catalog)}/catalog-roles`, { catalogRole: { name: v.name } }), { id: "create-catalog-role" }),
      principalRoles.length > 0 && form([
        { name: "role", label: "Catalog role", options: roles.map((r) => r.name) },
        { name: "principalRole", label: "to principal role", options: principalRoles.map((r) => r.name) },
      ], "Assign", (v) => act("PUT", `${M}/principal-roles/${enc(v.principalRole)}/catalog-roles/${enc(catalog)}`, { catalogRole: { name: v.role } }),
      { id: "assign-catalog-role" })),
  );
}

function on(g) {
  const ns = (g.namespace || []).join(".");
  if (g.type === "catalog") return "catalog";
  if (g.type === "namespace") return `namespace ${ns}`;
  return `${g.type} ${ns}.${g.tableName || g.viewName || g.policyName}`;
}

/** A grant form whose privilege list follows the chosen securable's type. */
function grantForm(catalog, role, privileges) {
  const type = h("select", { name: "type" }, ["catalog", "namespace", "table", "view", "policy"].map((t) => h("option", { value: t }, t)));
  const privilege = h("select", { name: "privilege" });
  const fill = () => privilege.replaceChildren(...(privileges[type.value] || []).map((p) => h("option", { value: p }, p)));
  type.addEventListener("change", fill);
  fill();
  return form([
    h("label", {}, "On", type),
    { name: "namespace", label: "Namespace (a.b)", placeholder: "for namespace, table, view, policy" },
    { name: "name", label: "Table, view or policy", placeholder: "for table, view, policy" },
    h("label", {}, "Privilege", privilege),
  ], "Grant", (v) => {
    const grant = { type: v.type, privilege: v.privilege };
    if (v.type !== "catalog") grant.namespace = v.namespace ? v.namespace.split(".") : [];
    if (v.type === "table") grant.tableName = v.name;
    if (v.type === "view") grant.viewName = v.name;
    if (v.type === "policy") grant.policyName = v.name;
    return act("PUT", `${M}/catalogs/${enc(catalog)}/catalog-roles/${enc(role)}/grants`, { grant });
  }, { class: "inline grant-form", "data-role": role });
}

/** The privileges each securable type takes, from the management API's own document. */
async function privilegeEnums() {
  const doc = await get("/openapi/polaris-management.json");
  const s = doc.components.schemas;
  return {
    catalog: s.CatalogPrivilege.enum,
    namespace: s.NamespacePrivilege.enum,
    table: s.TablePrivilege.enum,
    view: s.ViewPrivilege.enum,
    policy: s.PolicyPrivilege.enum,
  };
}

/** Does it, then shows the page again (or the error in place of nothing). */
async function act(method, path, body) {
  await call(method, path, body);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

/** A button's action: asks first when there is a question; an error shows on the page. */
async function run(question, method, path, body) {
  if (question && !window.confirm(question)) return;
  try {
    await act(method, path, body);
  } catch (e) {
    document.getElementById("main").prepend(notice("error", e.message));
  }
}
