//! The `floe` binary: expands the config file into arguments and runs the command.

use clap::Parser;

/// mimalloc instead of the system allocator: a request allocates and frees dozens of
/// small buffers, and glibc's malloc took ~13% of loadTable's CPU at 50 connections.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Before anything uses SQLite, and before any other thread exists (SQLite takes its
    // page cache only then): see the module. If it cannot, the default cache serves.
    floe::store::sqlite::pcache::install();
    let args = match floe::cli::config_file::expand(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("floe: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    let cli = floe::cli::Cli::parse_from(args);
    // Built after parsing: `serve` on the embedded store runs its threads below the
    // commit thread, which this (main) thread starts (`floe::runtime`).
    let runtime = match floe::runtime::build(cli.worker_nice()) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("floe: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli.run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
