//! Fair waiting through the lease service, over the real store (dynoxide, and moto in CI): the
//! contract's "Fair waiting" bullets with concurrent waiters, the queue as the item keeps it,
//! and requestId's rules for a wait.

mod common;

use common::test_store;
use leasekit_core::clock::now_ms;
use leasekit_core::lease::{LeaseAnswer, LeaseRequest};
use leasekit_core::provenance::Issuer;
use leasekit_core::service::lease::LeaseService;
use leasekit_core::store::LeaseStore;
use leasekit_core::tenant::Tenant;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

struct Waiting {
    service: LeaseService,
    client: aws_sdk_dynamodb::Client,
    table: String,
    tenant: Tenant,
}

async fn waiting() -> Arc<Waiting> {
    let test = test_store().await;
    let store = LeaseStore::new(
        test.client.clone(),
        &test.tables.leases,
        &test.tables.requests,
    );
    Arc::new(Waiting {
        service: LeaseService::new(store, Issuer::from_seed(&[9; 32])),
        client: test.client.clone(),
        table: test.tables.leases.clone(),
        tenant: Tenant::for_key("acme", "t1").unwrap(),
    })
}

impl Waiting {
    /// `body` at the real time (waits take real time).
    async fn call(&self, body: Value) -> LeaseAnswer {
        let request: LeaseRequest = serde_json::from_value(body).expect("valid request");
        self.service
            .execute(&self.tenant, &request, [0; 32], now_ms())
            .await
            .expect("store answers")
            .data
    }

    /// The stored item's attribute names.
    async fn attributes(&self, resource: &str) -> Vec<String> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("{}|{resource}", self.tenant)),
            )
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let mut names: Vec<String> = item.item().unwrap().keys().cloned().collect();
        names.sort();
        names
    }
}

fn acquire(resource: &str, holder: &str, wait: u32) -> Value {
    json!({"op": "acquire", "resource": resource, "holder": holder, "waitSeconds": wait, "ttlSeconds": 30})
}

fn release(resource: &str, holder: &str, token: Option<u64>) -> Value {
    json!({"op": "release", "resource": resource, "holder": holder, "token": token})
}

fn rules(a: &LeaseAnswer) -> Vec<&str> {
    a.witnesses.iter().map(|w| w.rule_id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_waiters_are_served_in_arrival_order_by_the_release_that_frees() {
    let w = waiting().await;
    let first = w.call(acquire("job", "h0", 0)).await;
    assert!(first.granted);
    let mut tasks = Vec::new();
    for (i, holder) in ["w1", "w2", "w3", "w4"].into_iter().enumerate() {
        let w2 = w.clone();
        tasks.push(tokio::spawn(async move {
            let got = w2.call(acquire("job", holder, 20)).await;
            assert!(got.granted, "{got:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            let freed = w2.call(release("job", holder, got.fencing_token)).await;
            assert!(freed.granted, "{freed:?}");
            (holder, got.fencing_token)
        }));
        // Arrival order: each place taken before the next waiter comes.
        loop {
            let seen = w.call(acquire("job", holder, 0)).await;
            if seen.queue_position == Some(i + 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // The queue is in the item, which is no longer a lease's: no one-round-trip write reaches it.
    let attributes = w.attributes("job").await;
    assert!(
        attributes.contains(&"wq".to_owned()) && !attributes.contains(&"holder".to_owned()),
        "{attributes:?}"
    );
    let newcomer = w.call(acquire("job", "newcomer", 0)).await;
    assert_eq!(
        (newcomer.granted, rules(&newcomer)),
        (false, vec!["WAITERS_AHEAD"])
    );
    assert_eq!(
        newcomer.queue_position, None,
        "a caller who does not wait takes no place"
    );
    w.call(release("job", "h0", first.fencing_token)).await;
    let mut served = Vec::new();
    for task in tasks {
        served.push(task.await.unwrap());
    }
    assert_eq!(
        served,
        [
            ("w1", Some(2)),
            ("w2", Some(3)),
            ("w3", Some(4)),
            ("w4", Some(5))
        ]
    );
    // The last waiter served, the item is a lease's again.
    let attributes = w.attributes("job").await;
    assert!(
        !attributes.contains(&"wq".to_owned()) && !attributes.contains(&"pm".to_owned()),
        "{attributes:?}"
    );
    assert!(w.call(acquire("job", "newcomer", 0)).await.granted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapse_is_handed_to_the_waiter_and_a_wait_that_ends_says_its_place() {
    let w = waiting().await;
    let held = w
        .call(json!({"op": "acquire", "resource": "lapse", "holder": "gone", "ttlSeconds": 1}))
        .await;
    let started = std::time::Instant::now();
    let got = w.call(acquire("lapse", "next", 5)).await;
    assert!(got.granted, "{got:?}");
    assert_eq!(got.fencing_token, Some(held.fencing_token.unwrap() + 1));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Behind a live lease, a 1 s wait ends with the place, not recorded.
    let ended = w
        .call(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 1, "requestId": "late-1"}))
        .await;
    assert_eq!((ended.granted, ended.queue_position), (false, Some(1)));
    let again = w
        .call(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 0, "requestId": "late-1"}))
        .await;
    assert!(!again.replayed, "a wait that ended is not kept for replays");
    assert_eq!(again.queue_position, Some(1));
    // Released: the lease is handed to the place, and the same requestId now gets and keeps it.
    w.call(release("lapse", "next", got.fencing_token)).await;
    let won = w
        .call(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 3, "requestId": "late-1"}))
        .await;
    assert_eq!((won.granted, won.replayed), (true, false));
    let replay = w
        .call(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 9, "requestId": "late-1"}))
        .await;
    assert_eq!(
        (replay.replayed, replay.fencing_token),
        (true, won.fencing_token)
    );
}
