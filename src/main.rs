use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = match floe::cli::config_file::expand(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("floe: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    match floe::cli::Cli::parse_from(args).run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
