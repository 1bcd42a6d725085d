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
    /// How many nice steps below the process the runtime's threads run (`runtime.rs`):
    /// `floe serve --worker-nice` on the embedded store, else none (on PostgreSQL no
    /// thread of this process is a serial section every write waits for).
    pub fn worker_nice(&self) -> i32 {
        match &self.command {
            Command::Serve(args) if args.database_url.is_none() => args.worker_nice,
            _ => 0,
        }
    }

    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Migrate(args) => migrate::run(args).await,
        }
    }
}
