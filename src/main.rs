//! `leasekit`: run the lease service locally, manage API keys, and (later) use it from scripts.

// Measured faster than glibc malloc for the local server (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod client;
mod client_tokens;
mod connect;
mod dynamodb_ops;
mod embedded_store;
mod engine_stats;
mod identity;
mod in_process;
mod inert;
mod key_changes;
mod keys;
mod local_aws;
mod logging;
mod payments;
mod process_group;
mod run;
mod serve;
mod text_view;
mod wal_file;
mod watchdog;

use clap::{Parser, Subcommand};
use leasekit_core::lease::Op;
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
    /// Acquire a lease, a permit (--limit) or a set (several --resource) (exit 0 granted, 1 held
    /// by another, 2 error); prints the answer.
    Acquire(client::Call),
    /// Renew a lease you hold (needs --token).
    Renew(client::Call),
    /// Release a lease you hold (needs --token).
    Release(client::Call),
    /// Show who holds a lease.
    Get(client::Call),
    /// Is a fencing token (of --holder, if given) still a live permit? Exit 0 current, 1 not.
    Check(client::Call),
    /// End a holder's permit (--holder), or every permit of the resource, with a --reason: an
    /// admin key's op, audited. Exit 0 revoked, 1 nothing to revoke.
    Revoke(client::Call),
    /// Print a resource, then again at each change of its holders, tokens or values: one JSON
    /// line each (`--changes N` to stop after N).
    Watch(client::Watch),
    /// Sessions: one keepalive for many holds; closing or losing it frees them all.
    #[command(subcommand)]
    Session(client::SessionCommand),
    /// A page of your tenant's live leases (--prefix, --cursor): advisory, about 2 s behind.
    List(client::Page),
    /// A page of the revoke audit, newest first (--resource, --cursor): an admin key's op.
    Audit(client::Page),
    /// DynamoDB (the embedded store) and the signing key's secret over HTTP on 127.0.0.1: the AWS
    /// that the Lambda functions need under `sam local start-api`.
    LocalAws(local_aws::LocalAwsArgs),
    /// List the x402 payment ledger (one JSON line per authorization: settled, settlement_failed,
    /// void, expired, or accepted while still open).
    Payments(payments::PaymentsArgs),
    /// Hold a lease while a command runs: `leasekit run --resource R -- CMD ARGS...`.
    Run(run::RunArgs),
    /// Run a command while leader of --resource: wait in its queue until elected (or --wait
    /// seconds), hold it with --value while CMD runs (as `run` does: CMD is stopped before
    /// anyone else can lead), resign when CMD exits. Exit 76 when deposed.
    #[command(after_long_help = run::TIMING)]
    Elect(run::RunArgs),
    /// `leasekit run`'s watchdog (started by `run`, not by people): see src/watchdog.rs.
    #[command(hide = true)]
    Watchdog,
}

/// How many tasks a runtime worker runs from its own queue before it looks at the shared one.
/// Tasks woken from outside the runtime land in the shared queue, and the embedded store's
/// answers are woken so, from its flusher thread: at tokio's default of 61, under load a request
/// whose write was already durable waited behind up to 61 others being parsed and signed. At 16
/// p99 at 128 clients fell by 15-21% and cycles/s rose (BENCHMARKS.md, 2026-12-07).
const SHARED_QUEUE_EVERY: u32 = 16;

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .global_queue_interval(SHARED_QUEUE_EVERY)
        .build()
}

fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // The servers log a line per request: written by a thread of their own (see logging.rs).
    let logging = logging::init(matches!(
        cli.command,
        Command::Serve(_) | Command::LocalAws(_)
    ));
    // A revoke ends whose permit --holder names, and every permit without one: an exported
    // LEASEKIT_HOLDER (who you are, for acquire and renew) must not quietly narrow it to your own
    // (found by the attack of the second session of 2026-12-05).
    if let Command::Revoke(call) = &mut cli.command {
        let revoke = matches.subcommand_matches("revoke");
        if revoke.and_then(|m| m.value_source("holder"))
            == Some(clap::parser::ValueSource::EnvVariable)
        {
            call.connection.holder = None;
        }
    }
    if let Command::Watchdog = cli.command {
        // Plain threads: no runtime to start, nothing that could stall it.
        return watchdog::main();
    }
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasekit: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await.map(|()| 0),
            Command::Keys(command) => keys::run(command).await.map(|()| 0),
            Command::Acquire(call) => client::run(Op::Acquire, call).await,
            Command::Session(command) => client::session(command).await,
            Command::Renew(call) => client::run(Op::Renew, call).await,
            Command::Release(call) => client::run(Op::Release, call).await,
            Command::Get(call) => client::run(Op::Get, call).await,
            Command::Check(call) => client::run(Op::Check, call).await,
            Command::Watch(args) => client::watch(args).await,
            Command::Revoke(call) => client::run(Op::Revoke, call).await,
            Command::List(page) => client::page(Op::List, page).await,
            Command::Audit(page) => client::page(Op::Audit, page).await,
            Command::LocalAws(args) => local_aws::run(args).await.map(|()| 0),
            Command::Payments(args) => payments::run(args).await.map(|()| 0),
            Command::Run(args) => run::run(args).await,
            Command::Elect(args) => run::elect(args).await,
            Command::Watchdog => unreachable!("handled before the runtime starts"),
        }
    });
    // The runtime's tasks end first, so that what they log on the way out is in the buffer
    // when it is written for the last time; then what is buffered goes before the command's
    // last words.
    drop(runtime);
    drop(logging);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may carry a server's words, or another holder's name.
            eprintln!("leasekit: {}", inert::inert(&format!("{e:#}")));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Any error (bad arguments are clap's 2 as well): see stderr.
const EXIT_ERROR: u8 = 2;
