//! Floe's integration suites, one test binary with a module per suite.
//!
//! One binary rather than one per file because every test binary is linked with the
//! release profile's thin LTO over the whole dependency tree: ~3 minutes each on a
//! 2-core machine, which a dozen binaries turned into half of CI's time. Run one suite
//! with a filter on its module: `cargo test --release --test it -- http_errors::`.
//! (`tests/sqlite_pcache.rs` stays a binary of its own: it must install SQLite's page
//! cache before anything else in its process uses SQLite.)

mod common;

mod bench_load;
mod bench_workloads;
mod http_api;
mod http_auth;
mod http_errors;
mod http_federation;
mod http_idempotency;
mod http_notifications;
mod http_oidc;
mod http_policies;
mod http_scan;
mod store_contract;
