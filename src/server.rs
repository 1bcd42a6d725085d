//! Assembles a server from its parts and runs it until a shutdown signal. Tests use the
//! same entry point with a port-0 listener and their own shutdown future.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::catalog::{Catalog, CatalogSettings};
use crate::http::{self, AppState, HttpSettings};
use crate::store::postgres::{PostgresSettings, PostgresStore};
use crate::store::sqlite::SqliteStore;
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Holds the embedded database (and, by default, the warehouse).
    pub data_dir: PathBuf,
    /// Root location of catalogs created without a base location.
    pub warehouse: Option<String>,
    /// Created on first start when no catalog exists; used when clients name none.
    pub default_catalog: String,
    pub fsync: bool,
    pub max_body_bytes: usize,
    /// PostgreSQL instead of the embedded store: several nodes can share it.
    pub postgres: Option<PostgresSettings>,
    /// How long clients may retry with one `Idempotency-Key`.
    pub idempotency_lifetime: Duration,
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            warehouse: None,
            default_catalog: "default".into(),
            fsync: true,
            max_body_bytes: 16 * 1024 * 1024,
            postgres: None,
            idempotency_lifetime: CatalogSettings::default().idempotency_lifetime,
        }
    }
}

fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))
}

/// How often expired idempotency records are deleted.
const IDEMPOTENCY_PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// Opens the store, bootstraps the default catalog, starts the housekeeping task and
/// builds the router.
pub async fn build(config: &ServerConfig) -> anyhow::Result<axum::Router> {
    let data_dir = absolute(&config.data_dir)?;
    let warehouse = match &config.warehouse {
        Some(w) => w.clone(),
        None => format!(
            "file://{}",
            absolute(&data_dir.join("warehouse"))?.display()
        ),
    };
    let store: Arc<dyn Store> = match &config.postgres {
        Some(settings) => Arc::new(PostgresStore::open(settings).await?),
        None => Arc::new(SqliteStore::open(&data_dir.join("catalog.db"))?),
    };
    let catalog = Catalog::new(
        store,
        CatalogSettings {
            warehouse_root: warehouse,
            fsync: config.fsync,
            idempotency_lifetime: config.idempotency_lifetime,
            ..CatalogSettings::default()
        },
    );
    if catalog.bootstrap_catalog(&config.default_catalog).await? {
        tracing::info!(catalog = %config.default_catalog, "created the default catalog");
    }
    let catalog = Arc::new(catalog);
    tokio::spawn(purge_idempotency_records(Arc::downgrade(&catalog)));
    let state = AppState {
        catalog,
        default_catalog: Arc::from(config.default_catalog.as_str()),
        max_body_bytes: config.max_body_bytes,
    };
    Ok(http::router(
        state,
        &HttpSettings {
            max_body_bytes: config.max_body_bytes,
        },
    ))
}

/// Deletes expired idempotency records now and then, on every node (deleting the same
/// expired rows twice is harmless); ends when the catalog is gone.
async fn purge_idempotency_records(catalog: Weak<Catalog>) {
    let mut tick = tokio::time::interval(IDEMPOTENCY_PURGE_INTERVAL);
    loop {
        tick.tick().await;
        let Some(catalog) = catalog.upgrade() else {
            return;
        };
        if let Err(e) = catalog.purge_expired_idempotency().await {
            tracing::warn!(error = %e, "could not delete expired idempotency keys");
        }
    }
}

/// Serves until `shutdown` completes, then drains in-flight requests.
pub async fn run(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving HTTP")
}
