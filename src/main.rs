//! `leasekit`: run the lease service locally, manage API keys, and (later) use it from scripts.

mod connect;
mod identity;
mod keys;
mod serve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "leasekit",
    version,
    about = "Leases with fencing tokens: local server, API keys, client"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every route on the embedded store (or any DynamoDB), with API keys checked in-process.
    Serve(serve::ServeArgs),
    /// Create and revoke API keys.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,aws=warn,dynoxide=error".into()),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not for files and log collectors.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasekit: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Keys(command) => keys::run(command).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leasekit: {e:#}");
            ExitCode::FAILURE
        }
    }
}
