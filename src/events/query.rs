//! The REST events query (`POST /v1/{prefix}/events`, apache/iceberg PR #12584), as
//! pure rules: what a request may say, what its continuation token means, which events
//! match, and how a stored event reads as the proposal's `Event`.
//!
//! **Tokens.** A continuation token is `base64url("v1:<catalog id>:<position>")`: the
//! catalog it was issued for and the last position the server looked at. Positions are
//! in commit order and never reused, so resuming after one never misses or repeats an
//! event; a token that names another catalog, or a position the store never reached, is
//! refused (400), and one whose next events retention already deleted is gone (410).
//! Filters are not in the token: each request states its own (a consumer normally sends
//! the same ones every time).

use std::collections::{BTreeMap, HashSet};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Operation, StoredEvent};
use crate::model::CatalogId;

/// Events per page when the request does not say.
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// The most events one page holds (a larger `page-size` gets this many).
pub const MAX_PAGE_SIZE: usize = 1000;
/// The most outbox rows one request looks at while filtering: a selective filter over a
/// long history answers with fewer events (maybe none) and a token to go on from.
pub const MAX_SCANNED: usize = 10_000;
/// The most bytes of stored events one page holds (a page always holds at least one
/// event, whatever its size): a thousand events of a few MiB each (a commit's updates)
/// would otherwise make one answer of gigabytes.
pub const MAX_PAGE_BYTES: usize = 8 << 20;

/// The request body, as the proposal defines it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct QueryEventsRequest {
    pub continuation_token: Option<String>,
    pub page_size: Option<i64>,
    pub since_timestamp_ms: Option<i64>,
    pub operation_types: Option<Vec<String>>,
    pub catalog_objects_by_name: Option<Vec<Vec<String>>>,
    pub catalog_objects_by_uuid: Option<Vec<String>>,
    pub object_types: Option<Vec<String>>,
    pub custom_filters: Option<BTreeMap<String, String>>,
}

/// Why a query is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// 400: the request itself is wrong.
    BadRequest(String),
    /// 410: the token's next events were deleted by retention.
    Gone(String),
}

/// A validated query: where to start and what to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct EventQuery {
    /// Resume after this position.
    pub after: i64,
    pub page_size: usize,
    pub filter: EventFilter,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFilter {
    pub since_ms: Option<i64>,
    pub operations: Option<HashSet<Operation>>,
    pub object_types: Option<HashSet<String>>,
    /// Paths: an event matches when one of its names starts with one of them, level by
    /// level.
    pub names: Option<Vec<Vec<String>>>,
    pub uuids: Option<HashSet<String>>,
}

impl EventQuery {
    /// Checks a request against the catalog it was sent to and the outbox's bounds
    /// (`oldest` kept position, `last` given).
    pub fn parse(
        request: &QueryEventsRequest,
        catalog: CatalogId,
        (oldest, last): (i64, i64),
    ) -> Result<EventQuery, QueryError> {
        let bad = |m: String| QueryError::BadRequest(m);
        let page_size = match request.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if n < 1 => return Err(bad(format!("page-size must be at least 1, got {n}"))),
            Some(n) => (n as u64).min(MAX_PAGE_SIZE as u64) as usize,
        };
        if let Some(filters) = &request.custom_filters {
            if let Some(key) = filters.keys().next() {
                return Err(bad(format!(
                    "Unsupported custom filter '{key}': Floe defines no custom filters"
                )));
            }
        }
        let operations = match &request.operation_types {
            None => None,
            Some(types) => Some(
                types
                    .iter()
                    .map(|t| {
                        Operation::parse(t).ok_or_else(|| {
                            bad(format!(
                                "Unknown operation type '{t}': Floe emits {}",
                                known_operations()
                            ))
                        })
                    })
                    .collect::<Result<HashSet<_>, _>>()?,
            ),
        };
        let object_types = match &request.object_types {
            None => None,
            Some(types) => Some(
                types
                    .iter()
                    .map(|t| match t.as_str() {
                        "namespace" | "table" | "view" | "generic-table" | "policy" => {
                            Ok(t.clone())
                        }
                        _ => Err(bad(format!(
                            "Unknown object type '{t}': expected namespace, table, view, generic-table or policy"
                        ))),
                    })
                    .collect::<Result<HashSet<_>, _>>()?,
            ),
        };
        if let Some(names) = &request.catalog_objects_by_name {
            for name in names {
                if name.is_empty() || name.iter().any(|level| level.is_empty()) {
                    return Err(bad(format!(
                        "Invalid catalog object name {name:?}: every level must be non-empty"
                    )));
                }
            }
        }
        let uuids = match &request.catalog_objects_by_uuid {
            None => None,
            Some(uuids) => Some(
                uuids
                    .iter()
                    .map(|u| {
                        uuid::Uuid::parse_str(u)
                            .map(|u| u.to_string())
                            .map_err(|_| bad(format!("Invalid catalog object uuid '{u}'")))
                    })
                    .collect::<Result<HashSet<_>, _>>()?,
            ),
        };
        let after = match &request.continuation_token {
            None => 0,
            Some(token) => {
                let (token_catalog, position) = decode_token(token)
                    .ok_or_else(|| bad(format!("Invalid continuation token '{token}'")))?;
                if token_catalog != catalog {
                    return Err(bad(
                        "The continuation token was issued for another catalog".into()
                    ));
                }
                if position > last {
                    return Err(bad(format!(
                        "Unknown continuation token '{token}': the event log never reached it"
                    )));
                }
                position
            }
        };
        // Events after `after` were deleted when the next one kept is further on.
        if after > 0 && after + 1 < oldest {
            return Err(QueryError::Gone(format!(
                "The events after this continuation token are past the retention period (the oldest kept is at position {oldest})"
            )));
        }
        Ok(EventQuery {
            after,
            page_size,
            filter: EventFilter {
                since_ms: request.since_timestamp_ms,
                operations,
                object_types,
                names: request.catalog_objects_by_name.clone(),
                uuids,
            },
        })
    }
}

fn known_operations() -> String {
    Operation::ALL.map(Operation::as_str).join(", ")
}

pub fn encode_token(catalog: CatalogId, position: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{}:{}", catalog.0, position))
}

fn decode_token(token: &str) -> Option<(CatalogId, i64)> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    let mut parts = text.split(':');
    if parts.next()? != "v1" {
        return None;
    }
    let catalog = parts.next()?.parse().ok()?;
    let position: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || position < 0 {
        return None;
    }
    Some((CatalogId(catalog), position))
}

impl EventFilter {
    /// Whether a stored event passes; `data` is its parsed CloudEvent `data`.
    pub fn matches(&self, event: &StoredEvent, data: &Map<String, Value>) -> bool {
        let Some(operation) = Operation::parse(&event.operation) else {
            return false;
        };
        if self.since_ms.is_some_and(|since| event.time_ms < since) {
            return false;
        }
        if self
            .operations
            .as_ref()
            .is_some_and(|ops| !ops.contains(&operation))
        {
            return false;
        }
        if let Some(types) = &self.object_types {
            if !types.contains(operation.object_type()) {
                return false;
            }
        }
        if let Some(uuids) = &self.uuids {
            // A policy's attachment to a table is about both.
            let hit = [
                "table-uuid",
                "view-uuid",
                "generic-table-uuid",
                "policy-uuid",
            ]
            .into_iter()
            .filter_map(|key| data.get(key))
            .chain(data.get("target").and_then(|t| t.get("table-uuid")))
            .filter_map(Value::as_str)
            .any(|u| uuids.contains(u));
            if !hit {
                return false;
            }
        }
        if let Some(names) = &self.names {
            let paths = paths_of(data);
            let hit = names.iter().any(|prefix| {
                paths
                    .iter()
                    .any(|path| path.len() >= prefix.len() && path[..prefix.len()] == prefix[..])
            });
            if !hit {
                return false;
            }
        }
        true
    }
}

/// The full names an event is about: a table's, view's or policy's namespace plus name
/// (both names of a rename), a namespace's levels, or what a policy is attached to.
fn paths_of(data: &Map<String, Value>) -> Vec<Vec<String>> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ident = |v: &Value| {
        let mut path = strings(&v["namespace"]);
        if let Some(name) = v["name"].as_str() {
            path.push(name.to_string());
        }
        path
    };
    let mut paths = Vec::new();
    for key in ["identifier", "source", "destination"] {
        if let Some(v) = data.get(key) {
            paths.push(ident(v));
        }
    }
    if let Some(ns) = data.get("namespace") {
        paths.push(strings(ns));
    }
    if let Some(path) = data.get("target").and_then(|t| t.get("path")) {
        paths.push(strings(path));
    }
    paths
}

/// A page being filled from the outbox in position order, bounded by its query's
/// page size, [`MAX_SCANNED`] rows looked at, and `max_bytes` of stored events.
#[derive(Debug)]
pub struct Page {
    pub events: Vec<Value>,
    /// The last position looked at: where the next page starts.
    pub after: i64,
    scanned: usize,
    bytes: usize,
    max_bytes: usize,
}

impl Page {
    pub fn new(after: i64, max_bytes: usize) -> Self {
        Page {
            events: Vec::new(),
            after,
            scanned: 0,
            bytes: 0,
            max_bytes,
        }
    }

    /// Looks at the next stored event, taking it if the filter matches. `false`: the page
    /// is full, and the event was not looked at if it did not fit (so the next page
    /// starts with it).
    pub fn offer(&mut self, event: &StoredEvent, query: &EventQuery) -> bool {
        if self.scanned >= MAX_SCANNED || self.events.len() >= query.page_size {
            return false;
        }
        let data = data_of(event);
        if query.filter.matches(event, &data) {
            let bytes = self.bytes + event.body.len();
            if !self.events.is_empty() && bytes > self.max_bytes {
                return false;
            }
            self.bytes = bytes;
            self.events.push(rest_event(event, data));
        }
        self.after = event.position;
        self.scanned += 1;
        self.scanned < MAX_SCANNED && self.events.len() < query.page_size
    }
}

/// Fields of `data` that describe the request, not the operation.
const REQUEST_FIELDS: [&str; 4] = ["catalog", "principal", "request-id", "request-event-count"];

/// A stored event as the proposal's `Event`: `event-id`, `request-id`,
/// `request-event-count`, `timestamp-ms`, `actor` and the `operation`, plus Floe's
/// `position` and `entity-sequence`.
fn rest_event(event: &StoredEvent, mut data: Map<String, Value>) -> Value {
    let request_id = data.remove("request-id").unwrap_or(Value::Null);
    let count = data.remove("request-event-count").unwrap_or(Value::from(1));
    let principal = data.remove("principal");
    for field in REQUEST_FIELDS {
        data.remove(field);
    }
    let mut out = Map::new();
    out.insert("event-id".into(), event.id.clone().into());
    out.insert("request-id".into(), request_id);
    out.insert("request-event-count".into(), count);
    out.insert("timestamp-ms".into(), event.time_ms.into());
    if let Some(Value::String(id)) = principal {
        out.insert("actor".into(), serde_json::json!({ "id": id }));
    }
    out.insert("operation".into(), Value::Object(data));
    out.insert("position".into(), event.position.into());
    out.insert("entity-sequence".into(), event.sequence.into());
    Value::Object(out)
}

/// The `data` of a stored CloudEvent.
fn data_of(event: &StoredEvent) -> Map<String, Value> {
    match serde_json::from_str::<Value>(&event.body) {
        Ok(Value::Object(mut body)) => match body.remove("data") {
            Some(Value::Object(data)) => data,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{seal, Draft, Origin};
    use crate::model::{Ident, Namespace};

    const CAT: CatalogId = CatalogId(7);

    fn request(json: serde_json::Value) -> QueryEventsRequest {
        serde_json::from_value(json).unwrap()
    }

    fn stored(draft: Draft, position: i64) -> StoredEvent {
        let origin = Origin {
            principal: "p".into(),
            request_id: "r".into(),
            time_ms: 1000 + position,
        };
        let e = seal(&origin, Some((CAT, "c")), vec![draft]).remove(0);
        StoredEvent {
            position,
            sequence: 1,
            catalog_id: CAT,
            entity: e.entity,
            operation: e.operation.as_str().into(),
            time_ms: e.time_ms,
            id: e.id,
            body: e.body,
        }
    }

    fn table(ns: &[&str], name: &str) -> Ident {
        let ns = Namespace::new(ns.iter().map(|s| s.to_string()).collect()).unwrap();
        Ident::new(ns, name.into()).unwrap()
    }

    #[test]
    fn a_page_is_bounded_by_its_size_and_bytes_and_resumes_at_what_did_not_fit() {
        let t = table(&["db"], "t");
        let uuid = "0195f0c5-7d2c-7c6e-9a4c-1f2e3d4c5b6a";
        let events: Vec<StoredEvent> = (1..=5)
            .map(|p| stored(Draft::object(Operation::UpdateTable, &t, uuid), p))
            .collect();
        let one = events[0].body.len();
        let query = |body| EventQuery::parse(&request(body), CAT, (1, 5)).unwrap();
        let fill = |page: &mut Page, q: &EventQuery| {
            for e in &events {
                if !page.offer(e, q) {
                    break;
                }
            }
        };
        // Two events' bytes: the third does not fit, and the next page starts with it.
        let all = query(serde_json::json!({}));
        let mut page = Page::new(0, 2 * one + one / 2);
        fill(&mut page, &all);
        assert_eq!((page.events.len(), page.after), (2, 2));
        // One event larger than the bound still makes a page of its own.
        let mut page = Page::new(0, 1);
        fill(&mut page, &all);
        assert_eq!((page.events.len(), page.after), (1, 1));
        // The page size stops it at the event that filled it.
        let mut page = Page::new(0, usize::MAX);
        fill(&mut page, &query(serde_json::json!({"page-size": 3})));
        assert_eq!((page.events.len(), page.after), (3, 3));
        // Events the filter skips cost no bytes, and are passed over.
        let creates = query(serde_json::json!({"operation-types": ["create-table"]}));
        let mut page = Page::new(0, 1);
        fill(&mut page, &creates);
        assert_eq!((page.events.len(), page.after), (0, 5));
    }

    #[test]
    fn tokens_round_trip_and_are_checked() {
        let token = encode_token(CAT, 41);
        let q = EventQuery::parse(
            &request(serde_json::json!({"continuation-token": token})),
            CAT,
            (1, 50),
        )
        .unwrap();
        assert_eq!(q.after, 41);
        assert_eq!(q.page_size, DEFAULT_PAGE_SIZE);
        let parse = |token: &str, bounds| {
            EventQuery::parse(
                &request(serde_json::json!({"continuation-token": token})),
                CAT,
                bounds,
            )
        };
        assert!(matches!(
            parse("garbage!", (1, 50)),
            Err(QueryError::BadRequest(_))
        ));
        assert!(matches!(
            parse(&encode_token(CatalogId(8), 3), (1, 50)),
            Err(QueryError::BadRequest(m)) if m.contains("another catalog")
        ));
        assert!(matches!(
            parse(&encode_token(CAT, 51), (1, 50)),
            Err(QueryError::BadRequest(m)) if m.contains("never reached")
        ));
        // Events 11..=19 were purged: resuming after 10 would miss them.
        assert!(matches!(
            parse(&encode_token(CAT, 10), (20, 50)),
            Err(QueryError::Gone(_))
        ));
        assert!(parse(&encode_token(CAT, 19), (20, 50)).is_ok());
    }

    #[test]
    fn bad_filters_are_refused() {
        for body in [
            serde_json::json!({"page-size": 0}),
            serde_json::json!({"operation-types": ["create-tables"]}),
            serde_json::json!({"object-types": ["function"]}),
            serde_json::json!({"catalog-objects-by-name": [[]]}),
            serde_json::json!({"catalog-objects-by-name": [["a", ""]]}),
            serde_json::json!({"catalog-objects-by-uuid": ["not-a-uuid"]}),
            serde_json::json!({"custom-filters": {"x": "y"}}),
        ] {
            let result = EventQuery::parse(&request(body.clone()), CAT, (1, 1));
            assert!(matches!(result, Err(QueryError::BadRequest(_))), "{body}");
        }
        assert!(
            serde_json::from_value::<QueryEventsRequest>(serde_json::json!({"pagesize": 1}))
                .is_err()
        );
        let big = EventQuery::parse(
            &request(serde_json::json!({"page-size": 1_000_000})),
            CAT,
            (1, 1),
        );
        assert_eq!(big.unwrap().page_size, MAX_PAGE_SIZE);
    }

    #[test]
    fn filters_match_by_name_prefix_uuid_type_and_time() {
        let uuid = "0195f0c5-7d2c-7c6e-9a4c-1f2e3d4c5b6a";
        let t = table(&["acc", "tax"], "paid");
        let update = stored(Draft::object(Operation::UpdateTable, &t, uuid), 5);
        let ns = stored(
            Draft::namespace(Operation::CreateNamespace, CAT, &t.namespace),
            6,
        );
        let filter = |body: serde_json::Value| {
            EventQuery::parse(&request(body), CAT, (1, 10))
                .unwrap()
                .filter
        };
        let hits = |f: &EventFilter, e: &StoredEvent| f.matches(e, &data_of(e));

        let by_name = filter(serde_json::json!({"catalog-objects-by-name": [["acc"]]}));
        assert!(hits(&by_name, &update) && hits(&by_name, &ns));
        let other = filter(serde_json::json!({"catalog-objects-by-name": [["accounting"]]}));
        assert!(!hits(&other, &update) && !hits(&other, &ns));
        let exact =
            filter(serde_json::json!({"catalog-objects-by-name": [["acc", "tax", "paid"]]}));
        assert!(hits(&exact, &update) && !hits(&exact, &ns));

        let by_uuid = filter(serde_json::json!({"catalog-objects-by-uuid": [uuid]}));
        assert!(hits(&by_uuid, &update) && !hits(&by_uuid, &ns));
        let tables = filter(serde_json::json!({"object-types": ["table"]}));
        assert!(hits(&tables, &update) && !hits(&tables, &ns));
        let creates = filter(serde_json::json!({"operation-types": ["create-namespace"]}));
        assert!(!hits(&creates, &update) && hits(&creates, &ns));
        let late = filter(serde_json::json!({"since-timestamp-ms": 1006}));
        assert!(!hits(&late, &update) && hits(&late, &ns));

        // A policy attached to the table: found by the policy's name and uuid, and by the
        // table's (the target's) too.
        let policy_uuid = "0195f0c5-7d2c-7c6e-9a4c-000000000001";
        let attach = stored(
            Draft::new(
                Operation::AttachPolicy,
                format!("object:{policy_uuid}"),
                "ops.expiry".into(),
            )
            .with(
                "identifier",
                serde_json::json!({"namespace": ["ops"], "name": "expiry"}),
            )
            .with("policy-uuid", policy_uuid)
            .with(
                "target",
                serde_json::json!({"type": "table-like", "path": ["acc", "tax", "paid"], "table-uuid": uuid}),
            ),
            7,
        );
        assert!(hits(&exact, &attach) && hits(&by_name, &attach) && !hits(&other, &attach));
        let policy_name =
            filter(serde_json::json!({"catalog-objects-by-name": [["ops", "expiry"]]}));
        assert!(hits(&policy_name, &attach) && !hits(&policy_name, &update));
        assert!(hits(&by_uuid, &attach));
        let by_policy = filter(serde_json::json!({"catalog-objects-by-uuid": [policy_uuid]}));
        assert!(hits(&by_policy, &attach) && !hits(&by_policy, &update));
        let policies = filter(serde_json::json!({"object-types": ["policy"]}));
        assert!(hits(&policies, &attach) && !hits(&policies, &update) && !hits(&tables, &attach));
    }

    #[test]
    fn rest_events_carry_the_request_and_the_operation() {
        let t = table(&["db"], "t");
        let e = stored(
            Draft::object(Operation::DropTable, &t, "u").with("purge", true),
            3,
        );
        let rest = rest_event(&e, data_of(&e));
        assert_eq!(rest["event-id"], e.id.as_str());
        assert_eq!(rest["request-id"], "r");
        assert_eq!(rest["request-event-count"], 1);
        assert_eq!(rest["timestamp-ms"], 1003);
        assert_eq!(rest["actor"]["id"], "p");
        assert_eq!(rest["operation"]["operation-type"], "drop-table");
        assert_eq!(rest["operation"]["table-uuid"], "u");
        assert_eq!(rest["operation"]["purge"], true);
        assert!(rest["operation"].get("principal").is_none());
        assert_eq!(rest["position"], 3);
    }
}
