//! The Rust client's leader election against `leasekit serve`: campaign (a waiting acquire with
//! a value), proclaim, resign, leader and observe.

mod support;

use leasekit_client::{Client, Error, Leader, Lost};
use std::time::Duration;
use support::*;
use tempfile::TempDir;

fn client(server: &Server, key: &str) -> Client {
    Client::with_api_key(&server.url, key, "election-tests").unwrap()
}

/// Within a second, or the test fails (an observer must hear of a change at once).
async fn soon<T>(what: impl std::future::IntoFuture<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(1), what)
        .await
        .expect("in time")
}

fn led_by(leader: &Option<Leader>) -> Option<(&str, u64, Option<&str>)> {
    leader
        .as_ref()
        .map(|l| (l.holder.as_str(), l.fencing_token, l.value.as_deref()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_hears_every_leader_and_value_in_order() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let mut observer = c.observe("leader");
    assert_eq!(soon(observer.next()).await.unwrap(), None, "nobody yet");
    let ttl = Duration::from_secs(5);
    let a = c
        .campaign("leader", "a", "10.0.0.1:80", ttl, None)
        .await
        .unwrap();
    let a_token = a.fencing_token();
    let seen = soon(observer.next()).await.unwrap();
    assert_eq!(led_by(&seen), Some(("a", a_token, Some("10.0.0.1:80"))));
    assert_eq!(c.leader("leader").await.unwrap(), seen);

    // b waits in line; a proclaims a new value, and the observer hears it.
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { c.campaign("leader", "b", "10.0.0.2:80", ttl, None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let proclaimed = a.proclaim("10.0.0.1:81").await.unwrap();
    assert_eq!(proclaimed.value.as_deref(), Some("10.0.0.1:81"));
    let seen = soon(observer.next()).await.unwrap();
    assert_eq!(led_by(&seen), Some(("a", a_token, Some("10.0.0.1:81"))));

    // a resigns: b leads at once with its own value and a larger token.
    a.release().await.unwrap();
    let b = soon(waiting).await.unwrap().unwrap();
    assert!(b.fencing_token() > a_token);
    let seen = soon(observer.next()).await.unwrap();
    assert_eq!(
        led_by(&seen),
        Some(("b", b.fencing_token(), Some("10.0.0.2:80")))
    );
    b.release().await.unwrap();
    assert_eq!(soon(observer.next()).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_cannot_proclaim() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let admin = client(&server, ACME_ADMIN_KEY);
    let mut leader = c
        .campaign("office", "a", "one", Duration::from_secs(30), None)
        .await
        .unwrap();
    admin
        .revoke("office", None, None, "a wedged leader")
        .await
        .unwrap();
    let next = c
        .campaign("office", "b", "two", Duration::from_secs(30), None)
        .await
        .unwrap();
    match leader.proclaim("still me").await {
        Err(Error::Lost(Lost::Refused(rule))) => assert_eq!(rule, "REVOKED"),
        other => panic!("a deposed leader's proclaim: {other:?}"),
    }
    // The guard knows it, and says so again without asking.
    assert!(!leader.is_held());
    assert!(matches!(leader.lost().await, Lost::Refused(_)));
    assert!(matches!(
        leader.proclaim("again").await,
        Err(Error::Lost(_))
    ));
    let now = c.leader("office").await.unwrap().unwrap();
    assert_eq!(
        (now.holder.as_str(), now.value.as_deref()),
        ("b", Some("two"))
    );
    assert_eq!(now.fencing_token, next.fencing_token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapse_is_a_change_and_an_unchanged_watch_ends_with_its_wait() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = client(&server, ACME_KEY);
    let lease = c
        .acquire("lapsing", "a", Duration::from_secs(1))
        .await
        .unwrap();
    let tag = lease
        .state_tag
        .clone()
        .expect("an answer about one resource has a tag");
    let quiet = c
        .watch("other", None, Duration::from_secs(1))
        .await
        .unwrap();
    let unchanged = c
        .watch("other", quiet.state_tag.as_deref(), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(unchanged.changed, Some(false));
    assert_eq!(unchanged.state_tag, quiet.state_tag);
    // The lease lapses about a second after it was granted: the watch answers then.
    let changed = tokio::time::timeout(
        Duration::from_millis(1_800),
        c.watch("lapsing", Some(&tag), Duration::from_secs(10)),
    )
    .await
    .expect("woken by the lapse")
    .unwrap();
    assert_eq!(changed.changed, Some(true));
    assert_eq!(changed.holder, None);
    assert_ne!(changed.state_tag.as_deref(), Some(tag.as_str()));
}
