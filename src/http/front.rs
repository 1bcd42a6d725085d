//! What every request goes through, around its route: a request id (echoed as
//! `X-Request-Id`), authentication, the request's metrics and its access-log line; and
//! for a federated catalog's request, forwarding instead of the route.
//!
//! A hand-written layer, not `middleware::from_fn`: `Router::layer` wraps every route in
//! it, and `from_fn` would add a boxed `Next` and a second boxed future to each request.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tower_service::Service;

use super::context::RequestId;
use super::AppState;

/// Wraps each route in [`Front`].
#[derive(Clone)]
pub struct FrontLayer(pub AppState);

impl<S> tower_layer::Layer<S> for FrontLayer {
    type Service = Front<S>;

    fn layer(&self, inner: S) -> Front<S> {
        Front {
            state: self.0.clone(),
            inner,
        }
    }
}

/// One route behind [`front`].
#[derive(Clone)]
pub struct Front<S> {
    state: AppState,
    inner: S,
}

impl<S> Service<Request> for Front<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The service that was made ready goes with the request; a clone stays behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        // The route's template, for metrics: this layer wraps each route (`Router::layer`),
        // so it runs after routing, where axum has put the template in the request.
        let route = crate::metrics::enabled().then(|| {
            request
                .extensions()
                .get::<MatchedPath>()
                .map_or("unmatched", |matched| {
                    crate::metrics::intern(matched.as_str())
                })
        });
        Box::pin(async move {
            let response = front(&state, request, route, move |request| {
                let call = inner.call(request);
                async move { call.await.unwrap_or_else(|never| match never {}) }
            });
            Ok(response.await)
        })
    }
}

/// Gives the request its id (echoed as `X-Request-Id`) and logs one line per request:
/// method, path, status, latency, request id. The line is queued here and formatted and
/// written by background threads (`access_log`), so logging never holds up a request.
/// Then authenticates it (`auth::authenticate`) and hands it to `inner`, the route.
///
/// `route` is the route's template as a metrics label (`None` with metrics off). Shared by
/// [`Front`] (every routed request) and the hot lane (`super::hot`), which serves table
/// loads without the router.
pub(super) async fn front<F, Fut>(
    state: &AppState,
    mut request: Request,
    route: Option<&'static str>,
    inner: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let started = Instant::now();
    let id = RequestId::from_header(request.headers().get(&REQUEST_ID));
    request.extensions_mut().insert(id.clone());
    let method = method_label(request.method());
    let logged = super::access_log::enabled()
        .then(|| (request.method().clone(), request.uri().path().to_string()));
    let mut response = match super::auth::authenticate(state, &mut request).await {
        // No name (catalog, namespace, table, principal, role) holds a control character,
        // and PostgreSQL refuses a NUL in any text it is given: refused here, once, for
        // every route, which would otherwise each have to check their segments.
        Ok(()) if request.uri().path().contains("%00") => super::error::ApiError::bad_request(
            "A request path must not hold a NUL character (%00): no name in a catalog has one",
        )
        .into_response(),
        // A panic in a route (a bug, here or in a library) is answered as an internal
        // error, logged, instead of dropping the connection with no answer.
        Ok(()) => match AssertUnwindSafe(routed(state, request, inner))
            .catch_unwind()
            .await
        {
            Ok(response) => response,
            Err(panic) => panicked(&*panic, &id),
        },
        Err(refused) => refused,
    };
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        response.headers_mut().insert(&REQUEST_ID, value);
    }
    let status = response.status().as_u16();
    // Read once for both (each read is a clock call and a subtraction).
    let took = started.elapsed();
    if let Some(route) = route {
        crate::metrics::record_request(method, route, status, took);
    }
    if let Some((method, path)) = logged {
        super::access_log::log(super::access_log::Line {
            at: std::time::SystemTime::now(),
            method,
            path,
            status,
            micros: took.as_micros() as u64,
            request_id: id.0,
        });
    }
    response
}

/// The request's route, unless its catalog is federated: then it is forwarded to the
/// remote catalog (`super::federated`). Only when this node knows of a federated catalog
/// at all, and boxed, so that no other request's future grows by the forwarding's.
async fn routed<F, Fut>(state: &AppState, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let request = if state.catalog.any_federated() {
        match Box::pin(super::federated::intercept(state, request)).await {
            Ok(forwarded) => return forwarded,
            Err(request) => request,
        }
    } else {
        request
    };
    inner(request).await
}

/// The 500 for a route that panicked, with the panic's message in the log (under an
/// error id, as every internal error) and not in the answer.
fn panicked(panic: &(dyn std::any::Any + Send), id: &RequestId) -> Response {
    let message = (panic.downcast_ref::<&str>().copied())
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let error = crate::catalog::error::CatalogError::internal(anyhow::anyhow!(
        "request {} panicked: {message}",
        id.0
    ));
    super::error::ApiError::from(error).into_response()
}

/// Named once: `HeaderMap::get` and `insert` with a `&str` parse and validate the name
/// on every call (~500 instructions each).
static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A method as a metrics label: the standard ones, anything else as `other` (a client
/// must not be able to add series).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method as M;
    match *method {
        M::GET => "GET",
        M::HEAD => "HEAD",
        M::POST => "POST",
        M::PUT => "PUT",
        M::DELETE => "DELETE",
        M::PATCH => "PATCH",
        M::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic's answer is the spec's 500 body with an error id, and the panic's message
    /// (which may hold anything) stays in the log.
    #[tokio::test]
    async fn a_panic_is_answered_as_an_internal_error() {
        let id = RequestId::from_header(None);
        for payload in [
            std::panic::catch_unwind(|| panic!("secret {}", 42)).unwrap_err(),
            std::panic::catch_unwind(|| panic!("secret")).unwrap_err(),
        ] {
            let response = panicked(&*payload, &id);
            assert_eq!(response.status(), 500);
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["type"], "InternalServerError");
            assert_eq!(body["error"]["code"], 500);
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains("error id"), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
    }
}
