// Signing in at the external OpenID Connect provider: the authorization code flow with
// PKCE (RFC 7636, S256), the console being a public client (no secret in the browser).
// The server says where (/ui/config.json, from the provider's discovery document); the
// provider sends the browser back to /ui/ with a code, which the console exchanges for an
// access token at the provider's token endpoint, then uses like any other bearer token
// (the server verifies it). The state and the PKCE verifier live in sessionStorage for
// the round trip only; the code leaves the address bar and history at once.

import { ApiError, useToken } from "./api.js";

const PENDING = "floe.oidc";

let config = null;
/** The server's sign-in settings: `{ oidc: null }` without an external sign-in. */
export function loginConfig() {
  if (!config) {
    config = fetch("/ui/config.json")
      .then((r) => (r.ok ? r.json() : { oidc: null }))
      .catch(() => ({ oidc: null }));
  }
  return config;
}

const redirectUri = () => `${location.origin}/ui/`;

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(bytes) {
  const buffer = new Uint8Array(bytes);
  crypto.getRandomValues(buffer);
  return base64url(buffer);
}

/** Sends the browser to the provider's sign-in page. */
export async function startLogin(oidc) {
  const verifier = randomString(32);
  const state = randomString(16);
  const challenge = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PENDING, JSON.stringify({ state, verifier }));
  const url = new URL(oidc.authorization_endpoint);
  const params = {
    response_type: "code",
    client_id: oidc.client_id,
    redirect_uri: redirectUri(),
    scope: oidc.scope,
    state,
    code_challenge: base64url(challenge),
    code_challenge_method: "S256",
  };
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  location.assign(url.toString());
}

/**
 * Finishes a sign-in when the provider has just sent the browser back (`?code=…&state=…`
 * or `?error=…`): checks the state, exchanges the code and keeps the token. Resolves to
 * whether this page load was such a return; throws ApiError when the sign-in failed.
 */
export async function finishLogin() {
  const params = new URLSearchParams(location.search);
  if (!params.has("code") && !params.has("error")) return false;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  sessionStorage.removeItem(PENDING);
  // The code is single-use and short-lived, but it must not linger in the address bar,
  // the history or a bookmark.
  history.replaceState(null, "", "/ui/#/");
  // Checked before anything the return says is believed, an error included: a forged
  // `?error=` link must not put words of its choosing on the sign-in page.
  if (!pending || pending.state !== params.get("state")) {
    throw new ApiError(400, "invalid_state", "this sign-in was not started in this tab; sign in again");
  }
  const { oidc } = await loginConfig();
  if (!oidc) throw new ApiError(400, "no_provider", "this server has no external sign-in");
  // RFC 9207: a provider that names itself must be the one the console sent the user to.
  if (params.has("iss") && params.get("iss") !== oidc.issuer) {
    throw new ApiError(400, "invalid_issuer", `the answer came from ${params.get("iss")}, not ${oidc.issuer}`);
  }
  if (params.has("error")) {
    throw new ApiError(401, params.get("error"), params.get("error_description") || "the identity provider refused the sign-in");
  }
  const response = await fetch(oidc.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: redirectUri(),
      client_id: oidc.client_id,
      code_verifier: pending.verifier,
    }),
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok || !json.access_token) {
    throw new ApiError(response.status, json.error, json.error_description || "the identity provider issued no token");
  }
  await useToken(json.access_token);
  return true;
}
