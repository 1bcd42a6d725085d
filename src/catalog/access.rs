//! Managing who may do what (Polaris's management API): principals and their
//! credentials, principal roles, catalog roles, and grants. Each change is one
//! compare-and-swap of the security document (`Catalog::change_security`).
//!
//! Who may manage what: principals, principal roles and the assignment of principal
//! roles need `service_admin`; a catalog's roles and grants need CATALOG_MANAGE_ACCESS
//! on that catalog (so its admin can neither reach another catalog nor make anyone
//! `service_admin`). Secrets are returned only by create, rotate and reset, once.

use std::collections::BTreeSet;

use super::error::{CatalogError, CatalogResult, Missing};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Grant, Privilege, Securable};
use crate::auth::secrets::{new_credentials, SecretHashes};
use crate::auth::state::{
    CatalogRoleRecord, Follow, PrincipalRecord, PrincipalRoleRecord, SecurityState, CATALOG_ADMIN,
    ROOT, SERVICE_ADMIN,
};
use crate::model::{now_ms, CatalogRecord, Ident, Namespace, ObjectKind, Properties};
use crate::store::{Mutation, Presence, WriteBatch};

/// Longest principal or role name.
pub const MAX_ROLE_NAME: usize = 256;

fn not_found(what: &str, name: &str) -> CatalogError {
    CatalogError::not_found(Missing::Catalog, format!("{what} {name} does not exist"))
}

fn validate_name(what: &str, name: &str) -> CatalogResult<()> {
    if name.is_empty() || name.len() > MAX_ROLE_NAME || name.chars().any(char::is_control) {
        return Err(CatalogError::bad_request(format!(
            "{what} name must be 1 to {MAX_ROLE_NAME} bytes without control characters"
        )));
    }
    Ok(())
}

/// A principal's public view (never its secret).
pub fn principal_view(p: &PrincipalRecord) -> serde_json::Value {
    serde_json::json!({
        "name": p.name,
        "clientId": p.client_id,
        "properties": p.properties,
        "createTimestamp": p.created_ms,
        "lastUpdateTimestamp": p.updated_ms,
        "entityVersion": p.version,
    })
}

/// A role's public view (principal role or catalog role).
pub fn role_view(
    name: &str,
    properties: &Properties,
    created: i64,
    updated: i64,
    version: i64,
) -> serde_json::Value {
    serde_json::json!({
        "name": name, "properties": properties, "createTimestamp": created,
        "lastUpdateTimestamp": updated, "entityVersion": version,
    })
}

/// A principal role's or catalog role's public view.
pub trait RoleView {
    fn view(&self) -> serde_json::Value;
}

macro_rules! role_views {
    ($($record:ty),*) => {$(
        impl RoleView for $record {
            fn view(&self) -> serde_json::Value {
                role_view(&self.name, &self.properties, self.created_ms, self.updated_ms, self.version)
            }
        }
    )*};
}
role_views!(PrincipalRoleRecord, CatalogRoleRecord);

/// The entity an update of properties names.
#[derive(Debug, Clone, Copy)]
pub enum Entity<'a> {
    Principal(&'a str),
    PrincipalRole(&'a str),
    CatalogRole { catalog: &'a str, name: &'a str },
}

/// Replaces an entity's properties if its version is still `expected` (Polaris's
/// optimistic `currentEntityVersion`); a stale version is a 409.
fn replace_properties(
    what: &str,
    (properties, updated_ms, version): (&mut Properties, &mut i64, &mut i64),
    expected: i64,
    new: &Properties,
) -> CatalogResult<()> {
    if *version != expected {
        return Err(CatalogError::CommitFailed(format!(
            "{what} is at version {version}, not {expected}; fetch it again and retry"
        )));
    }
    *properties = new.clone();
    *updated_ms = now_ms();
    *version += 1;
    Ok(())
}

/// A new secret's answer, and the outcome an idempotent retry of its request replays:
/// the same answer without the secret, which is shown once and never stored in the clear
/// (`clientSecret` is optional in Polaris's `PrincipalWithCredentials`). A client that
/// lost the first answer resets the secret.
fn with_credentials(
    p: &PrincipalRecord,
    secret: &str,
    status: u16,
) -> (serde_json::Value, Outcome) {
    let answer = serde_json::json!({
        "principal": principal_view(p),
        "credentials": { "clientId": p.client_id, "clientSecret": secret },
    });
    let body = serde_json::json!({
        "principal": principal_view(p),
        "credentials": { "clientId": p.client_id },
    });
    (answer, Outcome::Json { status, body })
}

impl Catalog {
    /// Reads the model for a management call (fresh from the store).
    pub async fn security_view<T>(
        &self,
        ctx: &RequestContext,
        catalog: Option<&str>,
        read: impl FnOnce(&SecurityState) -> CatalogResult<T>,
    ) -> CatalogResult<T> {
        match catalog {
            None => ctx.require_service_admin()?,
            Some(c) => {
                self.get_catalog(c).await?;
                ctx.require(c, Privilege::CATALOG_MANAGE_ACCESS, &Securable::Catalog)?;
            }
        }
        let current = self.security().await?;
        read(&current.state)
    }

    /// `PUT` of a principal, principal role or catalog role: new properties, if the
    /// caller saw the current version. Returns the updated entity's view.
    pub async fn update_properties(
        &self,
        ctx: &RequestContext,
        entity: Entity<'_>,
        expected_version: i64,
        properties: Properties,
    ) -> CatalogResult<serde_json::Value> {
        match entity {
            Entity::Principal(_) | Entity::PrincipalRole(_) => ctx.require_service_admin()?,
            Entity::CatalogRole { catalog, .. } => {
                self.get_catalog(catalog).await?;
                ctx.require(
                    catalog,
                    Privilege::CATALOG_MANAGE_ACCESS,
                    &Securable::Catalog,
                )?;
            }
        }
        let new = &properties;
        self.change_security(ctx, "update-properties", Mutation::None, |state| {
            let view = match entity {
                Entity::Principal(name) => {
                    let p = state
                        .principals
                        .get_mut(name)
                        .ok_or_else(|| not_found("Principal", name))?;
                    let what = format!("Principal {name}");
                    replace_properties(&what, p.versioned(), expected_version, new)?;
                    principal_view(p)
                }
                Entity::PrincipalRole(name) => {
                    let r = state
                        .principal_roles
                        .get_mut(name)
                        .ok_or_else(|| not_found("Principal role", name))?;
                    let what = format!("Principal role {name}");
                    replace_properties(&what, r.versioned(), expected_version, new)?;
                    r.view()
                }
                Entity::CatalogRole { catalog, name } => {
                    let r = state
                        .catalog_roles
                        .get_mut(catalog)
                        .and_then(|roles| roles.get_mut(name))
                        .ok_or_else(|| not_found("Catalog role", name))?;
                    let what = format!("Catalog role {name}");
                    replace_properties(&what, r.versioned(), expected_version, new)?;
                    r.view()
                }
            };
            Ok((
                view.clone(),
                Outcome::Json {
                    status: 200,
                    body: view,
                },
            ))
        })
        .await
    }

    /// Creates a principal; the answer (with the secret) is the only time the secret is
    /// shown.
    pub async fn create_principal(
        &self,
        ctx: &RequestContext,
        name: &str,
        properties: Properties,
    ) -> CatalogResult<serde_json::Value> {
        ctx.require_service_admin()?;
        validate_name("Principal", name)?;
        let (client_id, secret) = new_credentials();
        self.change_security(ctx, "create-principal", Mutation::None, |state| {
            if state.principals.contains_key(name) {
                return Err(CatalogError::AlreadyExists(format!(
                    "Principal {name} already exists"
                )));
            }
            let now = now_ms();
            let record = PrincipalRecord {
                name: name.to_string(),
                client_id: client_id.clone(),
                secret: SecretHashes::new(&secret),
                properties: properties.clone(),
                principal_roles: BTreeSet::new(),
                created_ms: now,
                updated_ms: now,
                version: 1,
            };
            let answer = with_credentials(&record, &secret, 201);
            state.principals.insert(name.to_string(), record);
            Ok(answer)
        })
        .await
    }

    pub async fn drop_principal(&self, ctx: &RequestContext, name: &str) -> CatalogResult<()> {
        ctx.require_service_admin()?;
        if name == ROOT {
            return Err(CatalogError::bad_request(
                "The root principal cannot be dropped",
            ));
        }
        self.change_security(ctx, "drop-principal", Mutation::None, |state| {
            state
                .principals
                .remove(name)
                .ok_or_else(|| not_found("Principal", name))?;
            Ok(((), Outcome::NoContent))
        })
        .await
    }

    /// A new secret: with `keep_old`, the current one stays valid as the secondary
    /// (rotate); else it stops working at once (reset).
    pub async fn new_principal_secret(
        &self,
        ctx: &RequestContext,
        name: &str,
        keep_old: bool,
    ) -> CatalogResult<serde_json::Value> {
        ctx.require_service_admin()?;
        let (_, secret) = new_credentials();
        self.change_security(ctx, "new-principal-secret", Mutation::None, |state| {
            let p = state
                .principals
                .get_mut(name)
                .ok_or_else(|| not_found("Principal", name))?;
            p.secret = if keep_old {
                p.secret.rotate(&secret)
            } else {
                SecretHashes::reset(&secret)
            };
            p.version += 1;
            p.updated_ms = now_ms();
            Ok(with_credentials(p, &secret, 200))
        })
        .await
    }

    pub async fn create_principal_role(
        &self,
        ctx: &RequestContext,
        name: &str,
        properties: Properties,
    ) -> CatalogResult<serde_json::Value> {
        ctx.require_service_admin()?;
        validate_name("Principal role", name)?;
        self.change_security(ctx, "create-principal-role", Mutation::None, |state| {
            if state.principal_roles.contains_key(name) {
                return Err(CatalogError::AlreadyExists(format!(
                    "Principal role {name} already exists"
                )));
            }
            let now = now_ms();
            state.principal_roles.insert(
                name.to_string(),
                PrincipalRoleRecord {
                    name: name.to_string(),
                    properties: properties.clone(),
                    catalog_roles: BTreeSet::new(),
                    created_ms: now,
                    updated_ms: now,
                    version: 1,
                },
            );
            let view = role_view(name, &properties, now, now, 1);
            Ok((
                view.clone(),
                Outcome::Json {
                    status: 201,
                    body: view,
                },
            ))
        })
        .await
    }

    pub async fn drop_principal_role(&self, ctx: &RequestContext, name: &str) -> CatalogResult<()> {
        ctx.require_service_admin()?;
        if name == SERVICE_ADMIN {
            return Err(CatalogError::bad_request(
                "The service_admin role cannot be dropped",
            ));
        }
        self.change_security(ctx, "drop-principal-role", Mutation::None, |state| {
            state
                .principal_roles
                .remove(name)
                .ok_or_else(|| not_found("Principal role", name))?;
            for p in state.principals.values_mut() {
                p.principal_roles.remove(name);
            }
            Ok(((), Outcome::NoContent))
        })
        .await
    }

    /// Gives (or, with `assign` false, takes) a principal role to a principal.
    pub async fn assign_principal_role(
        &self,
        ctx: &RequestContext,
        principal: &str,
        role: &str,
        assign: bool,
    ) -> CatalogResult<()> {
        ctx.require_service_admin()?;
        let outcome = if assign {
            Outcome::Json {
                status: 201,
                body: serde_json::json!({}),
            }
        } else {
            Outcome::NoContent
        };
        self.change_security(ctx, "assign-principal-role", Mutation::None, |state| {
            if !state.principal_roles.contains_key(role) {
                return Err(not_found("Principal role", role));
            }
            let p = state
                .principals
                .get_mut(principal)
                .ok_or_else(|| not_found("Principal", principal))?;
            if assign {
                p.principal_roles.insert(role.to_string());
            } else if !p.principal_roles.remove(role) {
                return Err(not_found("Principal role assignment", role));
            }
            Ok(((), outcome.clone()))
        })
        .await
    }

    pub async fn create_catalog_role(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        name: &str,
        properties: Properties,
    ) -> CatalogResult<serde_json::Value> {
        self.get_catalog(catalog).await?;
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_ACCESS,
            &Securable::Catalog,
        )?;
        validate_name("Catalog role", name)?;
        self.change_security(ctx, "create-catalog-role", Mutation::None, |state| {
            let roles = state.catalog_roles.entry(catalog.to_string()).or_default();
            if roles.contains_key(name) {
                return Err(CatalogError::AlreadyExists(format!(
                    "Catalog role {name} already exists in {catalog}"
                )));
            }
            let now = now_ms();
            roles.insert(
                name.to_string(),
                CatalogRoleRecord {
                    name: name.to_string(),
                    properties: properties.clone(),
                    grants: BTreeSet::new(),
                    created_ms: now,
                    updated_ms: now,
                    version: 1,
                },
            );
            let view = role_view(name, &properties, now, now, 1);
            Ok((
                view.clone(),
                Outcome::Json {
                    status: 201,
                    body: view,
                },
            ))
        })
        .await
    }

    pub async fn drop_catalog_role(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        name: &str,
    ) -> CatalogResult<()> {
        // A missing catalog is named as such (its roles would be "missing" too).
        self.get_catalog(catalog).await?;
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_ACCESS,
            &Securable::Catalog,
        )?;
        if name == CATALOG_ADMIN {
            return Err(CatalogError::bad_request(
                "The catalog_admin role cannot be dropped",
            ));
        }
        self.change_security(ctx, "drop-catalog-role", Mutation::None, |state| {
            state
                .catalog_roles
                .get_mut(catalog)
                .and_then(|roles| roles.remove(name))
                .ok_or_else(|| not_found("Catalog role", name))?;
            for role in state.principal_roles.values_mut() {
                role.catalog_roles
                    .remove(&(catalog.to_string(), name.to_string()));
            }
            Ok(((), Outcome::NoContent))
        })
        .await
    }

    /// Gives (or takes) a catalog role of `catalog` to a principal role. Needs
    /// CATALOG_MANAGE_ACCESS on the catalog; giving one to `service_admin` needs
    /// `service_admin`.
    pub async fn assign_catalog_role(
        &self,
        ctx: &RequestContext,
        principal_role: &str,
        catalog: &str,
        catalog_role: &str,
        assign: bool,
    ) -> CatalogResult<()> {
        self.get_catalog(catalog).await?;
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_ACCESS,
            &Securable::Catalog,
        )?;
        if principal_role == SERVICE_ADMIN {
            ctx.require_service_admin()?;
        }
        let outcome = if assign {
            Outcome::Json {
                status: 201,
                body: serde_json::json!({}),
            }
        } else {
            Outcome::NoContent
        };
        self.change_security(ctx, "assign-catalog-role", Mutation::None, |state| {
            let exists = state
                .catalog_roles
                .get(catalog)
                .is_some_and(|r| r.contains_key(catalog_role));
            if !exists {
                return Err(not_found("Catalog role", catalog_role));
            }
            let role = state
                .principal_roles
                .get_mut(principal_role)
                .ok_or_else(|| not_found("Principal role", principal_role))?;
            let key = (catalog.to_string(), catalog_role.to_string());
            if assign {
                role.catalog_roles.insert(key);
            } else if !role.catalog_roles.remove(&key) {
                return Err(not_found("Catalog role assignment", catalog_role));
            }
            Ok(((), outcome.clone()))
        })
        .await
    }

    /// Adds (or revokes) a grant on a securable of `catalog` to one of its roles.
    pub async fn change_grant(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        catalog_role: &str,
        grant: Grant,
        add: bool,
    ) -> CatalogResult<()> {
        let record = self.get_catalog(catalog).await?;
        ctx.require(
            catalog,
            Privilege::CATALOG_MANAGE_ACCESS,
            &Securable::Catalog,
        )?;
        if add && !grant.securable.grantable(grant.privilege) {
            return Err(CatalogError::bad_request(format!(
                "Privilege {} cannot be granted on a {} (one of the management API's {} values)",
                grant.privilege.as_str(),
                grant.securable.kind(),
                grant.securable.privilege_enum(),
            )));
        }
        let outcome = if add {
            Outcome::Json {
                status: 201,
                body: serde_json::json!({}),
            }
        } else {
            Outcome::NoContent
        };
        // The grant commits only while its object still exists (`present`): a drop
        // meanwhile takes the object's grants with it (`grants_follow`), so one that
        // slipped in after it would apply to whatever is created under the name later.
        // Revoking needs no check (the grant must exist).
        let (record, securable) = (&record, &grant.securable);
        let present = move || async move {
            if add {
                self.check_securable(record, securable).await
            } else {
                Ok(None)
            }
        };
        self.change_security_with(ctx, "change-grant", Mutation::None, present, |state| {
            let role = state
                .catalog_roles
                .get_mut(catalog)
                .and_then(|roles| roles.get_mut(catalog_role))
                .ok_or_else(|| not_found("Catalog role", catalog_role))?;
            let changed = if add {
                role.grants.insert(grant.clone())
            } else {
                role.grants.remove(&grant)
            };
            if changed {
                role.version += 1;
                role.updated_ms = now_ms();
            } else if !add {
                return Err(not_found("Grant", grant.privilege.as_str()));
            }
            Ok(((), outcome.clone()))
        })
        .await
    }

    /// A grant names a namespace, table, view or policy that exists (404 otherwise, as Polaris
    /// answers): a grant on a name nothing has would silently apply to whatever is
    /// created under that name later. Revoking needs no check (the grant must exist).
    /// Returns what the grant's write must find still there when it commits.
    async fn check_securable(
        &self,
        record: &CatalogRecord,
        securable: &Securable,
    ) -> CatalogResult<Option<Presence>> {
        let catalog = &record.name;
        let (levels, object) = match securable {
            Securable::Catalog => return Ok(None),
            Securable::Namespace { namespace } => (namespace, None),
            // A table grant may name a generic table: Polaris guards both alike.
            Securable::Table { namespace, name } => (
                namespace,
                Some((vec![ObjectKind::Table, ObjectKind::GenericTable], name)),
            ),
            Securable::View { namespace, name } => {
                (namespace, Some((vec![ObjectKind::View], name)))
            }
            Securable::Policy { namespace, name } => {
                // Policies live in the catalog's policy document, which the store does
                // not read: the grant commits only while that document is as read here.
                let namespace = Namespace::new(namespace.clone())?;
                let (version, policies) = self.policy_state(record).await?;
                policies.get(&namespace, name)?;
                return Ok(Some(Presence::Policies {
                    catalog: record.id,
                    version,
                }));
            }
        };
        let namespace = Namespace::new(levels.clone())?;
        let Some((kinds, name)) = object else {
            self.namespace_properties(catalog, &namespace).await?;
            return Ok(Some(Presence::Namespace {
                catalog: record.id,
                namespace,
            }));
        };
        let ident = Ident::new(namespace, name.clone())?;
        let found = self.store.load_object(catalog, &ident).await?;
        if !found.is_some_and(|o| kinds.contains(&o.kind)) {
            return Err(super::error::object_missing(kinds[0], &ident));
        }
        Ok(Some(Presence::Object {
            catalog: record.id,
            ident,
            kinds,
        }))
    }

    /// Makes a drop's or rename's `batch` carry the grants on `securable` along with its
    /// object (`SecurityState::grants_follow`): moved to `to`, or removed (kept for the
    /// undrop when the drop keeps a recoverable record) in the same transaction when
    /// there are any, and otherwise asserted to be still none (`security_seen`), which a
    /// grant committed meanwhile breaks (`Conflict`: the caller retries, `Catalog::apply`
    /// having re-read the model). A grant's own write holds its object (`present`), so a
    /// grant and a drop never both miss each other. A grant on a policy holds the
    /// catalog's policy document, which the policy's drop swaps, in the same way.
    pub(super) async fn grants_follow(
        &self,
        batch: &mut WriteBatch,
        catalog: &str,
        securable: &Securable,
        to: Option<&Securable>,
    ) -> CatalogResult<()> {
        let current = self.security().await?;
        if !current.state.has_grants_on(catalog, securable) {
            batch.security_seen = Some(current.version);
            return Ok(());
        }
        // A recoverable drop keeps them for its undrop.
        let kept = match &batch.mutation {
            Mutation::DropObject {
                retain: Some(retention),
                ..
            } => Some((retention.id.clone(), retention.expires_ms)),
            _ => None,
        };
        let follow = match (to, &kept) {
            (Some(to), _) => Follow::To(to),
            (None, Some((id, expires_ms))) => Follow::Kept {
                id,
                expires_ms: *expires_ms,
            },
            (None, None) => Follow::Gone,
        };
        swap_security(batch, &current, |state, now| {
            state.grants_follow(catalog, securable, follow, now);
        })
    }

    /// Makes an undrop's `batch` give back, on `to`, the grants its object held when it
    /// was dropped (`SecurityState::restore_grants`), in the same transaction. When none
    /// are kept, asserts that the model looked in is current (`security_seen`): a node
    /// whose model predates the drop would otherwise bring the object back without them
    /// (`Conflict`; the caller retries on the model `Catalog::apply` re-read).
    pub(super) async fn grants_return(
        &self,
        batch: &mut WriteBatch,
        dropped_id: &str,
        to: &Securable,
    ) -> CatalogResult<()> {
        let current = self.security().await?;
        if !current.state.keeps_grants_for(dropped_id) {
            batch.security_seen = Some(current.version);
            return Ok(());
        }
        swap_security(batch, &current, |state, now| {
            state.restore_grants(dropped_id, to, now);
        })
    }
}

/// Makes `batch` replace the security model `current` by what `change` makes of it (at
/// the batch's time), by compare-and-swap on its version.
fn swap_security(
    batch: &mut WriteBatch,
    current: &super::security::Cached,
    change: impl FnOnce(&mut SecurityState, i64),
) -> CatalogResult<()> {
    let mut state = current.state.clone();
    change(&mut state, batch.now_ms);
    let document = serde_json::to_string(&state).map_err(CatalogError::internal)?;
    batch.security = Some((current.version, document));
    Ok(())
}
