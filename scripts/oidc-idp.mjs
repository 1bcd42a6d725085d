// An OpenID Connect provider for the console's sign-in tests: panva's oidc-provider (an
// OpenID Certified implementation) with its development login and consent pages, which
// accept any login name and password. Started by scripts/oidc-provider.sh; loopback only.
//
//   node oidc-idp.mjs PORT REDIRECT_URI [ROLE,ROLE...]
//
// Issuer http://127.0.0.1:PORT. One public client, `floe-console` (no secret, PKCE
// required, as for any public client), allowed to come back to REDIRECT_URI and to call
// the token endpoint from the browser (CORS). Access tokens are JWTs (RS256, a key made at
// start and published in the JWKS) for the resource `urn:floe`, audience `floe`, when the
// client asks for the scope `catalog`; `sub` is the login name, and `roles` lists ROLES.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import Provider from "oidc-provider";

const [port, redirectUri, roleList = ""] = process.argv.slice(2);
if (!port || !redirectUri) {
  console.error("usage: node oidc-idp.mjs PORT REDIRECT_URI [ROLES]");
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
const roles = roleList.split(",").filter(Boolean);
const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });

const provider = new Provider(issuer, {
  clients: [{
    client_id: "floe-console",
    token_endpoint_auth_method: "none",
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  jwks: { keys: [{ ...key, kid: "idp-1", use: "sig", alg: "RS256" }] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  scopes: ["openid", "catalog"],
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => "urn:floe",
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: "catalog",
        audience: "floe",
        accessTokenFormat: "jwt",
        accessTokenTTL: 600,
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  extraTokenClaims: () => (roles.length ? { roles } : undefined),
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  clientBasedCORS: () => true,
});

// The development pages import a web font from Google; the tests run offline and fail on
// any request off the machine, so that import goes.
provider.use(async (ctx, next) => {
  await next();
  if (typeof ctx.body === "string" && ctx.body.includes("fonts.googleapis.com")) {
    ctx.body = ctx.body.replace(/@import url\(https:\/\/fonts\.googleapis\.com[^)]*\);/g, "");
  }
});

provider.listen(Number(port), "127.0.0.1", () => console.log(`oidc-provider listening at ${issuer}`));
