//! `GET /v1/config`: which catalog a warehouse names, and exactly which endpoints work.

use axum::extract::State;
use axum::routing::get;
use axum::Json;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::Params;
use super::{AppState, Routes};

/// Every endpoint this server implements, as the spec's `endpoints` list spells them.
/// Clients (the Java client, DuckDB, PyIceberg) trust this list: keep it exact.
pub const ENDPOINTS: &[&str] = &[
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
    "POST /v1/{prefix}/events",
    // Polaris's generic tables, spelled as Polaris advertises them (no leading slash):
    // its clients look for these exact strings before they call one.
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    "DELETE polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    // Polaris's policy API, spelled as Polaris advertises it.
    "GET polaris/v1/{prefix}/namespaces/{namespace}/policies",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/policies",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "PUT polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "DELETE polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "PUT polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}/mappings",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}/mappings",
    "GET polaris/v1/{prefix}/applicable-policies",
];

pub fn routes(routes: Routes) -> Routes {
    routes.route("/config", get(get_config))
}

async fn get_config(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    params: Params,
) -> ApiResult<Json<Value>> {
    let warehouse = params.get("warehouse").filter(|w| !w.is_empty());
    let name = warehouse.unwrap_or(&state.default_catalog);
    let prefix = match warehouse {
        // A catalog the caller has no grant in is answered from the caller's grants, never
        // the store, as if it existed: every call under it is then a 403, the same
        // whether it exists or not. So engines still attach (and are refused per
        // operation, as Polaris refuses them), and nobody can probe for catalog names.
        Some(named) if !ctx.sees_catalog(named) => named.to_string(),
        _ => state.catalog.get_catalog(name).await?.name,
    };
    // Escaped as one path segment: Iceberg's clients put the prefix into their paths as
    // given, so a name with a space or a `%` would otherwise make a path Java cannot
    // send or one that decodes to another name. Plain names are unchanged.
    let prefix = crate::model::path_segment(&prefix);
    // A federated catalog's clients get the remote's endpoints and idempotency (asked
    // only for a catalog the caller sees: otherwise the answer would tell one apart).
    if state.catalog.any_federated() && ctx.sees_catalog(name) {
        if let Some(remote) = state.catalog.federated(name).await? {
            return Ok(Json(
                super::federated::config(name, &prefix, &remote, &ctx.request_id).await?,
            ));
        }
    }
    Ok(Json(json!({
        "defaults": {},
        "overrides": { "prefix": prefix },
        "endpoints": ENDPOINTS,
        "idempotency-key-lifetime": iso8601_duration(state.catalog.idempotency_lifetime()),
    })))
}

/// `PT30M`-style ISO-8601 duration, as the spec's `idempotency-key-lifetime` wants.
fn iso8601_duration(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0 => "PT0S".to_string(),
        s if s % 3600 == 0 => format!("PT{}H", s / 3600),
        s if s % 60 == 0 => format!("PT{}M", s / 60),
        s => format!("PT{s}S"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_in_iso8601() {
        use std::time::Duration;
        assert_eq!(super::iso8601_duration(Duration::from_secs(1800)), "PT30M");
        assert_eq!(super::iso8601_duration(Duration::from_secs(7200)), "PT2H");
        assert_eq!(super::iso8601_duration(Duration::from_secs(90)), "PT90S");
    }
}
