//! Sets of resources, all or nothing, through the lease service over the real store (dynoxide,
//! and moto in CI): the contract's "Sets" bullet. Time is passed in.

mod common;

use common::service::{Fixture, lapsed_with_a_waiter_between_calls, req, rules};
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::lease::LeaseAnswer;
use leasekit_core::lease::answer::Status;
use leasekit_core::store::LeaseKey;
use serde_json::{Value, json};
use std::sync::Arc;

/// The shared fixture, every body it sends checked to be a request the edge would take.
async fn fixture() -> Fixture {
    Fixture::new().await.checking_shapes()
}

impl Fixture {
    async fn holder_of(&self, resource: &str, now: Millis) -> Option<String> {
        let state = self
            .store
            .get(&LeaseKey::new(&self.tenant, resource))
            .await
            .unwrap();
        state.live(now).map(|l| l.holder.to_owned())
    }
}

fn set(holder: &str, resources: &[&str]) -> Value {
    json!({"op": "acquire", "resources": resources, "holder": holder})
}

fn tokens(a: &LeaseAnswer) -> Vec<Option<u64>> {
    a.leases
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.fencing_token)
        .collect()
}

#[tokio::test]
async fn a_set_is_granted_whole_or_not_at_all() {
    let f = fixture().await;
    let now = now_ms();
    f.call(
        json!({"op": "acquire", "resource": "b", "holder": "other"}),
        now,
    )
    .await;
    let blocked = f.call(set("me", &["a", "b", "c"]), now).await;
    assert_eq!((blocked.status, blocked.granted), (Status::Fail, false));
    let witness = &blocked.witnesses[0];
    assert_eq!(
        (witness.rule_id.as_str(), witness.path.as_str()),
        ("LEASE_HELD", "/resources/1")
    );
    assert_eq!(blocked.witnesses.len(), 1);
    // Nothing was taken: a and c are free, b is still the other's.
    for r in ["a", "c"] {
        assert_eq!(f.holder_of(r, now).await, None, "{r}");
    }
    let members = blocked.leases.as_ref().unwrap();
    assert_eq!(members[1].holder.as_deref(), Some("other"));
    assert!(members.iter().all(|m| !m.granted));
    // The top-level permit is null for a set.
    assert_eq!(
        (blocked.holder.as_ref(), blocked.fencing_token),
        (None, None)
    );
    // Once b is free, the whole set is taken, each its own token, in request order.
    let released = f
        .call(
            json!({"op": "release", "resource": "b", "holder": "other", "token": 1}),
            now,
        )
        .await;
    assert!(released.granted);
    let granted = f.call(set("me", &["a", "b", "c"]), now + 1).await;
    assert_eq!((granted.status, granted.granted), (Status::Pass, true));
    assert_eq!(tokens(&granted), [Some(1), Some(2), Some(1)]);
    let names: Vec<_> = granted
        .leases
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.resource.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    for r in ["a", "b", "c"] {
        assert_eq!(f.holder_of(r, now + 1).await.as_deref(), Some("me"), "{r}");
    }
}

#[tokio::test]
async fn a_set_is_renewed_and_released_whole() {
    let f = fixture().await;
    let now = now_ms();
    let granted = f.call(set("me", &["x", "y"]), now).await;
    assert_eq!(tokens(&granted), [Some(1), Some(1)]);
    let leases = json!([{"resource": "x", "token": 1}, {"resource": "y", "token": 1}]);
    let renewed = f
        .call(
            json!({"op": "renew", "leases": leases, "holder": "me", "ttlSeconds": 120}),
            now + 1,
        )
        .await;
    assert!(renewed.granted, "{renewed:?}");
    assert!(renewed.leases.as_ref().unwrap().iter().all(|m| m.granted));
    // One wrong token: nothing renewed or released, the witness names it.
    let bad = json!([{"resource": "x", "token": 1}, {"resource": "y", "token": 7}]);
    let refused = f
        .call(
            json!({"op": "release", "leases": bad, "holder": "me"}),
            now + 2,
        )
        .await;
    assert_eq!(refused.witnesses[0].path, "/leases/1");
    assert_eq!(refused.witnesses[0].rule_id, "NO_HOLD");
    assert_eq!(
        f.holder_of("x", now + 2).await.as_deref(),
        Some("me"),
        "x kept"
    );
    let released = f
        .call(
            json!({"op": "release", "leases": leases, "holder": "me"}),
            now + 3,
        )
        .await;
    assert!(released.granted);
    for r in ["x", "y"] {
        assert_eq!(f.holder_of(r, now + 3).await, None, "{r}");
    }
    // The renew took: each member's lease runs 120 s from the renew, not 30 s from the take.
    let renewed_until = leasekit_core::clock::iso8601(now + 1 + 120_000);
    for member in renewed.leases.unwrap() {
        assert_eq!(
            member.expires_at.as_deref(),
            Some(renewed_until.as_str()),
            "{member:?}"
        );
    }
}

#[tokio::test]
async fn a_set_of_semaphores_applies_its_limit_to_each() {
    let f = fixture().await;
    let now = now_ms();
    let a = f
        .call(
            json!({"op": "acquire", "resources": ["p", "q"], "holder": "a", "limit": 2}),
            now,
        )
        .await;
    let b = f
        .call(
            json!({"op": "acquire", "resources": ["p", "q"], "holder": "b", "limit": 2}),
            now,
        )
        .await;
    assert!(a.granted && b.granted);
    assert_eq!(tokens(&b), [Some(2), Some(2)]);
    let c = f
        .call(
            json!({"op": "acquire", "resources": ["p", "q"], "holder": "c", "limit": 2}),
            now,
        )
        .await;
    assert_eq!(c.witnesses.len(), 2, "both are full: {c:?}");
    let mismatch = f
        .call(
            json!({"op": "acquire", "resources": ["r", "p"], "holder": "c", "limit": 3}),
            now,
        )
        .await;
    assert_eq!(mismatch.witnesses[0].rule_id, "LIMIT_MISMATCH");
    assert_eq!(mismatch.witnesses[0].path, "/resources/1");
    assert_eq!(f.holder_of("r", now).await, None, "r untouched");
}

#[tokio::test]
async fn a_request_id_applies_a_set_once() {
    let f = fixture().await;
    let now = now_ms();
    let body =
        json!({"op": "acquire", "resources": ["m", "n"], "holder": "me", "requestId": "set-1"});
    let first = f.call(body.clone(), now).await;
    let again = f.call(body, now + 5).await;
    assert!(first.granted && !first.replayed && again.replayed);
    assert_eq!(tokens(&again), tokens(&first));
    // A denial is recorded and replayed too, even after the set frees up.
    f.call(
        json!({"op": "acquire", "resource": "o", "holder": "other"}),
        now,
    )
    .await;
    let denied =
        json!({"op": "acquire", "resources": ["o", "p"], "holder": "me", "requestId": "set-2"});
    assert!(!f.call(denied.clone(), now).await.granted);
    f.call(
        json!({"op": "release", "resource": "o", "holder": "other", "token": 1}),
        now,
    )
    .await;
    let replayed = f.call(denied, now + 1).await;
    assert!(replayed.replayed && !replayed.granted);
}

/// Eight workers, each taking an overlapping pair of four resources, in rounds: no resource is
/// ever granted to two holders, and no set is ever half held.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_sets_never_half_apply() {
    let f = Arc::new(fixture().await);
    let pairs = [["a", "b"], ["b", "c"], ["c", "d"], ["d", "a"]];
    for round in 0..6 {
        let now = now_ms() + round * 60_000;
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let f = Arc::clone(&f);
                let pair = pairs[i % 4];
                tokio::spawn(async move {
                    let holder = format!("w{i}");
                    let a = f.call(set(&holder, &pair), now).await;
                    (holder, pair, a)
                })
            })
            .collect();
        let mut owners = std::collections::HashMap::new();
        for t in tasks {
            let (holder, pair, a) = t.await.unwrap();
            if !a.granted {
                continue;
            }
            for r in pair {
                let before = owners.insert(r, holder.clone());
                assert_eq!(before, None, "round {round}: {r} granted twice");
            }
        }
        assert!(!owners.is_empty(), "round {round}: nobody won");
        // What the store holds is exactly the winners' sets, whole.
        for r in ["a", "b", "c", "d"] {
            assert_eq!(
                f.holder_of(r, now).await,
                owners.get(r).cloned(),
                "round {round}: {r}"
            );
        }
    }
}

/// A set whose answer outgrows a request record (20 semaphores with dozens of holders of 128
/// four-byte characters) is refused with its requestId before anything is written, not sent
/// round for ever by a 502 (the attack of 2026-12-02); without a requestId it is granted. 20
/// resources, as moto reads at most 25 items in one TransactGetItems.
#[tokio::test]
async fn a_set_too_large_to_keep_for_its_request_id_is_refused_and_writes_nothing() {
    let f = fixture().await;
    let now = now_ms();
    let resources: Vec<String> = (0..20)
        .map(|i| format!("S{i:02}{}", "y".repeat(190)))
        .collect();
    let holder = |i: usize| format!("{i:03}{}", "\u{1D11E}".repeat(125));
    let take = |i: usize| json!({"op": "acquire", "resources": resources, "holder": holder(i), "limit": 64, "ttlSeconds": 600});
    for i in 0..40 {
        assert!(f.call(take(i), now).await.granted, "{i}");
    }
    let mut with_id = take(40);
    with_id["requestId"] = json!("big");
    let request = req(with_id);
    let refused = f.service.execute(&f.tenant, &request, [0; 32], now).await;
    assert!(
        matches!(
            refused,
            Err(leasekit_core::service::lease::LeaseError::TooLargeToKeep(_))
        ),
        "{refused:?}"
    );
    let state = f
        .store
        .get(&LeaseKey::new(&f.tenant, &resources[0]))
        .await
        .unwrap();
    assert_eq!(state.live_permits(now).len(), 40, "nothing written");
    assert!(
        f.call(take(40), now).await.granted,
        "granted without a requestId"
    );
}

/// As for one resource (waiting.rs: a_refusal_that_notices_a_lapse_writes_the_hand_off), a
/// refused set whose read notices a lapse writes the hand-off of that member, so that its witness
/// and its answer cite a permit the store has (the second attack of 2026-12-03).
#[tokio::test]
async fn a_refused_set_that_notices_a_lapse_writes_the_hand_off() {
    let (f, now) = lapsed_with_a_waiter_between_calls().await;
    let later = now + 2_500;
    let set = json!({"op": "acquire", "resources": ["free", "q"], "holder": "x"});
    let refused = f.call(set, later).await;
    assert!(!refused.granted, "{refused:?}");
    assert_eq!(rules(&refused), ["LEASE_HELD"]);
    let q = &refused.leases.as_ref().unwrap()[1];
    assert_eq!(
        (q.holder.as_deref(), q.fencing_token),
        (Some("w1"), Some(2)),
        "the answer shows the permit its witness cites: {q:?}"
    );
    let check = json!({"op": "check", "resource": "q", "token": 2, "holder": "w1"});
    assert_eq!(f.call(check, later + 1).await.current, Some(true));
    let free = f
        .call(json!({"op": "get", "resource": "free"}), later + 1)
        .await;
    assert_eq!(free.holder, None, "nothing else of the set is written");
}

/// A set's release after an operator revoked one member (issue #41): the members still held are
/// released (another holder can take them), the revoked one is reported and not shown granted;
/// a renew of such a set is refused whole.
#[tokio::test]
async fn a_sets_release_frees_what_is_held_when_a_member_was_revoked() {
    let f = Fixture::new().await.checking_shapes();
    let now = now_ms();
    let granted = f.call(set("me", &["rx", "ry", "rz"]), now).await;
    assert_eq!(tokens(&granted), [Some(1), Some(1), Some(1)]);
    let revoked = f
        .call(
            json!({"op": "revoke", "resource": "ry", "holder": "me", "reason": "stuck"}),
            now + 1,
        )
        .await;
    assert!(revoked.granted, "{revoked:?}");
    let leases = json!([
        {"resource": "rx", "token": 1}, {"resource": "ry", "token": 1}, {"resource": "rz", "token": 1}
    ]);
    let renewed = f
        .call(
            json!({"op": "renew", "leases": leases, "holder": "me", "ttlSeconds": 60}),
            now + 2,
        )
        .await;
    assert!(!renewed.granted, "{renewed:?}");
    assert_eq!(rules(&renewed), ["REVOKED"]);
    let released = f
        .call(
            json!({"op": "release", "leases": leases, "holder": "me"}),
            now + 3,
        )
        .await;
    assert!(released.granted, "{released:?}");
    assert_eq!(rules(&released), ["REVOKED"]);
    assert_eq!(released.witnesses[0].path, "/leases/1");
    let members: Vec<bool> = released.leases.unwrap().iter().map(|m| m.granted).collect();
    assert_eq!(members, [true, false, true]);
    let next = f.call(set("next", &["rx", "rz"]), now + 4).await;
    assert_eq!(tokens(&next), [Some(2), Some(2)], "{next:?}");
}
