//! Remote signing (`POST …/tables/{t}/sign`): a client without S3 keys sends the request
//! it is about to make; the catalog checks it against the table and signs it with its own
//! key (SigV4, by `aws-sigv4`).
//!
//! What is checked, before anything is signed ([`authorize`]):
//! - the provider is S3 and the region is the catalog's;
//! - the URI names the catalog's endpoint (path-style or virtual-hosted), so the server
//!   never signs for another host;
//! - the object key (percent-decoded, without `.`/`..` segments) lies under one of the
//!   table's locations; a bucket-level request is only a listing whose `prefix` lies
//!   there, or a DeleteObjects whose every key does (its XML body is parsed);
//! - the method decides the access level: GET/HEAD/OPTIONS read, the others write;
//! - the request is the plain operation its URI says: a `Host` header must name the
//!   URI's host (SigV4 signs a given one instead of the URI's), headers that reach
//!   beyond the key (a copy's source, grants, public ACLs, object locks) are refused,
//!   query parameters are those of object reads, writes, multipart uploads and tags, or
//!   of a listing, none given twice; and the raw path has no `.`/`..` segments (the
//!   check reads the URI as parsed, which resolves them, but the raw one is signed);
//! - a request whose body was checked (DeleteObjects) is signed over that body's SHA-256,
//!   so the signature is worthless for any other body; and only for stores that check
//!   a body against that hash (AWS S3, or `verifiesContentSha256`): SeaweedFS, for one,
//!   does not, and would delete any keys sent with the signature.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Deserialize;

use super::config::{S3Keys, S3Storage};
use super::location::ObjectLocation;
use super::vending::AccessLevel;

/// A `RemoteSignRequest` body.
#[derive(Debug, Deserialize)]
pub struct SignRequest {
    pub region: String,
    pub uri: String,
    pub method: String,
    pub headers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub properties: Option<BTreeMap<String, String>>,
}

/// A `RemoteSignResult` body.
#[derive(Debug, serde::Serialize)]
pub struct SignResult {
    pub uri: String,
    pub headers: BTreeMap<String, Vec<String>>,
}

/// Why a sign request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Malformed: 400.
    BadRequest(String),
    /// Well-formed, but outside what the table allows: 403.
    Forbidden(String),
}

fn bad<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::BadRequest(message.into()))
}

/// The parts of a DeleteObjects body the check needs.
#[derive(Deserialize)]
struct Delete {
    #[serde(rename = "Object", default)]
    objects: Vec<DeleteObject>,
}

#[derive(Deserialize)]
struct DeleteObject {
    #[serde(rename = "Key")]
    key: String,
}

/// The bucket and (decoded) key a request URI addresses, given the catalog's endpoint.
fn bucket_and_key(s3: &S3Storage, uri: &url::Url) -> Result<(String, String), Refusal> {
    let host = uri.host_str().unwrap_or_default().to_ascii_lowercase();
    let path = percent_encoding::percent_decode_str(uri.path())
        .decode_utf8()
        .map_err(|_| Refusal::BadRequest("The URI's path is not UTF-8".into()))?
        .into_owned();
    let path = path.strip_prefix('/').unwrap_or(&path).to_string();
    let path_style = |path: String| match path.split_once('/') {
        Some((bucket, key)) => (bucket.to_string(), key.to_string()),
        None => (path, String::new()),
    };
    match &s3.endpoint {
        Some(endpoint) => {
            let endpoint = url::Url::parse(endpoint)
                .map_err(|_| Refusal::BadRequest("The catalog's endpoint is invalid".into()))?;
            let ep_host = endpoint.host_str().unwrap_or_default().to_ascii_lowercase();
            if uri.port_or_known_default() != endpoint.port_or_known_default() {
                return Err(Refusal::Forbidden(format!(
                    "{uri} is not on this catalog's S3 endpoint"
                )));
            }
            if host == ep_host {
                Ok(path_style(path))
            } else if let Some(bucket) = host.strip_suffix(&format!(".{ep_host}")) {
                Ok((bucket.to_string(), path))
            } else {
                Err(Refusal::Forbidden(format!(
                    "{uri} is not on this catalog's S3 endpoint"
                )))
            }
        }
        None => {
            let Some(rest) = host.strip_suffix(".amazonaws.com") else {
                return Err(Refusal::Forbidden(format!("{uri} is not an AWS S3 URI")));
            };
            // The last label that is `s3` or `s3-…` (`s3-us-west-2`, `s3-accelerate`)
            // is the service; the labels before it, if any, the bucket (whose name may
            // itself hold dots, or start with `s3-`).
            let labels: Vec<&str> = rest.split('.').collect();
            match labels
                .iter()
                .rposition(|l| *l == "s3" || l.starts_with("s3-"))
            {
                Some(0) => Ok(path_style(path)),
                Some(i) => Ok((labels[..i].join("."), path)),
                None => Err(Refusal::Forbidden(format!("{uri} is not an AWS S3 URI"))),
            }
        }
    }
}

/// Whether `bucket/key` lies under one of the locations (a key must not climb out).
fn within(bucket: &str, key: &str, locations: &[ObjectLocation]) -> bool {
    if key.split('/').any(|s| s == "." || s == "..") {
        return false;
    }
    locations.iter().any(|l| {
        l.bucket == bucket && key.len() > l.key.len() + 1 && key.starts_with(&format!("{}/", l.key))
    })
}

/// A list `prefix` may also be the location itself, as a directory (`t/`); not `t`
/// without its slash, which S3 matches against a sibling's names too (`t_pii/…`).
fn prefix_within(bucket: &str, prefix: &str, locations: &[ObjectLocation]) -> bool {
    let Some(directory) = prefix.strip_suffix('/') else {
        return within(bucket, prefix, locations);
    };
    let trimmed = directory.trim_end_matches('/');
    within(bucket, prefix, locations)
        || locations
            .iter()
            .any(|l| l.bucket == bucket && !trimmed.is_empty() && trimmed == l.key)
}

/// Query parameters a request may carry: these names, and names starting with one of
/// the prefixes.
struct Allowed {
    names: &'static [&'static str],
    prefixes: &'static [&'static str],
}

impl Allowed {
    fn allows(&self, name: &str) -> bool {
        self.names.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// On an object: reads (of a version or part, with the response's headers overridden),
/// writes, multipart uploads and their parts' listing, and its tags (Iceberg's `s3.delete.tags` tag objects
/// rather than delete them). Not its ACL, retention, legal hold or restore.
const OBJECT_QUERY: Allowed = Allowed {
    names: &[
        "uploads",
        "uploadId",
        "partNumber",
        "max-parts",
        "part-number-marker",
        "versionId",
        "tagging",
        "attributes",
        "x-id",
    ],
    prefixes: &["response-"],
};

/// On a bucket, a listing of objects, versions or uploads (its `prefix` checked): not
/// the bucket's policy, ACL or other settings.
const LIST_QUERY: Allowed = Allowed {
    names: &[
        "list-type",
        "prefix",
        "delimiter",
        "continuation-token",
        "start-after",
        "max-keys",
        "encoding-type",
        "fetch-owner",
        "marker",
        "versions",
        "key-marker",
        "version-id-marker",
        "uploads",
        "upload-id-marker",
        "max-uploads",
        "x-id",
    ],
    prefixes: &[],
};

/// On a bucket, a batch delete (its body's keys checked).
const DELETE_QUERY: Allowed = Allowed {
    names: &["delete", "x-id"],
    prefixes: &[],
};

/// The URI's query, each parameter at most once: a store may read the first of two
/// `prefix`es where the check read the last.
fn query_of(uri: &url::Url) -> Result<BTreeMap<String, String>, Refusal> {
    let mut query = BTreeMap::new();
    for (name, value) in uri.query_pairs() {
        if query.insert(name.to_string(), value.into_owned()).is_some() {
            return bad(format!("Query parameter {name:?} is given twice"));
        }
    }
    Ok(query)
}

/// The raw URI's path without `.`/`..` segments (also percent-encoded): the check reads
/// the path as `url` resolves them, but the raw URI is signed and S3 keeps such
/// segments as part of the key, so `wh/u/../t/x` would be checked as `wh/t/x` and
/// written under `wh/u/`.
fn check_raw_path(raw: &str) -> Result<(), Refusal> {
    let after_scheme = raw.split_once("://").map_or(raw, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    let path = path.split(['?', '#']).next().unwrap_or_default();
    // `url` reads a backslash as a `/` in http(s) paths; S3 keeps it in the key.
    if path.contains('\\') {
        return Err(Refusal::Forbidden(format!(
            "{raw} has a backslash in its path"
        )));
    }
    for segment in path.split('/') {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
        if decoded == "." || decoded == ".." {
            return Err(Refusal::Forbidden(format!(
                "{raw} has a '.' or '..' path segment"
            )));
        }
    }
    Ok(())
}

/// Canned ACLs that grant no one outside the bucket's owner anything (Iceberg's
/// `s3.acl` may set one on every write).
const PRIVATE_ACLS: [&str; 3] = ["private", "bucket-owner-read", "bucket-owner-full-control"];

/// Headers that would make the signed request reach beyond its key or outlive the
/// table: a copy's source (any object the catalog's key can read), grants and object
/// locks.
const REFUSED_HEADER_PREFIXES: [&str; 5] = [
    "x-amz-copy-source",
    "x-amz-grant-",
    "x-amz-object-lock-",
    "x-amz-website-redirect-location",
    "x-amz-bypass-governance-retention",
];

/// The headers the client asks to have signed: a `Host` only if it is the URI's (SigV4
/// signs a given `Host` instead of the URI's, so another one would address another
/// bucket), no header of [`REFUSED_HEADER_PREFIXES`], and an ACL only a private one.
fn check_headers(uri: &url::Url, headers: &BTreeMap<String, Vec<String>>) -> Result<(), Refusal> {
    let host = uri.host_str().unwrap_or_default();
    for (name, values) in headers {
        let lower = name.to_ascii_lowercase();
        if lower == "host" {
            let with_port = uri.port_or_known_default().map(|p| format!("{host}:{p}"));
            let ok = values.iter().all(|v| {
                v.eq_ignore_ascii_case(host)
                    || with_port
                        .as_deref()
                        .is_some_and(|h| v.eq_ignore_ascii_case(h))
            });
            if !ok {
                return Err(Refusal::Forbidden(format!(
                    "The Host header {values:?} is not the URI's host {host}"
                )));
            }
        } else if REFUSED_HEADER_PREFIXES.iter().any(|p| lower.starts_with(p)) {
            return Err(Refusal::Forbidden(format!(
                "Header {name} is not signed: it reaches beyond the request's own key"
            )));
        } else if lower == "x-amz-acl" && !values.iter().all(|v| PRIVATE_ACLS.contains(&v.as_str()))
        {
            return Err(Refusal::Forbidden(format!(
                "ACL {values:?} is not signed: only {PRIVATE_ACLS:?}"
            )));
        }
    }
    Ok(())
}

/// Checks a sign request against the table; returns the access level it needs.
pub fn authorize(
    s3: &S3Storage,
    locations: &[ObjectLocation],
    request: &SignRequest,
) -> Result<AccessLevel, Refusal> {
    if let Some(provider) = &request.provider {
        if !provider.eq_ignore_ascii_case("s3") {
            return bad(format!(
                "Provider {provider} cannot be signed here; only s3"
            ));
        }
    }
    if request.region != s3.region {
        return bad(format!(
            "Region {} is not this catalog's region {}",
            request.region, s3.region
        ));
    }
    let level = match request.method.as_str() {
        "GET" | "HEAD" | "OPTIONS" => AccessLevel::Read,
        "PUT" | "POST" | "DELETE" | "PATCH" => AccessLevel::Write,
        other => return bad(format!("Method {other} cannot be signed")),
    };
    let uri = match url::Url::parse(&request.uri) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => u,
        _ => return bad(format!("{:?} is not an http(s) URI", request.uri)),
    };
    check_raw_path(&request.uri)?;
    check_headers(&uri, &request.headers)?;
    let query = query_of(&uri)?;
    let (bucket, key) = bucket_and_key(s3, &uri)?;
    let outside = |what: &str| {
        Err(Refusal::Forbidden(format!(
            "{what} is not within the table's location"
        )))
    };
    if !key.is_empty() {
        if let Some(name) = query.keys().find(|k| !OBJECT_QUERY.allows(k)) {
            return Err(Refusal::Forbidden(format!(
                "Query parameter {name:?} is not signed: only object reads, writes, multipart uploads and tags are"
            )));
        }
        return if within(&bucket, &key, locations) {
            Ok(level)
        } else {
            outside(&format!("s3://{bucket}/{key}"))
        };
    }
    // A bucket-level request: a listing of the table's prefix, or a batch delete of
    // the table's keys.
    let allowed = match request.method.as_str() {
        "POST" => &DELETE_QUERY,
        _ => &LIST_QUERY,
    };
    if let Some(name) = query.keys().find(|k| !allowed.allows(k)) {
        return Err(Refusal::Forbidden(format!(
            "Query parameter {name:?} is not signed on a bucket: only a listing's or a batch delete's are"
        )));
    }
    match request.method.as_str() {
        "GET" => match query.get("prefix") {
            Some(prefix) if prefix_within(&bucket, prefix, locations) => Ok(level),
            Some(prefix) => outside(&format!("List prefix {prefix}")),
            None => outside(&format!("A listing of all of bucket {bucket}")),
        },
        "POST" if query.contains_key("delete") => {
            let Some(body) = &request.body else {
                return bad("A DeleteObjects request must carry its body");
            };
            let delete: Delete = quick_xml::de::from_str(body)
                .map_err(|e| Refusal::BadRequest(format!("Invalid DeleteObjects body: {e}")))?;
            if delete.objects.is_empty() {
                return bad("A DeleteObjects body must name at least one key");
            }
            match delete
                .objects
                .iter()
                .find(|o| !within(&bucket, &o.key, locations))
            {
                Some(o) => outside(&format!("s3://{bucket}/{}", o.key)),
                // Its body names the keys; a store that does not check a body against
                // its signed hash would delete whatever keys come with the signature.
                None if !s3.binds_signed_bodies() => Err(Refusal::Forbidden(
                    "Batch deletes are not signed for this catalog: its S3 endpoint is not known to check a request's body against the signed x-amz-content-sha256, so a signature could delete any key. Delete objects one at a time, or set storageConfigInfo.verifiesContentSha256 to true if the store does check it".into(),
                )),
                None => Ok(level),
            }
        }
        _ => outside(&format!("A {} on all of bucket {bucket}", request.method)),
    }
}

/// Headers a signature replaces: a client's stale ones are dropped.
const REPLACED: [&str; 3] = ["authorization", "x-amz-date", "x-amz-security-token"];

/// The header that declares the payload's hash (part of what SigV4 signs).
const CONTENT_SHA256: &str = "x-amz-content-sha256";

/// Signs an authorized request with the catalog's key; the result's headers are the
/// request's, plus the signature's.
pub fn sign(keys: &S3Keys, request: &SignRequest) -> Result<SignResult, Refusal> {
    use aws_sigv4::http_request::{
        sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
        SigningSettings, UriPathNormalizationMode,
    };
    let mut headers: BTreeMap<String, Vec<String>> = request
        .headers
        .iter()
        .filter(|(name, _)| !REPLACED.contains(&name.to_ascii_lowercase().as_str()))
        .map(|(name, values)| (name.clone(), values.clone()))
        .collect();
    let body = match &request.body {
        // The body was checked (a DeleteObjects' keys): the signature covers its SHA-256,
        // so S3 refuses the request if any other body is sent with it. The client's own
        // declaration of the hash (or UNSIGNED-PAYLOAD) is replaced, not trusted.
        Some(body) => {
            headers.retain(|name, _| !name.eq_ignore_ascii_case(CONTENT_SHA256));
            SignableBody::Bytes(body.as_bytes())
        }
        // The URI alone decides what the request may touch; its payload is the client's.
        None => match headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(CONTENT_SHA256))
            .and_then(|(_, v)| v.first().cloned())
        {
            Some(sha) if sha != "UNSIGNED-PAYLOAD" => SignableBody::Precomputed(sha),
            _ => SignableBody::UnsignedPayload,
        },
    };
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let identity = aws_credential_types::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        keys.session_token.clone(),
        None,
        "floe",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(&request.region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| Refusal::BadRequest(format!("Cannot sign: {e}")))?
        .into();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .flat_map(|(name, values)| values.iter().map(move |v| (name.as_str(), v.as_str())))
        .collect();
    let signable = SignableRequest::new(
        &request.method,
        request.uri.as_str(),
        pairs.into_iter(),
        body,
    )
    .map_err(|e| Refusal::BadRequest(format!("Cannot sign this request: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| Refusal::BadRequest(format!("Cannot sign this request: {e}")))?
        .into_parts();
    for (name, value) in instructions.headers() {
        headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
        headers.insert(name.to_string(), vec![value.to_string()]);
    }
    Ok(SignResult {
        uri: request.uri.clone(),
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::location::parse_object;

    fn s3() -> S3Storage {
        S3Storage {
            region: "us-east-1".into(),
            endpoint: Some("http://127.0.0.1:8333".into()),
            path_style_access: true,
            ..Default::default()
        }
    }

    fn request(method: &str, uri: &str) -> SignRequest {
        SignRequest {
            region: "us-east-1".into(),
            uri: uri.into(),
            method: method.into(),
            headers: BTreeMap::new(),
            body: None,
            provider: None,
            properties: None,
        }
    }

    #[test]
    fn objects_under_the_table_are_signed_by_method() {
        let t = [parse_object("s3://lake/wh/t").unwrap()];
        let get = request("GET", "http://127.0.0.1:8333/lake/wh/t/data/f.parquet");
        assert_eq!(authorize(&s3(), &t, &get), Ok(AccessLevel::Read));
        let hosted = S3Storage {
            endpoint: Some("http://s3.test:9000".into()),
            ..s3()
        };
        let put = request("PUT", "http://lake.s3.test:9000/wh/t/metadata/x.avro");
        assert_eq!(authorize(&hosted, &t, &put), Ok(AccessLevel::Write));
        let list = request(
            "GET",
            "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/t/data/",
        );
        assert_eq!(authorize(&s3(), &t, &list), Ok(AccessLevel::Read));
        let directory = request("GET", "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/t/");
        assert_eq!(authorize(&s3(), &t, &directory), Ok(AccessLevel::Read));
    }

    #[test]
    fn other_tables_hosts_and_escapes_are_refused() {
        let t = [parse_object("s3://lake/wh/t").unwrap()];
        for (method, uri) in [
            ("GET", "http://127.0.0.1:8333/lake/wh/t2/data/f.parquet"),
            ("GET", "http://127.0.0.1:8333/lake/wh/t/../u/x"),
            ("GET", "http://127.0.0.1:8333/lake/wh/t/%2E%2E/u/x"),
            ("GET", "http://127.0.0.1:8333/other/wh/t/x"),
            ("GET", "http://evil.example:8333/lake/wh/t/x"),
            ("GET", "http://127.0.0.1:9999/lake/wh/t/x"),
            ("GET", "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/"),
            // The table's key without its slash would list `wh/t_pii/…` too.
            ("GET", "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/t"),
            (
                "GET",
                "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/t&delimiter=/",
            ),
            ("GET", "http://127.0.0.1:8333/lake"),
            ("DELETE", "http://127.0.0.1:8333/lake"),
        ] {
            let r = authorize(&s3(), &t, &request(method, uri));
            assert!(
                matches!(r, Err(Refusal::Forbidden(_))),
                "{method} {uri}: {r:?}"
            );
        }
        for r in [
            SignRequest {
                region: "eu-west-1".into(),
                ..request("GET", "http://127.0.0.1:8333/lake/wh/t/x")
            },
            SignRequest {
                provider: Some("gcs".into()),
                ..request("GET", "http://127.0.0.1:8333/lake/wh/t/x")
            },
            request("TRACE", "http://127.0.0.1:8333/lake/wh/t/x"),
            request("GET", "not a uri"),
            request("POST", "http://127.0.0.1:8333/lake?delete"),
        ] {
            assert!(
                matches!(authorize(&s3(), &t, &r), Err(Refusal::BadRequest(_))),
                "{r:?}"
            );
        }
    }

    #[test]
    fn requests_beyond_their_key_are_refused() {
        let t = [parse_object("s3://lake/wh/t").unwrap()];
        let with = |method: &str, uri: &str, headers: &[(&str, &str)]| {
            let mut r = request(method, uri);
            for (k, v) in headers {
                r.headers.insert(k.to_string(), vec![v.to_string()]);
            }
            authorize(&s3(), &t, &r)
        };
        let object = "http://127.0.0.1:8333/lake/wh/t/x";
        for (method, uri, headers) in [
            // Another bucket by a Host header the signature would cover.
            ("GET", object, vec![("Host", "prod.127.0.0.1:8333")]),
            ("GET", object, vec![("host", "127.0.0.1:9999")]),
            // A copy of any object the catalog can read, grants, public ACLs, locks.
            (
                "PUT",
                object,
                vec![("x-amz-copy-source", "/prod/secret.parquet")],
            ),
            (
                "PUT",
                object,
                vec![(
                    "X-Amz-Grant-Read",
                    "uri=\"http://acs.amazonaws.com/groups/global/AllUsers\"",
                )],
            ),
            ("PUT", object, vec![("x-amz-acl", "public-read")]),
            (
                "PUT",
                object,
                vec![("x-amz-object-lock-mode", "COMPLIANCE")],
            ),
            // The object's or bucket's settings through the query.
            ("PUT", "http://127.0.0.1:8333/lake/wh/t/x?retention", vec![]),
            ("PUT", "http://127.0.0.1:8333/lake/wh/t/x?acl", vec![]),
            (
                "GET",
                "http://127.0.0.1:8333/lake?policy&prefix=wh/t/",
                vec![],
            ),
            ("GET", "http://127.0.0.1:8333/lake?acl&prefix=wh/t/", vec![]),
            // Checked as wh/t/x, written under wh/u/.
            ("PUT", "http://127.0.0.1:8333/lake/wh/u/../t/x", vec![]),
            ("PUT", "http://127.0.0.1:8333/lake/wh/u/%2e%2e/t/x", vec![]),
            ("PUT", "http://127.0.0.1:8333/lake/wh/u/..\\t/x", vec![]),
        ] {
            let r = with(method, uri, &headers);
            assert!(
                matches!(r, Err(Refusal::Forbidden(_))),
                "{method} {uri} {headers:?}: {r:?}"
            );
        }
        // A store may read the first prefix where the check would read the last.
        assert!(matches!(
            with("GET", "http://127.0.0.1:8333/lake?prefix=&prefix=wh/t/", &[]),
            Err(Refusal::BadRequest(m)) if m.contains("twice")
        ));
        // What clients do send is still signed.
        for (method, uri, headers) in [
            ("GET", object, vec![("Host", "127.0.0.1:8333")]),
            ("GET", object, vec![("Range", "bytes=0-99")]),
            ("PUT", object, vec![("x-amz-acl", "bucket-owner-full-control")]),
            ("PUT", object, vec![("x-amz-tagging", "a=b")]),
            ("POST", "http://127.0.0.1:8333/lake/wh/t/x?uploads", vec![]),
            ("PUT", "http://127.0.0.1:8333/lake/wh/t/x?partNumber=1&uploadId=u", vec![]),
            ("PUT", "http://127.0.0.1:8333/lake/wh/t/x?tagging", vec![]),
            // ListParts, to resume an upload.
            ("GET", "http://127.0.0.1:8333/lake/wh/t/x?uploadId=u&max-parts=100&part-number-marker=5", vec![]),
            ("GET", "http://127.0.0.1:8333/lake?list-type=2&prefix=wh/t/&continuation-token=c&max-keys=10", vec![]),
        ] {
            let r = with(method, uri, &headers);
            assert!(r.is_ok(), "{method} {uri} {headers:?}: {r:?}");
        }
    }

    #[test]
    fn aws_addresses_name_their_bucket() {
        let aws = S3Storage {
            endpoint: None,
            path_style_access: false,
            ..s3()
        };
        let t = [parse_object("s3://lake/wh/t").unwrap()];
        let logs = [parse_object("s3://s3-logs/lake/wh/t").unwrap()];
        let dotted = [parse_object("s3://my.s3.data/wh/t").unwrap()];
        for (uri, locations, ok) in [
            ("https://lake.s3.amazonaws.com/wh/t/x", &t, true),
            ("https://lake.s3.us-west-2.amazonaws.com/wh/t/x", &t, true),
            ("https://lake.s3-us-west-2.amazonaws.com/wh/t/x", &t, true),
            (
                "https://lake.s3.dualstack.us-west-2.amazonaws.com/wh/t/x",
                &t,
                true,
            ),
            ("https://s3.us-west-2.amazonaws.com/lake/wh/t/x", &t, true),
            ("https://s3-us-west-2.amazonaws.com/lake/wh/t/x", &t, true),
            // Bucket s3-logs, key lake/wh/t/x: not bucket lake.
            ("https://s3-logs.s3.amazonaws.com/lake/wh/t/x", &t, false),
            ("https://s3-logs.s3.amazonaws.com/lake/wh/t/x", &logs, true),
            ("https://my.s3.data.s3.amazonaws.com/wh/t/x", &dotted, true),
        ] {
            let r = authorize(&aws, locations, &request("GET", uri));
            assert_eq!(r.is_ok(), ok, "{uri}: {r:?}");
        }
    }

    #[test]
    fn batch_deletes_are_checked_key_by_key() {
        let t = [parse_object("s3://lake/wh/t").unwrap()];
        let body = |keys: &[&str]| {
            let objects: String = keys
                .iter()
                .map(|k| format!("<Object><Key>{k}</Key></Object>"))
                .collect();
            Some(format!("<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{objects}<Quiet>true</Quiet></Delete>"))
        };
        let mut r = request("POST", "http://127.0.0.1:8333/lake?delete");
        r.body = body(&["wh/t/a", "wh/t/b"]);
        let verifying = S3Storage {
            verifies_content_sha256: Some(true),
            ..s3()
        };
        assert_eq!(authorize(&verifying, &t, &r), Ok(AccessLevel::Write));
        // Another endpoint is not assumed to check a body against its signed hash, so
        // no batch delete is signed there unless the catalog says it does.
        assert!(matches!(
            authorize(&s3(), &t, &r),
            Err(Refusal::Forbidden(m)) if m.contains("verifiesContentSha256")
        ));
        let aws = S3Storage {
            endpoint: None,
            path_style_access: false,
            ..s3()
        };
        let mut hosted = request("POST", "https://lake.s3.amazonaws.com/?delete");
        hosted.body = r.body.clone();
        assert_eq!(authorize(&aws, &t, &hosted), Ok(AccessLevel::Write));
        r.body = body(&["wh/t/a", "wh/u/b"]);
        assert!(matches!(
            authorize(&s3(), &t, &r),
            Err(Refusal::Forbidden(_))
        ));
        r.body = Some("<not-xml".into());
        assert!(matches!(
            authorize(&s3(), &t, &r),
            Err(Refusal::BadRequest(_))
        ));
    }

    #[test]
    fn signatures_cover_the_request() {
        let keys = S3Keys {
            access_key_id: "AKID".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        };
        let mut r = request("GET", "http://127.0.0.1:8333/lake/wh/t/x");
        r.headers
            .insert("Authorization".into(), vec!["stale".into()]);
        r.headers.insert(
            "x-amz-content-sha256".into(),
            vec!["UNSIGNED-PAYLOAD".into()],
        );
        let signed = sign(&keys, &r).unwrap();
        let auth = &signed.headers["authorization"][0];
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
            "{auth}"
        );
        assert!(!signed.headers.contains_key("Authorization"));
        assert!(signed.headers.contains_key("x-amz-date"));
    }

    #[test]
    fn a_checked_body_is_bound_into_the_signature() {
        use sha2::{Digest, Sha256};
        let keys = S3Keys {
            access_key_id: "AKID".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        };
        let checked = "<Delete><Object><Key>wh/t/a</Key></Object></Delete>";
        let hash = |body: &str| -> String {
            Sha256::digest(body.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        let mut r = request("POST", "http://127.0.0.1:8333/lake?delete");
        r.body = Some(checked.into());
        // Whatever the client declares (unsigned, or another body's hash), the signature
        // covers the body that was checked.
        for declared in [
            "UNSIGNED-PAYLOAD".to_string(),
            hash("<Delete><Object><Key>wh/u/b</Key></Object></Delete>"),
        ] {
            r.headers
                .insert("X-Amz-Content-Sha256".into(), vec![declared]);
            let signed = sign(&keys, &r).unwrap();
            let declared: Vec<_> = signed
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(CONTENT_SHA256))
                .collect();
            assert_eq!(declared.len(), 1, "{:?}", signed.headers);
            assert_eq!(declared[0].1, &vec![hash(checked)]);
            let auth = &signed.headers["authorization"][0];
            assert!(auth.contains("x-amz-content-sha256"), "{auth}");
        }
    }
}
