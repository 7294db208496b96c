//! Test harness: a real DynamoDB client against a real emulator. By default the embedded dynoxide
//! on a loopback port; with `LEASEKIT_TEST_DYNAMODB_ENDPOINT` set, that endpoint (CI points it at
//! moto). Each test gets its own tables, so tests never see each other's items. `service`: the
//! lease service over such tables, the fixture of the suites that drive it.

#![allow(dead_code)]

pub mod service;

use aws_sdk_dynamodb::Client;
use leasekit_core::store::{Tables, ensure_tables};

pub const ENDPOINT_VAR: &str = "LEASEKIT_TEST_DYNAMODB_ENDPOINT";

pub struct TestStore {
    pub client: Client,
    pub tables: Tables,
}

/// A fresh set of tables on the test store.
pub async fn test_store() -> TestStore {
    let client = leasekit_core::store::local_client(&test_endpoint().await);
    let tables = fresh_tables();
    ensure_tables(&client, &tables)
        .await
        .expect("create tables");
    TestStore { client, tables }
}

/// The test store's endpoint: `LEASEKIT_TEST_DYNAMODB_ENDPOINT`, or a new embedded dynoxide.
pub async fn test_endpoint() -> String {
    match std::env::var(ENDPOINT_VAR) {
        Ok(url) if !url.is_empty() => url,
        _ => start_dynoxide().await,
    }
}

/// Table names no other test uses.
pub fn fresh_tables() -> Tables {
    let mut suffix = [0u8; 6];
    getrandom::fill(&mut suffix).expect("randomness");
    Tables::with_prefix(&format!("t{}-", hex::encode(suffix)))
}

async fn start_dynoxide() -> String {
    let database = dynoxide::Database::memory().expect("in-memory dynoxide");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(dynoxide::server::serve_on(listener, database));
    url
}
