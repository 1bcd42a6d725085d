use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match floe::cli::Cli::parse().run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
