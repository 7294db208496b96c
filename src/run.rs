//! `leasekit run --resource R [--ttl 30] [--wait 0] -- CMD ARGS...`: `flock`, across machines.
//!
//! Acquire the lease (waiting up to `--wait` seconds with backoff if someone else holds it), run
//! CMD with `LEASE_FENCING_TOKEN`, `LEASE_RESOURCE` and `LEASE_HOLDER` in its environment, renew
//! at a third of the TTL while it runs, release it when CMD exits, and exit with CMD's code. If the
//! lease is lost (a renewal is refused, or the service stays unreachable until the lease would
//! have lapsed), CMD gets SIGTERM, then SIGKILL after `--grace` seconds, and `run` exits 76.

use crate::client::Connection;
use anyhow::{Context, Result};
use clap::Args;
use leasekit_client::{Client, Guard};
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// The lease was not obtained within `--wait`.
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// The lease was lost while CMD ran; CMD was stopped.
pub const EXIT_LEASE_LOST: u8 = 76;

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    connection: Connection,
    /// The resource to hold while CMD runs.
    #[arg(long)]
    resource: String,
    /// Lease length in seconds; renewed every third of it.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3600))]
    ttl: u32,
    /// Seconds to wait for the lease when someone else holds it (0: give up at once).
    #[arg(long, default_value_t = 0)]
    wait: u64,
    /// Seconds between SIGTERM and SIGKILL when the lease is lost.
    #[arg(long, default_value_t = 10)]
    grace: u64,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1.., value_name = "CMD")]
    command: Vec<String>,
}

pub async fn run(args: RunArgs) -> Result<u8> {
    let client = args.connection.client()?;
    let holder = args.connection.holder();
    let ttl = Duration::from_secs(u64::from(args.ttl));
    let Some(mut guard) = acquire(&client, &args, &holder, ttl).await? else {
        return Ok(EXIT_NOT_ACQUIRED);
    };
    let mut child = tokio::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("LEASE_FENCING_TOKEN", guard.fencing_token().to_string())
        .env("LEASE_RESOURCE", &args.resource)
        .env("LEASE_HOLDER", &holder)
        .spawn()
        .with_context(|| format!("starting {}", args.command[0]))?;
    let mut terminate = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = signal(tokio::signal::unix::SignalKind::interrupt())?;
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.context("waiting for the command")?;
                if let Err(e) = guard.release().await {
                    eprintln!("leasekit run: release failed, the lease will lapse by itself: {e}");
                }
                return Ok(exit_code(status));
            }
            lost = guard.lost() => {
                eprintln!("leasekit run: lease on {} lost ({lost:?}); stopping the command", args.resource);
                stop(&mut child, Duration::from_secs(args.grace)).await;
                return Ok(EXIT_LEASE_LOST);
            }
            _ = terminate.recv() => forward(&child, libc::SIGTERM),
            _ = interrupt.recv() => forward(&child, libc::SIGINT),
        }
    }
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).context("installing a signal handler")
}

/// The guard, or `None` if someone else holds the lease past `--wait`.
async fn acquire(
    client: &Client,
    args: &RunArgs,
    holder: &str,
    ttl: Duration,
) -> Result<Option<Guard>> {
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    let mut backoff = Duration::from_millis(100);
    loop {
        match client.guard(&args.resource, holder, ttl).await {
            Ok(guard) => return Ok(Some(guard)),
            Err(leasekit_client::Error::Held { holder, .. }) => {
                let now = Instant::now();
                if now >= deadline {
                    eprintln!("leasekit run: {} is held by {holder}", args.resource);
                    return Ok(None);
                }
                sleep(backoff.min(deadline - now)).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn forward(child: &tokio::process::Child, signal: i32) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with our own child's pid and a valid signal number; no memory involved.
        unsafe { libc::kill(pid, signal) };
    }
}

/// SIGTERM, then SIGKILL if the command has not exited after `grace`.
async fn stop(child: &mut tokio::process::Child, grace: Duration) {
    forward(child, libc::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// The command's exit code, or 128 + the signal that ended it (as shells report it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}
