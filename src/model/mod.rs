//! The catalog's vocabulary, shared by every layer: validated names, the kinds of
//! entities and the records a store keeps. It depends on nothing else in Floe, so the
//! store, the file layer, the catalog and HTTP can all use it without reaching up.

pub mod names;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use names::{
    path_segment, validate_catalog_name, Ident, IdentBody, InvalidName, Namespace, Rename,
    KEY_SEPARATOR,
};

pub type Properties = BTreeMap<String, String>;

/// A catalog's id in the store: random, never reused, so a catalog dropped and created
/// again under the same name is a different catalog (for locks, events and grants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CatalogId(pub i64);

/// Tables, views and generic tables share one name space inside a namespace. A generic
/// table is Polaris's record of a non-Iceberg table (Delta, CSV…): a name, a format, an
/// optional base location and properties, with no metadata file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    Table,
    View,
    GenericTable,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Table => "table",
            ObjectKind::View => "view",
            ObjectKind::GenericTable => "generic-table",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "table" => Some(ObjectKind::Table),
            "view" => Some(ObjectKind::View),
            "generic-table" => Some(ObjectKind::GenericTable),
            _ => None,
        }
    }

    /// "Table" or "View", as Iceberg's messages spell it ("Generic table" as Polaris's).
    pub fn title(self) -> &'static str {
        match self {
            ObjectKind::Table => "Table",
            ObjectKind::View => "View",
            ObjectKind::GenericTable => "Generic table",
        }
    }
}

/// Polaris's two kinds of catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CatalogType {
    /// Its tables and views change through the REST API.
    #[default]
    #[serde(rename = "INTERNAL")]
    Internal,
    /// A read-only copy of another catalog's tables (Polaris's "static facade"): they
    /// change only through notifications from that catalog.
    #[serde(rename = "EXTERNAL")]
    External,
}

impl CatalogType {
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogType::Internal => "INTERNAL",
            CatalogType::External => "EXTERNAL",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "INTERNAL" => Some(CatalogType::Internal),
            "EXTERNAL" => Some(CatalogType::External),
            _ => None,
        }
    }
}

/// A catalog (the REST `prefix`): Polaris's catalog entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogRecord {
    pub id: CatalogId,
    pub name: String,
    /// Records kept before the type existed (idempotency outcomes) are INTERNAL.
    #[serde(default)]
    pub catalog_type: CatalogType,
    pub properties: Properties,
    /// Polaris's `storageConfigInfo`, kept as sent.
    pub storage_config: serde_json::Value,
    /// A federated catalog's `connectionConfigInfo` as shown, without its secrets: the
    /// connection lives in the security model (`federation`), and the management API's
    /// reads fill this in from there; the catalog's row does not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<serde_json::Value>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

/// What a properties update did to each key it named.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PropertiesChange {
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    pub missing: Vec<String>,
}

impl PropertiesChange {
    /// Removes, then sets, properties in place, and says what happened to each key.
    pub fn apply(
        properties: &mut Properties,
        removals: &[String],
        updates: &Properties,
    ) -> PropertiesChange {
        let mut change = PropertiesChange::default();
        for key in removals {
            if properties.remove(key).is_some() {
                change.removed.push(key.clone());
            } else {
                change.missing.push(key.clone());
            }
        }
        for (key, value) in updates {
            change.updated.push(key.clone());
            properties.insert(key.clone(), value.clone());
        }
        change
    }
}

/// Milliseconds since the epoch: the one clock. Every timestamp a store keeps comes from
/// here, through the catalog, so a test or a node with a skewed clock has one place to
/// look.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_change_reports_each_key() {
        let mut props = Properties::from([("a".into(), "1".into()), ("b".into(), "2".into())]);
        let updates = Properties::from([("c".into(), "3".into())]);
        let change = PropertiesChange::apply(&mut props, &["a".into(), "x".into()], &updates);
        assert_eq!(change.removed, vec!["a"]);
        assert_eq!(change.missing, vec!["x"]);
        assert_eq!(change.updated, vec!["c"]);
        assert_eq!(props.len(), 2);
    }
}
