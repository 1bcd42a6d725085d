//! Where tables and views live. A catalog allows its `default-base-location` plus the
//! `allowedLocations` of its storage config; nothing may be placed outside them.

use uuid::Uuid;

use super::error::{CatalogError, CatalogResult};
use crate::model::{CatalogRecord, Ident, Properties};
use crate::storage::config::allowed_locations;
use crate::storage::{canonical_location, is_within, path_segment, StorageConfig};

pub const DEFAULT_BASE_LOCATION: &str = "default-base-location";

/// The namespace property that places the tables and views created in it without a
/// location of their own ([`default_location`]).
pub const NAMESPACE_LOCATION: &str = "location";

/// The catalog's base location as configured, without a trailing `/`.
pub fn catalog_base(catalog: &CatalogRecord) -> &str {
    catalog
        .properties
        .get(DEFAULT_BASE_LOCATION)
        .map(|b| b.trim_end_matches('/'))
        .unwrap_or("")
}

/// Every location the catalog allows, in canonical form. All are on the catalog's kind
/// of storage (an S3 catalog has no `file:` base, and so on).
pub fn allowed_bases(catalog: &CatalogRecord) -> CatalogResult<Vec<String>> {
    let storage = StorageConfig::of(&catalog.storage_config);
    let mut locations =
        allowed_locations(&catalog.storage_config).map_err(|e| CatalogError::bad_request(e.0))?;
    locations.insert(0, catalog_base(catalog).to_string());
    let mut bases = Vec::with_capacity(locations.len());
    for location in locations {
        storage
            .check_scheme(&location)
            .map_err(|e| CatalogError::bad_request(e.0))?;
        bases.push(canonical_location(&location)?);
    }
    Ok(bases)
}

/// The location of a new table or view that did not ask for one: under its namespace's
/// `location` property if set, else under the catalog base, in a directory named after
/// the object plus a random suffix, so a dropped and re-created table never shares files.
pub fn default_location(
    catalog: &CatalogRecord,
    namespace_properties: &Properties,
    ident: &Ident,
) -> String {
    let parent = match namespace_properties.get(NAMESPACE_LOCATION) {
        Some(location) => location.trim_end_matches('/').to_string(),
        None => {
            let mut base = catalog_base(catalog).to_string();
            for level in ident.namespace.levels() {
                base.push('/');
                base.push_str(&path_segment(level));
            }
            base
        }
    };
    format!(
        "{parent}/{}-{}",
        path_segment(&ident.name),
        Uuid::new_v4().simple()
    )
}

/// Where the metadata files of a table or view go: the `write.metadata.path` property
/// when set, else `<location>/metadata`. A custom path must lie inside the object's own
/// location, so that the location-overlap rule also keeps every metadata file away from
/// other objects' directories (and purge never deletes another object's metadata).
pub fn metadata_dir(
    catalog: &CatalogRecord,
    location: &str,
    properties: &std::collections::HashMap<String, String>,
) -> CatalogResult<String> {
    match properties.get(WRITE_METADATA_PATH) {
        Some(dir) => {
            let canonical_dir = check_allowed(catalog, dir)?;
            if !canonical_dir.starts_with(&canonical_location(location)?) {
                return Err(CatalogError::bad_request(format!(
                    "{WRITE_METADATA_PATH} {dir} must be inside the location {location}"
                )));
            }
            Ok(dir.trim_end_matches('/').to_string())
        }
        None => Ok(format!("{}/metadata", location.trim_end_matches('/'))),
    }
}

pub const WRITE_METADATA_PATH: &str = "write.metadata.path";

/// Checks that `location` is inside the catalog's allowed locations; returns its
/// canonical form (the key the store compares for overlaps).
pub fn check_allowed(catalog: &CatalogRecord, location: &str) -> CatalogResult<String> {
    let canonical = canonical_location(location)?;
    let bases = allowed_bases(catalog)?;
    if is_within(&canonical, &bases) {
        Ok(canonical)
    } else {
        Err(CatalogError::Forbidden(format!(
            "Location {location} is not within the allowed locations of catalog {}: {}",
            catalog.name,
            bases.join(", ")
        )))
    }
}
