//! The outcome of a mutation, as a value: what the HTTP layer renders, and what an
//! idempotency key keeps so that a retried request gets the same answer without running
//! again. Rendering lives in `http::outcome`; both paths use it, so a replay cannot
//! differ from the first response.

use serde::{Deserialize, Serialize};

use crate::model::{CatalogRecord, Properties, PropertiesChange};
use crate::store::cache_text::MetadataText;

/// A table's pointer and metadata document, ready to be sent as a LoadTableResult.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedTable {
    /// `None` for a staged table, which has no metadata file yet.
    pub metadata_location: Option<String>,
    /// The metadata document as JSON text.
    pub metadata: MetadataText,
}

/// A view's pointer and metadata document, ready to be sent as a LoadViewResult.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedView {
    pub metadata_location: String,
    pub metadata: MetadataText,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Table(LoadedTable),
    View(LoadedView),
    Namespace {
        namespace: Vec<String>,
        properties: Properties,
    },
    PropertiesChange(PropertiesChange),
    Catalog {
        record: CatalogRecord,
        created: bool,
    },
    NoContent,
    /// Any other JSON answer (the management API's principals and roles).
    Json {
        status: u16,
        body: serde_json::Value,
    },
    /// A final rejection (a deterministic 4xx), kept as sent.
    Rejected {
        status: u16,
        body: String,
    },
}

impl Outcome {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("outcomes serialise")
    }

    pub fn from_json(text: &str) -> Option<Outcome> {
        serde_json::from_str(text).ok()
    }
}
