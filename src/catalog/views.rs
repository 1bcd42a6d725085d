//! Views: create, load, replace (commit), drop, rename, register. Views share the name
//! space of tables inside a namespace.

use std::collections::HashMap;

use iceberg::spec::{Schema, ViewFormatVersion, ViewMetadata, ViewMetadataBuilder, ViewVersion};
use iceberg::ViewUpdate;
use serde::Deserialize;

use super::commit::{
    apply_view_updates, check_view_requirements, metadata_json, next_metadata_file, ViewRequirement,
};
use super::error::{CatalogError, CatalogResult};
use super::ident::{Ident, Namespace};
use super::locations::{check_allowed, default_location, metadata_dir};
use super::objects::{object_error, object_exists, object_missing, rename_error};
use super::pagination::{listed, ListRequest, Listed};
use super::Catalog;
use crate::storage;
use crate::store::{ObjectKind, ObjectWrite, StoreError};

/// The body of a create-view request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreateView {
    pub name: String,
    pub location: Option<String>,
    pub schema: Schema,
    pub view_version: ViewVersion,
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

/// A view's pointer and metadata document, ready to be sent as a LoadViewResult.
#[derive(Debug, Clone)]
pub struct LoadedView {
    pub metadata_location: String,
    pub metadata: String,
}

fn parse_view_metadata(json: &str) -> CatalogResult<ViewMetadata> {
    serde_json::from_str(json).map_err(|e| {
        CatalogError::internal(anyhow::anyhow!("stored view metadata is invalid: {e}"))
    })
}

impl From<ObjectWrite> for LoadedView {
    fn from(write: ObjectWrite) -> Self {
        LoadedView {
            metadata_location: write.metadata_location,
            metadata: write.metadata,
        }
    }
}

impl Catalog {
    pub async fn list_views(
        &self,
        catalog: &str,
        namespace: &Namespace,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        let page = self
            .store
            .list_objects(
                catalog,
                namespace,
                ObjectKind::View,
                &list.to_page_request()?,
            )
            .await
            .map_err(|e| object_error(ObjectKind::View, e))?;
        Ok(listed(page, |name| Ident {
            namespace: namespace.clone(),
            name,
        }))
    }

    pub async fn create_view(
        &self,
        catalog: &str,
        namespace: &Namespace,
        request: CreateView,
    ) -> CatalogResult<LoadedView> {
        let ident = Ident::new(namespace.clone(), request.name)?;
        let catalog_record = self.get_catalog(catalog).await?;
        let namespace_properties = self.load_namespace(catalog, namespace).await?;
        if let Some(existing) = self.store.load_object(catalog, &ident).await? {
            return Err(object_exists(ObjectKind::View, existing.kind, &ident));
        }
        let location = match request.location {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => default_location(&catalog_record, &namespace_properties, &ident),
        };
        let canonical = check_allowed(&catalog_record, &location)?;
        let metadata = ViewMetadataBuilder::new(
            location.clone(),
            request.schema,
            request.view_version,
            ViewFormatVersion::V1,
            request.properties,
        )?
        .build()?
        .metadata;
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::View,
            expected_metadata_location: None,
            metadata_location: next_metadata_file(
                &metadata_dir(&catalog_record, &location, metadata.properties())?,
                None,
                0,
            ),
            metadata: metadata_json(&metadata)?,
            location: canonical,
            check_location: true,
        };
        let mut writes = self
            .commit_with_retry(
                catalog,
                ObjectKind::View,
                std::slice::from_ref(&ident),
                |_current| {
                    let write = write.clone();
                    async move { Ok(vec![write]) }
                },
            )
            .await?;
        Ok(writes.remove(0).into())
    }

    pub async fn load_view(&self, catalog: &str, ident: &Ident) -> CatalogResult<LoadedView> {
        let object = self
            .load_kind(catalog, ident, ObjectKind::View)
            .await?
            .ok_or_else(|| object_missing(ObjectKind::View, ident))?;
        Ok(LoadedView {
            metadata_location: object.metadata_location,
            metadata: object.metadata,
        })
    }

    /// Replaces a view: checks requirements and applies updates on its current metadata.
    pub async fn commit_view(
        &self,
        catalog: &str,
        ident: &Ident,
        requirements: Vec<ViewRequirement>,
        updates: Vec<ViewUpdate>,
    ) -> CatalogResult<LoadedView> {
        let catalog_record = self.get_catalog(catalog).await?;
        let mut writes = self
            .commit_with_retry(
                catalog,
                ObjectKind::View,
                std::slice::from_ref(ident),
                |current| async {
                    let object = current
                        .into_iter()
                        .next()
                        .flatten()
                        .filter(|o| o.kind == ObjectKind::View)
                        .ok_or_else(|| object_missing(ObjectKind::View, ident))?;
                    let base = parse_view_metadata(&object.metadata)?;
                    check_view_requirements(&requirements, &base)?;
                    let log_len = base.history().len();
                    let previous_location = base.location().to_string();
                    let metadata = apply_view_updates(base, updates.clone())?;
                    let canonical = check_allowed(&catalog_record, metadata.location())?;
                    Ok(vec![ObjectWrite {
                        ident: ident.clone(),
                        kind: ObjectKind::View,
                        metadata_location: next_metadata_file(
                            &metadata_dir(
                                &catalog_record,
                                metadata.location(),
                                metadata.properties(),
                            )?,
                            Some(&object.metadata_location),
                            log_len,
                        ),
                        expected_metadata_location: Some(object.metadata_location),
                        metadata: metadata_json(&metadata)?,
                        location: canonical,
                        check_location: previous_location != metadata.location(),
                    }])
                },
            )
            .await?;
        Ok(writes.remove(0).into())
    }

    pub async fn drop_view(&self, catalog: &str, ident: &Ident) -> CatalogResult<()> {
        self.store
            .drop_object(catalog, ident, ObjectKind::View)
            .await
            .map(|_| ())
            .map_err(|e| object_error(ObjectKind::View, e))
    }

    pub async fn rename_view(&self, catalog: &str, from: &Ident, to: &Ident) -> CatalogResult<()> {
        let _guards = self.commit_locks.lock(catalog, [from, to]).await;
        self.store
            .rename_object(catalog, ObjectKind::View, from, to)
            .await
            .map_err(|e| rename_error(ObjectKind::View, from, e))
    }

    /// Registers an existing view metadata file as a view.
    pub async fn register_view(
        &self,
        catalog: &str,
        ident: &Ident,
        metadata_location: &str,
    ) -> CatalogResult<LoadedView> {
        let catalog_record = self.get_catalog(catalog).await?;
        self.load_namespace(catalog, &ident.namespace).await?;
        // Only read files inside the catalog's locations: a register request must not be a
        // way to read (or probe for) arbitrary files of the server.
        check_allowed(&catalog_record, metadata_location)?;
        let max = self.settings.max_metadata_file_bytes;
        let file_location = metadata_location.to_string();
        let bytes = tokio::task::spawn_blocking(move || storage::read_file(&file_location, max))
            .await
            .map_err(CatalogError::internal)??;
        let metadata: ViewMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            CatalogError::bad_request(format!(
                "{metadata_location} is not valid view metadata: {e}"
            ))
        })?;
        let canonical = check_allowed(&catalog_record, metadata.location())?;
        let write = ObjectWrite {
            ident: ident.clone(),
            kind: ObjectKind::View,
            expected_metadata_location: None,
            metadata_location: metadata_location.to_string(),
            metadata: metadata_json(&metadata)?,
            location: canonical,
            check_location: true,
        };
        match self
            .store
            .commit_objects(catalog, std::slice::from_ref(&write))
            .await
        {
            Ok(()) => Ok(write.into()),
            Err(StoreError::Conflict) => Err(CatalogError::CommitFailed(format!(
                "View {ident} changed while it was being registered"
            ))),
            Err(e) => Err(object_error(ObjectKind::View, e)),
        }
    }
}
