//! Claims over the real store, time passed in: expiry frees a key, tokens grow, `mine`, scopes,
//! and the free quota under concurrency.

mod common;

use common::test_store;
use leasekit_core::claims::{Outcome, Plan};
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::store::ClaimStore;
use std::sync::Arc;

async fn store() -> ClaimStore {
    let s = test_store().await;
    ClaimStore::new(s.client, &s.tables.claims)
}

#[tokio::test]
async fn a_lapsed_hold_frees_the_key_with_a_larger_token() {
    let claims = store().await;
    let t0 = now_ms();
    let Outcome::Acquired(first) = claims
        .claim("wallet:0xa", "job-1", "w1", Plan::Free, t0, None)
        .await
        .unwrap()
    else {
        panic!("a free key is acquired")
    };
    assert_eq!(
        (first.acquired_at, first.expires_at, first.fencing_token),
        (t0, t0 + 300_000, 1)
    );
    // One millisecond before expiry it is still held (by someone else: mine false; by w1: mine true).
    for (holder, at, mine) in [("w2", t0 + 299_999, false), ("w1", t0 + 1, true)] {
        let held = claims
            .claim("wallet:0xa", "job-1", holder, Plan::Hour, at, None)
            .await
            .unwrap();
        let claim = first.clone();
        assert_eq!(held, Outcome::Held { claim, mine }, "{holder}");
    }
    // At expiry the server clock says it is free: a new acquisition, a larger token.
    let Outcome::Acquired(second) = claims
        .claim("wallet:0xa", "job-1", "w2", Plan::Day, t0 + 300_000, None)
        .await
        .unwrap()
    else {
        panic!("a lapsed key is acquired")
    };
    assert_eq!(
        (second.holder.as_str(), second.plan, second.fencing_token),
        ("w2", Plan::Day, 2)
    );
    assert_eq!(second.expires_at, t0 + 300_000 + 86_400_000);
}

#[tokio::test]
async fn scopes_are_separate_and_keys_may_contain_the_separator() {
    let claims = store().await;
    let t0 = now_ms();
    for scope in ["wallet:0xa", "wallet:0xb", "key:acme"] {
        assert!(matches!(
            claims
                .claim(scope, "a|b", "w", Plan::Hour, t0, None)
                .await
                .unwrap(),
            Outcome::Acquired(_)
        ));
    }
    assert!(matches!(
        claims
            .claim("wallet:0xa", "a", "w", Plan::Hour, t0, None)
            .await
            .unwrap(),
        Outcome::Acquired(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_free_quota_holds_under_concurrency() {
    let claims = Arc::new(store().await);
    let now = now_ms();
    let tasks: Vec<_> = (0..30)
        .map(|_| {
            let claims = Arc::clone(&claims);
            tokio::spawn(async move { claims.count_free("key:acme", 10, now).await.unwrap() })
        })
        .collect();
    let mut counted = 0;
    for t in tasks {
        match t.await.unwrap() {
            None => counted += 1,
            Some(retry_after) => assert!((1..=3600).contains(&retry_after)),
        }
    }
    assert_eq!(counted, 10);
    // Another scope, and the next hour, have their own counts.
    assert_eq!(
        claims.count_free("key:globex", 10, now).await.unwrap(),
        None
    );
    assert_eq!(
        claims
            .count_free("key:acme", 10, now + 3_600_000)
            .await
            .unwrap(),
        None
    );
}

/// The free quota is a rolling hour: claims just before a clock hour's turn still count just
/// after it (a clock-hour counter let twice the limit through around the turn), and each slot
/// frees an hour after its claim, with Retry-After saying when.
#[tokio::test]
async fn the_free_quota_is_a_rolling_hour() {
    let claims = store().await;
    const MINUTE: Millis = 60_000;
    // Just before a clock hour turns.
    let turn = (now_ms() / 3_600_000 + 1) * 3_600_000;
    let t0 = turn - 2 * MINUTE;
    assert_eq!(claims.count_free("key:roll", 2, t0).await.unwrap(), None);
    assert_eq!(
        claims.count_free("key:roll", 2, t0 + MINUTE).await.unwrap(),
        None
    );
    // Past the turn, both still count.
    let refused = claims
        .count_free("key:roll", 2, turn + MINUTE)
        .await
        .unwrap();
    assert_eq!(refused, Some(57 * 60), "the first slot frees at t0 + 1 h");
    // An hour after the first claim, one slot is free again; only one.
    let later = t0 + 60 * MINUTE;
    assert_eq!(claims.count_free("key:roll", 2, later).await.unwrap(), None);
    assert_eq!(
        claims.count_free("key:roll", 2, later).await.unwrap(),
        Some(60),
        "the second slot frees at t0 + 1 min + 1 h"
    );
}

/// Concurrent free claims far below the limit are all counted: each takes a free slot under a
/// guard on that slot alone (a guard on the whole item made racers lose round after round, and
/// the 33rd loss was a 502 with the quota nearly empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_free_claims_under_the_limit_are_all_counted() {
    let claims = Arc::new(store().await);
    let now = now_ms();
    let tasks: Vec<_> = (0..120)
        .map(|_| {
            let claims = Arc::clone(&claims);
            tokio::spawn(async move { claims.count_free("key:crowd", 200, now).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), None, "under the limit: counted");
    }
    // Exactly 120 were counted: 80 more fit, the 81st does not.
    for _ in 0..80 {
        assert_eq!(
            claims.count_free("key:crowd", 200, now).await.unwrap(),
            None
        );
    }
    assert!(
        claims
            .count_free("key:crowd", 200, now)
            .await
            .unwrap()
            .is_some()
    );
}
