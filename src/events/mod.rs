//! Change events: what the catalog tells the world about every change it acknowledged.
//!
//! **Transactional outbox.** The catalog attaches the events of a change to the change's
//! `WriteBatch`; each store writes them in the same transaction as the change (or not at
//! all), numbering them with a global *position* (commit order, the resume point of every
//! consumer) and a per-entity *sequence* (1, 2, 3… for each table, view, namespace or
//! catalog). A rejected or rolled-back change has no events; an acknowledged one has all
//! of its events, durable before the client hears back.
//!
//! Consumers read the outbox two ways: pulling it through the REST events endpoint
//! (`query`), or from a broker the relay (`relay`, `sinks/`) publishes to.
//!
//! Each event is a CloudEvents 1.0 JSON document (`docs/events.schema.json` describes
//! it). The body is built when the change is made and stored as text; the store-assigned
//! `position` and `entityseq` are spliced in when it is read ([`StoredEvent::render`]),
//! so no event is parsed again on its way out.
//!
//! - `mod.rs`: the event, its operations and how a body is built.
//! - `query.rs`: the REST events query (filters, continuation tokens), pure.
//! - `relay.rs`: the one active relay per deployment (a lease in the store), at least once.
//! - `sinks/`: NATS JetStream, Kafka and webhooks.

pub mod query;
pub mod relay;
pub mod sinks;

use serde_json::{json, Map, Value};

use crate::model::{CatalogId, Ident, Namespace};

/// The operations of the REST events proposal (apache/iceberg PR #12584), plus
/// `register-view` (the spec's registerView, which the proposal predates) and Floe's own
/// (`x-floe-…`) for catalogs and the security model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    CreateTable,
    RegisterTable,
    UpdateTable,
    DropTable,
    RenameTable,
    CreateView,
    RegisterView,
    UpdateView,
    DropView,
    RenameView,
    CreateNamespace,
    UpdateNamespaceProperties,
    DropNamespace,
    CreateCatalog,
    UpdateCatalog,
    DropCatalog,
    UpdateSecurity,
}

impl Operation {
    pub const ALL: [Operation; 17] = [
        Operation::CreateTable,
        Operation::RegisterTable,
        Operation::UpdateTable,
        Operation::DropTable,
        Operation::RenameTable,
        Operation::CreateView,
        Operation::RegisterView,
        Operation::UpdateView,
        Operation::DropView,
        Operation::RenameView,
        Operation::CreateNamespace,
        Operation::UpdateNamespaceProperties,
        Operation::DropNamespace,
        Operation::CreateCatalog,
        Operation::UpdateCatalog,
        Operation::DropCatalog,
        Operation::UpdateSecurity,
    ];

    /// The `operation-type` as the REST proposal spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::CreateTable => "create-table",
            Operation::RegisterTable => "register-table",
            Operation::UpdateTable => "update-table",
            Operation::DropTable => "drop-table",
            Operation::RenameTable => "rename-table",
            Operation::CreateView => "create-view",
            Operation::RegisterView => "register-view",
            Operation::UpdateView => "update-view",
            Operation::DropView => "drop-view",
            Operation::RenameView => "rename-view",
            Operation::CreateNamespace => "create-namespace",
            Operation::UpdateNamespaceProperties => "update-namespace-properties",
            Operation::DropNamespace => "drop-namespace",
            Operation::CreateCatalog => "x-floe-create-catalog",
            Operation::UpdateCatalog => "x-floe-update-catalog",
            Operation::DropCatalog => "x-floe-drop-catalog",
            Operation::UpdateSecurity => "x-floe-update-security",
        }
    }

    pub fn parse(s: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == s)
    }

    /// The kind of object the event is about, as the query's `object-types` names it.
    pub fn object_type(self) -> &'static str {
        use Operation::*;
        match self {
            CreateTable | RegisterTable | UpdateTable | DropTable | RenameTable => "table",
            CreateView | RegisterView | UpdateView | DropView | RenameView => "view",
            CreateNamespace | UpdateNamespaceProperties | DropNamespace => "namespace",
            CreateCatalog | UpdateCatalog | DropCatalog => "catalog",
            UpdateSecurity => "security",
        }
    }
}

/// Who made a change, and when: the same for every event of one request.
#[derive(Debug, Clone)]
pub struct Origin {
    pub principal: String,
    pub request_id: String,
    pub time_ms: i64,
}

/// An event being built: sealed into [`ChangeEvent`]s once all events of its request
/// are known (each carries the request's event count).
#[derive(Debug, Clone)]
pub struct Draft {
    pub operation: Operation,
    /// The per-entity sequence key: the table or view uuid (stable across renames), or
    /// the namespace's or catalog's key.
    pub entity: String,
    /// CloudEvents `subject`: the dotted name of what changed.
    pub subject: String,
    /// Operation-specific fields of `data` (identifier, uuid, locations, snapshots…).
    pub data: Map<String, Value>,
}

impl Draft {
    pub fn new(operation: Operation, entity: String, subject: String) -> Self {
        Draft {
            operation,
            entity,
            subject,
            data: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }

    /// A table or view event keyed by its uuid.
    pub fn object(operation: Operation, ident: &Ident, uuid: &str) -> Self {
        let uuid_key = match operation.object_type() {
            "view" => "view-uuid",
            _ => "table-uuid",
        };
        Draft::new(operation, format!("object:{uuid}"), subject_of(ident))
            .with("identifier", identifier_json(ident))
            .with(uuid_key, uuid)
    }

    pub fn namespace(operation: Operation, catalog: CatalogId, namespace: &Namespace) -> Self {
        Draft::new(
            operation,
            format!("namespace:{}:{}", catalog.0, namespace.key()),
            namespace.levels().join("."),
        )
        .with("namespace", namespace.levels().to_vec())
    }

    pub fn catalog(operation: Operation, catalog: CatalogId, name: &str) -> Self {
        Draft::new(
            operation,
            format!("catalog:{}", catalog.0),
            name.to_string(),
        )
    }

    /// A change to principals, roles or grants; `action` names it (`change-grant`…).
    pub fn security(action: &str) -> Self {
        Draft::new(
            Operation::UpdateSecurity,
            "security".to_string(),
            "security".to_string(),
        )
        .with("action", action)
    }
}

/// An event ready for the outbox: what the store indexes, and the body it keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEvent {
    /// UUIDv7: unique, and the dedupe id relays give brokers.
    pub id: String,
    pub catalog_id: CatalogId,
    pub entity: String,
    pub operation: Operation,
    pub time_ms: i64,
    /// The CloudEvent as JSON text, without `position` and `entityseq`.
    pub body: String,
}

/// Turns one request's drafts into events (each knows how many its request made).
/// `catalog`: the catalog they belong to; `None` for service-wide changes (principals,
/// roles), which are kept under catalog id 0.
pub fn seal(
    origin: &Origin,
    catalog: Option<(CatalogId, &str)>,
    drafts: Vec<Draft>,
) -> Vec<ChangeEvent> {
    let count = drafts.len();
    let time = chrono::DateTime::from_timestamp_millis(origin.time_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    drafts
        .into_iter()
        .map(|draft| {
            let id = uuid::Uuid::now_v7().to_string();
            let mut data = Map::new();
            data.insert("operation-type".into(), draft.operation.as_str().into());
            if let Some((_, name)) = catalog {
                data.insert("catalog".into(), name.into());
            }
            data.extend(draft.data);
            data.insert("principal".into(), origin.principal.clone().into());
            data.insert("request-id".into(), origin.request_id.clone().into());
            data.insert("request-event-count".into(), count.into());
            // Built by moving `data` in: `json!` would copy the whole map (updates and
            // requirements included) through `to_value`.
            let source = match catalog {
                Some((_, name)) => format!("/catalogs/{name}"),
                None => "/".to_string(),
            };
            let body = Map::from_iter([
                ("specversion".to_string(), Value::from("1.0")),
                ("id".to_string(), Value::from(id.as_str())),
                ("source".to_string(), Value::from(source)),
                (
                    "type".to_string(),
                    Value::from(format!("dev.floe.{}", draft.operation.as_str())),
                ),
                ("subject".to_string(), Value::from(draft.subject)),
                ("time".to_string(), Value::from(time.as_str())),
                (
                    "datacontenttype".to_string(),
                    Value::from("application/json"),
                ),
                ("data".to_string(), Value::Object(data)),
            ]);
            ChangeEvent {
                id,
                catalog_id: catalog.map_or(CatalogId(0), |c| c.0),
                entity: draft.entity,
                operation: draft.operation,
                time_ms: origin.time_ms,
                // The same text as serde_json's, with its strings written faster.
                body: crate::json_text::to_string(&Value::Object(body)),
            }
        })
        .collect()
}

/// An event as the outbox keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Global, gap-free within a store's history, in commit order.
    pub position: i64,
    /// 1, 2, 3… per entity.
    pub sequence: i64,
    pub catalog_id: CatalogId,
    pub entity: String,
    pub operation: String,
    pub time_ms: i64,
    pub id: String,
    pub body: String,
}

impl StoredEvent {
    /// The CloudEvent with the store's numbers, as JSON text: `position` and `entityseq`
    /// are spliced into the stored body rather than parsing it again.
    pub fn render(&self) -> String {
        debug_assert!(self.body.starts_with('{'));
        format!(
            "{{\"position\":{},\"entityseq\":{},{}",
            self.position,
            self.sequence,
            &self.body[1..]
        )
    }
}

/// `{"namespace": [...], "name": "..."}`, the REST spec's TableIdentifier.
pub fn identifier_json(ident: &Ident) -> Value {
    json!({ "namespace": ident.namespace.levels(), "name": ident.name })
}

fn subject_of(ident: &Ident) -> String {
    let mut parts = ident.namespace.levels().to_vec();
    parts.push(ident.name.clone());
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(ns: &[&str], name: &str) -> Ident {
        Ident::new(
            Namespace::new(ns.iter().map(|s| s.to_string()).collect()).unwrap(),
            name.into(),
        )
        .unwrap()
    }

    #[test]
    fn operations_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("create-tables"), None);
    }

    #[test]
    fn sealed_events_are_cloud_events_with_the_request_count() {
        let origin = Origin {
            principal: "alice".into(),
            request_id: "r1".into(),
            time_ms: 1_700_000_000_123,
        };
        let t = ident(&["db", "sales"], "orders");
        let drafts = vec![
            Draft::object(Operation::UpdateTable, &t, "u-1").with("snapshots-added", vec![7]),
            Draft::namespace(Operation::CreateNamespace, CatalogId(9), &t.namespace),
        ];
        let events = seal(&origin, Some((CatalogId(9), "cat")), drafts);
        assert_eq!(events.len(), 2);
        assert_ne!(events[0].id, events[1].id);
        let body: Value = serde_json::from_str(&events[0].body).unwrap();
        assert_eq!(body["specversion"], "1.0");
        assert_eq!(body["type"], "dev.floe.update-table");
        assert_eq!(body["source"], "/catalogs/cat");
        assert_eq!(body["subject"], "db.sales.orders");
        assert_eq!(body["time"], "2023-11-14T22:13:20.123Z");
        assert_eq!(body["data"]["table-uuid"], "u-1");
        assert_eq!(body["data"]["identifier"]["namespace"][1], "sales");
        assert_eq!(body["data"]["request-event-count"], 2);
        assert_eq!(body["data"]["principal"], "alice");
        assert_eq!(events[0].entity, "object:u-1");
        assert_eq!(events[1].entity, "namespace:9:db\u{1f}sales");
    }

    #[test]
    fn render_splices_the_store_numbers() {
        let stored = StoredEvent {
            position: 42,
            sequence: 3,
            catalog_id: CatalogId(1),
            entity: "object:x".into(),
            operation: "drop-table".into(),
            time_ms: 0,
            id: "e".into(),
            body: r#"{"specversion":"1.0","id":"e"}"#.into(),
        };
        let v: Value = serde_json::from_str(&stored.render()).unwrap();
        assert_eq!(v["position"], 42);
        assert_eq!(v["entityseq"], 3);
        assert_eq!(v["id"], "e");
    }
}
