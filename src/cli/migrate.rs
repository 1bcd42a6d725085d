//! `floe migrate`: create or upgrade the PostgreSQL schema. `floe serve` also migrates on
//! start; running it separately lets a deployment upgrade the schema before nodes roll.

use std::time::Duration;

use clap::Args;

use crate::store::postgres::{PostgresSettings, PostgresStore};

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// PostgreSQL URL, e.g. postgres://floe:secret@127.0.0.1:5432/floe
    #[arg(long, env = "FLOE_DATABASE_URL")]
    pub database_url: String,
}

pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let settings = PostgresSettings {
        pool_size: 1,
        timeout: Duration::from_secs(30),
        ..PostgresSettings::new(args.database_url)
    };
    let applied = PostgresStore::connect(&settings)?.migrate().await?;
    eprintln!("schema is up to date ({applied} migrations applied now)");
    Ok(())
}
