//! `POST /v1/{prefix}/events`: the catalog's change events, as the REST events
//! proposal (apache/iceberg PR #12584) defines the endpoint.

use axum::extract::{Path, State};
use axum::routing::post;
use axum::Json;
use serde_json::Value;

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::JsonBody;
use super::{AppState, Routes};
use crate::events::query::QueryEventsRequest;

pub fn routes(routes: Routes) -> Routes {
    routes.route("/{prefix}/events", post(query))
}

async fn query(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(prefix): Path<String>,
    JsonBody(request): JsonBody<QueryEventsRequest>,
) -> ApiResult<Json<Value>> {
    Ok(Json(
        state.catalog.query_events(&ctx, &prefix, request).await?,
    ))
}
