//! `leasekit serve`: every route on 127.0.0.1, the store embedded in the process.

mod cap;
mod connections;
mod socket;
mod watch;

use crate::connect::{Store, StoreArgs};
use anyhow::{Context, Result};
use clap::Args;
use leasekit_core::clock::now_ms;
use leasekit_core::config::{ClaimPrices, FacilitatorConfig, PaymentConfig, PublicUrl};
use leasekit_core::http::{AppState, Routes, Settings, router};
use leasekit_core::service::payments::Payments;
use leasekit_core::store::KeyStore;
use leasekit_core::x402::settings::{BASE_SEPOLIA, BASE_SEPOLIA_USDC, PaymentSettings};
use std::io::Write;
use std::time::Duration;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the URL printed says which).
    #[arg(long, default_value = "127.0.0.1:3000", env = "LEASEKIT_ADDR")]
    addr: String,
    #[command(flatten)]
    store: StoreArgs,
    /// Register an API key at start, for development and tests (repeatable).
    #[arg(long = "api-key", value_name = "ACCOUNT:KEY")]
    api_keys: Vec<String>,
    /// Register an API key with the admin role (revoke, audit) for ACCOUNT, e.g.
    /// `--admin-key ops:my-admin-key-123456` (repeatable).
    #[arg(long = "admin-key", value_name = "ACCOUNT:KEY")]
    admin_keys: Vec<String>,
    /// The address that receives x402 payments (Base Sepolia USDC, local facilitator: no chain).
    #[arg(long, default_value = LOCAL_PAY_TO, env = "LEASEKIT_PAY_TO")]
    pay_to: String,
    /// An x402 facilitator to /verify and /settle with, instead of the built-in local one.
    #[arg(long, env = "LEASEKIT_FACILITATOR_URL")]
    facilitator_url: Option<String>,
    /// Authorization header value sent to --facilitator-url.
    #[arg(long, env = "LEASEKIT_FACILITATOR_AUTHORIZATION")]
    facilitator_authorization: Option<String>,
    /// Free claims allowed per wallet or account in any rolling hour (the hour before each claim).
    #[arg(long, default_value_t = 60, env = "LEASEKIT_FREE_CLAIMS_PER_HOUR",
          value_parser = clap::value_parser!(u32).range(0..=i64::from(leasekit_core::claims::MAX_FREE_CLAIMS_PER_HOUR)))]
    free_claims_per_hour: u32,
    /// Seconds between sweeps of the payment ledger: payments left open by a crash, a timeout or
    /// a facilitator that did not answer are settled if their work committed, voided if not.
    /// The first sweep runs at start.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    settle_sweep_seconds: u64,
    /// How old an open payment must be before a sweep takes it up (seconds). It must exceed the
    /// longest a paid call can work and settle (20 s + the facilitator's timeout), or a sweep may
    /// race a call still in progress; the default leaves room.
    #[arg(long, default_value_t = 45, value_parser = clap::value_parser!(u64).range(1..=86400))]
    settle_grace_seconds: u64,
    /// The URL callers reach this server at (http or https, optionally a path prefix; behind a
    /// proxy, the proxy's URL). Sign-in-with-x proofs must name it and every advertised URL
    /// starts with it; the request's Host and X-Forwarded-Proto are never used. Default: the URL
    /// served, http://ADDR.
    #[arg(long, env = "LEASEKIT_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,
    /// Seconds a client has to send a request's headers, from connecting or from its first byte
    /// after an answer; then the connection is closed.
    #[arg(long, default_value = "5", env = "LEASEKIT_HEADER_TIMEOUT", value_name = "SECONDS", value_parser = seconds)]
    header_timeout: Duration,
    /// Seconds a request body has to arrive in full once the headers are in; then 408.
    #[arg(long, default_value = "10", env = "LEASEKIT_BODY_TIMEOUT", value_name = "SECONDS", value_parser = seconds)]
    body_timeout: Duration,
    /// Seconds a keep-alive connection may wait between requests, and that a connection may go
    /// without a byte moving either way; then it is closed.
    #[arg(long, default_value = "30", env = "LEASEKIT_IDLE_TIMEOUT", value_name = "SECONDS", value_parser = seconds)]
    idle_timeout: Duration,
    /// Open connections at most. At the cap, the account with the most connections open (callers
    /// without a key count as one account) gives one up for a new one: one without a request in
    /// flight, else its slowest request body, else one whose call waits (answered at once, then
    /// closed), else one whose call is being carried out (closed once answered): the new one
    /// waits for at most that call. Default: 4096, or what the open-file limit serves if lower
    /// (each connection may take two descriptors, and 64 are kept for the rest).
    #[arg(long, env = "LEASEKIT_MAX_CONNECTIONS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Waiting calls (acquires with waitSeconds) one account or paying wallet may have in
    /// progress at once, and as many watches apart from them (watchers do not use up the waits
    /// of campaigns); more are answered 429 RATE_LIMITED with Retry-After, nothing done.
    /// Default: a quarter of --max-connections (at least 1).
    #[arg(long, env = "LEASEKIT_MAX_WAITS_PER_ACCOUNT", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_waits_per_account: Option<u32>,
}

/// A timeout flag: decimal seconds, more than 0 and at most an hour.
fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 3600.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{text:?} is not a number of seconds in (0, 3600]")),
    }
}

/// 4096 connections, or half the process's open-file limit (the store, logs and the listener
/// need descriptors too) if that is lower.
fn default_max_connections() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
    match known {
        true => connections_within(limit.rlim_cur),
        false => 4096,
    }
}

/// Descriptors kept for everything but callers' connections: the listener, the store's files,
/// logs, the facilitator's and the store's own connections, a connection being accepted.
const RESERVED_FDS: u64 = 64;

/// Descriptors one caller's connection may hold: its socket, and the copy a waiting call (a
/// waiting acquire, a watch, a stream) peeks at for the caller's hang-up (src/serve/watch.rs).
const FDS_PER_CONNECTION: u64 = 2;

/// The most connections that `nofile` descriptors serve when every one of them waits, with
/// [`RESERVED_FDS`] to spare: at the cap there is always a descriptor to accept the next caller
/// with, so the cap can make room for it. (Half the limit, without the copies or the reserve,
/// let four accounts' parked watches take every descriptor: accept failed, and nobody got in:
/// the attack of 2026-12-06.)
fn connections_within(nofile: u64) -> usize {
    let budget = nofile.saturating_sub(RESERVED_FDS) / FDS_PER_CONNECTION;
    usize::try_from(budget).unwrap_or(usize::MAX).clamp(1, 4096)
}

/// Connections waiting to be accepted, at most (the kernel may allow fewer: somaxconn). At the
/// connection cap, callers queue here in the order they came while room is made; with the usual
/// 128, a flood filled the queue and a caller's connect was dropped and retried by its kernel
/// after 1, 3, 7 s (the attack of 2026-12-05, round 2).
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` (its first address) with [`LISTEN_BACKLOG`].
async fn bind(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let addr = tokio::net::lookup_host(addr).await?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        )
    })?;
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std's bind does: a restarted server may take its port while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// A receiving address for local runs: nobody's wallet, and no money moves locally anyway.
const LOCAL_PAY_TO: &str = "0x000000000000000000000000000000000000dEaD";

pub async fn run(args: ServeArgs) -> Result<()> {
    let store = Store::open(&args.store).await?;
    let keys = KeyStore::new(store.client.clone(), &store.tables.keys);
    crate::keys::seed(&keys, &args.api_keys, false).await?;
    crate::keys::seed(&keys, &args.admin_keys, true).await?;
    if args.store.dynamodb_endpoint.is_none() {
        crate::key_changes::ensure(&args.store.data_dir)
            .context("creating the data dir's keys.generation file")?;
    }
    let issuer = crate::identity::load_or_create(&args.store.data_dir)?;
    tracing::info!(issuer = issuer.did(), "answers are signed by this key");
    let payments = payments(&store, &args)?;
    let max_connections = args
        .max_connections
        .map_or_else(default_max_connections, |n| n as usize);
    let waits_per_payer = args
        .max_waits_per_account
        .map_or(max_connections / 4, |n| n as usize);
    let sweeper = tokio::spawn(sweep_forever(
        payments.clone(),
        Duration::from_secs(args.settle_sweep_seconds),
    ));
    let listener = bind(&args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let served = format!("http://{}", listener.local_addr()?);
    let public = args.public_url.as_deref().unwrap_or(&served);
    let state = AppState::new(Settings {
        dynamodb: store.client.clone(),
        tables: store.tables.clone(),
        issuer: Some(issuer),
        payments: Some(payments),
        free_claims_per_hour: args.free_claims_per_hour,
        public: PublicUrl::parse(public).map_err(|e| anyhow::anyhow!("--public-url {e}"))?,
        on_lambda: false,
        // With the embedded store, `leasekit keys` says when the keys change; on a DynamoDB
        // endpoint nothing does, so every request reads them.
        key_changes: args.store.dynamodb_endpoint.is_none().then(|| {
            std::sync::Arc::new(crate::key_changes::KeysFile::new(&args.store.data_dir))
                as std::sync::Arc<dyn leasekit_core::auth::KeyChanges>
        }),
        waits_per_payer: Some(
            std::num::NonZeroUsize::new(waits_per_payer).unwrap_or(std::num::NonZeroUsize::MIN),
        ),
    });
    let app = router(state, Routes::All);
    let limits = connections::Limits {
        header: args.header_timeout,
        body: args.body_timeout,
        idle: args.idle_timeout,
        max_connections,
    };
    tracing::info!(?limits, waits_per_payer, public = public, "serving");
    // Before the URL is out: whoever reads it may stop the server at once.
    let shutdown = shutdown_signal();
    // The first line on stdout is the URL: scripts and tests read it.
    println!("{served}");
    std::io::stdout().flush()?;
    connections::serve(listener, app, limits, shutdown).await;
    sweeper.abort();
    drop(store);
    tracing::info!("stopped");
    Ok(())
}

/// x402 for local runs (README, "Paying per call"): Base Sepolia USDC (EIP-712 domain "USDC", "2"),
/// 0.005 USDC a lease call, the built-in local facilitator unless --facilitator-url is given.
fn payments(store: &Store, args: &ServeArgs) -> Result<Payments> {
    let settings = PaymentSettings::new(BASE_SEPOLIA, BASE_SEPOLIA_USDC, "USDC", "2", &args.pay_to)
        .with_context(|| format!("--pay-to {}", args.pay_to))?;
    let facilitator = match &args.facilitator_url {
        Some(url) => FacilitatorConfig::Remote {
            url: url.clone(),
            timeout: std::time::Duration::from_secs(5),
            authorization: args.facilitator_authorization.clone(),
        },
        None => FacilitatorConfig::Local,
    };
    let config = PaymentConfig {
        settings,
        lease_price: 5_000,
        claim_prices: ClaimPrices::default(),
        facilitator,
    };
    // The one grace: the sweeper's, and the one a resend's answer waits for.
    Ok(
        Payments::open(&config, store.client.clone(), &store.tables)?
            .with_sweep_grace(Duration::from_secs(args.settle_grace_seconds)),
    )
}

/// Sweep the payment ledger now and every `every`, taking up what is older than the payments'
/// sweep grace.
async fn sweep_forever(payments: Payments, every: Duration) {
    loop {
        if let Err(e) = payments.sweep_due(now_ms(), 100).await {
            tracing::error!(error = %e, "payment sweep failed; trying again later");
        }
        tokio::time::sleep(every).await;
    }
}

/// Ctrl-C or SIGTERM. The handlers are installed now, not when the future is first polled: a
/// server prints its URL before its loop first polls, and a SIGTERM sent in between (a test that
/// stops its server at once) found no handler and killed the process outright.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        let wait = |registered: std::io::Result<tokio::signal::unix::Signal>| async move {
            match registered {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {},
            () = wait(terminate) => {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection waiting (two descriptors each) still leaves the reserve free.
    #[test]
    fn the_connection_cap_fits_the_open_file_limit_with_every_connection_waiting() {
        for nofile in [64, 100, 256, 1024, 8192, 20_000, 1 << 20] {
            let cap = connections_within(nofile) as u64;
            assert!(cap >= 1);
            if nofile > RESERVED_FDS + 2 * 4096 {
                assert_eq!(cap, 4096);
            } else if nofile > RESERVED_FDS {
                assert!(
                    cap * FDS_PER_CONNECTION + RESERVED_FDS <= nofile,
                    "{nofile}: {cap}"
                );
            }
        }
        assert_eq!(connections_within(256), 96);
        assert_eq!(connections_within(1024), 480);
    }
}
