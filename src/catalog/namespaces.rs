//! Namespaces: a tree per catalog. A namespace can only be created under an existing
//! parent and only dropped when empty, so the tree never has orphans.

use std::sync::Arc;

use super::error::{CatalogError, CatalogResult, Missing};
use super::locations::{check_allowed, NAMESPACE_LOCATION};
use super::pagination::{listed, ListRequest, Listed};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::{Draft, Operation};
use crate::model::{CatalogRecord, Namespace, Properties, PropertiesChange};
use crate::store::{Mutation, StoreError, StoredProperties};

/// Attempts of a properties update that keeps meeting concurrent updates.
const MAX_UPDATE_ATTEMPTS: u32 = 10;

pub fn namespace_missing(namespace: &Namespace) -> CatalogError {
    CatalogError::not_found(
        Missing::Namespace,
        format!("Namespace does not exist: {namespace}"),
    )
}

/// Checks a namespace's new `location`, if it has one, as a table's is checked: a location
/// of the catalog's storage, within its allowed locations. Else every table created in
/// the namespace without a location of its own would fail, long after the property was
/// set.
fn check_location(catalog: &CatalogRecord, properties: &Properties) -> CatalogResult<()> {
    match properties.get(NAMESPACE_LOCATION) {
        Some(location) => check_allowed(catalog, location).map(drop),
        None => Ok(()),
    }
}

/// What holds a namespace's children: the catalog for the root, else the namespace.
fn container(namespace: &Namespace) -> Securable {
    if namespace.is_root() {
        Securable::Catalog
    } else {
        Securable::namespace(namespace)
    }
}

impl Catalog {
    pub async fn list_namespaces(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        parent: Option<&Namespace>,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Namespace>> {
        let root = Namespace::root();
        let parent = parent.unwrap_or(&root);
        ctx.require(catalog, Privilege::NAMESPACE_LIST, &container(parent))?;
        let page = self
            .store
            .list_namespaces(catalog, parent, &list.to_page_request()?)
            .await?;
        Ok(listed(page, |ns| ns))
    }

    pub async fn create_namespace(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        properties: Properties,
    ) -> CatalogResult<Properties> {
        let parent = container(&namespace.parent());
        ctx.require(catalog, Privilege::NAMESPACE_CREATE, &parent)?;
        let record = self.get_catalog(catalog).await?;
        check_location(&record, &properties)?;
        let outcome = Outcome::Namespace {
            namespace: namespace.levels().to_vec(),
            properties: properties.clone(),
        };
        let create = Mutation::CreateNamespace {
            catalog: record.id,
            namespace: namespace.clone(),
            properties: properties.clone(),
        };
        let event = Draft::namespace(Operation::CreateNamespace, record.id, namespace)
            .with("properties", serde_json::json!(properties));
        let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
        self.write(ctx, create, &outcome, events).await?;
        Ok(properties)
    }

    pub async fn load_namespace(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
    ) -> CatalogResult<Arc<StoredProperties>> {
        let target = Securable::namespace(namespace);
        ctx.require(catalog, Privilege::NAMESPACE_READ_PROPERTIES, &target)?;
        self.namespace_properties(catalog, namespace).await
    }

    /// A namespace's properties for the catalog's own use (no privilege needed: e.g. a
    /// table's default location under it).
    pub(super) async fn namespace_properties(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> CatalogResult<Arc<StoredProperties>> {
        self.store
            .get_namespace(catalog, namespace)
            .await?
            .ok_or_else(|| namespace_missing(namespace))
    }

    pub async fn drop_namespace(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
    ) -> CatalogResult<()> {
        let target = Securable::namespace(namespace);
        ctx.require(catalog, Privilege::NAMESPACE_DROP, &target)?;
        let record = self.get_catalog(catalog).await?;
        let drop = Mutation::DropNamespace {
            catalog: record.id,
            namespace: namespace.clone(),
        };
        let event = Draft::namespace(Operation::DropNamespace, record.id, namespace);
        let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
        // With the catalog's policy document: no policy may be left in it.
        self.drop_namespace_with_policies(ctx, &record, namespace, drop, events)
            .await
    }

    /// Computes the change on the current properties and swaps them if nobody changed
    /// them meanwhile (retrying if somebody did), so the answer says exactly what this
    /// request did.
    pub async fn update_namespace_properties(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        removals: Vec<String>,
        updates: Properties,
    ) -> CatalogResult<PropertiesChange> {
        let target = Securable::namespace(namespace);
        ctx.require(catalog, Privilege::NAMESPACE_WRITE_PROPERTIES, &target)?;
        let mut both: Vec<&str> = removals
            .iter()
            .filter(|k| updates.contains_key(k.as_str()))
            .map(String::as_str)
            .collect();
        if !both.is_empty() {
            both.sort_unstable();
            both.dedup();
            return Err(CatalogError::Unprocessable(format!(
                "Cannot remove and update the same properties: {}",
                both.join(", ")
            )));
        }
        let record = self.get_catalog(catalog).await?;
        check_location(&record, &updates)?;
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let expected = self
                .store
                .get_namespace_for_update(catalog, namespace)
                .await?
                .ok_or_else(|| namespace_missing(namespace))?;
            // The store hands over its cached copy when it can, so a namespace with many
            // properties (Polaris's benchmark adds one per update) is neither copied nor
            // written out again: the swap expects the text the store read, and new
            // properties are appended to it.
            let (properties, expected, change) =
                Arc::unwrap_or_clone(expected).change(&removals, &updates);
            let update =
                Mutation::swap_namespace(record.id, namespace.clone(), expected, properties);
            let outcome = Outcome::PropertiesChange(change.clone());
            let event =
                Draft::namespace(Operation::UpdateNamespaceProperties, record.id, namespace)
                    .with("updated", change.updated.clone())
                    .with("removed", change.removed.clone())
                    .with("missing", change.missing.clone());
            let events = self.events(ctx, Some((record.id, &record.name)), vec![event]);
            match self
                .apply(self.batch(ctx, update, &outcome, events), None)
                .await
            {
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => return Ok(change),
            }
        }
        Err(StoreError::Conflict.into())
    }
}
