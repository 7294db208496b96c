//! Watch (docs/adr/0011) through the lease service, over the real store (dynoxide, and moto in
//! CI): every answer about one resource carries a `stateTag` of its live permits; a watch with
//! the tag the caller saw answers at once when the state is another, else as soon as a write or
//! a lapse changes it (on this process: woken, not polled), or when its wait ends.

mod common;

use common::service::Fixture;
use leasekit_core::clock::now_ms;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn watch(resource: &str, tag: Option<&str>, wait: u32) -> Value {
    let mut body = json!({"op": "watch", "resource": resource, "waitSeconds": wait});
    if let Some(tag) = tag {
        body["stateTag"] = json!(tag);
    }
    body
}

#[tokio::test]
async fn the_tag_changes_with_the_live_permits_and_not_with_a_renew() {
    let f = Fixture::new().await;
    let now = now_ms();
    let free = f
        .call(json!({"op": "get", "resource": "r"}), now)
        .await
        .state_tag
        .unwrap();
    let a = f
        .call(
            json!({"op": "acquire", "resource": "r", "holder": "a", "ttlSeconds": 10}),
            now,
        )
        .await;
    let held = a.state_tag.clone().unwrap();
    assert_ne!(free, held);
    let renew =
        json!({"op": "renew", "resource": "r", "holder": "a", "token": 1, "ttlSeconds": 60});
    let renewed = f.call(renew, now + 1_000).await;
    assert_eq!(
        renewed.state_tag.as_deref(),
        Some(held.as_str()),
        "a renew only moves the expiry"
    );
    let valued = json!({"op": "renew", "resource": "r", "holder": "a", "token": 1, "value": "v"});
    let valued = f.call(valued, now + 2_000).await.state_tag.unwrap();
    assert_ne!(valued, held, "a new value is a change");
    // A refusal describes the resource as it is: the same tag.
    let refused = f
        .call(
            json!({"op": "acquire", "resource": "r", "holder": "b"}),
            now + 3_000,
        )
        .await;
    assert_eq!(refused.state_tag.as_deref(), Some(valued.as_str()));
    let release = json!({"op": "release", "resource": "r", "holder": "a", "token": 1});
    let released = f.call(release, now + 4_000).await.state_tag.unwrap();
    assert_ne!(
        released, free,
        "free again, after a grant: not the state never taken"
    );
    let got = f
        .call(json!({"op": "get", "resource": "r"}), now + 5_000)
        .await;
    assert_eq!(
        got.state_tag.as_deref(),
        Some(released.as_str()),
        "a release's tag is the next get's"
    );
}

#[tokio::test]
async fn a_watch_answers_at_once_without_a_tag_or_with_an_old_one_and_waits_with_the_current() {
    let f = Fixture::new().await;
    let first = f.call(watch("r", None, 20), now_ms()).await;
    assert_eq!((first.changed, first.granted), (Some(true), false));
    let tag = first.state_tag.clone().unwrap();
    assert!(
        f.call(
            json!({"op": "acquire", "resource": "r", "holder": "a"}),
            now_ms()
        )
        .await
        .granted
    );
    let old = f.call(watch("r", Some(&tag), 20), now_ms()).await;
    assert_eq!(
        (old.changed, old.holder.as_deref()),
        (Some(true), Some("a"))
    );
    let began = Instant::now();
    let same = f
        .call(watch("r", old.state_tag.as_deref(), 1), now_ms())
        .await;
    assert_eq!(same.changed, Some(false));
    assert_eq!(same.state_tag, old.state_tag);
    assert!(
        began.elapsed() >= Duration::from_millis(900),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn a_watch_is_answered_within_100_ms_of_the_write_or_the_lapse_that_changes_it() {
    let f = Arc::new(Fixture::new().await);
    let seen = f
        .call(
            json!({"op": "acquire", "resource": "r", "holder": "a", "ttlSeconds": 2}),
            now_ms(),
        )
        .await;
    let watcher = |tag: String| {
        let f = f.clone();
        tokio::spawn(async move {
            let a = f.call(watch("r", Some(&tag), 10), now_ms()).await;
            (a, Instant::now())
        })
    };
    // A write: another holder's acquire after a release.
    let w = watcher(seen.state_tag.clone().unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = json!({"op": "release", "resource": "r", "holder": "a", "token": 1});
    let written = Instant::now();
    assert!(f.call(release, now_ms()).await.granted);
    let (a, at) = w.await.unwrap();
    assert_eq!((a.changed, a.granted), (Some(true), false));
    assert!(
        at.duration_since(written) < Duration::from_millis(100),
        "{:?}",
        at.duration_since(written)
    );
    // A lapse: nobody writes; the watcher's own timer.
    let b = f
        .call(
            json!({"op": "acquire", "resource": "r", "holder": "b", "ttlSeconds": 1}),
            now_ms(),
        )
        .await;
    let lapses = Instant::now() + Duration::from_secs(1);
    let w = watcher(b.state_tag.clone().unwrap());
    let (a, at) = w.await.unwrap();
    assert_eq!((a.changed, a.granted), (Some(true), false));
    assert!(
        at.saturating_duration_since(lapses) < Duration::from_millis(100),
        "{:?}",
        at.saturating_duration_since(lapses)
    );
}

/// A tag is bound to its tenant and resource: equal states of two resources, or of one name in
/// two tenants, have different tags, and a tag of one is not taken as another's current state
/// (the attack of 2026-12-06 found a bare digest of the state: equal everywhere, and a leaked
/// tag open to confirming a guessed holder and value offline).
#[tokio::test]
async fn a_tag_is_bound_to_its_resource_and_tenant() {
    let f = Fixture::new().await;
    let now = now_ms();
    let get = |resource: &str| json!({"op": "get", "resource": resource});
    let a = f.call(get("a"), now).await.state_tag.unwrap();
    let b = f.call(get("b"), now).await.state_tag.unwrap();
    assert_ne!(a, b, "two resources nobody ever held");
    let elsewhere = leasekit_core::tenant::Tenant::for_key("acme", "t2").unwrap();
    let other = f.try_as(&elsewhere, get("a"), now).await.unwrap();
    assert_ne!(
        other.state_tag.as_deref(),
        Some(a.as_str()),
        "another tenant's a"
    );
    // b's tag, watching a: not a's state, so answered at once.
    let began = Instant::now();
    let crossed = f.call(watch("a", Some(&b), 5), now).await;
    assert!(began.elapsed() < Duration::from_secs(1));
    assert_eq!(
        (crossed.changed, crossed.state_tag.as_deref()),
        (Some(true), Some(a.as_str()))
    );
    // a's own tag stands for a's state: the watch waits it out.
    let same = f.call(watch("a", Some(&a), 1), now).await;
    assert_eq!(same.changed, Some(false));
}
