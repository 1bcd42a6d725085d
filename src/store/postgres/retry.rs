//! How a failed statement ends a store operation: retried (a serialization failure or
//! deadlock, with jittered backoff; prepared statements lost to a pooler, at once; a
//! read's failed connection, on another), or classified once into the store's error
//! (`Unavailable` for a database that is down, `OutcomeUnknown` for a COMMIT whose
//! connection failed, `Internal` otherwise).

use std::future::Future;
use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::queries;
use crate::store::{StoreError, StoreResult};

/// Attempts of one store operation that keeps hitting serialization failures or
/// deadlocks.
pub(super) const MAX_ATTEMPTS: u32 = 8;

/// Why one attempt of a store operation failed: a store-level answer, or an SQL error
/// that `retried` classifies (retry, unavailable, internal).
pub(super) enum Failure {
    Store(StoreError),
    Sql(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Sql(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

pub(super) type Attempt<T> = Result<T, Failure>;

pub(super) fn is_retryable(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
    )
}

/// A database that is down, restarting or unreachable: the client may retry later.
pub(super) fn is_unavailable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        None => true, // I/O or protocol errors: the connection, not the statement, failed
        Some(code) => {
            let class = &code.code()[..2];
            // 08: connection exception, 57: operator intervention (shutdown, restart),
            // 53: insufficient resources (too many connections).
            matches!(class, "08" | "57" | "53")
        }
    }
}

/// A failed COMMIT: when the connection, not the statement, failed, PostgreSQL may have
/// committed it all the same (it carries out a COMMIT it received whatever becomes of
/// the client), so the outcome is unknown: no answer at all (an I/O or protocol error, a
/// closed connection), a connection exception (08), or the server going away (57P01-03:
/// shutdown, crash, restart). An error it answered otherwise (a full disk, class 53; a
/// cancel) rolled the transaction back, and is classified as any other.
pub(super) fn commit_failure(error: tokio_postgres::Error) -> Failure {
    let lost = error.is_closed()
        || error.code().is_none_or(|code| {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        });
    if lost {
        Failure::Store(StoreError::OutcomeUnknown(format!(
            "the database connection failed during COMMIT: {error}"
        )))
    } else {
        Failure::Sql(error)
    }
}

pub(super) fn sql_error(error: tokio_postgres::Error) -> StoreError {
    if is_unavailable(&error) {
        StoreError::Unavailable(format!("database: {error}"))
    } else {
        StoreError::Internal(anyhow::Error::new(error).context("database error"))
    }
}

/// A pooler in transaction mode (PgBouncer before 1.21) hands each transaction another
/// server connection, where this connection's prepared statements do not exist: stop
/// preparing (the caller retries).
fn stop_preparing(error: &tokio_postgres::Error) {
    if queries::set_prepared(false) {
        tracing::warn!(%error, "prepared statements do not survive here (a pooler in transaction mode?); sending statements unnamed from now on (set --db-prepared-statements false to start that way)");
    }
}

/// How an SQL error ends a commit on locked rows: a conflict to redo (a deadlock, a
/// serialization failure, or prepared statements lost to a pooler, after which the redo
/// sends them unnamed), or a failure.
pub(super) fn locked_failure(error: tokio_postgres::Error) -> StoreError {
    match redo_or_failure(error) {
        Ok(_) => StoreError::Conflict,
        Err(failure) => failure,
    }
}

/// An SQL error worth redoing the work for (`Ok`, the error itself: a deadlock, a
/// serialization failure, or prepared statements lost to a pooler, after which the redo
/// sends them unnamed), or the failure it ends with.
pub(super) fn redo_or_failure(
    error: tokio_postgres::Error,
) -> Result<tokio_postgres::Error, StoreError> {
    if is_retryable(&error) {
        Ok(error)
    } else if lost_prepared_statement(&error) {
        stop_preparing(&error);
        Ok(error)
    } else {
        Err(sql_error(error))
    }
}

/// A prepared statement that the server connection does not have (26000), or a name
/// another client already prepared on it (42P05): both mean a pooler shares server
/// connections between transactions.
fn lost_prepared_statement(error: &tokio_postgres::Error) -> bool {
    has_code(error, &SqlState::INVALID_SQL_STATEMENT_NAME)
        || has_code(error, &SqlState::DUPLICATE_PSTATEMENT)
}

pub(super) fn has_code(error: &tokio_postgres::Error, code: &SqlState) -> bool {
    error.code() == Some(code)
}

pub(super) async fn backoff(attempt: u32) {
    use rand::Rng;
    let base_ms = 2u64.saturating_pow(attempt.min(7));
    let jitter = rand::rng().random_range(0..=base_ms);
    tokio::time::sleep(Duration::from_millis(base_ms + jitter)).await;
}

/// The loop of `run` and `read`: a connection from `connection` for each attempt;
/// conflicts are retried with backoff, lost prepared statements at once, and a failed
/// connection only for a read (`read_only`).
pub(super) async fn retried<C, T, G, GFut, F, Fut>(
    connection: G,
    attempt: F,
    read_only: bool,
) -> StoreResult<T>
where
    G: Fn() -> GFut,
    GFut: Future<Output = StoreResult<C>>,
    F: Fn(C) -> Fut,
    Fut: Future<Output = Attempt<T>>,
{
    for n in 1..=MAX_ATTEMPTS {
        let client = connection().await?;
        match attempt(client).await {
            Ok(value) => return Ok(value),
            Err(Failure::Store(e)) => return Err(e),
            Err(Failure::Sql(e)) if is_retryable(&e) && n < MAX_ATTEMPTS => {
                tracing::info!(attempt = n, error = %e, "retrying a database conflict");
                backoff(n).await;
            }
            Err(Failure::Sql(e)) if lost_prepared_statement(&e) && n < MAX_ATTEMPTS => {
                stop_preparing(&e);
            }
            Err(Failure::Sql(e)) if read_only && is_unavailable(&e) && n < MAX_ATTEMPTS => {
                tracing::info!(attempt = n, error = %e, "a read's connection failed; reading again on another");
            }
            Err(Failure::Sql(e)) => return Err(sql_error(e)),
        }
    }
    unreachable!("the loop returns on its last attempt")
}
