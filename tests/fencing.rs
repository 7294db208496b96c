//! The Rust client's fenced writes (`leasekit_client::fencing`, docs/adr/0013) against real
//! stores: DynamoDB on the embedded store (`leasekit local-aws`, started here) and on any other
//! DynamoDB (`LEASEKIT_TEST_DYNAMODB_ENDPOINT`: moto in CI), S3 on `LEASEKIT_TEST_S3_ENDPOINT`
//! (moto in CI's moto step; without it the S3 tests say they did not run).
//!
//! For each store: A acquires (token n) and writes, pauses past its lease, B acquires (token
//! n+1) and writes, and A's late write is refused naming both tokens while the store keeps B's
//! data. And a race: two writers with alternating tokens for 10 s while a reader watches; the
//! stored fence never goes down, and the data is always the write of the token it carries.

mod support;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use leasekit_client::fencing::{self, Fence, FenceError};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::*;
use tempfile::TempDir;
use tokio::time::Instant;

/// How long the writers race.
const RACE: Duration = Duration::from_secs(10);

/// A store the fenced helpers write to: one key's data is the token that wrote it.
#[derive(Clone)]
enum Store {
    Dynamodb {
        client: aws_sdk_dynamodb::Client,
        table: String,
    },
    S3 {
        client: aws_sdk_s3::Client,
        bucket: String,
    },
}

fn credentials() -> aws_sdk_dynamodb::config::Credentials {
    aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "tests")
}

impl Store {
    async fn dynamodb(endpoint: &str) -> Self {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(credentials())
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(config);
        let table = format!("fenced-{}", unique());
        client
            .create_table()
            .table_name(&table)
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("id")
                    .key_type(KeyType::Hash)
                    .build()
                    .unwrap(),
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("id")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await
            .unwrap();
        Self::Dynamodb { client, table }
    }

    async fn s3(endpoint: &str) -> Self {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .credentials_provider(credentials())
            .force_path_style(true)
            .build();
        let client = aws_sdk_s3::Client::from_conf(config);
        let bucket = format!("fenced-{}", unique());
        client.create_bucket().bucket(&bucket).send().await.unwrap();
        Self::S3 { client, bucket }
    }

    /// The fenced write of `key`, its data the token.
    async fn write(&self, key: &str, fence: &Fence) -> Result<(), FenceError> {
        match self {
            Self::Dynamodb { client, table } => {
                let item = HashMap::from([
                    ("id".to_owned(), AttributeValue::S(key.to_owned())),
                    ("by".to_owned(), AttributeValue::N(fence.token.to_string())),
                ]);
                fencing::dynamodb_put(client, table, item, fence).await
            }
            Self::S3 { client, bucket } => {
                let body = fence.token.to_string().into_bytes();
                fencing::s3_put(client, bucket, key, body, fence).await
            }
        }
    }

    /// `key`'s stored fence and data (the token that wrote it), read in one request.
    async fn read(&self, key: &str) -> Option<(u64, u64)> {
        match self {
            Self::Dynamodb { client, table } => {
                let got = client
                    .get_item()
                    .table_name(table)
                    .key("id", AttributeValue::S(key.to_owned()))
                    .consistent_read(true)
                    .send()
                    .await
                    .unwrap();
                let item = got.item?;
                let number = |name: &str| item[name].as_n().unwrap().parse().unwrap();
                Some((number(fencing::FENCE), number("by")))
            }
            Self::S3 { client, bucket } => {
                let got = match client.get_object().bucket(bucket).key(key).send().await {
                    Ok(got) => got,
                    Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                        return None;
                    }
                    Err(e) => panic!("{e:?}"),
                };
                let fence = got.metadata().unwrap()[fencing::S3_FENCE].parse().unwrap();
                let body = got.body.collect().await.unwrap().into_bytes();
                Some((fence, std::str::from_utf8(&body).unwrap().parse().unwrap()))
            }
        }
    }
}

fn unique() -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).unwrap();
    hex::encode(bytes)
}

fn client(server: &Server) -> leasekit_client::Client {
    leasekit_client::Client::with_api_key(&server.url, ACME_KEY, "fencing-tests").unwrap()
}

/// A writes under its lease and pauses past it; B acquires the next token and writes; A's late
/// write is refused naming both tokens, and the store keeps B's data.
async fn paused_past_the_lease(server: &Server, store: &Store) {
    let client = client(server);
    let resource = format!("doc-{}", unique());
    let a = client
        .acquire(&resource, "A", Duration::from_secs(1))
        .await
        .unwrap();
    let a = Fence::new(&resource, a.fencing_token.unwrap());
    store.write("doc", &a).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1300)).await; // A is paused past its lease
    let b = client
        .guard(&resource, "B", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(b.fencing_token(), a.token + 1);
    store.write("doc", &(&b).into()).await.unwrap();
    let before = store.read("doc").await;
    assert_eq!(before, Some((a.token + 1, a.token + 1)));
    match store.write("doc", &a).await {
        Err(FenceError::Refused {
            token,
            found,
            message,
        }) => {
            assert_eq!((token, found), (a.token, Some(a.token + 1)), "{message}");
            assert!(message.contains(&format!("token {}", a.token)), "{message}");
        }
        other => panic!("A's late write: {other:?}"),
    }
    assert_eq!(store.read("doc").await, before, "nothing written");
    b.release().await.unwrap();
}

/// Two writers with alternating tokens (every other one well below the latest) for [`RACE`],
/// and a reader: the fence it reads never goes down, the data is always the write of the token
/// the fence holds, a write that lands is never below the stored fence, and every refusal names
/// a larger one. Returns (writes landed, refused).
async fn race(store: &Store) -> (u64, u64) {
    let key = format!("race-{}", unique());
    let next = Arc::new(AtomicU64::new(1));
    let (landed, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop = Instant::now() + RACE;
    let writer = |store: Store, key: String| {
        let (next, landed, refused) = (next.clone(), landed.clone(), refused.clone());
        tokio::spawn(async move {
            while Instant::now() < stop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let token = if n % 2 == 1 {
                    n
                } else {
                    n.saturating_sub(7).max(1)
                };
                match store.write(&key, &Fence::new("race", token)).await {
                    Ok(()) => {
                        let (fence, _) = store.read(&key).await.unwrap();
                        assert!(fence >= token, "token {token} landed below fence {fence}");
                        landed.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(FenceError::Refused { found, .. }) => {
                        assert!(
                            found.is_none_or(|f| f > token),
                            "{token} refused by {found:?}"
                        );
                        refused.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        })
    };
    let writers = [
        writer(store.clone(), key.clone()),
        writer(store.clone(), key.clone()),
    ];
    let reader = {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move {
            let (mut last, mut reads) = (0, 0u64);
            while Instant::now() < stop {
                if let Some((fence, by)) = store.read(&key).await {
                    assert!(fence >= last, "the fence went down: {last} then {fence}");
                    assert_eq!(by, fence, "the data is not the write of the fence's token");
                    last = fence;
                    reads += 1;
                }
            }
            reads
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    assert!(reader.await.unwrap() > 10, "the reader saw the race");
    let (landed, refused) = (
        landed.load(Ordering::SeqCst),
        refused.load(Ordering::SeqCst),
    );
    assert!(
        landed > 10 && refused > 10,
        "{landed} landed, {refused} refused"
    );
    (landed, refused)
}

/// The stores this run has: DynamoDB on the embedded store always, the others when given.
async fn stores(local: &LocalAws) -> Vec<(String, Store)> {
    let mut stores = vec![(
        "DynamoDB (local-aws)".to_owned(),
        Store::dynamodb(&local.url).await,
    )];
    if let Ok(url) = std::env::var("LEASEKIT_TEST_DYNAMODB_ENDPOINT") {
        stores.push((format!("DynamoDB ({url})"), Store::dynamodb(&url).await));
    }
    match std::env::var("LEASEKIT_TEST_S3_ENDPOINT") {
        Ok(url) => stores.push((format!("S3 ({url})"), Store::s3(&url).await)),
        Err(_) => eprintln!(
            "S3 not tested here: LEASEKIT_TEST_S3_ENDPOINT is not set (CI's moto step sets it)"
        ),
    }
    stores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_write_is_refused_and_a_race_never_moves_the_fence_down() {
    let (dir, aws_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let server = Server::start(dir.path());
    let local = local_aws(aws_dir.path());
    let stores = stores(&local).await;
    for (name, store) in &stores {
        paused_past_the_lease(&server, store).await;
        eprintln!("{name}: a late write refused");
    }
    // The races at once: one RACE for every store.
    let races = stores.iter().map(|(name, store)| {
        let (name, store) = (name.clone(), store.clone());
        tokio::spawn(async move { (name, race(&store).await) })
    });
    for race in races.collect::<Vec<_>>() {
        let (name, (landed, refused)) = race.await.unwrap();
        eprintln!("{name}: {landed} writes landed, {refused} refused, the fence never went down");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphores_permit_writes_only_while_current() {
    let (dir, aws_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let server = Server::start(dir.path());
    let local = local_aws(aws_dir.path());
    let store = Store::dynamodb(&local.url).await;
    let client = client(&server);
    let pool = format!("pool-{}", unique());
    let ttl = Duration::from_secs(30);
    let a = client
        .guard_permit(&pool, "A", ttl, Duration::ZERO, 2)
        .await
        .unwrap();
    let b = client
        .guard_permit(&pool, "B", ttl, Duration::ZERO, 2)
        .await
        .unwrap();
    assert!(a.fencing_token() < b.fencing_token());
    // Two live permits, neither stale: the smaller token writes after the larger one.
    store.write("shared", &b.fence()).await.unwrap();
    store.write("shared", &a.fence()).await.unwrap();
    let a_fence = a.fence();
    assert_eq!(store.read("shared").await.unwrap().1, a_fence.token);
    a.release().await.unwrap();
    b.release().await.unwrap();
    // Released: `check` says it is no longer current, and nothing is written.
    match store.write("shared", &a_fence).await {
        Err(FenceError::Refused { found: None, .. }) => {}
        other => panic!("a released permit's write: {other:?}"),
    }
    assert_eq!(store.read("shared").await.unwrap().1, a_fence.token);
}
