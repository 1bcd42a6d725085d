//! Views: create, load, replace (commit), drop, rename, register. Views share the name
//! space of tables inside a namespace.

use std::collections::HashMap;

use iceberg::spec::{Schema, ViewFormatVersion, ViewMetadata, ViewMetadataBuilder, ViewVersion};
use iceberg::ViewUpdate;
use serde::Deserialize;

use super::commit::{
    apply_view_updates, check_view_requirements, next_metadata_file, properties_text,
    spliced_or_whole, view_document_spliced, view_metadata_document, view_metadata_json,
    view_property_keys, ViewRequirement,
};
use super::error::{object_missing, CatalogError, CatalogResult};
use super::locations::{check_allowed, default_location, metadata_dir};
use super::objects::{
    require_internal, to_value, write_event, MetadataFiles, Prepared, Registered,
};
pub use super::outcome::LoadedView;
use super::pagination::{ListRequest, Listed};
use super::parsed::{Kept, Model};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::Operation;
use crate::model::{Ident, Namespace, ObjectKind};
use crate::store::ObjectWrite;

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

fn parse_view_metadata(json: &str) -> CatalogResult<ViewMetadata> {
    serde_json::from_str(json).map_err(|e| {
        CatalogError::internal(anyhow::anyhow!("stored view metadata is invalid: {e}"))
    })
}

/// The change a view commit asks for.
#[derive(Debug, Clone)]
pub struct ViewChange {
    pub ident: Ident,
    pub requirements: Vec<ViewRequirement>,
    pub updates: Vec<ViewUpdate>,
}

fn loaded(write: &ObjectWrite) -> LoadedView {
    LoadedView {
        metadata_location: write.metadata_location.clone(),
        metadata: write.metadata.clone().into(),
    }
}

/// As [`loaded`], taking the write: the answer moves its document, not copies it.
fn into_loaded(write: ObjectWrite) -> LoadedView {
    LoadedView {
        metadata_location: write.metadata_location,
        metadata: write.metadata.into(),
    }
}

impl Catalog {
    pub async fn list_views(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        self.list_objects(ctx, catalog, namespace, ObjectKind::View, list)
            .await
    }

    pub async fn create_view(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        request: CreateView,
    ) -> CatalogResult<LoadedView> {
        let ident = Ident::new(namespace.clone(), request.name)?;
        // First: nothing (the namespace's existence, the allowed locations) for a caller
        // who may not create here.
        let parent = Securable::namespace(namespace);
        ctx.require(catalog, Privilege::VIEW_CREATE, &parent)?;
        let record = self.get_catalog(catalog).await?;
        let namespace_properties = self.namespace_properties(catalog, namespace).await?;
        let location = match request.location {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => default_location(&record, &namespace_properties, &ident),
        };
        let canonical = check_allowed(&record, &location)?;
        super::schemas::check(&request.schema)?;
        let built = ViewMetadataBuilder::new(
            location.clone(),
            request.schema,
            request.view_version,
            ViewFormatVersion::V1,
            request.properties,
        )?
        .build()?;
        let (metadata, changes) = (built.metadata, built.changes);
        let write = ObjectWrite {
            ident,
            kind: ObjectKind::View,
            expected_metadata_location: None,
            metadata_location: next_metadata_file(
                &metadata_dir(&record, &location, metadata.properties())?,
                None,
                0,
            ),
            metadata: view_metadata_json(&metadata, None)?,
            location: canonical,
            check_location: true,
        };
        let event = write_event(Operation::CreateView, &write, &metadata.uuid().to_string())
            .with("updates", to_value(&changes)?);
        let write = self
            .create_object(ctx, &record, write, event, |w| Outcome::View(loaded(w)))
            .await?;
        Ok(into_loaded(write))
    }

    pub async fn load_view(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<LoadedView> {
        let target = Securable::view(ident);
        ctx.require(catalog, Privilege::VIEW_READ_PROPERTIES, &target)?;
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
        ctx: &RequestContext,
        catalog: &str,
        change: ViewChange,
    ) -> CatalogResult<LoadedView> {
        let target = Securable::view(&change.ident);
        ctx.require(catalog, Privilege::VIEW_WRITE_PROPERTIES, &target)?;
        let record = self.get_catalog(catalog).await?;
        require_internal(&record, ObjectKind::View, "replace")?;
        let ident = &change.ident;
        let mut writes = self
            .commit_with_retry(
                ctx,
                &record,
                std::slice::from_ref(ident),
                MetadataFiles::New,
                |current| async {
                    let object = current
                        .into_iter()
                        .next()
                        .flatten()
                        .filter(|o| o.kind == ObjectKind::View)
                        .ok_or_else(|| object_missing(ObjectKind::View, ident))?;
                    let Kept {
                        model: base,
                        properties,
                        fields,
                    } = self
                        .parsed
                        .base(&object, Model::into_view, parse_view_metadata)?;
                    if let Err(e) = check_view_requirements(&change.requirements, &base) {
                        // Unchanged: the next commit may still start from this model.
                        let model = Model::View(Box::new(Kept {
                            model: base,
                            properties,
                            fields,
                        }));
                        self.parsed
                            .keep(&object.metadata_location, &object.metadata, model);
                        return Err(e);
                    }
                    let log_len = base.history().len();
                    let shape = (base.versions().len(), log_len, base.current_version_id());
                    let previous_location = base.location().to_string();
                    let metadata = apply_view_updates(base, change.updates.clone())?;
                    let properties = properties_text(
                        properties.as_ref(),
                        metadata.properties(),
                        view_property_keys(&change.updates),
                    );
                    // The base document's text with what a property-only commit
                    // changes, else the whole document written from the model.
                    let base = fields.as_ref().map(|f| (object.metadata.as_str(), f));
                    let (document, fields) = spliced_or_whole(
                        view_document_spliced(
                            base,
                            shape,
                            &metadata,
                            &change.updates,
                            properties.as_ref(),
                        )?,
                        || view_metadata_document(&metadata, properties.as_ref()),
                    )?;
                    let canonical = check_allowed(&record, metadata.location())?;
                    let write = ObjectWrite {
                        ident: ident.clone(),
                        kind: ObjectKind::View,
                        metadata_location: next_metadata_file(
                            &metadata_dir(&record, metadata.location(), metadata.properties())?,
                            Some(&object.metadata_location),
                            log_len,
                        ),
                        expected_metadata_location: Some(object.metadata_location),
                        metadata: document,
                        location: canonical,
                        check_location: previous_location != metadata.location(),
                    };
                    let uuid = metadata.uuid().to_string();
                    let event = write_event(Operation::UpdateView, &write, &uuid)
                        .with("updates", to_value(&change.updates)?)
                        .with("requirements", to_value(&change.requirements)?);
                    let model = Model::View(Box::new(Kept {
                        model: metadata,
                        properties,
                        fields,
                    }));
                    self.parsed
                        .keep(&write.metadata_location, &write.metadata, model);
                    Ok(vec![Prepared {
                        write,
                        events: vec![event],
                    }])
                },
                |writes| Outcome::View(loaded(&writes[0])),
            )
            .await?;
        Ok(into_loaded(writes.swap_remove(0)))
    }

    pub async fn drop_view(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<()> {
        self.drop_object(ctx, catalog, ObjectKind::View, ident, false)
            .await
            .map(|_| ())
    }

    pub async fn rename_view(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        from: &Ident,
        to: &Ident,
    ) -> CatalogResult<()> {
        self.rename_object(ctx, catalog, ObjectKind::View, from, to)
            .await
    }

    /// Registers an existing view metadata file as a view.
    pub async fn register_view(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
        metadata_location: &str,
    ) -> CatalogResult<LoadedView> {
        let parse = |bytes: &[u8]| {
            let metadata: ViewMetadata = serde_json::from_slice(bytes).map_err(|e| {
                CatalogError::bad_request(format!(
                    "{metadata_location} is not valid view metadata: {e}"
                ))
            })?;
            // Kept as Floe writes it, its schemas are checked as a request's would be.
            super::schemas::check_default_text(bytes)?;
            super::schemas::check_each(metadata.schemas_iter())?;
            Ok(Registered {
                location: metadata.location().to_string(),
                metadata: view_metadata_json(&metadata, None)?,
                uuid: metadata.uuid().to_string(),
            })
        };
        let write = self
            .register_object(
                ctx,
                catalog,
                ObjectKind::View,
                ident,
                metadata_location,
                false,
                parse,
                |w| Outcome::View(loaded(w)),
            )
            .await?;
        Ok(into_loaded(write))
    }
}
