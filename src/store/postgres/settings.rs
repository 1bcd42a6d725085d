//! What a node is told about its PostgreSQL database: where it is, how many connections
//! it may hold and how it uses them (`floe serve --database-url ...`, `floe migrate`).

use std::time::Duration;

/// Connection settings of the PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresSettings {
    pub url: String,
    /// Most connections this node opens.
    pub pool_size: usize,
    /// How long a request waits for a connection, or for the database to answer a
    /// connection attempt, before it fails with 503.
    pub timeout: Duration,
    /// Prepare statements once per connection (off behind PgBouncer's transaction mode).
    pub prepared_statements: bool,
    /// Concurrent writes of this node share one transaction and COMMIT (`group.rs`).
    pub group_commit: bool,
    /// Bytes of loaded metadata documents kept in memory (`documents.rs`); 0: none.
    pub document_cache_bytes: usize,
    /// Pooled connections that single-statement reads share (`readers.rs`); 0: each
    /// read takes a connection of its own.
    pub read_connections: usize,
}

impl PostgresSettings {
    pub fn new(url: impl Into<String>) -> Self {
        PostgresSettings {
            url: url.into(),
            pool_size: 10,
            timeout: Duration::from_secs(5),
            prepared_statements: true,
            group_commit: true,
            document_cache_bytes: 64 << 20,
            read_connections: default_read_connections(),
        }
    }

    /// The shared read connections actually kept: at least one pooled connection stays
    /// for writes.
    pub(super) fn shared_readers(&self) -> usize {
        self.read_connections.min(self.pool_size.saturating_sub(1))
    }
}

/// One shared read connection per two CPU cores of this machine, at least one: a
/// backend kept busy by pipelined reads uses about a core of the database's CPU, while
/// serving a read costs Floe about as much CPU as the database spends on it (measured:
/// BENCHMARKS.md). More connections than that only spread the same reads thinner.
pub fn default_read_connections() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}
