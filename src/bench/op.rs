//! One operation of a workload (one or a few requests in order, like a Gatling chain), and
//! how it is sent, retried, checked and recorded.

use std::time::Instant;

use serde_json::Value;

use super::body::{LoadedBody, NamespaceBody};
use super::client::{self, Client, Conn, Req, Response};
use super::stats::{Outcome, Sink};

/// Which statuses are retried, and how many attempts a request gets in all.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub on: &'static [u16],
}

impl Retry {
    pub const NONE: Retry = Retry {
        attempts: 1,
        on: &[],
    };
    /// The Polaris suite's default for reads and updates: up to 10 attempts on 409 and 500.
    pub const POLARIS: Retry = Retry {
        attempts: 10,
        on: &[409, 500],
    };
    /// The Polaris suite's dataset creation: up to 5 attempts on 500 only.
    pub const POLARIS_CREATE: Retry = Retry {
        attempts: 5,
        on: &[500],
    };
}

/// The field a loaded document's uuid is in.
#[derive(Debug, Clone, Copy)]
pub enum UuidField {
    /// `table-uuid`
    Table,
    /// `view-uuid`
    View,
}

/// What a response body must hold, beyond its status.
#[derive(Debug, Clone)]
pub enum Check {
    None,
    /// `namespace` equals these levels; with `initial_properties`, the properties named
    /// `InitialAttribute_*` are exactly `InitialAttribute_i = "i"` for i below it.
    Namespace {
        levels: Vec<String>,
        initial_properties: Option<usize>,
    },
    /// A loaded table or view: `metadata.<uuid_field>` and `metadata.location` are
    /// present and the initial properties are as written.
    Loaded {
        uuid_field: UuidField,
        initial_properties: usize,
    },
    /// A management-API catalog of this name and type INTERNAL.
    Catalog {
        name: String,
    },
}

/// One request of an operation.
#[derive(Debug, Clone)]
pub struct Call {
    /// The report's row; Polaris's request names where the request is one of theirs.
    pub name: &'static str,
    pub req: Req,
    pub expect: u16,
    pub check: Check,
    pub retry: Retry,
    /// For a list: also fetch up to this many following pages (`next-page-token`).
    pub follow_pages: u32,
    /// Other statuses that count as success, unchecked (setup tolerates 409: it exists).
    pub also_ok: &'static [u16],
}

impl Call {
    pub fn new(name: &'static str, req: Req, expect: u16) -> Call {
        Call {
            name,
            req,
            expect,
            check: Check::None,
            retry: Retry::NONE,
            follow_pages: 0,
            also_ok: &[],
        }
    }

    pub fn check(mut self, check: Check) -> Call {
        self.check = check;
        self
    }

    pub fn retry(mut self, retry: Retry) -> Call {
        self.retry = retry;
        self
    }
}

/// One operation: its calls run in order; a group also gets a row of its own.
#[derive(Debug, Clone)]
pub struct Op {
    pub group: Option<&'static str>,
    pub calls: Vec<Call>,
}

impl From<Call> for Op {
    fn from(call: Call) -> Op {
        Op {
            group: None,
            calls: vec![call],
        }
    }
}

/// Runs `op`, meant to start at `intended`, on the user's connection (`None`: pooled).
/// Returns whether every call succeeded.
pub async fn execute(
    client: &Client,
    mut conn: Option<&mut Option<Conn>>,
    op: &Op,
    intended: Instant,
    recorder: &mut impl Sink,
) -> bool {
    let mut all_ok = true;
    let first_sent = Instant::now();
    let mut call_intended = intended;
    for call in &op.calls {
        let mut req = call.req.clone();
        for page in 0..=call.follow_pages {
            let sent = Instant::now();
            let (outcome, retries, response) =
                attempt(client, conn.as_deref_mut(), call, &req).await;
            let end = Instant::now();
            recorder.record(call.name, false, call_intended, sent, end, outcome, retries);
            call_intended = end;
            all_ok &= outcome.is_ok();
            let next = match (&outcome, response) {
                (Outcome::Ok, Some(r)) if page < call.follow_pages => next_page(&call.req, &r),
                _ => None,
            };
            match next {
                Some(next) => req = next,
                None => break,
            }
        }
    }
    if let Some(group) = op.group {
        let outcome = if all_ok {
            Outcome::Ok
        } else {
            Outcome::Check("a request of the group failed")
        };
        let end = Instant::now();
        recorder.record(group, true, intended, first_sent, end, outcome, 0);
    }
    all_ok
}

async fn attempt(
    client: &Client,
    mut conn: Option<&mut Option<Conn>>,
    call: &Call,
    req: &Req,
) -> (Outcome, u32, Option<Response>) {
    let mut retries = 0;
    loop {
        let result = match conn.as_deref_mut() {
            Some(conn) => client.send(conn, req).await,
            None => client.send_pooled(req).await,
        };
        let response = match result {
            Ok(r) => r,
            Err(failure) => return (Outcome::Failure(failure), retries, None),
        };
        if call.also_ok.contains(&response.status) {
            return (Outcome::Ok, retries, Some(response));
        }
        if response.status != call.expect {
            if call.retry.on.contains(&response.status) && retries + 1 < call.retry.attempts {
                retries += 1;
                continue;
            }
            return (Outcome::Status(response.status), retries, Some(response));
        }
        let outcome = match check(&call.check, &response) {
            Ok(()) => Outcome::Ok,
            Err(what) => Outcome::Check(what),
        };
        return (outcome, retries, Some(response));
    }
}

/// The request for the page after `response`, if the server named one.
fn next_page(first: &Req, response: &Response) -> Option<Req> {
    let body: Value = serde_json::from_slice(&response.body).ok()?;
    let token = body.get("next-page-token")?.as_str()?;
    let path = first.uri.path();
    let mut query: Vec<(String, String)> = first
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    query.retain(|(k, _)| k != "pageToken");
    query.push(("pageToken".into(), token.into()));
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    let mut req = first.clone();
    req.uri = client::uri(format!("{path}?{query}")).ok()?;
    Some(req)
}

fn check(check: &Check, response: &Response) -> Result<(), &'static str> {
    let not_json = |_| "body is not JSON";
    match check {
        Check::None => Ok(()),
        Check::Namespace {
            levels,
            initial_properties,
        } => {
            let body: NamespaceBody = serde_json::from_slice(&response.body).map_err(not_json)?;
            if !body.namespace.equal(levels) {
                return Err("namespace");
            }
            match initial_properties {
                Some(n) if !body.properties.matches(*n) => Err("properties"),
                _ => Ok(()),
            }
        }
        Check::Loaded {
            uuid_field,
            initial_properties,
        } => {
            let body: LoadedBody = serde_json::from_slice(&response.body).map_err(not_json)?;
            let Some(metadata) = body.metadata else {
                return Err("uuid");
            };
            let uuid = match uuid_field {
                UuidField::Table => &metadata.table_uuid,
                UuidField::View => &metadata.view_uuid,
            };
            if uuid.0.is_none() {
                return Err("uuid");
            }
            if metadata.location.0.is_none() {
                return Err("location");
            }
            if !metadata.properties.matches(*initial_properties) {
                return Err("properties");
            }
            Ok(())
        }
        Check::Catalog { name } => {
            let body: Value = serde_json::from_slice(&response.body).map_err(not_json)?;
            if body["type"] != "INTERNAL" || body["name"] != name.as_str() {
                return Err("catalog");
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_what_a_body_lacks() {
        let response = |body: &str| Response {
            status: 200,
            body: bytes::Bytes::from(body.to_string()),
        };
        let loaded = Check::Loaded {
            uuid_field: UuidField::View,
            initial_properties: 1,
        };
        let good = r#"{"metadata": {"view-uuid": "u", "location": "l",
            "properties": {"InitialAttribute_0": "0"}}}"#;
        assert_eq!(check(&loaded, &response(good)), Ok(()));
        for (body, what) in [
            ("not json", "body is not JSON"),
            ("{}", "uuid"),
            (
                r#"{"metadata": {"table-uuid": "u", "location": "l"}}"#,
                "uuid",
            ),
            (r#"{"metadata": {"view-uuid": "u"}}"#, "location"),
            (
                r#"{"metadata": {"view-uuid": "u", "location": "l"}}"#,
                "properties",
            ),
            (
                r#"{"metadata": {"view-uuid": "u", "location": "l",
                    "properties": {"InitialAttribute_0": "1"}}}"#,
                "properties",
            ),
        ] {
            assert_eq!(check(&loaded, &response(body)), Err(what), "{body}");
        }
        let namespace = Check::Namespace {
            levels: vec!["a".into()],
            initial_properties: Some(0),
        };
        assert_eq!(
            check(&namespace, &response(r#"{"namespace": ["a"]}"#)),
            Ok(())
        );
        assert_eq!(
            check(&namespace, &response(r#"{"namespace": ["b"]}"#)),
            Err("namespace")
        );
        assert_eq!(
            check(
                &namespace,
                &response(r#"{"namespace": ["a"], "properties": {"InitialAttribute_0": "0"}}"#)
            ),
            Err("properties")
        );
    }

    #[test]
    fn next_page_carries_the_token_and_keeps_the_page_size() {
        let first = Req::get(client::uri("/v1/c/namespaces/a/tables?pageSize=2").unwrap());
        let response = Response {
            status: 200,
            body: bytes::Bytes::from(r#"{"identifiers":[],"next-page-token":"a b"}"#),
        };
        let next = next_page(&first, &response).unwrap();
        assert_eq!(
            next.uri.to_string(),
            "/v1/c/namespaces/a/tables?pageSize=2&pageToken=a+b"
        );
        let last = Response {
            status: 200,
            body: bytes::Bytes::from(r#"{"identifiers":[]}"#),
        };
        assert!(next_page(&first, &last).is_none());
    }
}
