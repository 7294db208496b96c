//! The lease service over the real store: token rules, idempotency, concurrency. Time is passed
//! in, so expiry is tested exactly and without sleeping.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::service::{Fixture, SEED, req, rules};
use leasekit_core::clock::now_ms;
use leasekit_core::lease::answer::Status;
use leasekit_core::lease::{LeaseAnswer, LeaseRequest, MAX_TOKEN};
use leasekit_core::provenance::Issuer;
use leasekit_core::service::lease::{LeaseError, REPLAY_WINDOW_MS, SignedAnswer};
use leasekit_core::tenant::Tenant;
use serde_json::json;
use std::sync::Arc;

impl Fixture {
    /// The store error `body` fails with (it must fail so).
    async fn unreadable(&self, body: &serde_json::Value) -> leasekit_core::store::StoreError {
        match self
            .service
            .execute(&self.tenant, &req(body.clone()), [0; 32], now_ms())
            .await
        {
            Err(LeaseError::Store(err)) => err,
            other => panic!("{body}: not a store error: {other:?}"),
        }
    }

    /// Store the lease item of `resource` as given (`pk` added): items this code would not write.
    async fn put_raw(&self, resource: &str, attributes: &[(&str, AttributeValue)]) {
        let mut item = std::collections::HashMap::from([(
            "pk".to_owned(),
            AttributeValue::S(format!("{}|{resource}", self.tenant)),
        )]);
        for (name, value) in attributes {
            item.insert((*name).to_owned(), value.clone());
        }
        self.client
            .put_item()
            .table_name(&self.tables.leases)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }
}

fn acquire(resource: &str, holder: &str, ttl: u32) -> LeaseRequest {
    req(json!({"op": "acquire", "resource": resource, "holder": holder, "ttlSeconds": ttl}))
}

fn release(resource: &str, holder: &str, token: u64) -> LeaseRequest {
    req(json!({"op": "release", "resource": resource, "holder": holder, "token": token}))
}

fn renew(resource: &str, holder: &str, token: u64, ttl: u32) -> LeaseRequest {
    req(
        json!({"op": "renew", "resource": resource, "holder": holder, "token": token, "ttlSeconds": ttl}),
    )
}

fn with_id(mut r: LeaseRequest, id: &str) -> LeaseRequest {
    r.request_id = Some(id.to_owned());
    r
}

#[tokio::test]
async fn tokens_start_at_1_and_grow_across_release_and_expiry() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    let a = f.run(&acquire("r", "a", 10), t0).await;
    assert!(a.granted);
    assert_eq!(a.fencing_token, Some(1));
    // Released, then acquired again: a new, larger token.
    assert!(f.run(&release("r", "a", 1), t0 + 1).await.granted);
    let b = f.run(&acquire("r", "b", 10), t0 + 2).await;
    assert_eq!(b.fencing_token, Some(2));
    // Lapsed (expiresAt = t0 + 2 + 10 s; at that instant it is no longer held): next token.
    let c = f.run(&acquire("r", "c", 10), t0 + 2 + 10_000).await;
    assert!(c.granted);
    assert_eq!(c.fencing_token, Some(3));
    // Even the previous holder gets a new token after a lapse.
    let d = f.run(&acquire("r", "c", 10), t0 + 2 + 20_000).await;
    assert_eq!(d.fencing_token, Some(4));
}

#[tokio::test]
async fn reacquire_by_the_holder_keeps_the_token_and_extends() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    f.run(&acquire("r", "a", 10), t0).await;
    let again = f.run(&acquire("r", "a", 60), t0 + 5_000).await;
    assert!(again.granted);
    assert_eq!(again.fencing_token, Some(1));
    assert_eq!(
        again.expires_at.as_deref(),
        Some(leasekit_core::clock::iso8601(t0 + 5_000 + 60_000).as_str())
    );
    assert_eq!(f.counter("r").await, 1);
}

#[tokio::test]
async fn acquire_while_held_shows_the_live_lease() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    f.run(&acquire("r", "a", 10), t0).await;
    let denied = f.run(&acquire("r", "b", 10), t0 + 9_999).await;
    assert!(!denied.granted);
    assert_eq!(denied.status, Status::Fail);
    assert_eq!(rules(&denied), ["LEASE_HELD"]);
    assert_eq!(denied.holder.as_deref(), Some("a"));
    assert_eq!(denied.fencing_token, Some(1));
    assert_eq!(f.counter("r").await, 1, "a denied acquire issues no token");
}

#[tokio::test]
async fn renew_and_release_need_the_live_holder_and_token() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    f.run(&acquire("r", "a", 10), t0).await;
    let renewed = f.run(&renew("r", "a", 1, 20), t0 + 1_000).await;
    assert!(renewed.granted);
    assert_eq!(
        renewed.expires_at.as_deref(),
        Some(leasekit_core::clock::iso8601(t0 + 21_000).as_str())
    );
    assert_eq!(
        rules(&f.run(&renew("r", "b", 1, 20), t0 + 2_000).await),
        ["NOT_HOLDER"]
    );
    assert_eq!(
        rules(&f.run(&renew("r", "a", 2, 20), t0 + 2_000).await),
        ["TOKEN_MISMATCH"]
    );
    assert_eq!(
        rules(&f.run(&release("r", "b", 1), t0 + 2_000).await),
        ["NO_HOLD"]
    );
    // A lapsed lease cannot be renewed or released.
    assert_eq!(
        rules(&f.run(&renew("r", "a", 1, 20), t0 + 21_000).await),
        ["LEASE_EXPIRED"]
    );
    assert_eq!(
        rules(&f.run(&release("r", "a", 1), t0 + 21_000).await),
        ["NO_HOLD"]
    );
    // A live lease is released by its holder, after which nobody holds it.
    f.run(&acquire("r", "a", 10), t0 + 22_000).await;
    let released = f.run(&release("r", "a", 2), t0 + 23_000).await;
    assert!(released.granted);
    assert_eq!(
        (released.holder, released.fencing_token, released.expires_at),
        (None, None, None)
    );
    let got = f
        .run(&req(json!({"op": "get", "resource": "r"})), t0 + 23_001)
        .await;
    assert!(!got.granted);
    assert_eq!(got.status, Status::Pass);
    assert_eq!(
        rules(&f.run(&release("r", "a", 2), t0 + 24_000).await),
        ["NO_HOLD"]
    );
}

#[tokio::test]
async fn the_token_ceiling_holds() {
    let f = Fixture::new().await;
    // Seed the counter at the ceiling.
    f.put_raw("r", &[("tok", AttributeValue::N(MAX_TOKEN.to_string()))])
        .await;
    let t0 = now_ms();
    assert_eq!(
        rules(&f.run(&acquire("r", "a", 10), t0).await),
        ["TOKEN_EXHAUSTED"]
    );
    assert_eq!(
        rules(&f.run(&with_id(acquire("r", "a", 10), "x"), t0).await),
        ["TOKEN_EXHAUSTED"]
    );
    assert_eq!(f.counter("r").await, MAX_TOKEN);
}

#[tokio::test]
async fn a_request_id_is_applied_once_and_replayed() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    let first = f.run(&with_id(acquire("r", "a", 10), "req-1"), t0).await;
    assert!(first.granted && !first.replayed);
    // The lease lapses and is taken by someone else; the retry still gets the original answer.
    f.run(&acquire("r", "b", 10), t0 + 10_000).await;
    let retry = f
        .run(&with_id(acquire("r", "a", 10), "req-1"), t0 + 11_000)
        .await;
    assert!(retry.replayed);
    assert_eq!(
        LeaseAnswer {
            replayed: false,
            ..retry
        },
        first
    );
    assert_eq!(f.counter("r").await, 2);
}

#[tokio::test]
async fn a_denied_answer_is_replayed_too() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    f.run(&acquire("r", "a", 10), t0).await;
    let denied = f.run(&with_id(acquire("r", "b", 10), "b-1"), t0 + 1).await;
    assert_eq!(rules(&denied), ["LEASE_HELD"]);
    // Now it would be granted, but the retry of the same request gets the same answer.
    let retry = f
        .run(&with_id(acquire("r", "b", 10), "b-1"), t0 + 20_000)
        .await;
    assert!(retry.replayed && !retry.granted);
}

#[tokio::test]
async fn same_request_id_with_other_input_is_a_conflict() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    f.run(&with_id(acquire("r", "a", 10), "req-1"), t0).await;
    for other in [
        acquire("r", "a", 11),
        acquire("r2", "a", 10),
        acquire("r", "b", 10),
        release("r", "a", 1),
    ] {
        let err = f
            .service
            .execute(&f.tenant, &with_id(other, "req-1"), [0; 32], t0 + 1)
            .await
            .unwrap_err();
        assert!(matches!(err, LeaseError::IdempotencyConflict), "{err:?}");
    }
    // The id is per tenant: another tenant may use it freely.
    let other_tenant = Tenant::for_key("globex", "t1").unwrap();
    let theirs = f
        .service
        .execute(
            &other_tenant,
            &with_id(acquire("r", "z", 10), "req-1"),
            [0; 32],
            t0 + 2,
        )
        .await
        .unwrap()
        .data;
    assert!(theirs.granted && !theirs.replayed);
    assert_eq!(theirs.fencing_token, Some(1));
}

#[tokio::test]
async fn records_expire_by_time_and_carry_a_ttl() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    let first = f.run(&with_id(acquire("r", "a", 10), "req-1"), t0).await;
    f.run(&release("r", "a", 1), t0 + 1).await;
    // One millisecond before the window closes it is still a replay...
    assert!(
        f.run(
            &with_id(acquire("r", "a", 10), "req-1"),
            t0 + REPLAY_WINDOW_MS - 1
        )
        .await
        .replayed
    );
    // ...and after it the same request is new (the stored record is still there: TTL is lazy).
    let later = f
        .run(
            &with_id(acquire("r", "a", 10), "req-1"),
            t0 + REPLAY_WINDOW_MS,
        )
        .await;
    assert!(!later.replayed && later.granted);
    assert_eq!(later.fencing_token, Some(first.fencing_token.unwrap() + 1));
    let items = f
        .client
        .scan()
        .table_name(&f.tables.requests)
        .send()
        .await
        .unwrap();
    let item = &items.items()[0];
    let ttl: i64 = item["ttl"].as_n().unwrap().parse().unwrap();
    let exp: i64 = item["exp"].as_n().unwrap().parse().unwrap();
    assert!(
        ttl * 1000 > exp,
        "TTL clean-up must come after the replay window"
    );
}

/// 50 concurrent acquirers per round, 5 rounds: exactly one winner each round, and every
/// winner's token is larger than all before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acquirers_get_one_winner_and_fresh_tokens() {
    let f = Arc::new(Fixture::new().await);
    let mut last = 0;
    for round in 0..5 {
        let now = now_ms();
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let f = Arc::clone(&f);
                tokio::spawn(async move {
                    f.run(&acquire("hot", &format!("w{round}-{i}"), 30), now)
                        .await
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            let a = t.await.unwrap();
            if a.granted {
                winners.push(a);
            } else {
                assert_eq!(rules(&a), ["LEASE_HELD"]);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {} winners", winners.len());
        let w = &winners[0];
        let token = w.fencing_token.unwrap();
        assert!(token > last, "round {round}: token {token} after {last}");
        last = token;
        assert!(
            f.run(
                &release("hot", w.holder.as_deref().unwrap(), token),
                now + 1
            )
            .await
            .granted
        );
    }
}

/// Identical requests with one requestId, racing: one applies, every answer is that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_requests_apply_once() {
    let f = Arc::new(Fixture::new().await);
    for round in 0..5 {
        let resource = format!("r{round}");
        let now = now_ms();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let f = Arc::clone(&f);
                let r = with_id(acquire(&resource, "a", 30), &format!("id-{round}"));
                tokio::spawn(async move { f.run(&r, now).await })
            })
            .collect();
        let mut applied = 0;
        for t in tasks {
            let a = t.await.unwrap();
            assert!(a.granted);
            assert_eq!(a.fencing_token, Some(1));
            applied += usize::from(!a.replayed);
        }
        assert_eq!(applied, 1, "round {round}: applied {applied} times");
        assert_eq!(f.counter(&resource).await, 1);
    }
}

/// Different requestIds racing for one resource: exactly one wins and the counter moves once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acquirers_with_request_ids_get_one_winner() {
    let f = Arc::new(Fixture::new().await);
    let now = now_ms();
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let f = Arc::clone(&f);
            let r = with_id(acquire("hot", &format!("w{i}"), 30), &format!("id-{i}"));
            tokio::spawn(async move { f.run(&r, now).await })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        winners += usize::from(t.await.unwrap().granted);
    }
    assert_eq!(winners, 1);
    assert_eq!(f.counter("hot").await, 1);
}

/// Identical renews with one requestId, racing. Every one of them would pass the lease's guard
/// (same holder, same token), so only the record's own condition keeps it to one application.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_renews_apply_once() {
    let f = Arc::new(Fixture::new().await);
    let now = now_ms();
    f.run(&acquire("r", "a", 30), now).await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let f = Arc::clone(&f);
            let r = with_id(renew("r", "a", 1, 60), "renew-1");
            tokio::spawn(async move { f.run(&r, now + 1).await })
        })
        .collect();
    let mut applied = 0;
    for t in tasks {
        let a = t.await.unwrap();
        assert!(a.granted);
        applied += usize::from(!a.replayed);
    }
    assert_eq!(applied, 1);
}

#[tokio::test]
async fn a_replay_carries_a_proof_over_its_own_data_signed_as_of_the_original() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    let first = f.signed(&with_id(acquire("r", "a", 10), "p-1"), t0).await;
    let replay = f
        .signed(&with_id(acquire("r", "a", 10), "p-1"), t0 + 5_000)
        .await;
    let again = f
        .signed(&with_id(acquire("r", "a", 10), "p-1"), t0 + 9_000)
        .await;
    assert!(replay.data.replayed);
    let credential = |a: &SignedAnswer| a.provenance["credential"].clone();
    let (original, replayed) = (credential(&first), credential(&replay));
    // Signed for the same request as of the same time, over data that now says replayed: true.
    assert_eq!(replayed["validFrom"], original["validFrom"]);
    let subject = |c: &serde_json::Value, field: &str| c["credentialSubject"][field].clone();
    assert_eq!(
        subject(&replayed, "requestSha256"),
        subject(&original, "requestSha256")
    );
    assert_ne!(
        subject(&replayed, "dataSha256"),
        subject(&original, "dataSha256")
    );
    assert_ne!(credential(&replay)["proof"], credential(&first)["proof"]);
    assert_eq!(
        replay.provenance, again.provenance,
        "every replay of one record carries the same proof"
    );
    let trusted = Issuer::from_seed(&[SEED; 32]).trusted();
    for answer in [&first, &replay] {
        let data = serde_json::to_value(&answer.data).unwrap();
        let report = leasekit_core::provenance::verify::verify(
            &data,
            answer.provenance.as_object().unwrap(),
            &trusted,
        );
        assert!(report.verified, "{report:?}");
    }
}

/// A lease item this code cannot read is our data's fault, whatever the op: a read finds it
/// unparseable, and a write's guard compares a number with the string and fails (DynamoDB's
/// comparisons across types are false), handing back the item, which does not parse. Both are
/// ours (a 500), not the store's to retry. moto crashes on that comparison (an HTTP 500 with a
/// Python TypeError: a store failure, rightly a 502 here), so the writes are checked on dynoxide.
#[tokio::test]
async fn an_unreadable_lease_item_is_our_failure_for_reads_and_writes() {
    use leasekit_core::store::StoreError;
    let f = Fixture::new().await;
    f.put_raw(
        "broken",
        &[("tok", AttributeValue::S("not a number".into()))],
    )
    .await;
    let mut bodies = vec![json!({"op": "get", "resource": "broken"})];
    if std::env::var(common::ENDPOINT_VAR).is_err() {
        bodies.push(json!({"op": "acquire", "resource": "broken", "holder": "a"}));
        bodies.push(
            json!({"op": "acquire", "resource": "broken", "holder": "a", "requestId": "b-1"}),
        );
    }
    for body in bodies {
        let err = f.unreadable(&body).await;
        assert!(
            matches!(err, StoreError::Corrupt(_) | StoreError::Internal(_)),
            "{body}: {err:?}"
        );
    }
}

/// A lease's permit is its holder with its expiry, its counter at most 2^53 - 1, its holder not
/// empty: an item that breaks one of these is none this code writes, so reading it is our
/// failure, not a free lease or a token past what JSON readers take (an attack was served
/// 9007199254740993 and an empty holder).
#[tokio::test]
async fn a_lease_item_this_code_would_not_write_is_unreadable() {
    use leasekit_core::store::StoreError;
    let f = Fixture::new().await;
    let n = |v: String| AttributeValue::N(v);
    let holder = |v: &str| AttributeValue::S(v.into());
    let exp = || n((now_ms() + 60_000).to_string());
    let cases = [
        (
            "no-exp",
            vec![("tok", n("3".into())), ("holder", holder("a"))],
        ),
        ("no-holder", vec![("tok", n("3".into())), ("exp", exp())]),
        ("past-ceiling", vec![("tok", n("9007199254740993".into()))]),
        (
            "empty-holder",
            vec![
                ("tok", n("3".into())),
                ("holder", holder("")),
                ("exp", exp()),
            ],
        ),
    ];
    for (resource, attributes) in cases {
        f.put_raw(resource, &attributes).await;
        let body = json!({"op": "get", "resource": resource});
        let err = f.unreadable(&body).await;
        assert!(matches!(err, StoreError::Corrupt(_)), "{body}: {err:?}");
    }
}
