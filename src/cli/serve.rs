//! `floe serve`: the catalog server on its embedded store.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use tokio::net::TcpListener;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

use crate::auth::oidc::{JwksSource, OidcSettings};
use crate::events::relay::RelaySettings;
use crate::http::auth::{AuthMode, AuthSettings};
use crate::server::{self, EventSettings, ServerConfig};
use crate::store::postgres::{default_read_connections, PostgresSettings};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A TOML file of settings: keys are these flags' long names (`bind = "…"`,
    /// `events-sink = "…"`). A flag or an environment variable wins over the file; an
    /// unknown key is an error.
    #[arg(long, env = "FLOE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "FLOE_BIND", default_value = "127.0.0.1:8181")]
    pub bind: SocketAddr,
    /// Directory of the embedded database and, by default, the warehouse.
    #[arg(long, env = "FLOE_DATA_DIR", default_value = "./floe-data")]
    pub data_dir: PathBuf,
    /// Root location (file:///...) under which new catalogs keep their tables
    /// [default: <data-dir>/warehouse].
    #[arg(long, env = "FLOE_WAREHOUSE")]
    pub warehouse: Option<String>,
    /// Catalog created on first start and used when a client names no warehouse.
    #[arg(long, env = "FLOE_DEFAULT_CATALOG", default_value = "default")]
    pub default_catalog: String,
    /// Make new metadata files durable, by the journal or synced before their commit
    /// (off only for throwaway data; the embedded database syncs every commit regardless).
    #[arg(long, env = "FLOE_FSYNC", default_value_t = true, action = clap::ArgAction::Set)]
    pub fsync: bool,
    /// Make new local metadata files durable in rounds shared by concurrent commits (one
    /// `syncfs` for all of them, twice, instead of two syncs each). It flushes everything
    /// dirty on that file system, so on a disk shared with heavy writers a commit waits
    /// for their data too.
    #[arg(long, env = "FLOE_FSYNC_BATCH", default_value_t = false, action = clap::ArgAction::Set)]
    pub fsync_batch: bool,
    /// Embedded store only: a commit does not sync its new local metadata file; the
    /// store keeps the file's text in the same transaction as the pointer, a background
    /// thread syncs the files' file systems every `--fsync-journal-interval-ms`, and a
    /// restart after a crash rewrites the files not yet synced before serving. Wins over
    /// `--fsync-batch`; `false` syncs each file on its commit's path.
    #[arg(long, env = "FLOE_FSYNC_JOURNAL", default_value_t = true, action = clap::ArgAction::Set)]
    pub fsync_journal: bool,
    /// How often the journal's files are synced (`--fsync-journal`), in milliseconds.
    #[arg(long, env = "FLOE_FSYNC_JOURNAL_INTERVAL_MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub fsync_journal_interval_ms: u64,
    /// Embedded store: under load, each group of writes stays open this many
    /// microseconds before it commits, so that more of them share its COMMIT and sync
    /// (0: none). An idle server's lone write never waits.
    #[arg(long, env = "FLOE_COMMIT_GATHER_US",
          default_value_t = crate::server::DEFAULT_COMMIT_GATHER.as_micros() as u64,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub commit_gather_us: u64,
    /// Embedded store: the WAL's frames (4 KiB pages) past which a background pass copies
    /// it into the database so that it can start over (1 to 1,000,000). Smaller: less WAL
    /// on disk and a shorter recovery after a crash, for more passes and database syncs.
    #[arg(long, env = "FLOE_WAL_CHECKPOINT_FRAMES",
          default_value_t = crate::store::sqlite::DEFAULT_WAL_CHECKPOINT_FRAMES,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub wal_checkpoint_frames: u32,
    /// Embedded store: the request threads run this many nice steps below the commit
    /// thread (0 to 19; 0: the same), so that it gets a core as soon as a write needs it.
    /// Only lowers the request threads' own priority; needs no privileges. Anything else
    /// in Floe's session or cgroup then outweighs the request threads (`runtime.rs`).
    #[arg(long, env = "FLOE_WORKER_NICE", default_value_t = 0,
          value_parser = clap::value_parser!(i32).range(0..=19))]
    pub worker_nice: i32,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "FLOE_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// MiB of table and view metadata kept in memory for loads (0: off): the embedded
    /// store then skips the database, PostgreSQL fetches only the pointer when it has not
    /// moved.
    #[arg(long, env = "FLOE_METADATA_CACHE_MIB", default_value_t = 64)]
    pub metadata_cache_mib: usize,
    /// MiB of memory (estimated from the documents and their schemas) that the parsed
    /// models a node keeps for the next commit of the same table or view may take (0: off):
    /// that commit then parses nothing.
    #[arg(long, env = "FLOE_COMMIT_CACHE_MIB", default_value_t = crate::catalog::DEFAULT_COMMIT_CACHE_MIB)]
    pub commit_cache_mib: usize,
    /// PostgreSQL URL (postgres://user:pass@host:port/db) to keep the catalog in, instead
    /// of the embedded store; several nodes can share one database.
    #[arg(long, env = "FLOE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Most database connections this node opens.
    #[arg(long, env = "FLOE_DB_POOL_SIZE", default_value_t = 10)]
    pub db_pool_size: usize,
    /// Milliseconds a request waits for a database connection before failing with 503.
    #[arg(long, env = "FLOE_DB_TIMEOUT_MS", default_value_t = 5000)]
    pub db_timeout_ms: u64,
    /// Prepare each statement once per connection (saves PostgreSQL parsing and planning
    /// per query); `false` behind PgBouncer in transaction pooling mode before 1.21,
    /// which cannot keep prepared statements.
    #[arg(long, env = "FLOE_DB_PREPARED_STATEMENTS", default_value_t = true, action = clap::ArgAction::Set)]
    pub db_prepared_statements: bool,
    /// Concurrent writes of this node share one transaction and one COMMIT (group
    /// commit), instead of queuing one by one on the change-event counter's row lock.
    #[arg(long, env = "FLOE_DB_GROUP_COMMIT", default_value_t = true, action = clap::ArgAction::Set)]
    pub db_group_commit: bool,
    /// Pooled connections that this node's single-statement reads share, pipelined
    /// (default: one per two CPU cores, at least 1; 0: a connection per read). Not shared
    /// behind a pooler in transaction mode (`--db-prepared-statements false`).
    #[arg(long, env = "FLOE_DB_READ_CONNECTIONS")]
    pub db_read_connections: Option<usize>,
    /// Seconds a client may retry a mutation with one `Idempotency-Key` (advertised in
    /// /v1/config as idempotency-key-lifetime; outcomes are kept 5 minutes longer).
    #[arg(long, env = "FLOE_IDEMPOTENCY_KEY_LIFETIME", default_value_t = 1800)]
    pub idempotency_key_lifetime: u64,
    /// How requests are authenticated: `internal` (OAuth2 client credentials for Floe's
    /// principals, at /v1/oauth/tokens), `external` (tokens of the OpenID Connect issuer
    /// `--oidc-issuer` only), `both`, or `none` (everyone may do everything).
    #[arg(long, env = "FLOE_AUTH", value_enum, default_value_t = AuthMode::Internal)]
    pub auth: AuthMode,
    /// Allow `--auth none` on an address other than loopback.
    #[arg(long, env = "FLOE_INSECURE", default_value_t = false)]
    pub insecure: bool,
    /// Seconds an access token issued by Floe is valid.
    #[arg(long, env = "FLOE_TOKEN_LIFETIME", default_value_t = 3600)]
    pub token_lifetime: u64,
    /// The external OpenID Connect issuer, exactly as its tokens' `iss` claim says it
    /// (for `--auth external` or `both`).
    #[arg(long, env = "FLOE_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// Audience the issuer's tokens must list in `aud` (recommended; unchecked if unset).
    #[arg(long, env = "FLOE_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// Where the issuer's keys are: a JWKS URL or file (default: the `jwks_uri` of
    /// `<issuer>/.well-known/openid-configuration`).
    #[arg(long, env = "FLOE_OIDC_JWKS")]
    pub oidc_jwks: Option<String>,
    /// Claim (a dotted path) naming the principal.
    #[arg(long, env = "FLOE_OIDC_PRINCIPAL_CLAIM", default_value = "sub")]
    pub oidc_principal_claim: String,
    /// Claim (a dotted path, e.g. `groups` or `realm_access.roles`) listing principal
    /// roles the token acts with, in addition to those assigned in Floe.
    #[arg(long, env = "FLOE_OIDC_ROLES_CLAIM")]
    pub oidc_roles_claim: Option<String>,
    /// Create a principal the first time a valid external token names an unknown one
    /// (default: refuse the token, as Polaris does).
    #[arg(long, env = "FLOE_OIDC_CREATE_PRINCIPALS", default_value_t = false)]
    pub oidc_create_principals: bool,
    /// The console signs users in at `--oidc-issuer` (authorization code flow with PKCE)
    /// as this public client, registered there with the redirect URI
    /// `<this server's address>/ui/` and this server's origin allowed to call the token
    /// endpoint (CORS). Its access tokens must pass the same checks as any other.
    #[arg(long, env = "FLOE_CONSOLE_OIDC_CLIENT_ID")]
    pub console_oidc_client_id: Option<String>,
    /// Scopes the console asks the issuer for (e.g. Entra ID's `api://floe/.default`
    /// added, to get tokens for Floe's audience).
    #[arg(long, env = "FLOE_CONSOLE_OIDC_SCOPE", default_value = "openid")]
    pub console_oidc_scope: String,
    /// The root principal's credentials on first start, as `client_id,client_secret`
    /// (default: generated, printed once, and saved in <data-dir>/root-credentials).
    #[arg(long, env = "FLOE_BOOTSTRAP_CREDENTIALS", hide_env_values = true)]
    pub bootstrap_credentials: Option<String>,
    /// `storageConfigInfo` (JSON) of the default catalog and of catalogs created without
    /// one, e.g. `{"storageType":"S3","endpoint":"http://127.0.0.1:8333","pathStyleAccess":true}`.
    /// Default: implied by the warehouse's scheme.
    #[arg(long, env = "FLOE_STORAGE_CONFIG")]
    pub storage_config: Option<String>,
    /// Seconds vended storage credentials live (STS DurationSeconds).
    #[arg(long, env = "FLOE_CREDENTIAL_LIFETIME", default_value_t = 3600)]
    pub credential_lifetime: u64,
    /// Write a change event for every change, in the same transaction (`false`: no
    /// events, the events endpoint stays empty and no relay runs).
    #[arg(long, env = "FLOE_EVENTS", default_value_t = true, action = clap::ArgAction::Set)]
    pub events: bool,
    /// Publish change events to a broker: `nats://host:port[?stream=S&subject=P]`,
    /// `kafka://host:port[,host:port][?topic=T]`, or an `http(s)://` webhook (signed
    /// with FLOE_EVENTS_WEBHOOK_SECRET). Every node may set it; one relays at a time.
    #[arg(long, env = "FLOE_EVENTS_SINK")]
    pub events_sink: Option<String>,
    /// Days change events are kept (once every relay confirmed them).
    #[arg(long, env = "FLOE_EVENTS_RETENTION_DAYS", default_value_t = 7.0)]
    pub events_retention_days: f64,
    /// Seconds a relay's lease lasts: after a node dies, another takes over relaying
    /// within this long.
    #[arg(long, env = "FLOE_EVENTS_RELAY_LEASE", default_value_t = 10)]
    pub events_relay_lease: u64,
    /// Days a dropped table or view stays recoverable (undrop) before it is forgotten
    /// and, if its drop asked for a purge, its files deleted; 0: drops are final at once.
    #[arg(long, env = "FLOE_DROP_RETENTION_DAYS", default_value_t = 7.0)]
    pub drop_retention_days: f64,
    /// Most files one round of a purge deletes; a larger table is purged over several
    /// rounds (the rest by the expirer), each recorded, so a purge resumes after a crash.
    #[arg(long, env = "FLOE_PURGE_BATCH_FILES", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub purge_batch_files: u32,
    /// Record Prometheus metrics (served at /metrics); `false` only to measure their
    /// cost.
    #[arg(long, env = "FLOE_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics: bool,
    /// Check every metadata document written against iceberg-rust's own serialisation,
    /// and every kept model against a parse, failing the request on a difference: for
    /// test suites (it costs CPU). `scripts/test-all.sh` turns it on for every server.
    #[arg(long, env = "FLOE_SELF_CHECK", default_value_t = false,
          action = clap::ArgAction::Set, hide = true)]
    pub self_check: bool,
    /// Log filter, e.g. `info`, `warn`, `floe=debug`.
    #[arg(long, env = "FLOE_LOG", default_value = "info")]
    pub log: String,
    /// Log line format.
    #[arg(long, env = "FLOE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the logger. Lines are written to stderr by a background thread through a
/// bounded queue, so a request never waits for the terminal or a log collector; the
/// returned guard flushes what is queued when `serve` returns. If the queue is full
/// (stderr stalled), further lines are dropped rather than slowing requests down.
fn init_logging(filter: &str, format: LogFormat) -> anyhow::Result<WorkerGuard> {
    let filter = EnvFilter::try_new(filter).context("invalid --log filter")?;
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    crate::http::access_log::set_json(matches!(format, LogFormat::Json));
    Ok(guard)
}

/// `--auth none` opens every catalog to whoever can connect: only on loopback, unless the
/// operator says `--insecure`.
fn check_auth_mode(args: &ServeArgs) -> anyhow::Result<()> {
    if args.auth == AuthMode::None && !args.bind.ip().is_loopback() && !args.insecure {
        anyhow::bail!(
            "--auth none on {} would let anyone who can reach it read and change every table; \
             bind to 127.0.0.1, use --auth internal, or add --insecure if the network is trusted",
            args.bind
        );
    }
    let external = matches!(args.auth, AuthMode::External | AuthMode::Both);
    if external && args.oidc_issuer.is_none() {
        anyhow::bail!("--auth external and --auth both need --oidc-issuer");
    }
    if !external && args.oidc_issuer.is_some() {
        anyhow::bail!("--oidc-issuer is used only with --auth external or --auth both");
    }
    if args.console_oidc_client_id.is_some() && !external {
        anyhow::bail!(
            "--console-oidc-client-id signs console users in at --oidc-issuer: it needs \
             --auth external or --auth both"
        );
    }
    if let Some(client) = &args.console_oidc_client_id {
        if client.trim().is_empty() {
            anyhow::bail!("--console-oidc-client-id must not be empty");
        }
        if args.console_oidc_scope.split_whitespace().next().is_none() {
            anyhow::bail!("--console-oidc-scope must name at least one scope");
        }
    }
    Ok(())
}

fn retention(days: f64) -> anyhow::Result<std::time::Duration> {
    if !(days.is_finite() && days > 0.0) {
        anyhow::bail!("--events-retention-days must be a positive number of days, got {days}");
    }
    Ok(std::time::Duration::from_secs_f64(days * 86_400.0))
}

fn drop_retention(days: f64) -> anyhow::Result<std::time::Duration> {
    if !(days.is_finite() && days >= 0.0) {
        anyhow::bail!("--drop-retention-days must be 0 or more days, got {days}");
    }
    Ok(std::time::Duration::from_secs_f64(days * 86_400.0))
}

fn bootstrap_credentials(raw: Option<&str>) -> anyhow::Result<Option<(String, String)>> {
    let Some(raw) = raw else { return Ok(None) };
    match raw.split_once(',') {
        Some((id, secret)) if !id.trim().is_empty() && !secret.trim().is_empty() => {
            Ok(Some((id.trim().to_string(), secret.trim().to_string())))
        }
        _ => anyhow::bail!("FLOE_BOOTSTRAP_CREDENTIALS must be client_id,client_secret"),
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let _log_guard = init_logging(&args.log, args.log_format)?;
    crate::metrics::set_enabled(args.metrics);
    crate::catalog::set_self_check(args.self_check);
    check_auth_mode(&args)?;
    let config = ServerConfig {
        data_dir: args.data_dir.clone(),
        warehouse: args.warehouse,
        default_catalog: args.default_catalog.clone(),
        fsync: args.fsync,
        fsync_batch: args.fsync_batch,
        fsync_journal: args
            .fsync_journal
            .then(|| std::time::Duration::from_millis(args.fsync_journal_interval_ms)),
        max_body_bytes: args.max_body_bytes,
        metadata_cache_bytes: args.metadata_cache_mib << 20,
        commit_gather: std::time::Duration::from_micros(args.commit_gather_us),
        wal_checkpoint_frames: args.wal_checkpoint_frames,
        postgres: args.database_url.as_ref().map(|url| PostgresSettings {
            url: url.clone(),
            pool_size: args.db_pool_size,
            timeout: std::time::Duration::from_millis(args.db_timeout_ms),
            prepared_statements: args.db_prepared_statements,
            group_commit: args.db_group_commit,
            document_cache_bytes: args.metadata_cache_mib << 20,
            read_connections: args
                .db_read_connections
                .unwrap_or_else(default_read_connections),
        }),
        idempotency_lifetime: std::time::Duration::from_secs(args.idempotency_key_lifetime),
        auth: AuthSettings {
            mode: args.auth,
            token_lifetime: std::time::Duration::from_secs(args.token_lifetime),
            oidc: args.oidc_issuer.as_ref().map(|issuer| OidcSettings {
                issuer: issuer.clone(),
                audience: args.oidc_audience.clone(),
                jwks: JwksSource::parse(args.oidc_jwks.as_deref()),
                principal_claim: args.oidc_principal_claim.clone(),
                roles_claim: args.oidc_roles_claim.clone(),
                create_principals: args.oidc_create_principals,
            }),
            console_client: args.console_oidc_client_id.as_ref().map(|client_id| {
                crate::http::console::ConsoleClient {
                    client_id: client_id.clone(),
                    scope: args.console_oidc_scope.clone(),
                }
            }),
        },
        bootstrap_credentials: bootstrap_credentials(args.bootstrap_credentials.as_deref())?,
        default_storage: args
            .storage_config
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--storage-config is not JSON: {e}"))?,
        credential_lifetime: std::time::Duration::from_secs(args.credential_lifetime),
        drop_retention: drop_retention(args.drop_retention_days)?,
        purge_batch_files: args.purge_batch_files as usize,
        commit_cache_bytes: args.commit_cache_mib << 20,
        events: EventSettings {
            enabled: args.events,
            sink: args.events_sink.clone(),
            retention: retention(args.events_retention_days)?,
            relay: RelaySettings {
                lease: std::time::Duration::from_secs(args.events_relay_lease.max(1)),
                ..RelaySettings::default()
            },
        },
    };
    let app = server::build(&config).await?;
    let listener = TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    let addr = listener.local_addr()?;
    // What a user needs to connect, printed once on start.
    eprintln!(
        "Floe is serving the Iceberg REST catalog at http://{addr}\n  \
         default catalog (warehouse): {}\n  store: {}\n  \
         PyIceberg: load_catalog(\"floe\", type=\"rest\", uri=\"http://{addr}\", warehouse=\"{}\")\n  \
         Spark: spark.sql.catalog.floe.type=rest, spark.sql.catalog.floe.uri=http://{addr}, spark.sql.catalog.floe.warehouse={}\n  \
         {}",
        args.default_catalog,
        match &args.database_url {
            Some(_) => "PostgreSQL (--database-url)".to_string(),
            None => format!("embedded, in {}", args.data_dir.display()),
        },
        args.default_catalog,
        args.default_catalog,
        match args.auth {
            AuthMode::Internal => format!(
                "Authentication: OAuth2 client credentials at http://{addr}/v1/oauth/tokens; \
                 clients add credential=\"<client_id>:<client_secret>\" (PyIceberg) or \
                 spark.sql.catalog.floe.credential=<client_id>:<client_secret> (Spark)"
            ),
            AuthMode::External => format!(
                "Authentication: bearer tokens of {} only; clients add token=\"<token>\" (PyIceberg) or spark.sql.catalog.floe.token=<token> (Spark)",
                args.oidc_issuer.as_deref().unwrap_or("?")
            ),
            AuthMode::Both => format!(
                "Authentication: bearer tokens of {}, or OAuth2 client credentials at http://{addr}/v1/oauth/tokens (credential=\"<client_id>:<client_secret>\")",
                args.oidc_issuer.as_deref().unwrap_or("?")
            ),
            AuthMode::None => "No authentication (--auth none): bind to a trusted interface only.".into(),
        },
    );
    server::run(listener, app, shutdown_signal()).await?;
    crate::http::access_log::flush();
    tracing::info!("shut down cleanly");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn check(args: &[&str]) -> anyhow::Result<()> {
        let cli = Cli::try_parse_from(["floe", "serve"].iter().chain(args)).unwrap();
        let Command::Serve(serve) = cli.command else {
            unreachable!("parsed a serve command")
        };
        check_auth_mode(&serve)
    }

    #[test]
    fn console_sign_in_needs_a_client_id_and_a_scope_only_when_it_is_on() {
        let external = ["--auth", "external", "--oidc-issuer", "https://id.example"];
        assert!(check(&external).is_ok());
        // The scope matters only to the console's sign-in: without it, an empty one is moot.
        assert!(check(&[&external[..], &["--console-oidc-scope", " "]].concat()).is_ok());
        let err = check(&[&external[..], &["--console-oidc-client-id", " "]].concat()).unwrap_err();
        assert!(err.to_string().contains("must not be empty"), "{err}");
        let with_client = [&external[..], &["--console-oidc-client-id", "console"]].concat();
        assert!(check(&with_client).is_ok());
        let err = check(&[&with_client[..], &["--console-oidc-scope", " "]].concat()).unwrap_err();
        assert!(err.to_string().contains("at least one scope"), "{err}");
        let err = check(&["--console-oidc-client-id", "console"]).unwrap_err();
        assert!(err.to_string().contains("needs --auth external"), "{err}");
    }
}
