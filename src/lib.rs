//! Floe: an Apache Iceberg REST catalog server.
//!
//! # Layout
//! - `cli/`: the `floe` binary's subcommands, one file each.
//! - `server.rs`: assembles store, catalog and HTTP router; runs until shutdown.
//! - `http/`: the thin HTTP layer (parse, authorize, call, map errors).
//! - `catalog/`: the catalog's use cases in plain Rust, knowing nothing of HTTP.
//! - `store/`: persistence behind the `Store` trait; one module per backend.
//! - `storage.rs`: metadata files on the file system, and location rules.
//! - `bench/`: `floe bench`, a load generator for any Iceberg REST catalog.

pub mod bench;
pub mod catalog;
pub mod cli;
pub mod http;
pub mod server;
pub mod stable_hash;
pub mod storage;
pub mod store;
