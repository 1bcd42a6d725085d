//! Polaris's notifications endpoint (`POST …/tables/{table}/notifications`), by which a
//! source catalog keeps an EXTERNAL catalog's copy of its tables current
//! (`catalog::notifications` says what each kind does).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use serde::Deserialize;
use serde_json::Value;

use super::context::Ctx;
use super::error::{ApiError, ApiResult};
use super::extract::{ident, JsonBody};
use super::{AppState, Routes};
use crate::catalog::notifications::{Notification, NotificationType};

pub fn routes(routes: Routes) -> Routes {
    routes.route(
        "/{prefix}/namespaces/{namespace}/tables/{table}/notifications",
        post(notify),
    )
}

/// Polaris's `NotificationRequest`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct NotificationRequest {
    notification_type: String,
    payload: TableUpdateNotification,
}

/// Polaris's `TableUpdateNotification`: every field but `metadata` is required, as in
/// its spec, but `metadata-location` for a DROP (which reads no file; Polaris's own tests
/// send DROPs without one). Polaris names the table by the path and so does Floe:
/// `table-name`, `table-uuid` and `metadata` are not used (the uuid is the metadata
/// file's own).
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // required by the spec, read by no one
struct TableUpdateNotification {
    table_name: String,
    timestamp: i64,
    table_uuid: String,
    #[serde(default)]
    metadata_location: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
}

async fn notify(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path((prefix, ns, table)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<NotificationRequest>,
) -> ApiResult<StatusCode> {
    let kind = match body.notification_type.as_str() {
        "CREATE" => NotificationType::Create,
        "UPDATE" => NotificationType::Update,
        "DROP" => NotificationType::Drop,
        "VALIDATE" => NotificationType::Validate,
        other => {
            return Err(ApiError::bad_request(format!(
                "Unknown notification-type {other:?}: CREATE, UPDATE, DROP or VALIDATE"
            )))
        }
    };
    let metadata_location = match (kind, body.payload.metadata_location) {
        (_, Some(location)) => location,
        (NotificationType::Drop, None) => String::new(),
        (_, None) => {
            return Err(ApiError::bad_request(
                "payload.metadata-location is required but for a DROP",
            ))
        }
    };
    let notification = Notification {
        kind,
        timestamp_ms: body.payload.timestamp,
        metadata_location,
    };
    state
        .catalog
        .send_notification(&ctx, &prefix, &ident(&ns, &table)?, notification)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
