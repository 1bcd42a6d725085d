//! The security model at work: bootstrap, the OAuth2 token endpoint's logic, turning a
//! bearer token into a principal and its access, and changing the model.
//!
//! The model (`auth::state::SecurityState`) is cached per node. A change made here
//! updates this node's cache at once; other nodes re-read it when they see its version
//! move, which they check at most [`REFRESH_EVERY`] apart (the embedded store has one
//! node, so there it is always exact). A revoked grant or role therefore stops working
//! on the next request on this node, and within that interval on the others.
//!
//! A bearer token is either one Floe issued (`auth::tokens`) or, with an external
//! identity provider configured, one its issuer signed (`auth::oidc`); which one is told
//! by the token's `iss`. An external token's principal must exist in the model, or is
//! created on first sight when so configured; its roles are those assigned in the model
//! plus those the token's roles claim names (that exist).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::error::{CatalogError, CatalogResult};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::oidc::{IdentityProvider, OidcError};
use crate::auth::secrets::{new_credentials, new_signing_key, random_hex, SecretHashes};
use crate::auth::state::{
    Access, PrincipalRecord, PrincipalRoleRecord, SecurityState, SigningKey, ROOT, SERVICE_ADMIN,
};
use crate::auth::tokens::{self, Claims, TokenError, ACCESS_TOKEN_TYPE, ISSUER};
use crate::catalog::context::Principal;
use crate::events::{ChangeEvent, Draft, Operation};
use crate::model::{now_ms, Properties};
use crate::store::{Mutation, Presence, StoreError, WriteBatch};

/// How stale another node's change may be on this node, at most.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Attempts of a model change that keeps meeting concurrent changes.
const MAX_CHANGE_ATTEMPTS: u32 = 20;
/// Tokens whose verification is remembered; beyond this the cache starts over.
const MAX_CACHED_TOKENS: usize = 10_000;
/// Longest `scope` accepted by the token endpoint.
const MAX_SCOPE_BYTES: usize = 4096;

/// The cached model and what was derived from it.
#[derive(Default)]
pub struct SecurityCache {
    current: RwLock<Arc<Cached>>,
    checked: Mutex<Option<Instant>>,
    /// Whether the cached model has a federated catalog: requests check this before
    /// looking for their catalog among them (`http::federated`).
    any_federated: std::sync::atomic::AtomicBool,
    /// Verified tokens: principal and access, valid while the model's version holds.
    /// Keyed with foldhash: every authenticated request looks its token up here, and
    /// SipHash over a ~200-byte token was half the lookup's cost. Only tokens that
    /// verified are inserted, so a client cannot flood it with chosen keys.
    tokens: Mutex<foldhash::HashMap<String, VerifiedToken>>,
    authenticators: Authenticators,
}

/// Which bearer tokens are accepted.
pub struct Authenticators {
    /// Tokens Floe issued at its token endpoint.
    pub internal: bool,
    /// Tokens of an external identity provider.
    pub external: Option<Arc<IdentityProvider>>,
}

impl Default for Authenticators {
    fn default() -> Self {
        Authenticators {
            internal: true,
            external: None,
        }
    }
}

/// A verified token: the model version and expiry it was checked against, and what it
/// resolved to (shared: each request holds them for its whole life).
type VerifiedToken = (i64, i64, Arc<Principal>, Arc<Access>);

#[derive(Default)]
pub struct Cached {
    pub version: i64,
    pub state: SecurityState,
}

/// An OAuth2 error: the RFC 6749 body `{"error", "error_description"}` and its status.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
}

impl OAuthError {
    fn new(status: u16, error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            error,
            description: description.into(),
        }
    }
}

/// A token request, as the form fields (and an HTTP Basic header) gave it.
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scope: Option<String>,
    pub subject_token: Option<String>,
    pub subject_token_type: Option<String>,
    pub requested_token_type: Option<String>,
}

pub struct TokenResponse {
    pub access_token: String,
    pub expires_in: i64,
    pub scope: String,
}

const CLIENT_CREDENTIALS: &str = "client_credentials";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

impl Catalog {
    /// Chooses which bearer tokens are accepted (default: Floe's own only).
    pub fn with_authenticators(mut self, authenticators: Authenticators) -> Self {
        self.security.authenticators = authenticators;
        self
    }

    /// Whether the model as this node knows it has a federated catalog: one atomic load,
    /// so that requests to other catalogs pay nothing for federation.
    pub fn any_federated(&self) -> bool {
        self.security
            .any_federated
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The remote of `catalog` if it is federated (as fresh as grants are), else `None`.
    pub async fn federated(
        &self,
        catalog: &str,
    ) -> CatalogResult<Option<Arc<crate::federation::remote::Remote>>> {
        let cached = self.security().await?;
        Ok(cached
            .state
            .federated
            .get(catalog)
            .map(|connection| self.remotes.get(catalog, connection)))
    }

    /// The model as this node knows it, re-read if another node changed it (checked at
    /// most every [`REFRESH_EVERY`]).
    pub async fn security(&self) -> CatalogResult<Arc<Cached>> {
        let due = {
            let mut checked = self.security.checked.lock().expect("poisoned");
            let due = checked.is_none_or(|at| at.elapsed() >= REFRESH_EVERY);
            if due {
                *checked = Some(Instant::now());
            }
            due
        };
        let current = self.security.current.read().expect("poisoned").clone();
        if !due && current.version > 0 {
            return Ok(current);
        }
        match self.store.security_version().await {
            Ok(version) if version != current.version => self.reload_security().await,
            Ok(_) => Ok(current),
            // The store is unreachable: nothing can change the model until it is back,
            // so the cached one still holds; the request meets the outage (503) itself
            // when it reaches the store.
            Err(e) if current.version > 0 => {
                tracing::debug!(error = %e, "security model not re-checked: store unavailable");
                Ok(current)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(super) async fn reload_security(&self) -> CatalogResult<Arc<Cached>> {
        let stored = self.store.security().await?;
        let state: SecurityState = serde_json::from_str(&stored.document)
            .map_err(|e| CatalogError::internal(anyhow::anyhow!("security document: {e}")))?;
        let cached = Arc::new(Cached {
            version: stored.version,
            state,
        });
        let mut current = self.security.current.write().expect("poisoned");
        if cached.version >= current.version {
            self.security.any_federated.store(
                !cached.state.federated.is_empty(),
                std::sync::atomic::Ordering::Relaxed,
            );
            *current = cached.clone();
            self.security.tokens.lock().expect("poisoned").clear();
        }
        Ok(current.clone())
    }

    /// Changes the model: `change` gets the current model and returns the outcome, which
    /// goes with the new model, `mutation` and the idempotency record into one write.
    /// Retried on a fresh model when another change won the race.
    pub(super) async fn change_security<T>(
        &self,
        ctx: &RequestContext,
        action: &str,
        mutation: Mutation,
        change: impl Fn(&mut SecurityState) -> CatalogResult<(T, Outcome)>,
    ) -> CatalogResult<T> {
        self.change_security_with(
            ctx,
            action,
            mutation,
            || std::future::ready(Ok(None)),
            change,
        )
        .await
    }

    /// As [`Self::change_security`], committing only while what `present` finds exists (a
    /// grant's object). It looks again at each attempt: the race lost may have been with
    /// that object's drop, or (for a policy) with any change of its catalog's policies.
    pub(super) async fn change_security_with<T, Found>(
        &self,
        ctx: &RequestContext,
        action: &str,
        mutation: Mutation,
        present: impl Fn() -> Found,
        change: impl Fn(&mut SecurityState) -> CatalogResult<(T, Outcome)>,
    ) -> CatalogResult<T>
    where
        Found: std::future::Future<Output = CatalogResult<Option<Presence>>>,
    {
        for _ in 0..MAX_CHANGE_ATTEMPTS {
            let present = present().await?;
            let current = self.reload_security().await?;
            let mut state = current.state.clone();
            let (value, outcome) = change(&mut state)?;
            let document = serde_json::to_string(&state).map_err(CatalogError::internal)?;
            let events = self.security_events(ctx, action, &mutation);
            let mut batch: WriteBatch = self.batch(ctx, mutation.clone(), &outcome, events);
            batch.security = Some((current.version, document));
            batch.present = present;
            match self.apply(batch, None).await {
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
                // `apply` has re-read the model.
                Ok(_) => return Ok(value),
            }
        }
        Err(StoreError::Conflict.into())
    }

    /// A security change's event: the catalog's own when it creates or drops one (its
    /// roles go with it), otherwise a service-wide `x-floe-update-security`.
    fn security_events(
        &self,
        ctx: &RequestContext,
        action: &str,
        mutation: &Mutation,
    ) -> Vec<ChangeEvent> {
        match mutation {
            Mutation::CreateCatalog(record) => self.events(
                ctx,
                Some((record.id, &record.name)),
                vec![Draft::catalog(
                    Operation::CreateCatalog,
                    record.id,
                    &record.name,
                )],
            ),
            Mutation::DropCatalog { catalog, name } => self.events(
                ctx,
                Some((*catalog, name)),
                vec![Draft::catalog(Operation::DropCatalog, *catalog, name)],
            ),
            _ => self.events(ctx, None, vec![Draft::security(action)]),
        }
    }

    /// On first start: a signing key, the `service_admin` principal role, the `root`
    /// principal holding it (with the given credentials, or generated ones, returned
    /// once), and `catalog_admin` roles for the catalogs that exist. Does nothing when
    /// the model has principals already.
    pub async fn bootstrap_security(
        &self,
        credentials: Option<(String, String)>,
    ) -> CatalogResult<Option<(String, String)>> {
        if !self.reload_security().await?.state.principals.is_empty() {
            return Ok(None);
        }
        let catalogs = self.store.list_catalogs().await?;
        let (client_id, secret) = credentials.unwrap_or_else(new_credentials);
        let ctx = RequestContext::system();
        let created = self
            .change_security(&ctx, "bootstrap-security", Mutation::None, |state| {
                if !state.principals.is_empty() {
                    return Ok((false, Outcome::NoContent));
                }
                let now = now_ms();
                if state.signing_keys.is_empty() {
                    state.signing_keys.push(SigningKey {
                        kid: random_hex(8),
                        secret: new_signing_key(),
                        created_ms: now,
                        retired_after_ms: None,
                    });
                }
                state
                    .principal_roles
                    .entry(SERVICE_ADMIN.into())
                    .or_insert_with(|| PrincipalRoleRecord {
                        name: SERVICE_ADMIN.into(),
                        properties: Properties::new(),
                        catalog_roles: BTreeSet::new(),
                        created_ms: now,
                        updated_ms: now,
                        version: 1,
                    });
                state.principals.insert(
                    ROOT.into(),
                    PrincipalRecord {
                        name: ROOT.into(),
                        client_id: client_id.clone(),
                        secret: SecretHashes::new(&secret),
                        properties: Properties::new(),
                        principal_roles: BTreeSet::from([SERVICE_ADMIN.to_string()]),
                        created_ms: now,
                        updated_ms: now,
                        version: 1,
                    },
                );
                for catalog in &catalogs {
                    if !state.catalog_roles.contains_key(&catalog.name) {
                        state.add_catalog(&catalog.name, now);
                    }
                }
                Ok((true, Outcome::NoContent))
            })
            .await?;
        Ok(created.then_some((client_id, secret)))
    }

    /// A new signing key for Floe's tokens (service_admin only). Tokens signed with
    /// the previous keys verify until they expire (`token_lifetime` being the longest
    /// any node issues); then those keys are retired by a later rotation. With
    /// `retire_previous`, the previous keys go at once, and every token with them.
    pub async fn rotate_signing_key(
        &self,
        ctx: &RequestContext,
        token_lifetime: Duration,
        retire_previous: bool,
    ) -> CatalogResult<serde_json::Value> {
        ctx.require_service_admin()?;
        let kid = random_hex(8);
        let secret = new_signing_key();
        self.change_security(ctx, "rotate-signing-key", Mutation::None, |state| {
            state.rotate_signing_key(
                SigningKey {
                    kid: kid.clone(),
                    secret: secret.clone(),
                    created_ms: now_ms(),
                    retired_after_ms: None,
                },
                token_lifetime.as_millis() as i64,
            );
            if retire_previous {
                state.signing_keys.truncate(1);
            }
            let body = serde_json::json!({
                "kid": kid,
                "verifying": state.signing_keys.iter().map(|k| &k.kid).collect::<Vec<_>>(),
            });
            Ok((body.clone(), Outcome::Json { status: 200, body }))
        })
        .await
    }

    /// The token endpoint: client credentials (form fields or HTTP Basic) or a token
    /// exchange (Iceberg Java's refresh), as Polaris answers them.
    pub async fn issue_token(
        &self,
        request: &TokenRequest,
        lifetime: Duration,
    ) -> Result<TokenResponse, OAuthError> {
        let cached = self.security().await.map_err(|_| {
            OAuthError::new(503, "temporarily_unavailable", "The store is unavailable")
        })?;
        let state = &cached.state;
        let grant = request.grant_type.as_deref().unwrap_or("");
        if grant != CLIENT_CREDENTIALS && grant != TOKEN_EXCHANGE {
            return Err(OAuthError::new(
                400,
                "unsupported_grant_type",
                "The grant type is invalid",
            ));
        }
        if request
            .requested_token_type
            .as_deref()
            .is_some_and(|t| t != ACCESS_TOKEN_TYPE)
        {
            return Err(OAuthError::new(
                400,
                "invalid_request",
                "The request is invalid",
            ));
        }
        let scope = request.scope.as_deref().unwrap_or("");
        if scope.len() > MAX_SCOPE_BYTES {
            return Err(OAuthError::new(
                400,
                "invalid_scope",
                "The scope is invalid",
            ));
        }
        let now_s = now_ms() / 1000;
        let (principal, held, secret_tag): (&PrincipalRecord, Vec<String>, String) = match (
            &request.client_id,
            &request.client_secret,
            &request.subject_token,
        ) {
            // Client credentials, also when sent with a token exchange (a client that
            // refreshes by logging in again).
            (Some(id), Some(secret), _) => {
                let (principal, tag) = state
                    .principal_by_client_id(id)
                    .and_then(|p| Some((p, p.secret.tag_for(secret)?)))
                    .ok_or_else(|| {
                        OAuthError::new(401, "unauthorized_client", "The client is not authorized")
                    })?;
                (
                    principal,
                    principal.principal_roles.iter().cloned().collect(),
                    tag,
                )
            }
            (_, _, Some(subject)) if grant == TOKEN_EXCHANGE => {
                let claims = tokens::verify(state, subject, now_s)
                    .map_err(|_| OAuthError::new(400, "invalid_grant", "The grant is invalid"))?;
                // Only while the secret the token was issued with is valid: a token from
                // before secrets were named, or from reset credentials, is not renewed.
                let principal = state
                    .principals
                    .get(&claims.sub)
                    .filter(|p| !claims.secret_tag.is_empty() && issued_to(p, &claims))
                    .ok_or_else(|| OAuthError::new(400, "invalid_grant", "The grant is invalid"))?;
                // A refreshed token carries no more roles than the one it replaces.
                let held = claims
                    .roles()
                    .into_iter()
                    .filter(|r| principal.principal_roles.contains(r))
                    .collect();
                (principal, held, claims.secret_tag)
            }
            _ => {
                return Err(OAuthError::new(
                    400,
                    "invalid_client",
                    "The Client is invalid",
                ))
            }
        };
        let roles = scoped_roles(scope, &held)
            .ok_or_else(|| OAuthError::new(400, "invalid_scope", "The scope is invalid"))?;
        let lifetime_s = lifetime.as_secs().max(1) as i64;
        let claims = Claims {
            iss: ISSUER.into(),
            sub: principal.name.clone(),
            iat: now_s,
            exp: now_s + lifetime_s,
            jti: uuid::Uuid::new_v4().to_string(),
            client_id: principal.client_id.clone(),
            scope: roles.join(" "),
            secret_tag,
        };
        let access_token = tokens::issue(state, &claims)
            .map_err(|e| OAuthError::new(500, "server_error", e.to_string()))?;
        Ok(TokenResponse {
            access_token,
            expires_in: lifetime_s,
            scope: roles
                .iter()
                .map(|r| format!("PRINCIPAL_ROLE:{r}"))
                .collect::<Vec<_>>()
                .join(" "),
        })
    }

    /// A bearer token's principal and what it may do (401 if the token is not valid
    /// now, or its principal is gone). Verified tokens are remembered until the model
    /// changes, so a load pays for a hash lookup, not a signature check.
    pub async fn authenticate(&self, token: &str) -> CatalogResult<(Arc<Principal>, Arc<Access>)> {
        let cached = self.security().await?;
        let now_s = now_ms() / 1000;
        if let Some((version, exp, principal, access)) =
            self.security.tokens.lock().expect("poisoned").get(token)
        {
            if *version == cached.version && *exp > now_s {
                return Ok((principal.clone(), access.clone()));
            }
        }
        // Boxed: verifying may fetch an external issuer's keys over HTTP, a future of
        // kilobytes that every request's future would otherwise reserve room for (and
        // copy when it is boxed), though nearly every request is a cache hit.
        Box::pin(self.verify_token(token, cached, now_s)).await
    }

    /// A token not in the cache (or no longer valid there): verified, then cached.
    async fn verify_token(
        &self,
        token: &str,
        mut cached: Arc<Cached>,
        now_s: i64,
    ) -> CatalogResult<(Arc<Principal>, Arc<Access>)> {
        let authenticators = &self.security.authenticators;
        let (name, roles, exp) = match &authenticators.external {
            Some(idp) if !authenticators.internal || idp.issued(token) => {
                let identity = idp
                    .verify(token, now_s)
                    .await
                    .map_err(|e| CatalogError::Unauthorized(external_refusal(&e)))?;
                if !cached.state.principals.contains_key(&identity.principal) {
                    if !idp.settings().create_principals {
                        return Err(CatalogError::Unauthorized(format!(
                            "The access token's principal {} is not known to this server",
                            identity.principal
                        )));
                    }
                    self.create_external_principal(&identity.principal, &idp.settings().issuer)
                        .await?;
                    cached = self.security().await?;
                }
                let record = cached
                    .state
                    .principals
                    .get(&identity.principal)
                    .ok_or_else(|| {
                        CatalogError::Unauthorized(
                            "The access token's principal no longer exists".into(),
                        )
                    })?;
                let mut roles = record.principal_roles.clone();
                roles.extend(
                    identity
                        .roles
                        .into_iter()
                        .filter(|r| cached.state.principal_roles.contains_key(r)),
                );
                (record.name.clone(), roles, identity.exp)
            }
            _ => {
                let claims = tokens::verify(&cached.state, token, now_s).map_err(|e| {
                    CatalogError::Unauthorized(match e {
                        TokenError::Expired => "The access token has expired".into(),
                        _ => "The access token is not valid".into(),
                    })
                })?;
                let record = cached.state.principals.get(&claims.sub).ok_or_else(|| {
                    CatalogError::Unauthorized(
                        "The access token's principal no longer exists".into(),
                    )
                })?;
                // A token from before secrets were named in tokens is taken until it
                // expires (one lifetime after an upgrade), but never renewed (above).
                let legacy = claims.secret_tag.is_empty() && claims.client_id == record.client_id;
                if !(legacy || issued_to(record, &claims)) {
                    return Err(CatalogError::Unauthorized(
                        "The access token was issued with credentials that are no longer valid (reset, or the principal was dropped and created again)".into(),
                    ));
                }
                let roles = claims
                    .roles()
                    .into_iter()
                    .filter(|r| record.principal_roles.contains(r))
                    .collect();
                (record.name.clone(), roles, claims.exp)
            }
        };
        let access = Arc::new(cached.state.roles_access(&roles));
        let principal = Arc::new(Principal {
            name,
            roles: roles.into_iter().collect(),
        });
        let mut tokens = self.security.tokens.lock().expect("poisoned");
        if tokens.len() >= MAX_CACHED_TOKENS {
            tokens.clear();
        }
        tokens.insert(
            token.to_string(),
            (cached.version, exp, principal.clone(), access.clone()),
        );
        Ok((principal, access))
    }

    /// A principal first seen in an external token: no roles of its own (the token's
    /// roles claim gives them), and credentials nobody is shown (an administrator may
    /// reset them to let it log in at the token endpoint too).
    async fn create_external_principal(&self, name: &str, issuer: &str) -> CatalogResult<()> {
        let (client_id, secret) = new_credentials();
        self.change_security(
            &RequestContext::system(),
            "create-external-principal",
            Mutation::None,
            |state| {
                if !state.principals.contains_key(name) {
                    let now = now_ms();
                    state.principals.insert(
                        name.to_string(),
                        PrincipalRecord {
                            name: name.to_string(),
                            client_id: client_id.clone(),
                            secret: SecretHashes::new(&secret),
                            properties: Properties::from([(
                                EXTERNAL_PRINCIPAL_PROPERTY.to_string(),
                                issuer.to_string(),
                            )]),
                            principal_roles: BTreeSet::new(),
                            created_ms: now,
                            updated_ms: now,
                            version: 1,
                        },
                    );
                }
                Ok(((), Outcome::NoContent))
            },
        )
        .await?;
        tracing::info!(principal = %name, issuer = %issuer, "created a principal first seen in an external token");
        Ok(())
    }
}

/// Set on a principal created from an external token: the issuer that named it.
pub const EXTERNAL_PRINCIPAL_PROPERTY: &str = "floe.identity-provider";

/// Whether `claims` were issued to this very principal (its client id: not to another
/// of the same name, dropped since) with a secret it still holds.
fn issued_to(principal: &PrincipalRecord, claims: &Claims) -> bool {
    claims.client_id == principal.client_id && principal.secret.holds_tag(&claims.secret_tag)
}

fn external_refusal(e: &OidcError) -> String {
    match e {
        OidcError::Expired => "The access token has expired".into(),
        OidcError::NotYetValid => "The access token is not valid yet".into(),
        OidcError::WrongAudience => "The access token is not meant for this server (aud)".into(),
        OidcError::MissingClaim(c) => format!("The access token has no usable claim {c}"),
        _ => "The access token is not valid".into(),
    }
}

/// The roles a token gets for `scope`: `catalog` (what clients send by default), an
/// empty scope and `PRINCIPAL_ROLE:ALL` mean all of `held`; `PRINCIPAL_ROLE:<name>`
/// items name some of them. `None` when the scope names anything else, or a role the
/// principal does not hold.
fn scoped_roles(scope: &str, held: &[String]) -> Option<Vec<String>> {
    let items: Vec<&str> = scope.split_whitespace().collect();
    if items.is_empty()
        || items
            .iter()
            .any(|i| *i == "catalog" || *i == "PRINCIPAL_ROLE:ALL")
    {
        return items
            .iter()
            .all(|i| *i == "catalog" || i.starts_with("PRINCIPAL_ROLE:"))
            .then(|| held.to_vec());
    }
    let mut roles = Vec::new();
    for item in items {
        let role = item.strip_prefix("PRINCIPAL_ROLE:")?;
        if !held.iter().any(|h| h == role) {
            return None;
        }
        if !roles.iter().any(|r| r == role) {
            roles.push(role.to_string());
        }
    }
    Some(roles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        let held = vec!["a".to_string(), "b".to_string()];
        assert_eq!(scoped_roles("catalog", &held), Some(held.clone()));
        assert_eq!(scoped_roles("", &held), Some(held.clone()));
        assert_eq!(
            scoped_roles("PRINCIPAL_ROLE:ALL", &held),
            Some(held.clone())
        );
        assert_eq!(
            scoped_roles("PRINCIPAL_ROLE:b", &held),
            Some(vec!["b".into()])
        );
        assert_eq!(scoped_roles("PRINCIPAL_ROLE:c", &held), None);
        assert_eq!(scoped_roles("openid", &held), None);
        assert_eq!(scoped_roles("catalog openid", &held), None);
    }
}
