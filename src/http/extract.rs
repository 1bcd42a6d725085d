//! Request parsing shared by the handlers: JSON bodies and query parameters that fail
//! with the spec's error body (never axum's plain-text rejections), and identifiers.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};
use crate::catalog::pagination::ListRequest;
use crate::model::{Ident, IdentBody, Namespace};

/// A JSON request body. Malformed JSON, a wrong shape or an unknown update action is a 400
/// with serde's explanation and where in the body it applies; a body over the limit is a
/// 413.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(request, state).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// A JSON request body the spec makes optional: none when the body is empty (or only
/// white space), else read as [`JsonBody`] reads one.
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        parse(&bytes).map(|body| OptionalJsonBody(Some(body)))
    }
}

async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(None)
            } else {
                ApiError::bad_request(format!("Cannot read request body: {rejection}"))
            }
        })
}

/// A body read whole by a layer in front of the routes (idempotency, federation), at most
/// `limit` bytes: a 413 above it, as [`JsonBody`] answers, and a 400 when the body could
/// not be read (the client stopped sending before its `Content-Length`), which is not
/// the client's size at fault.
pub async fn read_limited(body: Body, limit: usize) -> ApiResult<Bytes> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(cause) = source {
            if cause.is::<http_body_util::LengthLimitError>() {
                return ApiError::payload_too_large(Some(limit));
            }
            source = cause.source();
        }
        ApiError::bad_request(format!("Cannot read request body: {e}"))
    })
}

/// The typed body, then the defaults iceberg-rust's parser would have dropped without a
/// word (a byte search for most bodies; see `schemas::check_default_text`).
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let body = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(malformed::<T>(bytes, e)))?;
    crate::catalog::schemas::check_default_text(bytes)?;
    Ok(body)
}

/// The message for a body serde refused, naming the field it refused (`updates[0].action:
/// …`). The path is found by parsing again, with tracking, only once a parse has failed:
/// tracking every body's fields would cost each commit's parse on the write path.
pub fn malformed<T: DeserializeOwned>(body: &[u8], error: serde_json::Error) -> String {
    // Not JSON at all: the line and column say where; there is no field to name.
    if !error.is_data() {
        return format!("Malformed request body: {error}");
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let path = match serde_path_to_error::deserialize::<_, T>(de) {
        Err(tracked) => tracked.path().to_string(),
        Ok(_) => ".".to_string(),
    };
    match path.as_str() {
        // The body as a whole (the wrong type at the top).
        "." => format!("Malformed request body: {error}"),
        _ => format!("Malformed request body: {path}: {error}"),
    }
}

/// The request's `If-None-Match` values: only those, where axum's `HeaderMap` extractor
/// would clone every header of every load.
pub struct IfNoneMatch(Vec<HeaderValue>);

impl<S: Send + Sync> FromRequestParts<S> for IfNoneMatch {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let values = parts.headers.get_all(header::IF_NONE_MATCH).iter();
        Ok(IfNoneMatch(values.cloned().collect()))
    }
}

impl IfNoneMatch {
    /// Whether `tag` is among the values (lists and weak tags included), or they hold `*`.
    pub fn matches(&self, tag: &str) -> bool {
        self.0
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().trim_start_matches("W/"))
            .any(|v| v == tag || v == "*")
    }
}

/// The query string, decoded.
pub struct Params(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        Ok(Params(
            url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect(),
        ))
    }
}

impl Params {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean flag, read case-insensitively (PyIceberg sends `True`).
    pub fn flag(&self, name: &str) -> ApiResult<bool> {
        match self.get(name) {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "{name} must be true or false, not {v:?}"
            ))),
        }
    }

    pub fn list_request(&self) -> ApiResult<ListRequest> {
        let page_size = match self.get("pageSize") {
            None | Some("") => None,
            Some(v) => Some(v.parse::<usize>().map_err(|_| {
                ApiError::bad_request(format!("pageSize must be a positive integer, not {v:?}"))
            })?),
        };
        Ok(ListRequest {
            page_token: self.get("pageToken").map(str::to_string),
            page_size,
        })
    }
}

/// A namespace from a path segment or `parent` parameter: levels joined by U+001F (`%1F`).
pub fn namespace(raw: &str) -> ApiResult<Namespace> {
    Ok(Namespace::parse(raw)?)
}

pub fn ident(namespace_raw: &str, name: &str) -> ApiResult<Ident> {
    Ok(Ident::parse(namespace_raw, name)?)
}

/// A commit body may repeat the identifier of its path; if it does, they must agree.
pub fn check_body_ident(body: Option<IdentBody>, path: &Ident) -> ApiResult<()> {
    match body.map(IdentBody::into_ident).transpose()? {
        Some(named) if named != *path => Err(ApiError::bad_request(
            "The identifier in the body does not match the path",
        )),
        _ => Ok(()),
    }
}

/// A ListTablesResponse (also for views): identifiers and the next page's token.
pub fn identifiers_page(items: &[Ident], next_page_token: Option<String>) -> serde_json::Value {
    let identifiers: Vec<serde_json::Value> = items
        .iter()
        .map(|i| serde_json::json!({ "namespace": i.namespace.levels(), "name": i.name }))
        .collect();
    serde_json::json!({ "identifiers": identifiers, "next-page-token": next_page_token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_bodies_say_where() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)] // only parsed
        struct Body {
            name: String,
            items: Vec<Item>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Item {
            size: u32,
        }
        let message = |body: &str| {
            let error = serde_json::from_str::<Body>(body).unwrap_err();
            malformed::<Body>(body.as_bytes(), error)
        };
        assert_eq!(
            message(r#"{"name": "n", "items": [{"size": 1}, {"size": "x"}]}"#),
            "Malformed request body: items[1].size: invalid type: string \"x\", \
             expected u32 at line 1 column 49"
        );
        assert!(message(r#"{"name": 7, "items": []}"#)
            .starts_with("Malformed request body: name: invalid type: integer `7`"));
        // Nothing to point at: the body as a whole.
        assert!(message(r#""x""#).starts_with(
            "Malformed request body: invalid type: string \"x\", expected struct Body"
        ));
        assert!(message("{").starts_with("Malformed request body: EOF while parsing"));
    }

    #[test]
    fn if_none_match_accepts_lists_and_weak_tags() {
        let values = IfNoneMatch(vec![HeaderValue::from_static("\"x\", W/\"abc\"")]);
        assert!(values.matches("\"abc\""));
        assert!(!values.matches("\"abd\""));
        assert!(IfNoneMatch(vec![HeaderValue::from_static("*")]).matches("\"abd\""));
        assert!(!IfNoneMatch(Vec::new()).matches("\"abc\""));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_a_413_and_one_cut_off_a_400() {
        let whole = read_limited(Body::from("0123456789"), 10).await.unwrap();
        assert_eq!(&whole[..], b"0123456789");
        let large = read_limited(Body::from("0123456789"), 9).await.unwrap_err();
        assert_eq!(large.status, StatusCode::PAYLOAD_TOO_LARGE);
        // A client that stops sending before its Content-Length: hyper's body ends with
        // an error, which is not about the body's size.
        let chunks: Vec<Result<&'static str, std::io::Error>> = vec![
            Ok("0123"),
            Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before message completed",
            )),
        ];
        let cut = Body::from_stream(futures_util::stream::iter(chunks));
        let refused = read_limited(cut, 10).await.unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(
            refused.message.contains("Cannot read request body"),
            "{}",
            refused.message
        );
    }
}
