//! The one place where errors become HTTP responses: each catalog error gets its status
//! and Iceberg exception type here, in the spec's `ErrorModel` body. Internals of a 500
//! are logged with an id and never sent to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::catalog::error::{CatalogError, Missing, PolicyRefusal};
use crate::model::InvalidName;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_type: &'static str,
    pub message: String,
    /// The request's idempotency key was taken by another request: the idempotency
    /// layer answers with that request's outcome instead.
    key_taken: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error_type,
            message: message.into(),
            key_taken: false,
        }
    }

    /// A body over the server's limit, named when the caller knows it (axum's own limit,
    /// behind `JsonBody`, does not say it).
    pub fn payload_too_large(limit: Option<usize>) -> Self {
        let message = match limit {
            Some(limit) => {
                format!("Request body is larger than {limit} bytes, the most this server accepts")
            }
            None => "Request body is larger than this server accepts".to_string(),
        };
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BadRequestException",
            message,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequestException", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "NotFoundException", message)
    }
}

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        use StatusCode as S;
        let message = error.to_string();
        let (status, error_type) = match &error {
            CatalogError::NotFound { missing, .. } => (
                S::NOT_FOUND,
                match missing {
                    Missing::Catalog => "NotFoundException",
                    Missing::Namespace => "NoSuchNamespaceException",
                    Missing::Table => "NoSuchTableException",
                    Missing::View => "NoSuchViewException",
                    Missing::File => "NotFoundException",
                    Missing::PlanId => "NoSuchPlanIdException",
                    Missing::PlanTask => "NoSuchPlanTaskException",
                    Missing::Policy => "NoSuchPolicyException",
                    Missing::PolicyMapping => "NoSuchMappingException",
                },
            ),
            CatalogError::Policy(refusal, _) => match refusal {
                PolicyRefusal::VersionMismatch => (S::CONFLICT, "PolicyVersionMismatchException"),
                PolicyRefusal::MappingExists => {
                    (S::CONFLICT, "PolicyMappingAlreadyExistsException")
                }
                PolicyRefusal::InUse => (S::BAD_REQUEST, "PolicyInUseException"),
                PolicyRefusal::Invalid => (S::BAD_REQUEST, "InvalidPolicyException"),
            },
            CatalogError::AlreadyExists(_) => (S::CONFLICT, "AlreadyExistsException"),
            CatalogError::NamespaceNotEmpty(_) => (S::CONFLICT, "NamespaceNotEmptyException"),
            CatalogError::CommitFailed(_) => (S::CONFLICT, "CommitFailedException"),
            CatalogError::BadRequest(_) => (S::BAD_REQUEST, "BadRequestException"),
            CatalogError::InvalidArgument(_) => (S::BAD_REQUEST, "IllegalArgumentException"),
            CatalogError::Unprocessable(_) => {
                (S::UNPROCESSABLE_ENTITY, "UnprocessableEntityException")
            }
            CatalogError::Forbidden(_) => (S::FORBIDDEN, "ForbiddenException"),
            CatalogError::Unsupported(_) => (S::NOT_ACCEPTABLE, "UnsupportedOperationException"),
            CatalogError::Unauthorized(_) => (S::UNAUTHORIZED, "NotAuthorizedException"),
            CatalogError::Unavailable(_) => (S::SERVICE_UNAVAILABLE, "ServiceUnavailableException"),
            // 502, not 503: Iceberg Java before 1.10 resends any request answered 503
            // (commits too, which a landed first try then fails, and the client's cleanup
            // can delete files the landed snapshot needs); 500, 502 and 504 are its and
            // PyIceberg's CommitStateUnknownException, and 502 the spec's "a gateway ...
            // received an invalid response from the upstream server" (the database).
            CatalogError::OutcomeUnknown(why) => {
                tracing::warn!(error = %why, "a write's outcome is unknown");
                (S::BAD_GATEWAY, "CommitStateUnknownException")
            }
            CatalogError::Gone(_) => (S::GONE, "GoneException"),
            CatalogError::IdempotencyKeyUsed => {
                let mut error = ApiError::new(S::CONFLICT, "CommitFailedException", message);
                error.key_taken = true;
                return error;
            }
            CatalogError::Internal(inner) => {
                let id = uuid::Uuid::new_v4();
                tracing::error!(error_id = %id, error = format!("{inner:#}"), "internal error");
                return ApiError::new(
                    S::INTERNAL_SERVER_ERROR,
                    "InternalServerError",
                    format!("Internal server error; see the server log for error id {id}"),
                );
            }
        };
        ApiError::new(status, error_type, message)
    }
}

impl From<InvalidName> for ApiError {
    fn from(error: InvalidName) -> Self {
        CatalogError::from(error).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {
                "message": self.message,
                "type": self.error_type,
                "code": self.status.as_u16(),
            }
        });
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.key_taken {
            response
                .extensions_mut()
                .insert(super::idempotency::KeyTaken);
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    /// A write whose outcome the store cannot tell is the spec's CommitStateUnknown at
    /// 502 (a client must look before it retries), never the retryable 503 of a store
    /// that refused before committing anything.
    #[test]
    fn an_unknown_outcome_is_a_502_commit_state_unknown() {
        let unknown: ApiError = CatalogError::from(StoreError::OutcomeUnknown(
            "the database connection failed during COMMIT".into(),
        ))
        .into();
        assert_eq!(
            (unknown.status, unknown.error_type),
            (StatusCode::BAD_GATEWAY, "CommitStateUnknownException")
        );
        assert!(
            unknown.message.contains("may or may not"),
            "{}",
            unknown.message
        );
        let refused: ApiError = CatalogError::from(StoreError::Unavailable("down".into())).into();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
