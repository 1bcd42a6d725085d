//! The hot lane: `GET {base}/{prefix}/namespaces/{namespace}/tables/{table}` (loadTable,
//! under `/v1` and `/api/catalog/v1`) served without going through the router.
//!
//! A load is what engines send most, and axum's routing of one cost a sixth of its
//! userspace work: matching, percent-decoding the three parameters into reference-counted
//! strings stored in the request's extensions, the route's boxed service and its
//! layers, and the `Path` extractor copying the parameters out again. The lane recognises
//! exactly that shape and runs the route's own handler body (`tables::load_table`) behind
//! the same front (`front::front`): the same authentication, metrics label, log line,
//! request id and answers.
//!
//! Everything else goes to the router, which stays complete (it has the load route too):
//! another method, another shape, an empty segment, a segment that does not decode to
//! UTF-8. So a request the lane declines is served exactly as before, and the lane only
//! takes requests the router would give to that route.

use std::convert::Infallible;
use std::ops::Range;
use std::task::{Context, Poll};

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures_util::future::{BoxFuture, Either};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use tower_service::Service;

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::{IfNoneMatch, Params};
use super::AppState;

/// The bases the load route is registered under (`super::router`), with the route's
/// template under each (`tables::TABLE`: its metrics label, as the router gives it).
const BASES: [(&str, &str); 2] = [
    ("/v1/", "/v1/{prefix}/namespaces/{namespace}/tables/{table}"),
    (
        "/api/catalog/v1/",
        "/api/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}",
    ),
];

/// The server's service: the hot lane in front of the router.
#[derive(Clone)]
pub struct App {
    router: Router,
    state: AppState,
    lane: bool,
}

impl App {
    pub fn new(router: Router, state: AppState) -> Self {
        App {
            router,
            state,
            lane: true,
        }
    }

    /// The same app (same catalog) with every request routed, the lane closed: for the
    /// tests that check the lane answers as the router does.
    pub fn without_lane(&self) -> App {
        App {
            lane: false,
            ..self.clone()
        }
    }
}

impl Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        BoxFuture<'static, Result<Response, Infallible>>,
        <Router as Service<Request>>::Future,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let load = self
            .lane
            .then(|| Load::recognise(request.method(), request.uri().path()));
        match load.flatten() {
            Some(load) => Either::Left(Box::pin(serve(self.state.clone(), request, load))),
            None => Either::Right(self.router.call(request)),
        }
    }
}

/// A recognised load: where its segments are in the path, and its route's template.
#[derive(Debug, PartialEq)]
struct Load {
    route: &'static str,
    prefix: Range<usize>,
    namespace: Range<usize>,
    table: Range<usize>,
}

impl Load {
    /// The load `path` names, if it is a `GET` of exactly the load route's shape with
    /// every segment non-empty and decodable.
    fn recognise(method: &Method, path: &str) -> Option<Load> {
        if *method != Method::GET {
            return None;
        }
        let (base, route) = BASES.iter().find(|(base, _)| path.starts_with(base))?;
        let mut segments: [Range<usize>; 5] = Default::default();
        let mut count = 0;
        let mut start = base.len();
        for segment in path[start..].split('/') {
            if count == segments.len() || segment.is_empty() || decode(segment).is_none() {
                return None;
            }
            segments[count] = start..start + segment.len();
            count += 1;
            start += segment.len() + 1;
        }
        let [prefix, namespaces, namespace, tables, table] = segments;
        let literal = |range: Range<usize>, text: &str| path[range] == *text;
        let shape = count == 5 && literal(namespaces, "namespaces") && literal(tables, "tables");
        shape.then_some(Load {
            route,
            prefix,
            namespace,
            table,
        })
    }
}

/// A path segment percent-decoded as axum decodes path parameters; `None` if the result
/// is not UTF-8 (the router's answer to that is its own, so the lane declines it).
fn decode(segment: &str) -> Option<Cow<'_, str>> {
    // Without a `%` it decodes to itself, and it is UTF-8 already (a `str` cut at `/`):
    // skips `decode_utf8`'s byte-at-a-time scan and UTF-8 check.
    if !segment.as_bytes().contains(&b'%') {
        return Some(Cow::Borrowed(segment));
    }
    percent_decode_str(segment).decode_utf8().ok()
}

/// Serves a recognised load behind the front every request goes through.
async fn serve(state: AppState, request: Request, load: Load) -> Result<Response, Infallible> {
    let route = crate::metrics::enabled().then_some(load.route);
    let response = super::front::front(&state, request, route, |request| {
        respond(&state, request, load)
    });
    Ok(response.await)
}

/// The route's handler, with its extractors run by hand.
async fn respond(state: &AppState, request: Request, load: Load) -> Response {
    let (mut parts, _body) = request.into_parts();
    handle(state, &mut parts, load).await.into_response()
}

async fn handle(state: &AppState, parts: &mut Parts, load: Load) -> ApiResult<Response> {
    let Ctx(ctx) = Ctx::from_request_parts(parts, &()).await?;
    let params = Params::from_request_parts(parts, &()).await?;
    let Ok(if_none_match) = IfNoneMatch::from_request_parts(parts, &()).await;
    let path = parts.uri.path();
    // Recognised, so each decodes.
    let segment = |range: Range<usize>| decode(&path[range]).unwrap_or_default();
    let (prefix, namespace, table) = (
        segment(load.prefix),
        segment(load.namespace),
        segment(load.table),
    );
    let loaded = super::tables::load_table(
        state,
        &ctx,
        &prefix,
        &namespace,
        &table,
        &params,
        &if_none_match,
    );
    loaded.await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recognised(path: &str) -> Option<(&'static str, String, String, String)> {
        Load::recognise(&Method::GET, path).map(|load| {
            let text = |range: Range<usize>| decode(&path[range]).unwrap().into_owned();
            (
                load.route,
                text(load.prefix),
                text(load.namespace),
                text(load.table),
            )
        })
    }

    #[test]
    fn recognises_loads_under_both_bases() {
        let (route, prefix, namespace, table) =
            recognised("/v1/cat/namespaces/a%1Fb/tables/t%20x").unwrap();
        assert_eq!(route, "/v1/{prefix}/namespaces/{namespace}/tables/{table}");
        assert_eq!((prefix.as_str(), namespace.as_str()), ("cat", "a\u{1f}b"));
        assert_eq!(table, "t x");
        let (route, ..) = recognised("/api/catalog/v1/cat/namespaces/a/tables/t").unwrap();
        assert!(route.starts_with("/api/catalog/v1/"));
    }

    #[test]
    fn labels_loads_with_the_routers_templates() {
        for (base, route) in BASES {
            let registered = format!(
                "{}{}",
                base.trim_end_matches('/'),
                super::super::tables::TABLE
            );
            assert_eq!(route, registered);
        }
    }

    #[test]
    fn declines_everything_else() {
        for path in [
            "/v1/cat/namespaces/a/tables",
            "/v1/cat/namespaces/a/tables/",
            "/v1/cat/namespaces/a/tables/t/",
            "/v1/cat/namespaces/a/tables/t/credentials",
            "/v1/cat/namespaces/a/views/t",
            "/v1/cat/namespace/a/tables/t",
            "/v1//namespaces/a/tables/t",
            "/v1/cat/namespaces//tables/t",
            "/v1/cat/namespaces/a/tables/%FF",
            "/v2/cat/namespaces/a/tables/t",
            "/api/catalog/polaris/v1/cat/namespaces/a/tables/t",
            "/v1/cat/namespaces/a/tables/t/x/y",
        ] {
            assert_eq!(Load::recognise(&Method::GET, path), None, "{path}");
        }
        for method in [Method::HEAD, Method::POST, Method::DELETE] {
            assert_eq!(
                Load::recognise(&method, "/v1/cat/namespaces/a/tables/t"),
                None
            );
        }
    }
}
