//! `leasekit local-aws`: the AWS a Lambda function of this service needs, on 127.0.0.1, for
//! running the deployed shape locally (`sam local start-api`): DynamoDB (the embedded store in
//! the data dir, the same engine `leasekit serve` uses) and Secrets Manager's GetSecretValue,
//! which answers every secret id with the data dir's signing key; and, at /verify and /settle, an
//! x402 facilitator that, like `leasekit serve`'s built-in one, moves no money (its transactions
//! are `local-settlement:...`): the functions do every local check themselves. The functions reach it through
//! `AWS_ENDPOINT_URL`, with their deployed code unchanged: nothing in them has a development
//! mode to turn on by accident. Loopback only; it checks no signature and is no AWS stand-in
//! for anything else.

use crate::embedded_store::Engine;
use crate::in_process::{CONTENT_TYPE, TARGET_PREFIX};
use anyhow::{Context, Result, bail};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clap::Args;
use serde_json::json;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args)]
pub struct LocalAwsArgs {
    /// Address to listen on: loopback only (port 0 picks a free port; the URL printed says which).
    #[arg(long, default_value = "127.0.0.1:8000")]
    addr: SocketAddr,
    /// Directory of the embedded store and the signing key (as for `leasekit serve`).
    #[arg(long, default_value = ".leasekit-lambda", env = "LEASEKIT_DATA_DIR")]
    data_dir: PathBuf,
    /// Prefix of the table names, created here if missing.
    #[arg(long, default_value = "leasekit-")]
    table_prefix: String,
}

const SECRETS_TARGET: &str = "secretsmanager.GetSecretValue";

pub async fn run(args: LocalAwsArgs) -> Result<()> {
    if !args.addr.ip().is_loopback() {
        bail!("--addr must be a loopback address: this stand-in checks no credentials");
    }
    let store = crate::connect::Store::open(&crate::connect::StoreArgs {
        data_dir: args.data_dir.clone(),
        dynamodb_endpoint: None,
        table_prefix: args.table_prefix.clone(),
    })
    .await?;
    drop(store);
    let engine = crate::connect::open_engine(&args.data_dir)?;
    let seed = crate::identity::seed_hex(&args.data_dir)?;
    let app = axum::Router::new()
        .route("/verify", axum::routing::post(verify))
        .route("/settle", axum::routing::post(settle))
        .fallback(move |headers: HeaderMap, body: Bytes| {
            let (engine, seed) = (engine.clone(), seed.clone());
            async move { answer(&engine, &seed, &headers, body).await }
        });
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    // Handlers first: whoever reads the URL may stop it at once (see `shutdown_signal`).
    let shutdown = crate::serve::shutdown_signal();
    println!("http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving")
}

async fn answer(engine: &Engine, seed: &str, headers: &HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if target == SECRETS_TARGET {
        let id = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["SecretId"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let secret = json!({
            "ARN": format!("arn:aws:secretsmanager:us-east-1:000000000000:secret:{id}"),
            "Name": id,
            "VersionId": "local",
            "SecretString": seed,
            "VersionStages": ["AWSCURRENT"],
        });
        let content_type = [(header::CONTENT_TYPE, "application/x-amz-json-1.1")];
        return (StatusCode::OK, content_type, secret.to_string()).into_response();
    }
    let Some(operation) = target.strip_prefix(TARGET_PREFIX).map(str::to_owned) else {
        let unknown = r#"{"__type":"UnknownOperationException"}"#;
        return (StatusCode::BAD_REQUEST, unknown).into_response();
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    let (status, json) = engine.call(operation, body).await;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, CONTENT_TYPE)], json).into_response()
}

/// The payer of a facilitator request, lowercased as the built-in local facilitator answers it.
fn payer(body: &serde_json::Value) -> serde_json::Value {
    body["paymentPayload"]["payload"]["authorization"]["from"]
        .as_str()
        .map_or(serde_json::Value::Null, |a| a.to_lowercase().into())
}

async fn verify(axum::Json(body): axum::Json<serde_json::Value>) -> axum::Json<serde_json::Value> {
    axum::Json(json!({"isValid": true, "payer": payer(&body)}))
}

async fn settle(axum::Json(body): axum::Json<serde_json::Value>) -> Response {
    let mut id = [0u8; 16];
    if getrandom::fill(&mut id).is_err() {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no randomness").into_response();
    }
    axum::Json(json!({
        "success": true,
        "payer": payer(&body),
        "transaction": format!("{}{}", leasekit_core::x402::facilitator::LOCAL_TRANSACTION_PREFIX, hex::encode(id)),
        "network": body["paymentRequirements"]["network"],
        "amount": body["paymentRequirements"]["amount"],
    }))
    .into_response()
}
