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
    CreateGenericTable,
    DropGenericTable,
    CreatePolicy,
    UpdatePolicy,
    DropPolicy,
    AttachPolicy,
    DetachPolicy,
    CreateNamespace,
    UpdateNamespaceProperties,
    DropNamespace,
    CreateCatalog,
    UpdateCatalog,
    DropCatalog,
    UpdateSecurity,
}

impl Operation {
    pub const ALL: [Operation; 24] = [
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
        Operation::CreateGenericTable,
        Operation::DropGenericTable,
        Operation::CreatePolicy,
        Operation::UpdatePolicy,
        Operation::DropPolicy,
        Operation::AttachPolicy,
        Operation::DetachPolicy,
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
            // Polaris's generic tables: no operation of the REST proposal names them.
            Operation::CreateGenericTable => "x-floe-create-generic-table",
            Operation::DropGenericTable => "x-floe-drop-generic-table",
            // Polaris's policies, likewise.
            Operation::CreatePolicy => "x-floe-create-policy",
            Operation::UpdatePolicy => "x-floe-update-policy",
            Operation::DropPolicy => "x-floe-drop-policy",
            Operation::AttachPolicy => "x-floe-attach-policy",
            Operation::DetachPolicy => "x-floe-detach-policy",
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
            CreateGenericTable | DropGenericTable => "generic-table",
            CreatePolicy | UpdatePolicy | DropPolicy | AttachPolicy | DetachPolicy => "policy",
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

    /// A table, view or generic table event keyed by its uuid.
    pub fn object(operation: Operation, ident: &Ident, uuid: &str) -> Self {
        Draft::named(operation, ident.namespace.levels(), &ident.name, uuid)
    }

    /// As [`Self::object`], for an object named by its namespace's levels and its name
    /// (a stored policy, which keeps its namespace as levels).
    pub fn named(operation: Operation, namespace: &[String], name: &str, uuid: &str) -> Self {
        let uuid_key = match operation.object_type() {
            "view" => "view-uuid",
            "generic-table" => "generic-table-uuid",
            "policy" => "policy-uuid",
            _ => "table-uuid",
        };
        let mut subject = namespace.to_vec();
        subject.push(name.to_string());
        Draft::new(operation, format!("object:{uuid}"), subject.join("."))
            .with(
                "identifier",
                json!({ "namespace": namespace, "name": name }),
            )
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
            let body = body_text(origin, catalog.map(|c| c.1), count, &id, &time, &draft);
            ChangeEvent {
                id,
                catalog_id: catalog.map_or(CatalogId(0), |c| c.0),
                entity: draft.entity,
                operation: draft.operation,
                time_ms: origin.time_ms,
                body,
            }
        })
        .collect()
}

/// A field of an event's `data`.
enum Field<'a> {
    Text(&'a str),
    Count(usize),
    Value(&'a Value),
}

/// The CloudEvent's JSON text, byte for byte what serde_json writes for it as a map
/// (keys in order, at every level), written directly: building that map per event and
/// then serialising it was most of an event's cost on a commit.
fn body_text(
    origin: &Origin,
    catalog: Option<&str>,
    count: usize,
    id: &str,
    time: &str,
    draft: &Draft,
) -> String {
    use crate::json_text::{push_str, push_value};
    // `data`: the operation and catalog, which a draft's own fields may replace, then
    // the request's fields, which no draft may replace.
    const OURS: [&str; 3] = ["principal", "request-id", "request-event-count"];
    let mut data: Vec<(&str, Field)> = Vec::with_capacity(draft.data.len() + 5);
    data.push(("operation-type", Field::Text(draft.operation.as_str())));
    if let Some(name) = catalog {
        data.push(("catalog", Field::Text(name)));
    }
    let replaceable = data.len();
    for (key, value) in &draft.data {
        if OURS.contains(&key.as_str()) {
            continue;
        }
        match data[..replaceable].iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = Field::Value(value),
            None => data.push((key, Field::Value(value))),
        }
    }
    data.push(("principal", Field::Text(&origin.principal)));
    data.push(("request-id", Field::Text(&origin.request_id)));
    data.push(("request-event-count", Field::Count(count)));
    // Keys are unique by now; sorted as a `serde_json::Map` iterates them.
    data.sort_unstable_by(|a, b| a.0.cmp(b.0));

    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"data\":");
    crate::json_text::push_object(&mut out, data, |out, field| match field {
        Field::Text(text) => push_str(out, text),
        Field::Count(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        Field::Value(value) => push_value(out, value),
    });
    // The envelope, its keys in sorted order too.
    out.extend_from_slice(b",\"datacontenttype\":\"application/json\",\"id\":");
    push_str(&mut out, id);
    out.extend_from_slice(b",\"source\":");
    match catalog {
        Some(name) => push_str(&mut out, &format!("/catalogs/{name}")),
        None => out.extend_from_slice(b"\"/\""),
    }
    out.extend_from_slice(b",\"specversion\":\"1.0\",\"subject\":");
    push_str(&mut out, &draft.subject);
    out.extend_from_slice(b",\"time\":");
    push_str(&mut out, time);
    out.extend_from_slice(b",\"type\":\"dev.floe.");
    out.extend_from_slice(draft.operation.as_str().as_bytes());
    out.extend_from_slice(b"\"}");
    String::from_utf8(out).expect("JSON text is UTF-8")
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

    /// The body as seal built it before writing it directly: a `serde_json::Map`.
    fn body_by_map(
        origin: &Origin,
        catalog: Option<&str>,
        count: usize,
        id: &str,
        time: &str,
        draft: &Draft,
    ) -> String {
        let mut data = Map::new();
        data.insert("operation-type".into(), draft.operation.as_str().into());
        if let Some(name) = catalog {
            data.insert("catalog".into(), name.into());
        }
        data.extend(draft.data.clone());
        data.insert("principal".into(), origin.principal.clone().into());
        data.insert("request-id".into(), origin.request_id.clone().into());
        data.insert("request-event-count".into(), count.into());
        let source = catalog.map_or("/".to_string(), |name| format!("/catalogs/{name}"));
        serde_json::to_string(&json!({
            "specversion": "1.0", "id": id, "source": source,
            "type": format!("dev.floe.{}", draft.operation.as_str()),
            "subject": draft.subject, "time": time,
            "datacontenttype": "application/json", "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn bodies_are_what_serde_json_writes_for_the_event_as_a_map() {
        let origin = Origin {
            principal: "bob \"the\" admin\\".into(),
            request_id: "r\u{1}2".into(),
            time_ms: 1_700_000_000_123,
        };
        let t = ident(&["db", "sales"], "orders \"x\"");
        let drafts = [
            Draft::object(Operation::UpdateTable, &t, "u-1")
                .with("snapshots-added", vec![7, -1])
                .with(
                    "updates",
                    json!([{"action": "set-properties", "updates": {"b": "1", "a": "\n"}}]),
                )
                .with("requirements", json!([])),
            Draft::namespace(Operation::CreateNamespace, CatalogId(9), &t.namespace),
            Draft::catalog(Operation::DropCatalog, CatalogId(9), "cat"),
            Draft::security("change-grant"),
            // A draft may replace the operation and catalog, never the request's fields.
            Draft::object(Operation::DropTable, &t, "u-2")
                .with("catalog", "other")
                .with("operation-type", json!({"x": 1}))
                .with("principal", "mallory")
                .with("request-event-count", 99)
                .with("zz", json!(null))
                .with("aa", 1.5),
        ];
        let time = "2023-11-14T22:13:20.123Z";
        for catalog in [Some("cat"), Some("c/\"d\""), None] {
            for (i, draft) in drafts.iter().enumerate() {
                let id = format!("id-{i}");
                assert_eq!(
                    body_text(&origin, catalog, 5, &id, time, draft),
                    body_by_map(&origin, catalog, 5, &id, time, draft),
                    "draft {i}, catalog {catalog:?}"
                );
            }
        }
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
