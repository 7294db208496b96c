//! Where the store is: the embedded dynoxide emulator on a SQLite file in the data dir (default),
//! or any DynamoDB endpoint. Either way the service talks to it with the real SDK client.

use anyhow::{Context, Result};
use aws_sdk_dynamodb::Client;
use clap::Args;
use shared::store::{Tables, ensure_tables};
use std::path::PathBuf;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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

/// A DynamoDB client, and the embedded emulator behind it if there is one.
pub struct Store {
    pub client: Client,
    pub tables: Tables,
    embedded: Option<Embedded>,
}

struct Embedded {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), String>>,
}

/// The embedded store's file inside the data dir.
const DATABASE_FILE: &str = "leasekit.sqlite3";

impl Store {
    /// Connect as `args` say, and create any missing table.
    pub async fn open(args: &StoreArgs) -> Result<Self> {
        let tables = Tables::with_prefix(&args.table_prefix);
        let (client, embedded) = match &args.dynamodb_endpoint {
            Some(endpoint) => (remote_client(endpoint).await, None),
            None => {
                let (url, embedded) = start_embedded(args).await?;
                (shared::store::local_client(&url), Some(embedded))
            }
        };
        ensure_tables(&client, &tables)
            .await
            .context("creating the tables")?;
        Ok(Self {
            client,
            tables,
            embedded,
        })
    }

    /// Stop the embedded emulator (if any) after its in-flight requests finish.
    pub async fn close(self) -> Result<()> {
        if let Some(embedded) = self.embedded {
            let _ = embedded.stop.send(());
            embedded
                .task
                .await
                .context("embedded store task")?
                .map_err(anyhow::Error::msg)?;
        }
        Ok(())
    }
}

async fn start_embedded(args: &StoreArgs) -> Result<(String, Embedded)> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating the data dir {}", args.data_dir.display()))?;
    let path = args.data_dir.join(DATABASE_FILE);
    let path_text = path.to_str().context("the data dir path is not UTF-8")?;
    let database = dynoxide::Database::new(path_text)
        .with_context(|| format!("opening {}", path.display()))?;
    // The emulator listens on a loopback port of its own, reachable only from this machine.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the embedded store")?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(dynoxide::server::serve_with_shutdown(
        listener,
        database,
        async {
            let _ = stopped.await;
        },
    ));
    Ok((url, Embedded { stop, task }))
}

async fn remote_client(endpoint: &str) -> Client {
    let region =
        aws_config::meta::region::RegionProviderChain::default_provider().or_else("us-east-1");
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(region)
        .endpoint_url(endpoint)
        .load()
        .await;
    Client::from_conf(
        shared::store::client::configure(aws_sdk_dynamodb::config::Builder::from(&config)).build(),
    )
}
