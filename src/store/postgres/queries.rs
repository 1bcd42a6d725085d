//! How the PostgreSQL store sends statements: prepared once per connection and cached
//! (PostgreSQL then skips parsing and planning them), or unnamed (`query_typed`, one round
//! trip each) behind a pooler in transaction mode. The choice is made here, in the
//! [`Queries`] impls for a pooled connection and a transaction, and nowhere else.

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::Object;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

/// Statement parameters with their types (`query_typed` needs them).
pub(crate) fn text(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::TEXT)
}

pub(crate) fn int8(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::INT8)
}

/// The query methods shared by a pooled connection and a transaction.
pub(crate) trait Queries {
    async fn query_opt_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Option<Row>, tokio_postgres::Error>;
    async fn query_all_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, tokio_postgres::Error>;
    async fn execute_all_typed(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<u64, tokio_postgres::Error>;
    /// `query_all_typed`, always unnamed, so PostgreSQL plans it for the values given.
    /// For a statement whose best plan depends on them: a prepared statement soon runs
    /// one generic plan, chosen while the table was small, and keeps it. (Found at scale:
    /// the location-overlap check's generic plan is a sequential scan behind its LIMIT 1,
    /// 77 ms at 31,000 tables against 0.06 ms planned for the values.)
    async fn query_all_replanned(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, tokio_postgres::Error>;
}

/// Whether statements are prepared and cached per connection (`PostgresSettings::
/// prepared_statements`). Process-wide, like the metrics switch: a process serves one
/// database, and every store it opens takes the setting of the last one connected.
static PREPARED: AtomicBool = AtomicBool::new(true);

pub(super) fn prepared() -> bool {
    PREPARED.load(Ordering::Relaxed)
}

/// Turns preparing on or off; returns whether it was on.
pub(super) fn set_prepared(on: bool) -> bool {
    PREPARED.swap(on, Ordering::Relaxed)
}

/// The parameter values without their types (a prepared statement knows them).
fn values<'a>(params: &[(&'a (dyn ToSql + Sync), Type)]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|(value, _)| *value).collect()
}

/// The parameter types, to prepare a statement with.
fn types(params: &[(&(dyn ToSql + Sync), Type)]) -> Vec<Type> {
    params.iter().map(|(_, ty)| ty.clone()).collect()
}

macro_rules! impl_queries {
    ($type:ty) => {
        impl Queries for $type {
            async fn query_opt_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<Option<Row>, tokio_postgres::Error> {
                if prepared() {
                    let statement = self.prepare_typed_cached(sql, &types(params)).await?;
                    self.query_opt(&statement, &values(params)).await
                } else {
                    self.query_typed_opt(sql, params).await
                }
            }
            async fn query_all_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<Vec<Row>, tokio_postgres::Error> {
                if prepared() {
                    let statement = self.prepare_typed_cached(sql, &types(params)).await?;
                    self.query(&statement, &values(params)).await
                } else {
                    self.query_typed(sql, params).await
                }
            }
            async fn execute_all_typed(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<u64, tokio_postgres::Error> {
                if prepared() {
                    let statement = self.prepare_typed_cached(sql, &types(params)).await?;
                    self.execute(&statement, &values(params)).await
                } else {
                    self.execute_typed(sql, params).await
                }
            }
            async fn query_all_replanned(
                &self,
                sql: &str,
                params: &[(&(dyn ToSql + Sync), Type)],
            ) -> Result<Vec<Row>, tokio_postgres::Error> {
                self.query_typed(sql, params).await
            }
        }
    };
}

impl_queries!(Object);
impl_queries!(deadpool_postgres::Transaction<'_>);
