//! Where the store is: the embedded dynoxide emulator on a SQLite file in the data dir (default),
//! or any DynamoDB endpoint. Either way the service talks to it with the real SDK client.

use crate::embedded_store::Engine;
use anyhow::{Context, Result};
use aws_sdk_dynamodb::Client;
use clap::Args;
use leasekit_core::store::{Tables, ensure_tables};
use std::path::PathBuf;

#[derive(Args, Clone)]
pub struct StoreArgs {
    /// Directory for the embedded store's SQLite file (kept across restarts).
    #[arg(long, default_value = ".leasekit", env = "LEASEKIT_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Use this DynamoDB endpoint instead of the embedded store (AWS credentials and region from
    /// the usual environment; region defaults to us-east-1).
    #[arg(long, env = "LEASEKIT_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
    /// Prefix of the table names: <prefix>leases, <prefix>requests, <prefix>keys.
    #[arg(long, default_value = "leasekit-", env = "LEASEKIT_TABLE_PREFIX")]
    pub table_prefix: String,
}

/// A DynamoDB client. With the embedded store, the client owns the database: dropping the last
/// clone closes it, after the requests running on it have finished.
pub struct Store {
    pub client: Client,
    pub tables: Tables,
}

/// The embedded store's file inside the data dir.
const DATABASE_FILE: &str = "leasekit.sqlite3";

/// Which store `args` name, for a person: the embedded store's file (absolute), or the endpoint
/// and table prefix; and whether opening it will create it (an embedded store not there yet).
pub fn location(args: &StoreArgs) -> (String, bool) {
    match &args.dynamodb_endpoint {
        Some(endpoint) => (
            format!("DynamoDB at {endpoint}, tables {}*", args.table_prefix),
            false,
        ),
        None => {
            let file = args.data_dir.join(DATABASE_FILE);
            let shown = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
            (
                format!("the embedded store {}", shown.display()),
                !file.exists(),
            )
        }
    }
}

impl Store {
    /// Connect as `args` say, and create any missing table.
    pub async fn open(args: &StoreArgs) -> Result<Self> {
        let tables = Tables::with_prefix(&args.table_prefix);
        let client = match &args.dynamodb_endpoint {
            Some(endpoint) => remote_client(endpoint).await,
            None => crate::in_process::client(open_engine(&args.data_dir)?),
        };
        ensure_tables(&client, &tables)
            .await
            .context("creating the tables")?;
        Ok(Self { client, tables })
    }
}

/// The embedded store's engine, on its database in `data_dir`.
pub fn open_engine(data_dir: &std::path::Path) -> Result<Engine> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating the data dir {}", data_dir.display()))?;
    let path = data_dir.join(DATABASE_FILE);
    Engine::open(&path).with_context(|| format!("opening {}", path.display()))
}

async fn remote_client(endpoint: &str) -> Client {
    // The endpoint is given, so the region only names the signing scope: from the environment or
    // the profile, else us-east-1. Never the instance metadata service (the default chain's last
    // resort), which off EC2 is a request to 169.254.169.254 that can only time out.
    let region = aws_config::meta::region::RegionProviderChain::first_try(
        aws_config::environment::region::EnvironmentVariableRegionProvider::new(),
    )
    .or_else(aws_config::profile::ProfileFileRegionProvider::new())
    .or_else("us-east-1");
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(region)
        .endpoint_url(endpoint);
    // A loopback endpoint (moto, `leasekit local-aws`, DynamoDB Local) checks no credentials; without
    // any in the environment, the default chain would end at the metadata service too.
    if is_loopback(endpoint) && std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "local",
            "local",
            None,
            None,
            "leasekit-loopback",
        ));
    }
    let config = loader.load().await;
    Client::from_conf(
        leasekit_core::store::client::configure(aws_sdk_dynamodb::config::Builder::from(&config))
            .build(),
    )
}

/// Whether `endpoint` is an http(s) URL on a loopback host.
fn is_loopback(endpoint: &str) -> bool {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .unwrap_or("");
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_endpoints_are_recognised() {
        for yes in [
            "http://127.0.0.1:8000",
            "http://localhost:1/x",
            "http://[::1]:9",
            "http://127.9.9.9",
        ] {
            assert!(super::is_loopback(yes), "{yes}");
        }
        for no in [
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://10.0.0.1:8000",
            "127.0.0.1:8000",
            "http://127.0.0.1.evil.com",
        ] {
            assert!(!super::is_loopback(no), "{no}");
        }
    }
}
