// The console's shell: sign-in, the navigation bar and the routes (the URL's #fragment,
// so every page has a link and the server serves one file).
//
// Routes:
//   #/                          catalogs
//   #/c/CAT                     a catalog: its namespaces
//   #/c/CAT/ns/NS               a namespace: children, tables, views, properties
//   #/c/CAT/t/NS/TABLE          a table          #/c/CAT/v/NS/VIEW   a view
//   #/c/CAT/g/NS/NAME           a generic table (Polaris's API: Delta, Hudi, CSV…)
//   #/c/CAT/dropped             dropped tables and views (undrop, purge)
//   #/c/CAT/roles               catalog roles and their grants
//   #/security                  principals and principal roles
//   #/docs                      the API reference
// NS is the namespace's levels joined by U+001F, URL-encoded, as in REST paths.

import { ApiError, get, login, session, useToken } from "./api.js";
import { form, h, notice, show } from "./dom.js";
import { catalogPage, catalogsPage, namespacePage } from "./browse.js";
import { tablePage } from "./table.js";
import { viewPage } from "./view.js";
import { genericPage } from "./generic.js";
import { catalogRolesPage, securityPage } from "./security.js";
import { droppedPage } from "./dropped.js";
import { docsPage } from "./docs.js";
import { finishLogin, loginConfig, startLogin } from "./oidc.js";

const routes = [
  [/^#\/?$/, () => catalogsPage()],
  [/^#\/c\/([^/]+)$/, (c) => catalogPage(c)],
  [/^#\/c\/([^/]+)\/ns\/([^/]+)$/, (c, ns) => namespacePage(c, ns)],
  [/^#\/c\/([^/]+)\/t\/([^/]+)\/([^/]+)$/, (c, ns, t) => tablePage(c, ns, t)],
  [/^#\/c\/([^/]+)\/v\/([^/]+)\/([^/]+)$/, (c, ns, v) => viewPage(c, ns, v)],
  [/^#\/c\/([^/]+)\/g\/([^/]+)\/([^/]+)$/, (c, ns, g) => genericPage(c, ns, g)],
  [/^#\/c\/([^/]+)\/dropped$/, (c) => droppedPage(c)],
  [/^#\/c\/([^/]+)\/roles$/, (c) => catalogRolesPage(c)],
  [/^#\/security$/, () => securityPage()],
  [/^#\/docs$/, () => docsPage(), { open: true }],
  [/^#\/login$/, () => loginPage(), { open: true }],
];

async function route() {
  const hash = location.hash || "#/";
  const [pattern, page, options] = routes.find(([re]) => re.test(hash)) || [];
  markNav(hash);
  if (!page) {
    show(notice("error", "No such page. "), h("a", { href: "#/" }, "Back to the catalogs"));
    return;
  }
  const args = hash.match(pattern).slice(1).map(decodeURIComponent);
  try {
    if (!(options && options.open)) await whoAmI();
    await page(...args);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      session.clear();
      location.hash = "#/login";
      return;
    }
    show(h("h1", {}, "Something went wrong"), notice("error", e.message));
  }
}

function markNav(hash) {
  const current = hash.startsWith("#/security") ? "security" : hash.startsWith("#/docs") ? "docs" : "catalogs";
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.nav === current);
  }
}

let checked = false;
/** Whether the server needs a token, and what the signed-in user may manage. */
async function whoAmI() {
  if (checked) return;
  await get("/api/management/v1/catalogs"); // 401 without a (valid) token
  checked = true;
  // Principals and roles are service_admin's: show the menu only to those who may.
  const security = document.querySelector('#nav a[data-nav="security"]');
  security.hidden = !(await get("/api/management/v1/principal-roles").then(() => true, () => false));
  const who = document.getElementById("who");
  who.replaceChildren();
  if (session.token()) {
    who.append(
      h("span", { "data-testid": "who" }, session.who()),
      h("button", { class: "link", onclick: signOut }, "Sign out"),
    );
  }
}

function signOut() {
  session.clear();
  checked = false;
  document.getElementById("who").replaceChildren();
  location.hash = "#/login";
}

/** Why the last sign-in at the identity provider failed (shown on the sign-in page). */
let loginError = null;

async function loginPage() {
  checked = false;
  const done = () => {
    location.hash = "#/";
  };
  const { oidc } = await loginConfig();
  const provider = oidc
    ? h("section", { class: "card" }, h("h2", {}, "Identity provider"),
      h("p", { class: "muted" }, `Sign in at ${new URL(oidc.issuer).host}, your organization's OpenID Connect provider.`),
      h("button", { "data-testid": "login-oidc", onclick: () => startLogin(oidc) }, "Sign in with your identity provider"))
    : null;
  const failed = loginError ? notice("error", `Sign-in failed: ${loginError}`) : null;
  loginError = null;
  show(
    h("h1", {}, "Sign in"),
    failed,
    h("p", { class: "muted" }, "This catalog needs credentials. Use a principal's client id and secret, or a bearer token from your identity provider."),
    h("div", { class: "cards" },
      provider,
      h("section", { class: "card" }, h("h2", {}, "Client credentials"),
        form([
          { name: "client_id", label: "Client id", required: true },
          { name: "client_secret", label: "Client secret", type: "password", required: true },
        ], "Sign in", async (v) => {
          await login(v.client_id, v.client_secret);
          done();
        }, { id: "login-credentials" })),
      h("section", { class: "card" }, h("h2", {}, "Token (OIDC)"),
        h("p", { class: "muted" }, "An access token your OpenID Connect provider issued for this catalog."),
        form([{ name: "token", label: "Bearer token", type: "password", required: true }], "Use token", async (v) => {
          await useToken(v.token);
          done();
        }, { id: "login-token" }))),
  );
}

// Back from the identity provider: finish the sign-in before the first page.
async function start() {
  try {
    await finishLogin();
  } catch (e) {
    // A refused or forged return leaves the console signed out, whoever was signed in
    // before: what the user sees must be what the failed sign-in says.
    session.clear();
    loginError = e.message;
    history.replaceState(null, "", "/ui/#/login");
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
