//! Values (docs/adr/0011) through the lease service, over the real store (dynoxide, and moto in
//! CI): the holder's note kept with its permit, set by acquire, changed by renew, shown in every
//! permit it is in an answer about, and carried through the queue, semaphores, sets and sessions.

mod common;

use common::service::{Fixture, rules};
use leasekit_core::clock::now_ms;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn acquire(resource: &str, holder: &str, value: Option<&str>) -> Value {
    let mut body =
        json!({"op": "acquire", "resource": resource, "holder": holder, "ttlSeconds": 60});
    if let Some(value) = value {
        body["value"] = json!(value);
    }
    body
}

#[tokio::test]
async fn an_acquire_sets_the_value_a_renew_changes_or_keeps_it_and_a_get_shows_it() {
    let f = Fixture::new().await;
    let now = now_ms();
    let a = f
        .call(acquire("leader", "n1", Some("10.0.0.1:7000")), now)
        .await;
    assert!(a.granted);
    assert_eq!(a.value.as_deref(), Some("10.0.0.1:7000"));
    assert_eq!(a.holders[0].value.as_deref(), Some("10.0.0.1:7000"));
    let got = f
        .call(json!({"op": "get", "resource": "leader"}), now + 1)
        .await;
    assert_eq!(
        (got.holder.as_deref(), got.value.as_deref()),
        (Some("n1"), Some("10.0.0.1:7000"))
    );
    // A renew without a value keeps it; with one, changes it (an empty one too).
    let renew = |value: Option<&str>| {
        let mut body = json!({"op": "renew", "resource": "leader", "holder": "n1", "token": 1, "ttlSeconds": 60});
        if let Some(value) = value {
            body["value"] = json!(value);
        }
        body
    };
    let kept = f.call(renew(None), now + 2).await;
    assert_eq!(
        (kept.granted, kept.value.as_deref()),
        (true, Some("10.0.0.1:7000"))
    );
    let changed = f.call(renew(Some("10.0.0.1:7001")), now + 3).await;
    assert_eq!(changed.value.as_deref(), Some("10.0.0.1:7001"));
    let empty = f.call(renew(Some("")), now + 4).await;
    assert_eq!(empty.value.as_deref(), Some(""));
    // Someone else's refused acquire sees the holder's value; its own is not stored.
    let refused = f
        .call(acquire("leader", "n2", Some("10.0.0.2:7000")), now + 5)
        .await;
    assert!(!refused.granted);
    assert_eq!(
        (refused.holder.as_deref(), refused.value.as_deref()),
        (Some("n1"), Some(""))
    );
    // The holder's acquire again without a value is a renew: it keeps the value.
    let again = f.call(acquire("leader", "n1", None), now + 6).await;
    assert_eq!(
        (again.fencing_token, again.value.as_deref()),
        (Some(1), Some(""))
    );
    // A renew refused (a stale token) changes nothing.
    let stale =
        json!({"op": "renew", "resource": "leader", "holder": "n1", "token": 9, "value": "x"});
    assert_eq!(rules(&f.call(stale, now + 7).await), ["TOKEN_MISMATCH"]);
    let got = f
        .call(json!({"op": "get", "resource": "leader"}), now + 8)
        .await;
    assert_eq!(got.value.as_deref(), Some(""));
    // Released, the resource shows no value; the next holder's is its own.
    let release = json!({"op": "release", "resource": "leader", "holder": "n1", "token": 1});
    assert!(f.call(release, now + 9).await.granted);
    let next = f.call(acquire("leader", "n2", Some("b")), now + 10).await;
    assert_eq!(
        (next.fencing_token, next.value.as_deref()),
        (Some(2), Some("b"))
    );
}

#[tokio::test]
async fn each_permit_of_a_semaphore_and_of_a_set_carries_its_own_value() {
    let f = Fixture::new().await;
    let now = now_ms();
    let permit = |holder: &str, value: &str| json!({"op": "acquire", "resource": "pool", "holder": holder, "limit": 3, "value": value});
    assert!(f.call(permit("a", "va"), now).await.granted);
    let b = f.call(permit("b", "vb"), now).await;
    let values: Vec<_> = b
        .holders
        .iter()
        .map(|h| (h.holder.as_str(), h.value.as_deref()))
        .collect();
    assert_eq!(values, [("a", Some("va")), ("b", Some("vb"))]);
    assert_eq!(
        b.value.as_deref(),
        Some("vb"),
        "the caller's own permit is the one shown"
    );
    let set = json!({"op": "acquire", "resources": ["x", "y"], "holder": "s", "value": "both"});
    let s = f.call(set, now).await;
    let members = s.leases.unwrap();
    assert!(
        members.iter().all(|m| m.value.as_deref() == Some("both")),
        "{members:?}"
    );
    let listed = f
        .call(json!({"op": "list"}), now + 1_000)
        .await
        .leases
        .unwrap();
    let x = listed.iter().find(|m| m.resource == "x").unwrap();
    assert_eq!(x.holders[0].value.as_deref(), Some("both"));
}

#[tokio::test]
async fn a_waiting_acquires_value_is_the_permits_from_the_moment_it_is_granted() {
    let f = Arc::new(Fixture::new().await);
    assert!(
        f.call(acquire("job", "old", Some("old-v")), now_ms())
            .await
            .granted
    );
    let waiter = {
        let f = f.clone();
        tokio::spawn(async move {
            let mut body = acquire("job", "new", Some("new-v"));
            body["waitSeconds"] = json!(5);
            f.call(body, now_ms()).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = json!({"op": "release", "resource": "job", "holder": "old", "token": 1});
    let released = f.call(release, now_ms()).await;
    // Handed to the waiter in the release's own write: with the value it asked for.
    assert_eq!(
        (released.holder.as_deref(), released.value.as_deref()),
        (Some("new"), Some("new-v"))
    );
    let granted = waiter.await.unwrap();
    assert_eq!(
        (granted.fencing_token, granted.value.as_deref()),
        (Some(2), Some("new-v"))
    );
}

#[tokio::test]
async fn a_sessions_permit_takes_a_value_and_its_renew_changes_only_that() {
    let f = Fixture::new().await;
    let now = now_ms();
    let open = f
        .call(
            json!({"op": "open", "holder": "agent", "ttlSeconds": 60}),
            now,
        )
        .await;
    let s = open.session.flatten().unwrap().id;
    let a =
        json!({"op": "acquire", "resource": "r", "holder": "agent", "session": s, "value": "v1"});
    let a = f.call(a, now).await;
    assert_eq!((a.granted, a.value.as_deref()), (true, Some("v1")));
    let renew =
        json!({"op": "renew", "resource": "r", "holder": "agent", "token": 1, "value": "v2"});
    let r = f.call(renew, now + 1_000).await;
    assert_eq!(
        (r.value.as_deref(), r.expires_at.clone()),
        (Some("v2"), a.expires_at.clone())
    );
    assert_eq!(r.holders[0].session.as_deref(), Some(s.as_str()));
}

#[tokio::test]
async fn a_requestid_replays_its_value_and_another_value_is_another_request() {
    let f = Fixture::new().await;
    let now = now_ms();
    let mut first = acquire("r", "h", Some("one"));
    first["requestId"] = json!("req-1");
    let a = f.call(first.clone(), now).await;
    let b = f.call(first.clone(), now + 10).await;
    assert!(b.replayed && b.value.as_deref() == Some("one") && a.value == b.value);
    let mut other = first;
    other["value"] = json!("two");
    let tenant = common::service::tenant();
    let conflict = f.try_as(&tenant, other, now + 20).await;
    assert!(
        conflict.is_err(),
        "the same requestId with another value: {conflict:?}"
    );
}

/// An acquire again by the live holder is a renew: one that asks no value keeps the permit's,
/// as a renew without one does (the attack of 2026-12-06 found it cleared, waking every watcher
/// with a leader that had none), on a lease and on a semaphore's permit; a new permit has none.
#[tokio::test]
async fn a_reacquire_without_a_value_keeps_it() {
    let f = Fixture::new().await;
    let now = now_ms();
    let first = f
        .call(acquire("leader", "n1", Some("10.0.0.7:8080")), now)
        .await;
    let again = f.call(acquire("leader", "n1", None), now + 1).await;
    assert_eq!(
        (again.granted, again.fencing_token, again.value.as_deref()),
        (true, Some(1), Some("10.0.0.7:8080"))
    );
    assert_eq!(
        again.state_tag, first.state_tag,
        "nothing a watcher sees changed"
    );
    let changed = f
        .call(acquire("leader", "n1", Some("10.0.0.7:9090")), now + 2)
        .await;
    assert_eq!(changed.value.as_deref(), Some("10.0.0.7:9090"));

    let permit = |holder: &str, value: Option<&str>| {
        let mut body = acquire("pool", holder, value);
        body["limit"] = json!(3);
        body
    };
    f.call(permit("a", Some("slot-a")), now + 3).await;
    f.call(permit("b", None), now + 4).await;
    let again = f.call(permit("a", None), now + 5).await;
    let values: Vec<(&str, Option<&str>)> = again
        .holders
        .iter()
        .map(|p| (p.holder.as_str(), p.value.as_deref()))
        .collect();
    assert_eq!(values, [("a", Some("slot-a")), ("b", None)]);
    // Released and taken again: a new permit, without the old one's value.
    f.call(
        json!({"op": "release", "resource": "leader", "holder": "n1", "token": 1}),
        now + 6,
    )
    .await;
    let fresh = f.call(acquire("leader", "n1", None), now + 7).await;
    assert_eq!(
        (fresh.fencing_token, fresh.value.as_deref()),
        (Some(2), None)
    );
}
