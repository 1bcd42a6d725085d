//! `floe bench`: a load generator for any Iceberg REST catalog.
//!
//! It runs the Apache Polaris benchmark's workloads, YCSB-style presets and vegeta-style
//! single-endpoint tests under a closed or an open load model, and reports per request
//! the Polaris report's columns from HDR histograms, as a table, CSV, JSON and a
//! self-contained HTML page.
//!
//! # Layout
//! - `client`: HTTP/1.1 keep-alive connections, one per virtual user; `wire`: the
//!   protocol, read and written in place.
//! - `auth`: none, a bearer token, or OAuth2 client credentials refreshed before expiry.
//! - `target`: the server's REST and management paths, the warehouse's prefix.
//! - `op`: one operation (a chain of requests), its retries and checks.
//! - `load`: the closed and open load models; `live`: the line shown while running.
//! - `stats`: histograms per request and per second; `report`, `html`: the outputs.
//! - `polaris/`: the Polaris suite's tree dataset and workloads.
//! - `ycsb`: YCSB-style presets at growing scales; `endpoints`: single-endpoint tests;
//!   `fixtures`: their flat datasets.
//! - `ceiling`: the tool's own ceiling against a static endpoint, next to wrk's.

pub mod auth;
mod body;
pub mod ceiling;
pub mod client;
pub mod endpoints;
pub mod events;
pub mod fixtures;
pub mod html;
pub mod live;
pub mod load;
pub mod op;
pub mod polaris;
pub mod report;
pub mod stats;
pub mod target;
pub mod wire;
pub mod ycsb;
