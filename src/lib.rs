//! Floe: an Apache Iceberg REST catalog server.
//!
//! # Layout
//! - `cli/`: the `floe` binary's subcommands, one file each.
//! - `server.rs`: assembles store, catalog and HTTP router; runs until shutdown.
//! - `http/`: the thin HTTP layer (parse, build the request context, call, render;
//!   authentication and idempotency keys are layers here).
//! - `catalog/`: the catalog's use cases in plain Rust, knowing nothing of HTTP; every
//!   entry point takes a `RequestContext` (authorization goes there).
//! - `store/`: persistence behind the `Store` trait, one module per backend; every
//!   change is one `WriteBatch` through one write seam (the event outbox goes there).
//! - `storage/`: metadata files behind the `FileStore` trait (local now; object stores
//!   are new backends), and location rules.
//! - `federation/`: catalogs served from a remote Iceberg REST catalog (the remote's
//!   client, and the privileges and scrubbing around each forwarded request).
//! - `model/`: names and records every layer shares; depends on nothing else.
//! - `bench/`: `floe bench`, a load generator for any Iceberg REST catalog.
//! - `json_text.rs`, `stable_hash.rs`: small pure helpers (JSON text written fast and as
//!   serde_json writes it; hashes that agree across processes).
//!
//! Dependencies run one way: http → catalog → store, storage → model.

pub mod auth;
pub mod bench;
pub mod catalog;
pub mod cli;
pub mod events;
pub mod federation;
pub mod http;
pub mod json_text;
pub mod metrics;
pub mod model;
pub mod runtime;
pub mod server;
pub mod stable_hash;
pub mod storage;
pub mod store;
