// The console's only way to the server: the same REST and management endpoints any
// client uses, with the signed-in user's token. The token lives in sessionStorage, so it
// ends with the tab and is never sent anywhere but this server.

const TOKEN = "floe.token";
const WHO = "floe.who";

/** A refused call, with the server's Iceberg error body. */
export class ApiError extends Error {
  constructor(status, type, message) {
    super(`${message} (${status}${type ? " " + type : ""})`);
    this.status = status;
    this.type = type;
  }
}

export const session = {
  token: () => sessionStorage.getItem(TOKEN),
  who: () => sessionStorage.getItem(WHO),
  set(token, who) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(WHO, who);
  },
  clear() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(WHO);
  },
};

/** Calls the server; resolves to the JSON body (null for 204), throws ApiError. */
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = session.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body, keepBig),
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text, exact) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    const error = (json && json.error) || {};
    throw new ApiError(response.status, error.type, error.message || response.statusText || "request failed");
  }
  return json;
}

export const get = (path) => call("GET", path);

// Snapshot ids are 64-bit and most exceed 2^53, which a JS number cannot hold: integers
// that large are read from their source text as BigInt (and written back as such), so
// ids compare, display and round-trip exactly.
function exact(_key, value, context) {
  if (typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)) {
    return BigInt(context.source);
  }
  return value;
}

function keepBig(_key, value) {
  return typeof value === "bigint" ? JSON.rawJSON(value.toString()) : value;
}

/** OAuth2 client credentials at the catalog's token endpoint. */
export async function login(clientId, clientSecret) {
  const response = await fetch("/v1/oauth/tokens", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: clientId,
      client_secret: clientSecret,
      scope: "PRINCIPAL_ROLE:ALL",
    }),
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(response.status, json.error, json.error_description || "sign-in refused");
  }
  session.set(json.access_token, clientId);
}

/** Signs in with a bearer token from elsewhere (an OIDC provider's access token). */
export async function useToken(token) {
  session.set(token.trim(), tokenSubject(token) || "token");
  try {
    await get("/api/management/v1/catalogs");
  } catch (e) {
    session.clear();
    throw e;
  }
}

/** The `sub` claim of a JWT, for display only (the server is what verifies it). */
function tokenSubject(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload)).sub;
  } catch {
    return null;
  }
}

// Names in paths, as the REST spec writes them.
export const enc = encodeURIComponent;
/** A namespace (its levels) as one path segment: levels joined by the unit separator. */
export const nsPath = (levels) => enc(levels.join("\u001f"));
/** The levels of a namespace path segment, once the router has decoded it. */
export const nsFromPath = (decoded) => decoded.split("\u001f");
export const nsName = (levels) => levels.join(".");

const prefixes = new Map();
/** The REST path of a catalog (`/v1/{prefix}`), from its `/v1/config`. */
export async function catalogRoot(catalog) {
  if (!prefixes.has(catalog)) {
    const config = await get(`/v1/config?warehouse=${enc(catalog)}`);
    const prefix = (config.overrides && config.overrides.prefix) || (config.defaults && config.defaults.prefix);
    prefixes.set(catalog, prefix ? `/v1/${enc(prefix)}` : "/v1");
  }
  return prefixes.get(catalog);
}

/** Every page of a paginated list (`next-page-token`), joined. */
export async function listAll(path, key) {
  const items = [];
  let token = null;
  for (let pages = 0; pages < 1000; pages += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await get(token ? `${path}${sep}pageToken=${enc(token)}` : path);
    items.push(...(page[key] || []));
    token = page["next-page-token"];
    if (!token) break;
  }
  return items;
}
