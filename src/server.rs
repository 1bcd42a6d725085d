//! Assembles a server from its parts and runs it until a shutdown signal. Tests use the
//! same entry point with a port-0 listener and their own shutdown future.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::auth::oidc::IdentityProvider;
use crate::catalog::security::Authenticators;
use crate::catalog::{Catalog, CatalogSettings};
use crate::events::relay::{self, RelaySettings};
use crate::http::auth::{AuthMode, AuthSettings};
use crate::http::console::{ConsoleLogin, ConsoleSettings};
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
    /// Share the metadata files' syncs between concurrent commits (`syncfs` rounds).
    pub fsync_batch: bool,
    /// Embedded store: leave the metadata files' syncs to a background round at this
    /// interval, the store's journal keeping their text meanwhile (`--fsync-journal`).
    pub fsync_journal: Option<Duration>,
    pub max_body_bytes: usize,
    /// Metadata bytes the embedded store keeps in memory for loads (0: none).
    pub metadata_cache_bytes: usize,
    /// Embedded store: how long its commit thread waits, under load, for more writes to
    /// share a group (zero: none).
    pub commit_gather: Duration,
    /// Embedded store: the WAL's frames (pages) past which it is checkpointed.
    pub wal_checkpoint_frames: u32,
    /// PostgreSQL instead of the embedded store: several nodes can share it.
    pub postgres: Option<PostgresSettings>,
    /// How long clients may retry with one `Idempotency-Key`.
    pub idempotency_lifetime: Duration,
    pub auth: AuthSettings,
    /// The `root` principal's client id and secret on first start (else generated).
    pub bootstrap_credentials: Option<(String, String)>,
    /// `storageConfigInfo` of catalogs created without one (and of the default catalog).
    pub default_storage: Option<serde_json::Value>,
    /// How long vended storage credentials live.
    pub credential_lifetime: Duration,
    pub events: EventSettings,
    /// How long dropped tables and views stay recoverable (zero: not at all).
    pub drop_retention: Duration,
    /// Most files one round of a purge deletes.
    pub purge_batch_files: usize,
    /// Bytes of documents whose parsed models are kept for the next commit (0: none).
    pub commit_cache_bytes: usize,
}

/// The change-event outbox and its relay.
#[derive(Debug, Clone)]
pub struct EventSettings {
    pub enabled: bool,
    /// The broker to relay to (`events::sinks::from_url`); `None`: no relay.
    pub sink: Option<String>,
    /// How long events are kept once relayed.
    pub retention: Duration,
    pub relay: RelaySettings,
}

impl Default for EventSettings {
    fn default() -> Self {
        EventSettings {
            enabled: true,
            sink: None,
            retention: Duration::from_secs(7 * 86_400),
            relay: RelaySettings::default(),
        }
    }
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            warehouse: None,
            default_catalog: "default".into(),
            fsync: true,
            fsync_batch: false,
            fsync_journal: Some(Duration::from_millis(100)),
            max_body_bytes: 16 * 1024 * 1024,
            metadata_cache_bytes: 64 << 20,
            commit_gather: DEFAULT_COMMIT_GATHER,
            wal_checkpoint_frames: crate::store::sqlite::DEFAULT_WAL_CHECKPOINT_FRAMES,
            postgres: None,
            idempotency_lifetime: CatalogSettings::default().idempotency_lifetime,
            auth: AuthSettings::default(),
            bootstrap_credentials: None,
            default_storage: None,
            credential_lifetime: CatalogSettings::default().credential_lifetime,
            events: EventSettings::default(),
            drop_retention: CatalogSettings::default().drop_retention,
            purge_batch_files: CatalogSettings::default().purge_batch_files,
            commit_cache_bytes: CatalogSettings::default().commit_cache_bytes,
        }
    }
}

/// The storage a warehouse location implies when none is configured: S3 (with the
/// server's AWS environment) for `s3://`, GCS for `gs://`, else the local file system.
fn default_storage_for(warehouse: &str) -> serde_json::Value {
    let storage_type = match crate::storage::location::scheme_of(warehouse) {
        Ok(crate::storage::location::Scheme::S3) => "S3",
        Ok(crate::storage::location::Scheme::Gcs) => "GCS",
        _ => "FILE",
    };
    serde_json::json!({ "storageType": storage_type })
}

fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))
}

/// Rewrites the metadata files the embedded store's journal still holds (a crash left
/// them unsynced; `storage/journal.rs`), whatever the flag says now, then starts the
/// syncer if `--fsync-journal` is on. Before anything serves.
fn open_file_journal(
    store: &SqliteStore,
    config: &ServerConfig,
) -> anyhow::Result<Option<Arc<crate::storage::journal::Syncer>>> {
    let rewritten = store
        .restore_file_journal(crate::storage::journal::restore)
        .context("restoring the metadata files of the file journal")?;
    if rewritten > 0 {
        tracing::warn!(rewritten, "rewrote metadata files a crash left unsynced");
    }
    match (config.fsync, config.fsync_journal) {
        (true, Some(interval)) => Ok(Some(crate::storage::journal::Syncer::start(
            store.file_journal(),
            interval,
        )?)),
        _ => Ok(None),
    }
}

/// The embedded store's gather window (`--commit-gather-us`): with the request threads
/// below the commit thread (`crate::runtime`), 300 µs took the 50/50 mix's write p50 from
/// 5.80 to 5.27 ms and its requests/s up 7%; 500 µs measured the same (BENCHMARKS.md).
pub const DEFAULT_COMMIT_GATHER: Duration = Duration::from_micros(300);

/// How often expired idempotency records are deleted.
const IDEMPOTENCY_PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// Opens the store, bootstraps the default catalog, starts the housekeeping task and
/// builds the server's service.
pub async fn build(config: &ServerConfig) -> anyhow::Result<http::App> {
    let data_dir = absolute(&config.data_dir)?;
    let warehouse = match &config.warehouse {
        Some(w) => w.clone(),
        None => format!(
            "file://{}",
            absolute(&data_dir.join("warehouse"))?.display()
        ),
    };
    let (store, file_journal): (Arc<dyn Store>, _) = match &config.postgres {
        // The journal is the embedded store's: on PostgreSQL files are synced one by one
        // (`--fsync-journal` is on by default, so saying so at every start would be noise).
        Some(settings) => (Arc::new(PostgresStore::open(settings).await?), None),
        None => {
            SqliteStore::set_wal_checkpoint_frames(config.wal_checkpoint_frames);
            let store = SqliteStore::open_with_cache(
                &data_dir.join("catalog.db"),
                config.metadata_cache_bytes,
            )?;
            store.set_commit_gather(config.commit_gather);
            let file_journal = open_file_journal(&store, config)?;
            (Arc::new(store), file_journal)
        }
    };
    let catalog = Catalog::new(
        store,
        CatalogSettings {
            warehouse_root: warehouse.clone(),
            fsync: config.fsync,
            fsync_batch: config.fsync_batch,
            file_journal,
            idempotency_lifetime: config.idempotency_lifetime,
            default_storage: match &config.default_storage {
                Some(storage) => storage.clone(),
                None => default_storage_for(&warehouse),
            },
            credential_lifetime: config.credential_lifetime,
            events: config.events.enabled,
            drop_retention: config.drop_retention,
            purge_batch_files: config.purge_batch_files,
            commit_cache_bytes: config.commit_cache_bytes,
            ..CatalogSettings::default()
        },
    )
    .with_authenticators(authenticators(&config.auth).await?);
    // Before anything starts (bootstrap, relay, sweepers): a wrong issuer fails the
    // start with nothing done.
    let console = console_settings(&config.auth).await?;
    if catalog.bootstrap_catalog(&config.default_catalog).await? {
        tracing::info!(catalog = %config.default_catalog, "created the default catalog");
    }
    if config.auth.mode != AuthMode::None {
        bootstrap_security(&catalog, config, &data_dir).await?;
    }
    let catalog = Arc::new(catalog);
    tokio::spawn(purge_idempotency_records(Arc::downgrade(&catalog)));
    start_events(&catalog, &config.events).await?;
    tokio::spawn(expire_dropped(Arc::downgrade(&catalog)));
    if config.auth.mode == AuthMode::None {
        tokio::spawn(follow_security(Arc::downgrade(&catalog)));
    }
    let state = AppState::new(http::Shared {
        catalog,
        default_catalog: Arc::from(config.default_catalog.as_str()),
        max_body_bytes: config.max_body_bytes,
        auth: config.auth.clone(),
    });
    Ok(http::app(
        state,
        &HttpSettings {
            max_body_bytes: config.max_body_bytes,
            console,
        },
    ))
}

/// The console's sign-in at the external issuer: its endpoints are read from the
/// issuer's discovery document now, so a wrong issuer fails the start.
async fn console_settings(auth: &AuthSettings) -> anyhow::Result<ConsoleSettings> {
    let (Some(client), Some(oidc)) = (&auth.console_client, &auth.oidc) else {
        return Ok(ConsoleSettings::default());
    };
    let endpoints = crate::auth::oidc::login_endpoints(&oidc.issuer)
        .await
        .with_context(|| format!("the console's sign-in at {}", oidc.issuer))?;
    Ok(ConsoleSettings {
        login: Some(ConsoleLogin {
            issuer: oidc.issuer.clone(),
            client_id: client.client_id.clone(),
            scope: client.scope.clone(),
            authorization_endpoint: endpoints.authorization,
            token_endpoint: endpoints.token,
        }),
    })
}

/// Which tokens the catalog accepts; an external issuer's keys are loaded now, so that
/// a wrong `--oidc-issuer` fails the start.
async fn authenticators(auth: &AuthSettings) -> anyhow::Result<Authenticators> {
    let external = match (auth.mode, &auth.oidc) {
        (AuthMode::External | AuthMode::Both, Some(oidc)) => Some(Arc::new(
            IdentityProvider::connect(oidc.clone())
                .await
                .with_context(|| format!("identity provider {}", oidc.issuer))?,
        )),
        (AuthMode::External | AuthMode::Both, None) => {
            anyhow::bail!("--auth external and --auth both need --oidc-issuer")
        }
        _ => None,
    };
    Ok(Authenticators {
        internal: auth.mode != AuthMode::External,
        external,
    })
}

/// Creates the `root` principal on first start. Generated credentials are printed once
/// and, on the embedded store, saved to `<data-dir>/root-credentials` (mode 0600), so
/// the user of a local server can find them again; on PostgreSQL nodes they are only
/// printed (set `FLOE_BOOTSTRAP_CREDENTIALS` to choose them).
async fn bootstrap_security(
    catalog: &Catalog,
    config: &ServerConfig,
    data_dir: &Path,
) -> anyhow::Result<()> {
    let given = config.bootstrap_credentials.clone();
    let Some((id, secret)) = catalog.bootstrap_security(given.clone()).await? else {
        return Ok(());
    };
    tracing::info!(principal = "root", client_id = %id, "created the root principal");
    if given.is_some() {
        return Ok(());
    }
    let mut message = format!(
        "Created the root principal (role service_admin). Its credentials are shown once:\n  client id:     {id}\n  client secret: {secret}"
    );
    if config.postgres.is_none() {
        let path = data_dir.join("root-credentials");
        write_private(&path, &format!("{id},{secret}\n"))?;
        message.push_str(&format!(
            "\n  (also saved, readable only by you, in {})",
            path.display()
        ));
    }
    eprintln!("{message}");
    Ok(())
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// Without authentication no request reads the security model, yet which catalogs are
/// federated is kept there: re-checked as often as authenticated requests would, so a
/// federated catalog another node created is forwarded here too within that interval.
async fn follow_security(catalog: Weak<Catalog>) {
    let mut tick = tokio::time::interval(crate::catalog::security::REFRESH_EVERY);
    loop {
        tick.tick().await;
        let Some(catalog) = catalog.upgrade() else {
            return;
        };
        if let Err(e) = catalog.security().await {
            tracing::debug!(error = %e, "security model not re-checked");
        }
    }
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

/// Starts the relay (when a sink is configured) and the expiry of old events. A broker
/// that is down does not stop the start: the relay retries until it is up.
async fn start_events(catalog: &Arc<Catalog>, events: &EventSettings) -> anyhow::Result<()> {
    tokio::spawn(relay::expire_events(
        catalog.store(),
        events.retention,
        EVENT_EXPIRY_INTERVAL,
    ));
    let Some(url) = &events.sink else {
        return Ok(());
    };
    if !events.enabled {
        anyhow::bail!("--events-sink needs events on (--events true)");
    }
    let sink = crate::events::sinks::from_url(url).await?;
    tracing::info!(sink = sink.name(), "relaying change events");
    let relay = relay::Relay::new(
        catalog.store(),
        sink,
        catalog.events_written(),
        events.relay.clone(),
    );
    tokio::spawn(relay.run());
    Ok(())
}

/// How often events past retention are deleted.
const EVENT_EXPIRY_INTERVAL: Duration = Duration::from_secs(60);

/// Forgets dropped tables and views past their retention (purging files where their
/// drop asked), on one node at a time: the node holding the `expirer` lease in the store.
async fn expire_dropped(catalog: Weak<Catalog>) {
    let holder = uuid::Uuid::now_v7().to_string();
    loop {
        let Some(catalog) = catalog.upgrade() else {
            return;
        };
        let every = catalog.expiry_interval();
        let now = crate::model::now_ms();
        let lease = 3 * every.as_millis() as i64;
        let store = catalog.store();
        match store
            .claim_relay("expirer:dropped", &holder, now, now + lease)
            .await
        {
            Ok(Some(_)) => match catalog.expire_dropped().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(forgotten = n, "expired dropped tables and views"),
                Err(e) => tracing::warn!(error = %e, "could not expire dropped tables and views"),
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not take the expirer lease"),
        }
        drop(catalog);
        tokio::time::sleep(every).await;
    }
}

/// Serves until `shutdown` completes, then drains in-flight requests.
pub async fn run(
    listener: TcpListener,
    app: http::App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    axum::serve(listener, axum::ServiceExt::into_make_service(app))
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving HTTP")
}
