//! Polaris's generic tables: a catalog entry for a table in a format other than Iceberg
//! (Delta, Hudi, CSV…), so that one catalog can name and guard every table of a lake.
//! A generic table is a name, a format, an optional base location, a comment and
//! properties, kept as given; there is no metadata file and no commit.
//!
//! They share the name space of tables and views (a taken name is a 409 either way) and
//! the table privileges (`TABLE_CREATE`, `TABLE_LIST`, `TABLE_READ_PROPERTIES`,
//! `TABLE_DROP`), as in Polaris. A base location must lie in the catalog's allowed
//! locations and overlap no other object's, as a table's must: an Iceberg table's purge
//! must never delete a Delta table's files. Dropping one is final (undrop restores Iceberg
//! metadata, which a generic table has none of) and deletes no files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::delegation::StorageCredential;
use super::error::{object_missing, CatalogError, CatalogResult};
use super::locations::check_allowed;
use super::pagination::{ListRequest, Listed};
use super::{Catalog, Outcome, RequestContext};
use crate::auth::privileges::{Privilege, Securable};
use crate::events::{Draft, Operation};
use crate::model::{Ident, Namespace, ObjectKind};
use crate::store::ObjectWrite;

/// Longest `format` and `doc` accepted (a 400 above): they are labels and a comment.
const MAX_FORMAT_CHARS: usize = 256;
const MAX_DOC_CHARS: usize = 64 * 1024;

/// The body of a create request (Polaris's `CreateGenericTableRequest`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreateGenericTable {
    pub name: String,
    pub format: String,
    pub base_location: Option<String>,
    pub doc: Option<String>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// A generic table as Polaris's API answers it (`GenericTable`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct GenericTable {
    pub name: String,
    pub format: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    pub properties: BTreeMap<String, String>,
}

/// What the store keeps as the object's document: the table without its name (the
/// store's key holds that) and with a uuid, which keys its change events.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Stored {
    generic_table_uuid: String,
    format: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    doc: Option<String>,
    properties: BTreeMap<String, String>,
}

impl Stored {
    fn into_table(self, name: &str) -> GenericTable {
        GenericTable {
            name: name.to_string(),
            format: self.format,
            base_location: self.base_location,
            doc: self.doc,
            properties: self.properties,
        }
    }
}

/// A generic table with the credentials vended for it (only when asked for).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedGeneric {
    pub table: GenericTable,
    pub credentials: Vec<StorageCredential>,
}

/// The answer to a create or a load (`LoadGenericTableResponse`).
pub fn load_response(loaded: &LoadedGeneric) -> serde_json::Value {
    let mut body = serde_json::json!({ "table": loaded.table });
    if !loaded.credentials.is_empty() {
        body["storage-credentials"] = serde_json::json!(loaded.credentials);
    }
    body
}

/// The request's fields checked: a format is required, and the base location, when
/// given, is a location (trailing slashes dropped, as a table's).
fn checked(request: CreateGenericTable) -> CatalogResult<CreateGenericTable> {
    let bad = |message: String| Err(CatalogError::bad_request(message));
    if request.format.trim().is_empty() {
        return bad("A generic table needs a format (e.g. \"delta\")".into());
    }
    if request.format.chars().count() > MAX_FORMAT_CHARS {
        return bad(format!(
            "A generic table's format is at most {MAX_FORMAT_CHARS} characters"
        ));
    }
    if request.doc.as_ref().map_or(0, |d| d.chars().count()) > MAX_DOC_CHARS {
        return bad(format!(
            "A generic table's doc is at most {MAX_DOC_CHARS} characters"
        ));
    }
    let base_location = match request.base_location {
        Some(location) if location.trim().is_empty() => {
            return bad("A generic table's base-location, when given, may not be empty".into())
        }
        Some(location) => Some(location.trim_end_matches('/').to_string()),
        None => None,
    };
    Ok(CreateGenericTable {
        base_location,
        ..request
    })
}

impl Catalog {
    pub async fn list_generic_tables(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        list: &ListRequest,
    ) -> CatalogResult<Listed<Ident>> {
        self.list_objects(ctx, catalog, namespace, ObjectKind::GenericTable, list)
            .await
    }

    pub async fn create_generic_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        namespace: &Namespace,
        request: CreateGenericTable,
    ) -> CatalogResult<LoadedGeneric> {
        let ident = Ident::new(namespace.clone(), request.name.clone())?;
        ctx.require(
            catalog,
            Privilege::TABLE_CREATE,
            &Securable::namespace(namespace),
        )?;
        let request = checked(request)?;
        let record = self.get_catalog(catalog).await?;
        self.namespace_properties(catalog, namespace).await?;
        let location = match &request.base_location {
            Some(location) => Some(check_allowed(&record, location)?),
            None => None,
        };
        // Vended before anything is written: a refusal (or an STS failure) creates nothing.
        let credentials = self
            .generic_table_credentials(ctx, catalog, &ident, request.base_location.as_deref())
            .await?;
        let uuid = uuid::Uuid::new_v4().to_string();
        let stored = Stored {
            generic_table_uuid: uuid.clone(),
            format: request.format,
            base_location: request.base_location,
            doc: request.doc,
            properties: request.properties,
        };
        let write = ObjectWrite {
            ident,
            kind: ObjectKind::GenericTable,
            expected_metadata_location: None,
            // The store's pointer (compared by a drop); no file has this name.
            metadata_location: format!("generic-table:{uuid}"),
            metadata: serde_json::to_string(&stored).map_err(CatalogError::internal)?,
            check_location: location.is_some(),
            // No location: nothing to overlap (the store checks only when told to).
            location: location.unwrap_or_default(),
        };
        let mut event = Draft::object(Operation::CreateGenericTable, &write.ident, &uuid)
            .with("format", stored.format.clone());
        if let Some(base) = &stored.base_location {
            event = event.with("base-location", base.clone());
        }
        let table = stored.into_table(&write.ident.name);
        // What a replay answers: credentials are never kept with an outcome.
        let body = load_response(&LoadedGeneric {
            table: table.clone(),
            credentials: Vec::new(),
        });
        self.create_object(ctx, &record, write, event, |_| Outcome::Json {
            status: 200,
            body: body.clone(),
        })
        .await?;
        Ok(LoadedGeneric { table, credentials })
    }

    pub async fn load_generic_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<LoadedGeneric> {
        let target = Securable::table(ident);
        ctx.require(catalog, Privilege::TABLE_READ_PROPERTIES, &target)?;
        let object = self
            .load_kind(catalog, ident, ObjectKind::GenericTable)
            .await?
            .ok_or_else(|| object_missing(ObjectKind::GenericTable, ident))?;
        let stored: Stored = serde_json::from_str(&object.metadata).map_err(|e| {
            CatalogError::internal(anyhow::anyhow!("stored generic table is invalid: {e}"))
        })?;
        let table = stored.into_table(&ident.name);
        let credentials = self
            .generic_table_credentials(ctx, catalog, ident, table.base_location.as_deref())
            .await?;
        Ok(LoadedGeneric { table, credentials })
    }

    pub async fn drop_generic_table(
        &self,
        ctx: &RequestContext,
        catalog: &str,
        ident: &Ident,
    ) -> CatalogResult<()> {
        self.drop_object(ctx, catalog, ObjectKind::GenericTable, ident, false)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(format: &str, base: Option<&str>) -> CreateGenericTable {
        CreateGenericTable {
            name: "t".into(),
            format: format.into(),
            base_location: base.map(String::from),
            doc: None,
            properties: BTreeMap::new(),
        }
    }

    #[test]
    fn a_format_is_required_and_bounded() {
        assert!(checked(request("", None)).is_err());
        assert!(checked(request("  ", None)).is_err());
        assert!(checked(request(&"x".repeat(MAX_FORMAT_CHARS + 1), None)).is_err());
        assert!(checked(request("delta", None)).is_ok());
    }

    #[test]
    fn base_locations_lose_trailing_slashes_and_may_not_be_empty() {
        let ok = checked(request("delta", Some("s3://b/t//"))).unwrap();
        assert_eq!(ok.base_location.as_deref(), Some("s3://b/t"));
        assert!(checked(request("delta", Some(""))).is_err());
    }

    #[test]
    fn the_stored_document_answers_without_its_uuid() {
        let stored = Stored {
            generic_table_uuid: "u".into(),
            format: "delta".into(),
            base_location: None,
            doc: Some("d".into()),
            properties: BTreeMap::from([("k".into(), "v".into())]),
        };
        let text = serde_json::to_string(&stored).unwrap();
        let back: Stored = serde_json::from_str(&text).unwrap();
        let answer = load_response(&LoadedGeneric {
            table: back.into_table("t"),
            credentials: Vec::new(),
        });
        assert_eq!(
            answer,
            serde_json::json!({"table": {"name": "t", "format": "delta", "doc": "d",
                "properties": {"k": "v"}}})
        );
    }
}
