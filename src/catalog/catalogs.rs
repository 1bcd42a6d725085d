//! Catalogs: the REST `prefix`, managed through Polaris's management API shape.
//! INTERNAL catalogs change through the REST API; EXTERNAL ones (Polaris's static
//! facades) only through notifications (`notifications.rs`), unless they have a
//! `connectionConfigInfo`: a federated catalog, whose REST requests are forwarded to
//! its remote catalog (`crate::federation`, `http::federated`). Its connection is kept in
//! the security model, created and dropped with the catalog in one write.

use super::error::{catalog_missing, CatalogError, CatalogResult};
use super::locations::{allowed_bases, catalog_base, check_allowed, DEFAULT_BASE_LOCATION};
use super::{new_catalog_id, Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::auth::state::SecurityState;
use crate::events::{Draft, Operation};
use crate::federation::Connection;
use crate::model::{now_ms, validate_catalog_name, CatalogRecord, CatalogType, Properties};
use crate::storage::config::{allowed_locations, check_properties};
use crate::storage::{path_segment, StorageConfig};
use crate::store::Mutation;

/// A catalog to create, in the terms of Polaris's `Catalog` object.
#[derive(Debug, Clone)]
pub struct NewCatalog {
    pub name: String,
    /// `INTERNAL` or `EXTERNAL`.
    pub catalog_type: String,
    /// Polaris's `connectionConfigInfo`: a federated catalog (EXTERNAL only).
    pub connection_config: Option<serde_json::Value>,
    pub properties: Properties,
    /// Polaris's `storageConfigInfo`; `None` means FILE storage under the base location.
    pub storage_config: Option<serde_json::Value>,
}

/// Checks a storage config and the catalog properties stored with it.
fn validate_storage_config(
    storage: &serde_json::Value,
    properties: &Properties,
) -> CatalogResult<StorageConfig> {
    check_properties(properties).map_err(|e| CatalogError::bad_request(e.0))?;
    StorageConfig::parse(storage).map_err(|e| CatalogError::bad_request(e.0))
}

impl Catalog {
    pub async fn create_catalog(
        &self,
        ctx: &RequestContext,
        new: NewCatalog,
    ) -> CatalogResult<CatalogRecord> {
        ctx.require_service_admin()?;
        validate_catalog_name(&new.name)?;
        let catalog_type = CatalogType::parse(&new.catalog_type).ok_or_else(|| {
            CatalogError::bad_request(format!(
                "Unknown catalog type {:?}: INTERNAL or EXTERNAL",
                new.catalog_type
            ))
        })?;
        let connection = match &new.connection_config {
            None => None,
            Some(_) if catalog_type != CatalogType::External => {
                return Err(CatalogError::bad_request(
                    "A catalog with a connectionConfigInfo is served from its remote catalog: its type must be EXTERNAL",
                ))
            }
            Some(info) => {
                Some(Connection::parse(info).map_err(|e| CatalogError::bad_request(e.0))?)
            }
        };
        let mut properties = new.properties;
        let storage_config = new
            .storage_config
            .unwrap_or_else(|| self.settings.default_storage.clone());
        let storage = validate_storage_config(&storage_config, &properties)?;
        if !properties.contains_key(DEFAULT_BASE_LOCATION) {
            // Under the server's warehouse when that is on the same kind of storage,
            // else in the first allowed location.
            let root = self.settings.warehouse_root.trim_end_matches('/');
            let base = if storage.check_scheme(root).is_ok() {
                format!("{root}/{}", path_segment(&new.name))
            } else {
                allowed_locations(&storage_config)
                    .ok()
                    .and_then(|l| l.into_iter().next())
                    .ok_or_else(|| {
                        CatalogError::bad_request(format!(
                            "A catalog on {} storage needs properties.default-base-location or storageConfigInfo.allowedLocations",
                            storage.scheme().as_str()
                        ))
                    })?
            };
            properties.insert(DEFAULT_BASE_LOCATION.to_string(), base);
        }
        let now = now_ms();
        let record = CatalogRecord {
            id: new_catalog_id(),
            name: new.name,
            catalog_type,
            properties,
            storage_config,
            connection: connection.as_ref().map(Connection::view),
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        allowed_bases(&record)?;
        let outcome = Outcome::Catalog {
            record: record.clone(),
            created: true,
        };
        // The catalog and its catalog_admin role (granted to service_admin) commit
        // together.
        let name = record.name.clone();
        self.change_security(
            ctx,
            "create-catalog",
            Mutation::CreateCatalog(record.clone()),
            |state| {
                state.add_catalog(&name, now);
                if let Some(connection) = &connection {
                    state.federated.insert(name.clone(), connection.clone());
                }
                Ok(((), outcome.clone()))
            },
        )
        .await?;
        Ok(record)
    }

    /// Creates the catalog unless some catalog exists already; true when created.
    pub async fn bootstrap_catalog(&self, name: &str) -> CatalogResult<bool> {
        if !self.store.list_catalogs().await?.is_empty() {
            return Ok(false);
        }
        let created = self
            .create_catalog(
                &RequestContext::system(),
                NewCatalog {
                    name: name.to_string(),
                    catalog_type: "INTERNAL".into(),
                    connection_config: None,
                    properties: Properties::new(),
                    storage_config: None,
                },
            )
            .await;
        match created {
            Ok(_) => Ok(true),
            // Another node bootstrapped it at the same moment.
            Err(CatalogError::AlreadyExists(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The catalog's record: looked up once per request, then passed along.
    pub async fn get_catalog(&self, name: &str) -> CatalogResult<CatalogRecord> {
        // No catalog's name holds a control character (`validate_catalog_name`), and
        // PostgreSQL refuses a NUL in any text it is given: such a name is missing.
        if name.chars().any(char::is_control) {
            return Err(catalog_missing(name));
        }
        self.store
            .get_catalog(name)
            .await?
            .ok_or_else(|| catalog_missing(name))
    }

    /// The catalogs the caller has any grant in (all of them for `service_admin`).
    pub async fn list_catalogs(&self, ctx: &RequestContext) -> CatalogResult<Vec<CatalogRecord>> {
        let mut catalogs = self.store.list_catalogs().await?;
        catalogs.retain(|c| ctx.sees_catalog(&c.name));
        let model = self.security().await?;
        for catalog in &mut catalogs {
            catalog.connection = connection_view(&model.state, &catalog.name);
        }
        Ok(catalogs)
    }

    /// The record with its connection as shown, when it is federated.
    async fn with_connection(&self, mut record: CatalogRecord) -> CatalogResult<CatalogRecord> {
        let model = self.security().await?;
        record.connection = connection_view(&model.state, &record.name);
        Ok(record)
    }

    /// The catalog's record, for its management API (CATALOG_READ_PROPERTIES).
    pub async fn load_catalog(
        &self,
        ctx: &RequestContext,
        name: &str,
    ) -> CatalogResult<CatalogRecord> {
        ctx.require(
            name,
            Privilege::CATALOG_READ_PROPERTIES,
            &Securable::Catalog,
        )?;
        let record = self.get_catalog(name).await?;
        self.with_connection(record).await
    }

    /// Replaces the given parts; fails with 409 when `expected_version` is stale.
    pub async fn update_catalog(
        &self,
        ctx: &RequestContext,
        name: &str,
        expected_version: Option<i64>,
        properties: Option<Properties>,
        storage_config: Option<serde_json::Value>,
    ) -> CatalogResult<CatalogRecord> {
        ctx.require(
            name,
            Privilege::CATALOG_WRITE_PROPERTIES,
            &Securable::Catalog,
        )?;
        let current = self.get_catalog(name).await?;
        let expected = expected_version.unwrap_or(current.version);
        if expected != current.version {
            return Err(stale_version(name, expected));
        }
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
            let (old, new) = (
                StorageConfig::of(&current.storage_config),
                StorageConfig::parse(&storage).map_err(|e| CatalogError::bad_request(e.0))?,
            );
            if old.scheme() != new.scheme() {
                return Err(CatalogError::bad_request(format!(
                    "A catalog's storage type cannot change ({} to {}): its tables' files stay where they are",
                    old.scheme().as_str(),
                    new.scheme().as_str()
                )));
            }
            updated.storage_config = storage;
        }
        validate_storage_config(&updated.storage_config, &updated.properties)?;
        allowed_bases(&updated)?;
        // Where the catalog's files may lie, and with which keys they are reached, is the
        // service admin's to change: a catalog admin who could widen them would reach
        // another catalog's files, or the server's own keys, through vended credentials.
        // A base moved within the locations already allowed widens nothing.
        let widened = updated.storage_config != current.storage_config
            || check_allowed(&current, catalog_base(&updated)).is_err();
        if widened {
            ctx.require_service_admin().map_err(|_| {
                CatalogError::Forbidden(format!(
                    "Principal '{}' is not authorized to change where catalog {name} keeps its files: storageConfigInfo, and a {DEFAULT_BASE_LOCATION} outside its allowed locations, need the service_admin role",
                    ctx.principal.name
                ))
            })?;
        }
        updated.version = current.version + 1;
        updated.updated_ms = now_ms();
        let outcome = Outcome::Catalog {
            record: updated.clone(),
            created: false,
        };
        let update = Mutation::UpdateCatalog {
            expected_version: expected,
            record: updated.clone(),
        };
        self.catalog_cache.forget(name);
        let events = self.events(
            ctx,
            Some((updated.id, &updated.name)),
            vec![
                Draft::catalog(Operation::UpdateCatalog, updated.id, &updated.name)
                    .with("version", updated.version),
            ],
        );
        let written = self.write(ctx, update, &outcome, events).await;
        self.catalog_cache.forget(name);
        match written {
            // Another update won between the read and the write.
            Err(CatalogError::CommitFailed(_)) => Err(stale_version(name, expected)),
            other => match other {
                Ok(_) => self.with_connection(updated).await,
                Err(e) => Err(e),
            },
        }
    }

    /// Drops an empty catalog, and its catalog roles in the same transaction.
    pub async fn drop_catalog(&self, ctx: &RequestContext, name: &str) -> CatalogResult<()> {
        ctx.require_service_admin()?;
        let record = self.get_catalog(name).await?;
        self.catalog_cache.forget(name);
        let drop = Mutation::DropCatalog {
            catalog: record.id,
            name: record.name.clone(),
        };
        self.change_security(ctx, "drop-catalog", drop, |state| {
            state.remove_catalog(&record.name);
            Ok(((), Outcome::NoContent))
        })
        .await?;
        self.remotes.forget(name);
        Ok(())
    }
}

/// A federated catalog's `connectionConfigInfo` as shown (no secrets), if it is one.
fn connection_view(model: &SecurityState, name: &str) -> Option<serde_json::Value> {
    model.federated.get(name).map(Connection::view)
}

fn stale_version(name: &str, expected: i64) -> CatalogError {
    CatalogError::CommitFailed(format!(
        "Catalog {name} has changed since version {expected}; fetch it and retry"
    ))
}
