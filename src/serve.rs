//! `leasekit serve`: every route on 127.0.0.1, the store embedded in the process.

use crate::connect::{Store, StoreArgs};
use anyhow::{Context, Result};
use clap::Args;
use shared::clock::now_ms;
use shared::config::{ClaimPrices, FacilitatorConfig, PaymentConfig};
use shared::http::{AppState, router};
use shared::store::{KeyStore, PaymentLedger};
use shared::x402::payments::Payments;
use shared::x402::settings::{BASE_SEPOLIA, BASE_SEPOLIA_USDC, PaymentSettings};
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
    /// The address that receives x402 payments (Base Sepolia USDC, local facilitator: no chain).
    #[arg(long, default_value = LOCAL_PAY_TO, env = "LEASEKIT_PAY_TO")]
    pay_to: String,
    /// An x402 facilitator to /verify and /settle with, instead of the built-in local one.
    #[arg(long, env = "LEASEKIT_FACILITATOR_URL")]
    facilitator_url: Option<String>,
    /// Authorization header value sent to --facilitator-url.
    #[arg(long, env = "LEASEKIT_FACILITATOR_AUTHORIZATION")]
    facilitator_authorization: Option<String>,
    /// Free claims allowed per wallet or account per clock hour.
    #[arg(long, default_value_t = 60, env = "LEASEKIT_FREE_CLAIMS_PER_HOUR")]
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
}

/// A receiving address for local runs: nobody's wallet, and no money moves locally anyway.
const LOCAL_PAY_TO: &str = "0x000000000000000000000000000000000000dEaD";

pub async fn run(args: ServeArgs) -> Result<()> {
    let store = Store::open(&args.store).await?;
    let keys = KeyStore::new(store.client.clone(), &store.tables.keys);
    crate::keys::seed(&keys, &args.api_keys).await?;
    let issuer = crate::identity::load_or_create(&args.store.data_dir)?;
    tracing::info!(issuer = issuer.did(), "answers are signed by this key");
    let payments = payments(&store, &args)?;
    let sweeper = tokio::spawn(sweep_forever(
        payments.clone(),
        Duration::from_secs(args.settle_sweep_seconds),
        Duration::from_secs(args.settle_grace_seconds),
    ));
    let mut state = AppState::new(
        store.client.clone(),
        &store.tables,
        issuer,
        false,
        Some(payments),
    );
    state.free_claims_per_hour = args.free_claims_per_hour;
    let app = router(state);
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    // The first line on stdout is the URL: scripts and tests read it.
    println!("http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving")?;
    sweeper.abort();
    drop(store);
    tracing::info!("stopped");
    Ok(())
}

/// x402 as the contract sets it for local runs: Base Sepolia USDC (EIP-712 domain "USDC", "2"),
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
    let ledger = PaymentLedger::new(store.client.clone(), &store.tables);
    let payments = Payments::new(&config, ledger)?;
    if payments.is_local() {
        tracing::info!(
            pay_to = args.pay_to,
            "x402 on the LOCAL facilitator: checked and recorded, never on a chain"
        );
    }
    Ok(payments)
}

/// Sweep the payment ledger now and every `every`, taking up what is older than `grace`.
async fn sweep_forever(payments: Payments, every: Duration, grace: Duration) {
    let grace = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    loop {
        let now = now_ms();
        if let Err(e) = payments.sweep(now - grace, now, 100).await {
            tracing::error!(error = %e, "payment sweep failed; trying again later");
        }
        tokio::time::sleep(every).await;
    }
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
