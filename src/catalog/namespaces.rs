//! Namespaces: a tree per catalog. A namespace can only be created under an existing
//! parent and only dropped when empty, so the tree never has orphans.

use super::error::{CatalogError, CatalogResult, Missing};
use super::ident::Namespace;
use super::pagination::{listed, ListRequest, Listed};
use super::Catalog;
use crate::store::{Properties, PropertiesChange, StoreError};

pub fn namespace_missing(namespace: &Namespace) -> CatalogError {
    CatalogError::not_found(
        Missing::Namespace,
        format!("Namespace does not exist: {namespace}"),
    )
}

/// Maps the store errors every namespace call can meet.
fn namespace_error(error: StoreError) -> CatalogError {
    match error {
        StoreError::NamespaceMissing(ns) => namespace_missing(&ns),
        other => other.into(),
    }
}

impl Catalog {
    pub async fn list_namespaces(
        &self,
        catalog: &str,
        parent: Option<&Namespace>,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Namespace>> {
        let root = Namespace::root();
        let parent = parent.unwrap_or(&root);
        let page = self
            .store
            .list_namespaces(catalog, parent, &list.to_page_request()?)
            .await
            .map_err(namespace_error)?;
        Ok(listed(page, |ns| ns))
    }

    pub async fn create_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
        properties: Properties,
    ) -> CatalogResult<Properties> {
        match self
            .store
            .create_namespace(catalog, namespace, &properties)
            .await
        {
            Ok(()) => Ok(properties),
            Err(StoreError::NamespaceExists) => Err(CatalogError::AlreadyExists(format!(
                "Namespace already exists: {namespace}"
            ))),
            Err(e) => Err(namespace_error(e)),
        }
    }

    pub async fn load_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> CatalogResult<Properties> {
        self.store
            .get_namespace(catalog, namespace)
            .await?
            .ok_or_else(|| namespace_missing(namespace))
    }

    pub async fn drop_namespace(&self, catalog: &str, namespace: &Namespace) -> CatalogResult<()> {
        match self.store.drop_namespace(catalog, namespace).await {
            Ok(()) => Ok(()),
            Err(StoreError::NamespaceNotEmpty) => Err(CatalogError::NamespaceNotEmpty(format!(
                "Namespace {namespace} is not empty"
            ))),
            Err(e) => Err(namespace_error(e)),
        }
    }

    pub async fn update_namespace_properties(
        &self,
        catalog: &str,
        namespace: &Namespace,
        removals: Vec<String>,
        updates: Properties,
    ) -> CatalogResult<PropertiesChange> {
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
        self.store
            .update_namespace_properties(catalog, namespace, &removals, &updates)
            .await
            .map_err(namespace_error)
    }
}
