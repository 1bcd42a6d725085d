//! Catalogs: the REST `prefix`, managed through Polaris's management API shape.
//! Only INTERNAL catalogs on FILE storage exist so far.

use serde_json::json;

use super::error::{CatalogError, CatalogResult, Missing};
use super::ident::validate_catalog_name;
use super::locations::{allowed_bases, DEFAULT_BASE_LOCATION};
use super::{now_ms, Catalog};
use crate::storage::path_segment;
use crate::store::{CatalogRecord, Properties, StoreError};

/// A catalog to create, in the terms of Polaris's `Catalog` object.
#[derive(Debug, Clone)]
pub struct NewCatalog {
    pub name: String,
    /// `INTERNAL` or `EXTERNAL`.
    pub catalog_type: String,
    pub properties: Properties,
    /// Polaris's `storageConfigInfo`; `None` means FILE storage under the base location.
    pub storage_config: Option<serde_json::Value>,
}

fn validate_storage_config(storage: &serde_json::Value) -> CatalogResult<()> {
    let storage_type = storage.get("storageType").and_then(|t| t.as_str());
    match storage_type {
        Some("FILE") => {}
        Some(other @ ("S3" | "GCS" | "AZURE")) => {
            return Err(CatalogError::bad_request(format!(
                "Storage type {other} is not supported yet; use FILE"
            )))
        }
        Some(other) => {
            return Err(CatalogError::bad_request(format!(
                "Unknown storage type {other}"
            )))
        }
        None => {
            return Err(CatalogError::bad_request(
                "storageConfigInfo.storageType is required",
            ))
        }
    }
    match storage.get("allowedLocations") {
        None => Ok(()),
        Some(serde_json::Value::Array(items)) if items.iter().all(|i| i.is_string()) => Ok(()),
        Some(_) => Err(CatalogError::bad_request(
            "storageConfigInfo.allowedLocations must be an array of strings",
        )),
    }
}

impl Catalog {
    pub async fn create_catalog(&self, new: NewCatalog) -> CatalogResult<CatalogRecord> {
        validate_catalog_name(&new.name)?;
        if new.catalog_type != "INTERNAL" {
            return Err(CatalogError::bad_request(format!(
                "Catalog type {} is not supported; only INTERNAL catalogs are",
                new.catalog_type
            )));
        }
        let mut properties = new.properties;
        properties
            .entry(DEFAULT_BASE_LOCATION.to_string())
            .or_insert_with(|| {
                format!(
                    "{}/{}",
                    self.settings.warehouse_root.trim_end_matches('/'),
                    path_segment(&new.name)
                )
            });
        let storage_config = new
            .storage_config
            .unwrap_or_else(|| json!({ "storageType": "FILE" }));
        validate_storage_config(&storage_config)?;
        let now = now_ms();
        let record = CatalogRecord {
            name: new.name,
            properties,
            storage_config,
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        allowed_bases(&record)?;
        match self.store.create_catalog(&record).await {
            Ok(()) => Ok(record),
            Err(StoreError::CatalogExists) => Err(CatalogError::AlreadyExists(format!(
                "Catalog already exists: {}",
                record.name
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the catalog unless some catalog exists already; true when created.
    pub async fn bootstrap_catalog(&self, name: &str) -> CatalogResult<bool> {
        if !self.store.list_catalogs().await?.is_empty() {
            return Ok(false);
        }
        let created = self
            .create_catalog(NewCatalog {
                name: name.to_string(),
                catalog_type: "INTERNAL".into(),
                properties: Properties::new(),
                storage_config: None,
            })
            .await;
        match created {
            Ok(_) => Ok(true),
            // Another node bootstrapped it at the same moment.
            Err(CatalogError::AlreadyExists(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn get_catalog(&self, name: &str) -> CatalogResult<CatalogRecord> {
        self.store
            .get_catalog(name)
            .await?
            .ok_or_else(|| catalog_missing(name))
    }

    pub async fn list_catalogs(&self) -> CatalogResult<Vec<CatalogRecord>> {
        Ok(self.store.list_catalogs().await?)
    }

    /// Replaces the given parts; fails with 409 when `expected_version` is stale.
    pub async fn update_catalog(
        &self,
        name: &str,
        expected_version: Option<i64>,
        properties: Option<Properties>,
        storage_config: Option<serde_json::Value>,
    ) -> CatalogResult<CatalogRecord> {
        let current = self.get_catalog(name).await?;
        let mut updated = current.clone();
        if let Some(mut properties) = properties {
            // The base location is required; keep the current one unless replaced.
            if !properties.contains_key(DEFAULT_BASE_LOCATION) {
                if let Some(base) = current.properties.get(DEFAULT_BASE_LOCATION) {
                    properties.insert(DEFAULT_BASE_LOCATION.into(), base.clone());
                }
            }
            updated.properties = properties;
        }
        if let Some(storage) = storage_config {
            validate_storage_config(&storage)?;
            updated.storage_config = storage;
        }
        allowed_bases(&updated)?;
        let expected = expected_version.or(Some(current.version));
        match self
            .store
            .update_catalog(
                name,
                expected,
                &updated.properties,
                &updated.storage_config,
                now_ms(),
            )
            .await
        {
            Ok(record) => Ok(record),
            Err(StoreError::Conflict) => Err(CatalogError::CommitFailed(format!(
                "Catalog {name} has changed since version {}; fetch it and retry",
                expected.unwrap_or_default()
            ))),
            Err(StoreError::CatalogMissing(_)) => Err(catalog_missing(name)),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn drop_catalog(&self, name: &str) -> CatalogResult<()> {
        match self.store.drop_catalog(name).await {
            Ok(()) => Ok(()),
            Err(StoreError::CatalogNotEmpty) => Err(CatalogError::NamespaceNotEmpty(format!(
                "Catalog {name} is not empty"
            ))),
            Err(StoreError::CatalogMissing(_)) => Err(catalog_missing(name)),
            Err(e) => Err(e.into()),
        }
    }
}

pub fn catalog_missing(name: &str) -> CatalogError {
    CatalogError::not_found(Missing::Catalog, format!("Catalog does not exist: {name}"))
}
