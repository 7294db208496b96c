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
        self.call_at(body, now_ms()).await
    }

    /// `body` at server time `now`.
    async fn call_at(&self, body: Value, now: i64) -> LeaseAnswer {
        let request: LeaseRequest = serde_json::from_value(body).expect("valid request");
        self.service
            .execute(&self.tenant, &request, [0; 32], now)
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

/// A permit handed to a waiter between its calls answers that waiter's requestId, once: when the
/// permit ends before the waiter calls again (released under another requestId, revoked, or
/// lapsed with the place), the retry of the same requestId is the grant it was handed, replayed,
/// not a second permit (found by the attack of 2026-12-03, round 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_handed_between_calls_answers_the_waiters_request_id_once() {
    let w = waiting().await;
    for end in ["released", "revoked", "lapsed"] {
        let resource = format!("handed-{end}");
        let owner = w
            .call(json!({"op": "acquire", "resource": resource, "holder": "owner"}))
            .await;
        let mut asked = acquire(&resource, "late", 1);
        asked["requestId"] = json!(format!("late-{end}"));
        let queued = w.call(asked.clone()).await;
        assert_eq!((queued.granted, queued.queue_position), (false, Some(1)));
        // Between the waiter's calls, the owner's release hands the permit to its place.
        w.call(release(&resource, "owner", owner.fencing_token))
            .await;
        let handed = w.call(json!({"op": "get", "resource": resource})).await;
        assert_eq!(handed.holder.as_deref(), Some("late"), "{end}: {handed:?}");
        let token = handed.fencing_token;
        let mut later = now_ms();
        match end {
            "released" => {
                let freed = w.call(release(&resource, "late", token)).await;
                assert!(freed.granted, "{freed:?}");
            }
            "revoked" => {
                let revoked = w
                    .call(json!({"op": "revoke", "resource": resource, "holder": "late", "reason": "test"}))
                    .await;
                assert!(revoked.granted, "{revoked:?}");
            }
            _ => later += 40_000,
        }
        for _ in 0..2 {
            let mut retry = asked.clone();
            retry["waitSeconds"] = json!(0);
            let again = w.call_at(retry, later).await;
            assert_eq!(
                (again.granted, again.fencing_token, again.replayed),
                (true, token, true),
                "{end}: the retry is the grant it was handed, not another: {again:?}"
            );
        }
        let after = w
            .call_at(json!({"op": "get", "resource": resource}), later)
            .await;
        assert_eq!(after.holder, None, "{end}: no second permit: {after:?}");
        let next = w
            .call_at(
                json!({"op": "acquire", "resource": resource, "holder": "next"}),
                later,
            )
            .await;
        assert_eq!(next.fencing_token, token.map(|t| t + 1), "{end}: {next:?}");
    }
}

/// A waiter that calls under several requestIds (found by the attack of 2026-12-03, round 3):
/// the place answers the last call with a requestId, whatever order the retries come in, and a
/// call without one leaves it to the call before. A retry planned on this process's view, which
/// cannot show a hand-off that ended since, is decided on the store's state instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_calling_under_several_request_ids_is_answered_its_hand_off_once() {
    let w = waiting().await;
    for (case, second, retries) in [
        ("w1-first", Some("b"), ["a", "b"]),
        ("w2-first", Some("b"), ["b", "a"]),
        ("no-id", None, ["a", "a"]),
    ] {
        let resource = format!("several-{case}");
        let owner = w
            .call(json!({"op": "acquire", "resource": resource, "holder": "owner"}))
            .await;
        let call = |id: Option<&str>| {
            let mut body = acquire(&resource, "w", 1);
            if let Some(id) = id {
                body["requestId"] = json!(format!("{case}-{id}"));
            }
            body
        };
        assert_eq!(w.call(call(Some("a"))).await.queue_position, Some(1));
        assert_eq!(w.call(call(second)).await.queue_position, Some(1));
        w.call(release(&resource, "owner", owner.fencing_token))
            .await;
        let handed = w.call(json!({"op": "get", "resource": resource})).await;
        assert_eq!(handed.fencing_token, Some(2), "{case}: {handed:?}");
        assert!(w.call(release(&resource, "w", Some(2))).await.granted);
        // The call the place answered replays token 2; the other is a new acquire, its first.
        let answered = second.unwrap_or("a");
        let mut tokens = Vec::new();
        for id in retries {
            let mut again = call(Some(id));
            again["waitSeconds"] = json!(0);
            let got = w.call(again).await;
            assert!(got.granted, "{case} {id}: {got:?}");
            tokens.push((id, got.fencing_token, got.replayed));
        }
        for (id, token, replayed) in tokens.iter().copied() {
            match id == answered {
                true => assert_eq!((token, replayed), (Some(2), true), "{case}: {tokens:?}"),
                false => assert_eq!((token, replayed), (Some(3), false), "{case}: {tokens:?}"),
            }
        }
    }
}
