//! Polaris's management API for catalogs (`/api/management/v1/catalogs`), with Polaris's
//! JSON shapes so Polaris tools and benchmarks work unchanged.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::context::Ctx;
use super::error::ApiResult;
use super::extract::JsonBody;
use super::outcome::render;
use super::{AppState, Routes};
use crate::auth::privileges::{Privilege, Securable};
use crate::catalog::catalogs::NewCatalog;
use crate::catalog::locations::DEFAULT_BASE_LOCATION;
use crate::catalog::Outcome;
use crate::model::{CatalogRecord, Properties};

pub fn routes(routes: Routes) -> Routes {
    routes.route("/catalogs", get(list).post(create)).route(
        "/catalogs/{name}",
        get(load).put(update).delete(drop_catalog),
    )
}

pub fn catalog_json(catalog: &CatalogRecord) -> Value {
    let mut json = json!({
        "type": catalog.catalog_type.as_str(),
        "name": catalog.name,
        "properties": catalog.properties,
        "createTimestamp": catalog.created_ms,
        "lastUpdateTimestamp": catalog.updated_ms,
        "entityVersion": catalog.version,
        "storageConfigInfo": catalog.storage_config,
    });
    if let Some(connection) = &catalog.connection {
        json["connectionConfigInfo"] = connection.clone();
    }
    json
}

/// Lists the catalogs the caller has any grant in. Those whose properties it may not
/// read (`CATALOG_READ_PROPERTIES`, as loading one needs) are shown without them: only
/// the base location and the storage type, the parts Polaris's `Catalog` requires, and
/// none of the storage configuration (role, endpoints, allowed locations) nor a
/// federated catalog's connection.
async fn list(State(state): State<AppState>, Ctx(ctx): Ctx) -> ApiResult<Json<Value>> {
    let catalogs = state.catalog.list_catalogs(&ctx).await?;
    let shown = |catalog: &CatalogRecord| {
        let mut json = catalog_json(catalog);
        let securable = &Securable::Catalog;
        if ctx
            .require(&catalog.name, Privilege::CATALOG_READ_PROPERTIES, securable)
            .is_err()
        {
            let base = catalog.properties.get(DEFAULT_BASE_LOCATION);
            json["properties"] = json!({ DEFAULT_BASE_LOCATION: base });
            json["storageConfigInfo"] =
                json!({ "storageType": catalog.storage_config["storageType"] });
            if let Some(shown) = json.as_object_mut() {
                shown.remove("connectionConfigInfo");
            }
        }
        json
    };
    let catalogs: Vec<Value> = catalogs.iter().map(shown).collect();
    Ok(Json(json!({ "catalogs": catalogs })))
}

#[derive(Deserialize)]
struct CreateCatalogRequest {
    catalog: CatalogBody,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CatalogBody {
    #[serde(rename = "type", default = "internal")]
    catalog_type: String,
    name: String,
    #[serde(default)]
    properties: Properties,
    storage_config_info: Option<Value>,
    connection_config_info: Option<Value>,
}

fn internal() -> String {
    "INTERNAL".into()
}

async fn create(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreateCatalogRequest>,
) -> ApiResult<Response> {
    let c = body.catalog;
    let created = state
        .catalog
        .create_catalog(
            &ctx,
            NewCatalog {
                name: c.name,
                catalog_type: c.catalog_type,
                connection_config: c.connection_config_info,
                properties: c.properties,
                storage_config: c.storage_config_info,
            },
        )
        .await?;
    Ok(render(&Outcome::Catalog {
        record: created,
        created: true,
    }))
}

async fn load(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(catalog_json(
        &state.catalog.load_catalog(&ctx, &name).await?,
    )))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateCatalogRequest {
    current_entity_version: Option<i64>,
    properties: Option<Properties>,
    storage_config_info: Option<Value>,
}

async fn update(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<UpdateCatalogRequest>,
) -> ApiResult<Response> {
    let updated = state
        .catalog
        .update_catalog(
            &ctx,
            &name,
            body.current_entity_version,
            body.properties,
            body.storage_config_info,
        )
        .await?;
    Ok(render(&Outcome::Catalog {
        record: updated,
        created: false,
    }))
}

async fn drop_catalog(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.catalog.drop_catalog(&ctx, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
