//! `leasekit serve`: every route on 127.0.0.1, the store embedded in the process.

use crate::connect::{Store, StoreArgs};
use anyhow::{Context, Result};
use clap::Args;
use shared::http::{AppState, router};
use shared::store::KeyStore;
use std::io::Write;

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
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let store = Store::open(&args.store).await?;
    crate::keys::seed(
        &KeyStore::new(store.client.clone(), &store.tables.keys),
        &args.api_keys,
    )
    .await?;
    let issuer = crate::identity::load_or_create(&args.store.data_dir)?;
    tracing::info!(issuer = issuer.did(), "answers are signed by this key");
    let app = router(AppState::new(
        store.client.clone(),
        &store.tables,
        issuer,
        true,
    ));
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
    store.close().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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
