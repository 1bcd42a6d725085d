//! Polaris's policy API: policies (data compaction, metadata compaction, orphan file
//! removal, snapshot expiry) defined in a namespace, attached to the catalog, a
//! namespace or a table, and the policies that apply to each, inherited down the tree.
//! Floe keeps and serves them; maintenance engines read them (Floe runs none).
//!
//! A catalog's policies and attachments are one document (`rules.rs`), read, changed by
//! one pure rule and swapped by its version in the store (`Store::policies`), with the
//! request's idempotency record; a lost race reads again. A namespace's drop swaps the
//! same document (it refuses while a policy lives there, and takes the namespace's
//! attachments), so no policy is created in, or attached to, a namespace that goes
//! meanwhile. A table's attachments count while the table of that name has the uuid it
//! had when they were made, so a table's drop never waits on this document.
//!
//! Privileges are Polaris's: `POLICY_CREATE` and `POLICY_LIST` on the namespace,
//! `POLICY_READ`/`_WRITE`/`_DROP` on the policy, `POLICY_ATTACH` (or `_DETACH`) on the
//! policy and `{CATALOG,NAMESPACE,TABLE}_ATTACH_POLICY` (or `_DETACH_`) on the target,
//! and the target's read privilege for what applies to it.

mod content;
mod events;
mod rules;

pub use content::PolicyType;
pub use rules::{Applicable, PolicyState, StoredPolicy, Target};

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{object_missing, CatalogError, CatalogResult, PolicyRefusal};
use super::objects::identity;
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::{Draft, Operation};
use crate::model::{now_ms, CatalogRecord, Ident, Namespace, ObjectKind};
use crate::store::{Mutation, PolicyWrite, StoreError};

/// Longest policy name (Polaris has no limit; names are `[A-Za-z0-9_-]+`).
const MAX_NAME_CHARS: usize = 256;
/// Largest content and description: a policy is a few settings.
const MAX_CONTENT_BYTES: usize = 64 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 64 * 1024;
/// Most parameters of one attachment, and their longest key or value.
const MAX_PARAMETERS: usize = 100;
const MAX_PARAMETER_CHARS: usize = 4096;
/// Attempts of one change when other changes to the catalog's policies (or namespace
/// drops) win the race, each after a random wait of up to 2^attempt ms (at most 100).
const MAX_ATTEMPTS: u32 = 16;
/// Most policies in one catalog, and most attachments: every change rewrites the
/// catalog's document.
const MAX_POLICIES: usize = 1_000;
const MAX_ATTACHMENTS: usize = 10_000;

/// Tables loaded at once when a full document's attachments are checked.
const LOADS_AT_ONCE: usize = 16;

/// `CreatePolicyRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreatePolicy {
    pub name: String,
    #[serde(rename = "type")]
    pub policy_type: String,
    pub description: Option<String>,
    pub content: Option<String>,
}

/// `UpdatePolicyRequest`: replaces the description and the content (as Polaris does,
/// an absent description clears it).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct UpdatePolicy {
    pub description: Option<String>,
    pub content: Option<String>,
    pub current_policy_version: Option<i64>,
}

/// `PolicyAttachmentTarget`: `{"type": "catalog"}`, `{"type": "namespace", "path":
/// ["a", "b"]}` or `{"type": "table-like", "path": ["a", "b", "t"]}`.
#[derive(Debug, Deserialize)]
pub struct TargetBody {
    #[serde(rename = "type")]
    pub kind: String,
    /// Absent or null for the catalog.
    #[serde(default)]
    pub path: Option<Vec<String>>,
}

/// `AttachPolicyRequest`.
#[derive(Debug, Deserialize)]
pub struct AttachPolicy {
    pub target: TargetBody,
    /// Absent or null: none (Polaris's CLI may send null).
    #[serde(default)]
    pub parameters: Option<BTreeMap<String, String>>,
}

/// `DetachPolicyRequest`.
#[derive(Debug, Deserialize)]
pub struct DetachPolicy {
    pub target: TargetBody,
}

/// A target as the request names it, resolved against the catalog.
enum Named {
    Catalog,
    Namespace(Namespace),
    Table(Ident),
}

/// `Policy` as Polaris answers it.
pub fn policy_json(policy: &StoredPolicy) -> Value {
    json!({
        "policy-type": policy.policy_type,
        "inheritable": PolicyType::is_inheritable(&policy.policy_type),
        "name": policy.name,
        "description": policy.description,
        "content": policy.content,
        "version": policy.version,
    })
}

/// `LoadPolicyResponse`.
pub fn load_response(policy: &StoredPolicy) -> Value {
    json!({ "policy": policy_json(policy) })
}

fn applicable_json(applicable: &Applicable) -> Value {
    let mut body = policy_json(applicable.policy);
    body["inherited"] = applicable.inherited.into();
    body["namespace"] = json!(applicable.policy.namespace);
    body
}

/// Polaris's name rule, then Floe's length limit.
fn check_name(name: &str) -> CatalogResult<()> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(CatalogError::bad_request(format!(
            "Invalid policy name {name:?}: it must match ^[A-Za-z0-9\\-_]+$"
        )));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(CatalogError::bad_request(format!(
            "A policy name is at most {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(())
}

fn check_content(policy_type: PolicyType, content: Option<&str>) -> CatalogResult<String> {
    let content = content.unwrap_or_default();
    if content.len() > MAX_CONTENT_BYTES {
        return Err(CatalogError::bad_request(format!(
            "A policy's content is at most {MAX_CONTENT_BYTES} bytes"
        )));
    }
    policy_type
        .check(content)
        .map_err(|message| CatalogError::Policy(PolicyRefusal::Invalid, message))?;
    Ok(content.to_string())
}

fn check_description(description: &Option<String>) -> CatalogResult<()> {
    if description.as_ref().map_or(0, |d| d.chars().count()) > MAX_DESCRIPTION_CHARS {
        return Err(CatalogError::bad_request(format!(
            "A policy's description is at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(())
}

fn check_parameters(parameters: &BTreeMap<String, String>) -> CatalogResult<()> {
    let too_long = parameters.iter().any(|(k, v)| {
        k.chars().count() > MAX_PARAMETER_CHARS || v.chars().count() > MAX_PARAMETER_CHARS
    });
    if parameters.len() > MAX_PARAMETERS || too_long {
        return Err(CatalogError::bad_request(format!(
            "An attachment has at most {MAX_PARAMETERS} parameters of at most {MAX_PARAMETER_CHARS} characters each"
        )));
    }
    Ok(())
}

/// The target a request names (its kind and path checked).
fn named(target: &TargetBody) -> CatalogResult<Named> {
    let bad = |message: &str| Err(CatalogError::bad_request(message.to_string()));
    let path = target.path.as_deref().unwrap_or_default();
    match target.kind.as_str() {
        "catalog" => Ok(Named::Catalog),
        "namespace" if path.is_empty() => bad("A namespace target needs a path"),
        "namespace" => Ok(Named::Namespace(Namespace::new(path.to_vec())?)),
        "table-like" if path.len() < 2 => {
            bad("A table-like target's path is its namespace, then its name")
        }
        "table-like" => {
            let (name, levels) = path.split_last().expect("two or more");
            Ok(Named::Table(Ident::new(
                Namespace::new(levels.to_vec())?,
                name.clone(),
            )?))
        }
        other => Err(CatalogError::bad_request(format!(
            "Unknown policy target type {other:?}: catalog, namespace or table-like"
        ))),
    }
}

/// Whether an attachment counts, given the uuids of the tables it may name (by
/// namespace and name): a table's only while that table has the uuid it was made with.
fn counting(
    live: &HashMap<(Vec<String>, String), String>,
) -> impl Fn(&rules::Attachment) -> bool + '_ {
    move |a| match &a.target {
        Target::Table {
            namespace,
            name,
            uuid,
        } => live.get(&(namespace.clone(), name.clone())) == Some(uuid),
        _ => true,
    }
}

impl Catalog {
    /// The catalog's policy document and its version.
    pub(super) async fn policy_state(
        &self,
        record: &CatalogRecord,
    ) -> CatalogResult<(i64, PolicyState)> {
        let stored = self.store.policies(record.id).await?;
        let state = serde_json::from_str(&stored.document)
            .map_err(|e| CatalogError::internal(anyhow::anyhow!("policy document: {e}")))?;
        Ok((stored.version, state))
    }

    /// A table's uuid, or a 404 (`NoSuchTableException`) if no Iceberg table has that
    /// name: policies attach to Iceberg tables only, as in Polaris.
    async fn table_uuid(&self, catalog: &str, ident: &Ident) -> CatalogResult<String> {
        let object = self
            .load_kind(catalog, ident, ObjectKind::Table)
            .await?
            .ok_or_else(|| object_missing(ObjectKind::Table, ident))?;
        Ok(identity(ObjectKind::Table, &object.metadata)?.uuid)
    }

    /// The uuids of the tables the given attachments name (those that exist).
    async fn live_tables<'a>(
        &self,
        catalog: &str,
        attachments: impl Iterator<Item = &'a rules::Attachment>,
    ) -> CatalogResult<HashMap<(Vec<String>, String), String>> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let mut named = std::collections::HashSet::new();
        let mut tables = Vec::new();
        for attachment in attachments {
            if let Target::Table {
                namespace, name, ..
            } = &attachment.target
            {
                if named.insert((namespace, name)) {
                    let ident = Ident::new(Namespace::new(namespace.clone())?, name.clone())?;
                    tables.push(((namespace.clone(), name.clone()), ident));
                }
            }
        }
        // A full document names up to MAX_ATTACHMENTS tables: loaded a few at a time, so
        // that over PostgreSQL the round trips overlap.
        stream::iter(tables)
            .map(|(key, ident)| async move {
                let object = self.load_kind(catalog, &ident, ObjectKind::Table).await?;
                let uuid = match object {
                    Some(object) => Some(identity(ObjectKind::Table, &object.metadata)?.uuid),
                    None => None,
                };
                CatalogResult::Ok((key, uuid))
            })
            .buffer_unordered(LOADS_AT_ONCE)
            .try_filter_map(|(key, uuid)| async move { Ok(uuid.map(|uuid| (key, uuid))) })
            .try_collect()
            .await
    }

    /// Swaps the catalog's policy document, with the change's event and the request's
    /// idempotency record carrying `outcome`. `false`: another change won the race; read
    /// again and retry.
    async fn swap_policies(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        expected_version: i64,
        state: &PolicyState,
        outcome: &Outcome,
        event: Draft,
    ) -> CatalogResult<bool> {
        let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
        self.swap_policies_with(
            ctx,
            record,
            expected_version,
            state,
            outcome,
            (Mutation::None, None),
            events,
        )
        .await
    }

    /// As [`Self::swap_policies`], with a mutation and its events in the same write (a
    /// namespace's drop), and the grants on what it drops going with it (`grants_follow`).
    #[allow(clippy::too_many_arguments)]
    async fn swap_policies_with(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        expected_version: i64,
        state: &PolicyState,
        outcome: &Outcome,
        (mutation, dropped): (Mutation, Option<&Securable>),
        events: Vec<crate::events::ChangeEvent>,
    ) -> CatalogResult<bool> {
        let document = serde_json::to_string(state).map_err(CatalogError::internal)?;
        let mut batch = self.batch(ctx, mutation, outcome, events);
        batch.policies = Some(PolicyWrite {
            catalog: record.id,
            expected_version,
            document,
        });
        if let Some(dropped) = dropped {
            self.grants_follow(&mut batch, &record.name, dropped, None)
                .await?;
        }
        match self.apply(batch, None).await {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn list_policies(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        of_type: Option<&str>,
    ) -> CatalogResult<Vec<Value>> {
        ctx.require(
            catalog,
            Privilege::POLICY_LIST,
            &Securable::namespace(namespace),
        )?;
        let record = self.get_catalog(catalog).await?;
        self.namespace_properties(catalog, namespace).await?;
        let (_, state) = self.policy_state(&record).await?;
        Ok(state
            .in_namespace(namespace, of_type)
            .into_iter()
            .map(|p| json!({ "namespace": p.namespace, "name": p.name }))
            .collect())
    }

    pub async fn create_policy(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        request: CreatePolicy,
    ) -> CatalogResult<Value> {
        ctx.require(
            catalog,
            Privilege::POLICY_CREATE,
            &Securable::namespace(namespace),
        )?;
        check_name(&request.name)?;
        let policy_type = PolicyType::parse(&request.policy_type).ok_or_else(|| {
            CatalogError::bad_request(format!(
                "Unknown policy type: {} (one of system.data-compaction, system.metadata-compaction, system.orphan-file-removal, system.snapshot-expiry)",
                request.policy_type
            ))
        })?;
        check_description(&request.description)?;
        let content = check_content(policy_type, request.content.as_deref())?;
        let record = self.get_catalog(catalog).await?;
        let now = now_ms();
        let policy = StoredPolicy {
            id: uuid::Uuid::now_v7().to_string(),
            namespace: namespace.levels().to_vec(),
            name: request.name,
            policy_type: policy_type.name().to_string(),
            description: request.description,
            content,
            version: 0,
            created_ms: now,
            updated_ms: now,
        };
        let body = load_response(&policy);
        let event = events::written(Operation::CreatePolicy, &policy);
        for attempt in 0..MAX_ATTEMPTS {
            after_lost_race(attempt).await;
            // The document's version first: a namespace dropped after the check below
            // moved it, so the swap loses and the next attempt finds no namespace.
            let (version, mut state) = self.policy_state(&record).await?;
            self.namespace_properties(catalog, namespace).await?;
            if state.policies.len() >= MAX_POLICIES {
                return Err(CatalogError::bad_request(format!(
                    "A catalog holds at most {MAX_POLICIES} policies"
                )));
            }
            state.create(policy.clone())?;
            let outcome = json_outcome(&body);
            if self
                .swap_policies(ctx, &record, version, &state, &outcome, event.clone())
                .await?
            {
                return Ok(body);
            }
        }
        Err(lost_races())
    }

    pub async fn load_policy(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        name: &str,
    ) -> CatalogResult<Value> {
        ctx.require(
            catalog,
            Privilege::POLICY_READ,
            &Securable::policy(namespace, name),
        )?;
        let record = self.get_catalog(catalog).await?;
        let (_, state) = self.policy_state(&record).await?;
        Ok(load_response(state.get(namespace, name)?))
    }

    pub async fn update_policy(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        name: &str,
        request: UpdatePolicy,
    ) -> CatalogResult<Value> {
        ctx.require(
            catalog,
            Privilege::POLICY_WRITE,
            &Securable::policy(namespace, name),
        )?;
        check_description(&request.description)?;
        let record = self.get_catalog(catalog).await?;
        for attempt in 0..MAX_ATTEMPTS {
            after_lost_race(attempt).await;
            let (version, mut state) = self.policy_state(&record).await?;
            let current = state.get(namespace, name)?;
            let expected = request.current_policy_version.ok_or_else(|| {
                CatalogError::bad_request(
                    "current-policy-version is required: the version the update was made from",
                )
            })?;
            let policy_type = PolicyType::parse(&current.policy_type).ok_or_else(|| {
                CatalogError::internal(anyhow::anyhow!("stored policy of an unknown type"))
            })?;
            let content = check_content(policy_type, request.content.as_deref())?;
            let updated = state
                .update(
                    namespace,
                    name,
                    request.description.clone(),
                    content,
                    expected,
                    now_ms(),
                )?
                .clone();
            let body = load_response(&updated);
            let outcome = json_outcome(&body);
            if updated.version == expected {
                // Nothing changed: no new version, no event, nothing to swap.
                self.record_outcome(ctx, &outcome).await?;
                return Ok(body);
            }
            let event = events::written(Operation::UpdatePolicy, &updated);
            if self
                .swap_policies(ctx, &record, version, &state, &outcome, event)
                .await?
            {
                return Ok(body);
            }
        }
        Err(lost_races())
    }

    pub async fn drop_policy(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        name: &str,
        detach_all: bool,
    ) -> CatalogResult<()> {
        ctx.require(
            catalog,
            Privilege::POLICY_DROP,
            &Securable::policy(namespace, name),
        )?;
        let record = self.get_catalog(catalog).await?;
        for attempt in 0..MAX_ATTEMPTS {
            after_lost_race(attempt).await;
            let (version, mut state) = self.policy_state(&record).await?;
            let policy = state.get(namespace, name)?;
            let (id, event) = (policy.id.clone(), events::dropped(policy, detach_all));
            let live = self
                .live_tables(
                    catalog,
                    state.attachments.iter().filter(|a| a.policy_id == id),
                )
                .await?;
            state.drop_policy(namespace, name, detach_all, counting(&live))?;
            let outcome = Outcome::NoContent;
            let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
            let dropped = Securable::policy(namespace, name);
            if self
                .swap_policies_with(
                    ctx,
                    &record,
                    version,
                    &state,
                    &outcome,
                    (Mutation::None, Some(&dropped)),
                    events,
                )
                .await?
            {
                return Ok(());
            }
        }
        Err(lost_races())
    }

    /// The target's privilege to attach or detach, and the target as the document names
    /// it (checked to exist: 404 otherwise).
    async fn resolve_target(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        body: &TargetBody,
        attach: bool,
    ) -> CatalogResult<Target> {
        let (privilege, securable, named) = match named(body)? {
            Named::Catalog => (
                if attach {
                    Privilege::CATALOG_ATTACH_POLICY
                } else {
                    Privilege::CATALOG_DETACH_POLICY
                },
                Securable::Catalog,
                Named::Catalog,
            ),
            Named::Namespace(namespace) => (
                if attach {
                    Privilege::NAMESPACE_ATTACH_POLICY
                } else {
                    Privilege::NAMESPACE_DETACH_POLICY
                },
                Securable::namespace(&namespace),
                Named::Namespace(namespace),
            ),
            Named::Table(ident) => (
                if attach {
                    Privilege::TABLE_ATTACH_POLICY
                } else {
                    Privilege::TABLE_DETACH_POLICY
                },
                Securable::table(&ident),
                Named::Table(ident),
            ),
        };
        ctx.require(catalog, privilege, &securable)?;
        Ok(match named {
            Named::Catalog => Target::Catalog,
            Named::Namespace(namespace) => {
                self.namespace_properties(catalog, &namespace).await?;
                Target::Namespace {
                    namespace: namespace.levels().to_vec(),
                }
            }
            Named::Table(ident) => Target::Table {
                uuid: self.table_uuid(catalog, &ident).await?,
                namespace: ident.namespace.levels().to_vec(),
                name: ident.name,
            },
        })
    }

    /// Attaches (`detach`: false) or detaches a policy.
    pub async fn map_policy(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        name: &str,
        target: &TargetBody,
        parameters: Option<BTreeMap<String, String>>,
    ) -> CatalogResult<()> {
        let attach = parameters.is_some();
        let on_policy = if attach {
            Privilege::POLICY_ATTACH
        } else {
            Privilege::POLICY_DETACH
        };
        ctx.require(catalog, on_policy, &Securable::policy(namespace, name))?;
        if let Some(parameters) = &parameters {
            check_parameters(parameters)?;
        }
        let record = self.get_catalog(catalog).await?;
        for attempt in 0..MAX_ATTEMPTS {
            after_lost_race(attempt).await;
            // The version first, as for a create: a target namespace dropped after it is
            // resolved moves the version, and the swap loses.
            let (version, mut state) = self.policy_state(&record).await?;
            let target = self.resolve_target(ctx, catalog, target, attach).await?;
            let event = events::mapped(state.get(namespace, name)?, &target, parameters.as_ref());
            // Only this target's table can be named by the attachments that matter here.
            let live = match &target {
                Target::Table {
                    namespace,
                    name,
                    uuid,
                } => HashMap::from([((namespace.clone(), name.clone()), uuid.clone())]),
                _ => HashMap::new(),
            };
            // Full, unless the attachment is there already (new parameters replace it).
            if attach
                && state.attachments.len() >= MAX_ATTACHMENTS
                && !state.attached(namespace, name, &target)?
            {
                // Full: which tables still stand decides what may be forgotten (read
                // only now, as it takes a load per table named).
                let all_live = self.live_tables(catalog, state.attachments.iter()).await?;
                state.make_room(MAX_ATTACHMENTS, counting(&all_live))?;
            }
            match &parameters {
                Some(parameters) => state.attach(
                    namespace,
                    name,
                    target,
                    parameters.clone(),
                    &record.name,
                    counting(&live),
                )?,
                None => state.detach(namespace, name, &target, &record.name, counting(&live))?,
            }
            let outcome = Outcome::NoContent;
            if self
                .swap_policies(ctx, &record, version, &state, &outcome, event)
                .await?
            {
                return Ok(());
            }
        }
        Err(lost_races())
    }

    /// The policies that apply to the catalog (no namespace), a namespace (no table
    /// name) or a table, of one type if given.
    pub async fn applicable_policies(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: Option<&Namespace>,
        table: Option<&str>,
        of_type: Option<&str>,
    ) -> CatalogResult<Vec<Value>> {
        let mut path = vec![Target::Catalog];
        let mut live = HashMap::new();
        match (namespace, table) {
            (None, _) => ctx.require(
                catalog,
                Privilege::CATALOG_READ_PROPERTIES,
                &Securable::Catalog,
            )?,
            (Some(namespace), None) => ctx.require(
                catalog,
                Privilege::NAMESPACE_READ_PROPERTIES,
                &Securable::namespace(namespace),
            )?,
            (Some(namespace), Some(table)) => {
                let ident = Ident::new(namespace.clone(), table.to_string())?;
                ctx.require(
                    catalog,
                    Privilege::TABLE_READ_PROPERTIES,
                    &Securable::table(&ident),
                )?;
            }
        }
        let record = self.get_catalog(catalog).await?;
        if let Some(namespace) = namespace {
            self.namespace_properties(catalog, namespace).await?;
            let levels = namespace.levels();
            for depth in 1..=levels.len() {
                path.push(Target::Namespace {
                    namespace: levels[..depth].to_vec(),
                });
            }
            if let Some(table) = table {
                let ident = Ident::new(namespace.clone(), table.to_string())?;
                let uuid = self.table_uuid(catalog, &ident).await?;
                live.insert((levels.to_vec(), table.to_string()), uuid.clone());
                path.push(Target::Table {
                    namespace: levels.to_vec(),
                    name: table.to_string(),
                    uuid,
                });
            }
        }
        let (_, state) = self.policy_state(&record).await?;
        Ok(state
            .applicable(&path, of_type, counting(&live))
            .iter()
            .map(applicable_json)
            .collect())
    }

    /// A namespace's drop, with the catalog's policy document: refused while a policy is
    /// defined in the namespace, and taking the attachments to it.
    pub(super) async fn drop_namespace_with_policies(
        &self,
        ctx: &RequestContext,
        record: &CatalogRecord,
        namespace: &Namespace,
        drop: Mutation,
        events: Vec<crate::events::ChangeEvent>,
    ) -> CatalogResult<()> {
        for attempt in 0..MAX_ATTEMPTS {
            after_lost_race(attempt).await;
            let (version, mut state) = self.policy_state(record).await?;
            if state.holds_policies(namespace) {
                return Err(CatalogError::NamespaceNotEmpty(format!(
                    "Namespace {namespace} is not empty: it holds policies"
                )));
            }
            state.forget_namespace(namespace);
            let outcome = Outcome::NoContent;
            if self
                .swap_policies_with(
                    ctx,
                    record,
                    version,
                    &state,
                    &outcome,
                    (drop.clone(), Some(&Securable::namespace(namespace))),
                    events.clone(),
                )
                .await?
            {
                return Ok(());
            }
        }
        Err(lost_races())
    }
}

/// A create's or update's answer, kept with its idempotency key.
fn json_outcome(body: &Value) -> Outcome {
    Outcome::Json {
        status: 200,
        body: body.clone(),
    }
}

/// Every attempt lost to another change of the catalog's policies: a 503, which a
/// client retries (and an idempotency key does not keep as final).
fn lost_races() -> CatalogError {
    CatalogError::Unavailable(
        "The catalog's policies kept changing while this request was applied; retry later".into(),
    )
}

/// Before attempt `attempt` (0: none): a random wait, so that racing writers spread out.
async fn after_lost_race(attempt: u32) {
    if attempt > 0 {
        let most = (1u64 << attempt.min(7)).min(100);
        let ms = rand::random_range(0..=most);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_targets_are_checked() {
        for good in ["p", "P-1_x", &"a".repeat(MAX_NAME_CHARS)] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            " p",
            "p.q",
            "p/q",
            "p%q",
            "é",
            &"a".repeat(MAX_NAME_CHARS + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let target = |kind: &str, path: &[&str]| TargetBody {
            kind: kind.into(),
            path: Some(path.iter().map(|s| s.to_string()).collect()),
        };
        assert!(matches!(named(&target("catalog", &[])), Ok(Named::Catalog)));
        assert!(matches!(
            named(&target("namespace", &["a", "b"])),
            Ok(Named::Namespace(_))
        ));
        assert!(named(&target("namespace", &[])).is_err());
        assert!(matches!(
            named(&target("table-like", &["a", "t"])),
            Ok(Named::Table(_))
        ));
        assert!(named(&target("table-like", &["t"])).is_err());
        assert!(named(&target("view", &["a", "v"])).is_err());
        let many: BTreeMap<_, _> = (0..=MAX_PARAMETERS)
            .map(|i| (i.to_string(), "v".into()))
            .collect();
        assert!(check_parameters(&many).is_err());
    }
}
