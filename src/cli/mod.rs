//! The `floe` command line: one subcommand per file.

pub mod bench;
pub mod config_file;
pub mod migrate;
pub mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "floe",
    version,
    about = "Floe: an Apache Iceberg REST catalog server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the catalog server.
    Serve(Box<serve::ServeArgs>),
    /// Load-test an Iceberg REST catalog (Floe or any other) with the Polaris benchmark's
    /// workloads, YCSB-style presets and single-endpoint tests.
    Bench(bench::BenchArgs),
    /// Create or upgrade the PostgreSQL schema (safe to run from several nodes at once).
    Migrate(migrate::MigrateArgs),
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Migrate(args) => migrate::run(args).await,
        }
    }
}
