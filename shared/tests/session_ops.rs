//! Sessions through the lease service, over the real store (dynoxide, and moto in CI): the
//! contract's "Sessions" bullet (docs/adr/0010). One heartbeat keeps every permit in a session;
//! its end (close, lapse) frees them all at that instant, with nothing written to them; tokens
//! keep each resource's counter. Time is passed in, but for the waits, which take real time.

mod common;

use common::service::{Fixture, rules};
use leasekit_core::clock::{Millis, iso8601, now_ms};
use leasekit_core::lease::LeaseAnswer;
use leasekit_core::tenant::Tenant;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

impl Fixture {
    /// `holder` opens a session of `ttl` seconds at `now`: its id.
    async fn open(&self, holder: &str, ttl: u32, now: Millis) -> String {
        let a = self
            .call(
                json!({"op": "open", "holder": holder, "ttlSeconds": ttl}),
                now,
            )
            .await;
        assert!(a.granted, "{a:?}");
        let session = a.session.flatten().expect("an open session");
        assert_eq!(session.holder, holder);
        assert_eq!(session.expires_at, iso8601(now + Millis::from(ttl) * 1000));
        assert!(session.leases.is_empty());
        session.id
    }

    /// `holder`'s acquire of `resource` in `session` at `now`.
    async fn acquire_in(
        &self,
        resource: &str,
        holder: &str,
        session: &str,
        now: Millis,
    ) -> LeaseAnswer {
        self.call(
            json!({"op": "acquire", "resource": resource, "holder": holder, "session": session}),
            now,
        )
        .await
    }

    /// The session `id` as a get shows it at `now` (`None`: ended or unknown).
    async fn session(
        &self,
        id: &str,
        now: Millis,
    ) -> Option<leasekit_core::lease::answer::SessionView> {
        let a = self.call(json!({"op": "get", "session": id}), now).await;
        assert_eq!(rules(&a), Vec::<&str>::new());
        a.session.expect("a session's get answers session")
    }

    /// agent-1 acquires `n` (240 or more) resources in `session` at `now`: ten sets of 24 (a
    /// set's members join the session too; 24, as moto reads at most 25 items in a transaction
    /// and a set is read with its session), then `one-<i>` alone.
    async fn fill(&self, session: &str, n: usize, now: Millis) {
        for set in 0..10 {
            let resources: Vec<String> = (0..24).map(|i| format!("r{set}-{i}")).collect();
            let body = json!({"op": "acquire", "resources": resources, "holder": "agent-1", "session": session});
            let a = self.call(body, now).await;
            assert!(a.granted, "{a:?}");
            let first = &a.leases.as_ref().unwrap()[0];
            assert_eq!(first.holders[0].session.as_deref(), Some(session));
        }
        for i in 0..n - 240 {
            let one = self
                .acquire_in(&format!("one-{i}"), "agent-1", session, now)
                .await;
            assert!(one.granted);
        }
    }

    async fn get(&self, resource: &str, now: Millis) -> LeaseAnswer {
        self.call(json!({"op": "get", "resource": resource}), now)
            .await
    }
}

fn leases_of(view: &leasekit_core::lease::answer::SessionView) -> Vec<(&str, u64)> {
    view.leases
        .iter()
        .map(|l| (l.resource.as_str(), l.fencing_token))
        .collect()
}

#[tokio::test]
async fn a_permit_lives_exactly_as_long_as_its_session_and_moves_with_each_keepalive() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 30, t0).await;
    assert_eq!(s.len(), 26, "128 bits in base32: {s}");
    let default = f.call(json!({"op": "open", "holder": "agent-9"}), t0).await;
    let default = default.session.flatten().unwrap();
    assert_eq!(
        default.expires_at,
        iso8601(t0 + 30_000),
        "ttlSeconds defaults to 30"
    );
    assert_ne!(default.id, s, "each open is a new session");
    let a = f.acquire_in("deploy:prod", "agent-1", &s, t0 + 1_000).await;
    assert!(a.granted, "{a:?}");
    assert_eq!(a.fencing_token, Some(1));
    assert_eq!(
        a.expires_at,
        Some(iso8601(t0 + 30_000)),
        "the session's end"
    );
    assert_eq!(a.holders[0].session.as_deref(), Some(s.as_str()));
    let view = f.session(&s, t0 + 1_000).await.expect("live");
    assert_eq!(leases_of(&view), [("deploy:prod", 1)]);

    // One keepalive moves every permit's end.
    let b = f.acquire_in("gpu", "agent-1", &s, t0 + 2_000).await;
    assert!(b.granted);
    let kept = f
        .call(
            json!({"op": "keepalive", "session": s, "holder": "agent-1", "ttlSeconds": 60}),
            t0 + 20_000,
        )
        .await;
    assert!(kept.granted, "{kept:?}");
    let kept_until = t0 + 80_000;
    assert_eq!(
        kept.session.flatten().unwrap().expires_at,
        iso8601(kept_until)
    );
    for resource in ["deploy:prod", "gpu"] {
        let g = f.get(resource, t0 + 50_000).await;
        assert_eq!(
            g.holder.as_deref(),
            Some("agent-1"),
            "{resource} outlived its first 30 s"
        );
        assert_eq!(g.expires_at, Some(iso8601(kept_until)));
    }
    // A keepalive without a ttl takes the one it was opened with.
    let again = f
        .call(
            json!({"op": "keepalive", "session": s, "holder": "agent-1"}),
            t0 + 70_000,
        )
        .await;
    assert_eq!(
        again.session.flatten().unwrap().expires_at,
        iso8601(t0 + 100_000)
    );

    // It lapses: every permit with it, at that instant; the next take continues the counter.
    let lapsed = t0 + 100_000;
    assert!(f.get("deploy:prod", lapsed - 1).await.granted);
    assert!(!f.get("deploy:prod", lapsed).await.granted);
    assert_eq!(f.session(&s, lapsed).await, None);
    let other = f.acquire("deploy:prod", "agent-2", lapsed).await;
    assert_eq!(other.fencing_token, Some(2));
    let kept_late = f
        .call(
            json!({"op": "keepalive", "session": s, "holder": "agent-1"}),
            lapsed,
        )
        .await;
    assert_eq!(rules(&kept_late), ["SESSION_EXPIRED"]);
    assert!(!kept_late.granted);
    let check = f
        .call(
            json!({"op": "check", "resource": "gpu", "token": 1}),
            lapsed,
        )
        .await;
    assert_eq!(
        check.current,
        Some(false),
        "a lapsed session's permit is not current"
    );
}

#[tokio::test]
async fn a_close_ends_every_permit_at_once_and_writes_none_of_them() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 600, t0).await;
    for r in ["a", "b", "c"] {
        assert!(f.acquire_in(r, "agent-1", &s, t0).await.granted);
    }
    let sem = f
        .call(json!({"op": "acquire", "resource": "pool", "holder": "agent-1", "session": s, "limit": 2}), t0)
        .await;
    assert!(sem.granted, "{sem:?}");
    f.acquire_in("pool", "agent-1", &s, t0).await;
    let other = f
        .call(json!({"op": "acquire", "resource": "pool", "holder": "other", "ttlSeconds": 60, "limit": 2}), t0)
        .await;
    assert!(other.granted, "{other:?}");
    let stored_before = f
        .store
        .get(&leasekit_core::store::LeaseKey::new(&f.tenant, "a"))
        .await
        .unwrap();

    let wrong = f
        .call(
            json!({"op": "close", "session": s, "holder": "agent-2"}),
            t0 + 1_000,
        )
        .await;
    assert_eq!(rules(&wrong), ["NOT_HOLDER"]);
    assert!(
        f.session(&s, t0 + 1_000).await.is_some(),
        "another holder changes nothing"
    );

    let closed = f
        .call(
            json!({"op": "close", "session": s, "holder": "agent-1"}),
            t0 + 2_000,
        )
        .await;
    assert!(closed.granted, "{closed:?}");
    assert_eq!(closed.session, Some(None));
    let stored_after = f
        .store
        .get(&leasekit_core::store::LeaseKey::new(&f.tenant, "a"))
        .await
        .unwrap();
    assert_eq!(stored_before, stored_after, "no permit is written");
    for r in ["a", "b", "c"] {
        assert!(!f.get(r, t0 + 2_000).await.granted, "{r} is free at once");
        let next = f.acquire(r, "agent-2", t0 + 2_000).await;
        assert_eq!(next.fencing_token, Some(2), "{r}: the counter goes on");
    }
    let pool = f.get("pool", t0 + 2_000).await;
    let holders: Vec<&str> = pool.holders.iter().map(|h| h.holder.as_str()).collect();
    assert_eq!(holders, ["other"], "the semaphore's other permit stays");
    assert_eq!(pool.holders[0].session, None);
    for op in ["close", "keepalive"] {
        let late = f
            .call(
                json!({"op": op, "session": s, "holder": "agent-1"}),
                t0 + 3_000,
            )
            .await;
        assert_eq!(rules(&late), ["SESSION_EXPIRED"], "{op} after close");
    }
    let late = f.acquire_in("d", "agent-1", &s, t0 + 3_000).await;
    assert_eq!(rules(&late), ["SESSION_EXPIRED"]);
    assert_eq!(f.counter("d").await, 0, "nothing written");
}

#[tokio::test]
async fn a_session_is_its_holders_and_its_tenants_only() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 60, t0).await;
    let not_mine = f.acquire_in("r", "agent-2", &s, t0).await;
    assert_eq!(rules(&not_mine), ["NOT_HOLDER"]);
    assert_eq!(not_mine.witnesses[0].path, "/holder");
    assert_eq!(f.counter("r").await, 0);
    let kept = f
        .call(
            json!({"op": "keepalive", "session": s, "holder": "agent-2"}),
            t0,
        )
        .await;
    assert_eq!(rules(&kept), ["NOT_HOLDER"]);

    // Another tenant: the session does not exist for it, exactly as an unknown one.
    let elsewhere = Tenant::for_key("acme", "t2").unwrap();
    let body = json!({"op": "acquire", "resource": "r", "holder": "agent-1", "session": s});
    let theirs = f.try_as(&elsewhere, body, t0).await.unwrap();
    let unknown = f
        .acquire_in("r", "agent-1", "aaaaaaaaaaaaaaaaaaaaaaaaaa", t0)
        .await;
    assert_eq!(rules(&theirs), ["SESSION_EXPIRED"]);
    assert_eq!(theirs.witnesses, unknown.witnesses);
    let get = f
        .try_as(&elsewhere, json!({"op": "get", "session": s}), t0)
        .await
        .unwrap();
    assert_eq!(get.session, Some(None));
    assert!(!get.granted);
    assert_eq!(f.counter("r").await, 0, "nothing written");
}

#[tokio::test]
async fn release_and_renew_of_a_sessions_permit_and_an_acquire_with_a_ttl_that_takes_it_out() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 60, t0).await;
    for r in ["x", "y", "z"] {
        assert!(f.acquire_in(r, "agent-1", &s, t0).await.granted);
    }
    // renew: granted, and only its value changes: its end stays the session's.
    let renewed = f
        .call(json!({"op": "renew", "resource": "x", "holder": "agent-1", "token": 1, "ttlSeconds": 5}), t0 + 1_000)
        .await;
    assert!(renewed.granted, "{renewed:?}");
    assert_eq!(renewed.expires_at, Some(iso8601(t0 + 60_000)));
    assert_eq!(renewed.holders[0].session.as_deref(), Some(s.as_str()));
    // release: off the session's list, the session lives on.
    let released = f
        .call(
            json!({"op": "release", "resource": "y", "holder": "agent-1", "token": 1}),
            t0 + 1_000,
        )
        .await;
    assert!(released.granted, "{released:?}");
    // An acquire with a ttl of its own by the holder: the permit leaves the session.
    let own = f
        .call(
            json!({"op": "acquire", "resource": "z", "holder": "agent-1", "ttlSeconds": 300}),
            t0 + 1_000,
        )
        .await;
    assert!(own.granted);
    assert_eq!(
        own.fencing_token,
        Some(1),
        "the holder's own permit, same token"
    );
    assert_eq!(own.expires_at, Some(iso8601(t0 + 301_000)));
    assert_eq!(own.holders[0].session, None);
    let view = f.session(&s, t0 + 1_000).await.unwrap();
    assert_eq!(leases_of(&view), [("x", 1)]);
    // The session's close leaves z alone.
    f.call(
        json!({"op": "close", "session": s, "holder": "agent-1"}),
        t0 + 2_000,
    )
    .await;
    assert!(f.get("z", t0 + 2_000).await.granted);
    assert!(!f.get("x", t0 + 2_000).await.granted);
}

#[tokio::test]
async fn a_session_holds_at_most_256_permits() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 600, t0).await;
    f.fill(&s, 256, t0).await;
    let full = f.acquire_in("one-more", "agent-1", &s, t0).await;
    assert_eq!(rules(&full), ["SESSION_FULL"], "{full:?}");
    assert_eq!(full.witnesses[0].actual, Some(json!(256)));
    assert_eq!(f.counter("one-more").await, 0, "nothing written");
    // A permit it has takes no more room; a set that would pass the limit is refused whole.
    assert!(f.acquire_in("one-0", "agent-1", &s, t0).await.granted);
    let set = f
        .call(json!({"op": "acquire", "resources": ["one-1", "two-more"], "holder": "agent-1", "session": s}), t0)
        .await;
    assert_eq!(rules(&set), ["SESSION_FULL"]);
    // A release makes room.
    let r = f
        .call(
            json!({"op": "release", "resource": "one-15", "holder": "agent-1", "token": 1}),
            t0,
        )
        .await;
    assert!(r.granted);
    assert!(f.acquire_in("one-more", "agent-1", &s, t0).await.granted);
    assert_eq!(f.session(&s, t0).await.unwrap().leases.len(), 256);
}

#[tokio::test]
async fn a_requestid_makes_each_session_op_apply_once() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let open = json!({"op": "open", "holder": "agent-1", "ttlSeconds": 60, "requestId": "open-1"});
    let first = f.call(open.clone(), t0).await;
    let again = f.call(open, t0 + 5_000).await;
    assert!(again.replayed);
    let id = first.session.clone().flatten().unwrap().id;
    assert_eq!(
        again.session.flatten().unwrap().id,
        id,
        "the same session, not a second"
    );
    let keep =
        json!({"op": "keepalive", "session": id, "holder": "agent-1", "requestId": "keep-1"});
    let kept = f.call(keep.clone(), t0 + 10_000).await;
    let replay = f.call(keep, t0 + 30_000).await;
    assert!(replay.replayed);
    assert_eq!(replay.session, kept.session);
    assert_eq!(
        f.session(&id, t0 + 30_000).await.unwrap().expires_at,
        iso8601(t0 + 70_000),
        "applied once, at its first call"
    );
    let acquire = json!({"op": "acquire", "resource": "r", "holder": "agent-1", "session": id, "requestId": "acq-1"});
    let granted = f.call(acquire.clone(), t0 + 31_000).await;
    f.call(
        json!({"op": "close", "session": id, "holder": "agent-1"}),
        t0 + 32_000,
    )
    .await;
    let replayed = f.call(acquire, t0 + 33_000).await;
    assert!(replayed.replayed && replayed.granted);
    assert_eq!(replayed.fencing_token, granted.fencing_token);
    assert_eq!(f.counter("r").await, 1);
}

/// A waiter of a resource held in a session is served when the session ends: at once after a
/// close, at the instant of a lapse. Real time: the waits are real.
#[tokio::test]
async fn a_sessions_end_serves_the_waiters_of_its_resources() {
    let f = Arc::new(Fixture::new().await);
    let s = f.open("agent-1", 600, now_ms()).await;
    assert!(f.acquire_in("w", "agent-1", &s, now_ms()).await.granted);
    let wait = |f: Arc<Fixture>| {
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let body = json!({"op": "acquire", "resource": "w", "holder": "waiter", "ttlSeconds": 30, "waitSeconds": 10});
            let a = f.call(body, now_ms()).await;
            (a, started.elapsed())
        })
    };
    let waiter = wait(f.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    f.call(
        json!({"op": "close", "session": s, "holder": "agent-1"}),
        now_ms(),
    )
    .await;
    let (a, took) = waiter.await.unwrap();
    assert!(a.granted, "{a:?}");
    assert_eq!(a.fencing_token, Some(2));
    assert!(
        took < Duration::from_secs(3),
        "served when the session closed, not at the wait's end: {took:?}"
    );

    // A lapse: a session of 1 s, nobody closes it.
    let s = f.open("agent-1", 1, now_ms()).await;
    assert!(f.acquire_in("v", "agent-1", &s, now_ms()).await.granted);
    let body: Value = json!({"op": "acquire", "resource": "v", "holder": "waiter", "ttlSeconds": 30, "waitSeconds": 10});
    let started = std::time::Instant::now();
    let a = f.call(body, now_ms()).await;
    assert!(a.granted, "{a:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "served at the lapse: {:?}",
        started.elapsed()
    );
}

/// Two acquires race for a session's last room: the store's condition on the session's list
/// lets one in, and the other, read again, is told SESSION_FULL. Real concurrency.
#[tokio::test]
async fn two_acquires_racing_for_a_sessions_last_room_get_it_once() {
    let f = Arc::new(Fixture::new().await);
    let t0 = now_ms();
    let s = f.open("agent-1", 600, t0).await;
    f.fill(&s, 255, t0).await;
    for round in 0..5 {
        let racers: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|side| {
                let (f, s) = (f.clone(), s.clone());
                let resource = format!("{side}-{round}");
                tokio::spawn(async move { f.acquire_in(&resource, "agent-1", &s, now_ms()).await })
            })
            .collect();
        let mut granted = Vec::new();
        for racer in racers {
            let a = racer.await.unwrap();
            if a.granted {
                granted.push(a);
            } else {
                assert_eq!(rules(&a), ["SESSION_FULL"], "{a:?}");
            }
        }
        assert_eq!(
            granted.len(),
            1,
            "round {round}: exactly one gets the last room"
        );
        let view = f.session(&s, now_ms()).await.unwrap();
        assert_eq!(view.leases.len(), 256);
        // Room again for the next round.
        let last = view
            .leases
            .iter()
            .find(|l| l.resource.ends_with(&format!("-{round}")) && !l.resource.starts_with("r"))
            .unwrap();
        let body = json!({"op": "release", "resource": last.resource, "holder": "agent-1", "token": last.fencing_token});
        assert!(f.call(body, now_ms()).await.granted);
    }
}

/// A waiting acquire in a session: granted in it when the permit frees (its end the session's,
/// on its list), and told SESSION_EXPIRED if its session ends while it waits. Real time.
#[tokio::test]
async fn a_waiting_acquire_in_a_session_is_granted_in_it() {
    let f = Arc::new(Fixture::new().await);
    let s = f.open("agent-1", 600, now_ms()).await;
    let held = json!({"op": "acquire", "resource": "q", "holder": "other", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let waiter = {
        let (f, s) = (f.clone(), s.clone());
        tokio::spawn(async move {
            let body = json!({"op": "acquire", "resource": "q", "holder": "agent-1", "session": s, "waitSeconds": 10});
            f.call(body, now_ms()).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = json!({"op": "release", "resource": "q", "holder": "other", "token": 1});
    assert!(f.call(release, now_ms()).await.granted);
    let a = waiter.await.unwrap();
    assert!(a.granted, "{a:?}");
    assert_eq!(a.fencing_token, Some(2));
    assert_eq!(a.holders[0].session.as_deref(), Some(s.as_str()));
    let view = f.session(&s, now_ms()).await.unwrap();
    assert_eq!(leases_of(&view), [("q", 2)]);
    assert_eq!(a.expires_at.as_deref(), Some(view.expires_at.as_str()));

    // Its session closes while it waits: the wait ends, told why, and the permit handed to its
    // call (it has a requestId: a ticket) goes on at once instead of being kept for it.
    let held = json!({"op": "acquire", "resource": "p", "holder": "other", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let waiter = {
        let (f, s) = (f.clone(), s.clone());
        tokio::spawn(async move {
            let body = json!({"op": "acquire", "resource": "p", "holder": "agent-1", "session": s, "waitSeconds": 3, "requestId": "wait-p"});
            f.call(body, now_ms()).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let close = json!({"op": "close", "session": s, "holder": "agent-1"});
    assert!(f.call(close, now_ms()).await.granted);
    let release = json!({"op": "release", "resource": "p", "holder": "other", "token": 1});
    assert!(f.call(release, now_ms()).await.granted);
    let a = waiter.await.unwrap();
    assert!(!a.granted, "{a:?}");
    assert_eq!(rules(&a), ["SESSION_EXPIRED"]);
    let p = f.get("p", now_ms()).await;
    assert!(p.holders.iter().all(|h| h.holder != "agent-1"), "{p:?}");
}

/// list entries name the session of each permit, and a closed session's resources leave the
/// list (their permits are judged through it, as any read's are).
#[tokio::test]
async fn list_entries_name_their_session_and_an_ended_ones_are_not_listed() {
    let f = Fixture::new().await.checking_shapes();
    let t0 = now_ms();
    let s = f.open("agent-1", 60, t0).await;
    assert!(f.acquire_in("job:a", "agent-1", &s, t0).await.granted);
    f.acquire("job:b", "agent-2", t0).await;
    let page = f.call(json!({"op": "list", "prefix": "job:"}), t0).await;
    let entries: Vec<(String, Option<String>)> = page
        .leases
        .unwrap()
        .iter()
        .map(|m| (m.resource.clone(), m.holders[0].session.clone()))
        .collect();
    assert_eq!(
        entries,
        [
            ("job:a".to_owned(), Some(s.clone())),
            ("job:b".to_owned(), None)
        ]
    );
    f.call(
        json!({"op": "close", "session": s, "holder": "agent-1"}),
        t0 + 1_000,
    )
    .await;
    let page = f
        .call(json!({"op": "list", "prefix": "job:"}), t0 + 1_000)
        .await;
    let listed: Vec<String> = page
        .leases
        .unwrap()
        .iter()
        .map(|m| m.resource.clone())
        .collect();
    assert_eq!(listed, ["job:b"]);
}

/// An operator's revoke of a session: it ends, with every permit in it, at once; the audit keeps
/// who, when, why, and the permits it ended with their resources. A resource's revoke of a
/// session's permit takes it off the session's list.
#[tokio::test]
async fn a_revoke_of_a_session_ends_every_permit_in_it_and_is_audited() {
    let f = Fixture::new().await.checking_shapes().acting_as("key:ops");
    let t0 = now_ms();
    let s = f.open("agent-1", 600, t0).await;
    for r in ["a", "b", "c"] {
        assert!(f.acquire_in(r, "agent-1", &s, t0).await.granted);
    }
    let one =
        json!({"op": "revoke", "resource": "c", "holder": "agent-1", "reason": "c is wedged"});
    assert!(f.call(one, t0 + 1_000).await.granted);
    let view = f.session(&s, t0 + 1_000).await.unwrap();
    assert_eq!(leases_of(&view), [("a", 1), ("b", 1)], "c is off its list");

    let revoke = json!({"op": "revoke", "session": s, "reason": "agent-1 is stuck"});
    let revoked = f.call(revoke.clone(), t0 + 2_000).await;
    assert!(revoked.granted, "{revoked:?}");
    assert_eq!(revoked.session, Some(None));
    let ended: Vec<(Option<&str>, u64)> = revoked
        .revoked
        .as_ref()
        .unwrap()
        .iter()
        .map(|h| (h.resource.as_deref(), h.fencing_token))
        .collect();
    assert_eq!(ended, [(Some("a"), 1), (Some("b"), 1)]);
    for r in ["a", "b"] {
        assert!(!f.get(r, t0 + 2_000).await.granted, "{r} is free");
    }
    let kept = f
        .call(
            json!({"op": "keepalive", "session": s, "holder": "agent-1"}),
            t0 + 3_000,
        )
        .await;
    assert_eq!(rules(&kept), ["SESSION_EXPIRED"]);
    let again = f.call(revoke, t0 + 3_000).await;
    assert_eq!(rules(&again), ["SESSION_EXPIRED"], "nothing left to revoke");

    let audit = f.call(json!({"op": "audit"}), t0 + 4_000).await;
    let entries = audit.entries.unwrap();
    assert_eq!(entries.len(), 2, "{entries:?}");
    let newest = &entries[0];
    assert_eq!(
        (
            newest.resource.as_deref(),
            newest.session.as_deref(),
            newest.actor.as_str()
        ),
        (None, Some(s.as_str()), "key:ops")
    );
    assert_eq!(newest.reason, "agent-1 is stuck");
    assert_eq!(newest.ended.len(), 2);
    assert_eq!(entries[1].resource.as_deref(), Some("c"));
    let of_c = f
        .call(json!({"op": "audit", "resource": "c"}), t0 + 4_000)
        .await;
    assert_eq!(
        of_c.entries.unwrap().len(),
        1,
        "a resource's audit lists its own revokes"
    );
}

/// A close recorded under a requestId replays as it was answered, `"session": null` and all
/// (the attack on sessions, 2026-12-05: the replay read null as absent and answered as a
/// resource's answer, with holder, fencingToken, expiresAt, limit and holders).
#[tokio::test]
async fn a_replayed_close_is_the_answer_it_was() {
    let f = Fixture::new().await;
    let t0 = now_ms();
    let s = f.open("agent-1", 60, t0).await;
    let close = json!({"op": "close", "session": s, "holder": "agent-1", "requestId": "close-1"});
    let first = f.signed(&common::service::req(close.clone()), t0).await;
    let again = f.signed(&common::service::req(close), t0 + 1_000).await;
    assert!(again.data.replayed);
    let mut first_data = serde_json::to_value(&first.data).unwrap();
    let mut again_data = serde_json::to_value(&again.data).unwrap();
    first_data["replayed"] = json!(true);
    again_data["replayed"] = json!(true);
    assert_eq!(again_data, first_data);
    assert_eq!(again_data["session"], Value::Null);
    assert!(again_data.get("holder").is_none(), "{again_data}");
}

/// A place kept in a session between its holder's calls (no requestId: no ticket) is that
/// session's: a permit freed while the holder is away is handed to it as the session's permit,
/// and ends when the session does; a place whose session has ended is skipped, and the waiters
/// behind it are served. (The attack of 2026-12-05: the hand-off was a plain permit for the
/// place's 30 s, the session's end did not end it, and the waiters behind waited.)
#[tokio::test]
async fn a_place_kept_in_a_session_ends_with_it_and_so_does_a_permit_handed_to_it() {
    let f = Fixture::new().await;
    let held = |resource: &str| json!({"op": "acquire", "resource": resource, "holder": "other", "ttlSeconds": 60});
    let release = |resource: &str| json!({"op": "release", "resource": resource, "holder": "other", "token": 1});
    let wait_once = |resource: &str, s: &str| json!({"op": "acquire", "resource": resource, "holder": "agent-1", "session": s, "waitSeconds": 1});
    let third = |resource: &str| json!({"op": "acquire", "resource": resource, "holder": "agent-3", "ttlSeconds": 60});

    // Handed while the session lives: the session's permit, not listed until taken.
    let s = f.open("agent-1", 600, now_ms()).await;
    assert!(f.call(held("a"), now_ms()).await.granted);
    let waited = f.call(wait_once("a", &s), now_ms()).await;
    assert!(
        !waited.granted && waited.queue_position == Some(1),
        "{waited:?}"
    );
    assert!(f.call(release("a"), now_ms()).await.granted);
    let a = f.get("a", now_ms()).await;
    assert_eq!(a.holder.as_deref(), Some("agent-1"));
    assert_eq!(a.holders[0].session.as_deref(), Some(s.as_str()));
    assert!(leases_of(&f.session(&s, now_ms()).await.unwrap()).is_empty());
    // The session ends: the permit handed to it with it, at once.
    let close = json!({"op": "close", "session": s, "holder": "agent-1"});
    assert!(f.call(close, now_ms()).await.granted);
    let a = f.get("a", now_ms()).await;
    assert!(
        !a.granted,
        "the handed permit ended with its session: {a:?}"
    );
    let took = f.call(third("a"), now_ms()).await;
    assert_eq!(
        (took.granted, took.fencing_token),
        (true, Some(3)),
        "{took:?}"
    );

    // The session ends before the permit is freed: its place is skipped.
    let s = f.open("agent-1", 600, now_ms()).await;
    assert!(f.call(held("b"), now_ms()).await.granted);
    assert!(!f.call(wait_once("b", &s), now_ms()).await.granted);
    let close = json!({"op": "close", "session": s, "holder": "agent-1"});
    assert!(f.call(close, now_ms()).await.granted);
    let b = f.get("b", now_ms()).await;
    assert_eq!(b.queue_position, None, "{b:?}");
    assert!(f.call(release("b"), now_ms()).await.granted);
    let took = f.call(third("b"), now_ms()).await;
    assert!(
        took.granted,
        "nobody waits ahead of agent-3 any more: {took:?}"
    );

    // Taken by the holder's next acquire in the session: listed in it from then on.
    let s = f.open("agent-1", 600, now_ms()).await;
    assert!(f.call(held("c"), now_ms()).await.granted);
    assert!(!f.call(wait_once("c", &s), now_ms()).await.granted);
    assert!(f.call(release("c"), now_ms()).await.granted);
    let taken = f.acquire_in("c", "agent-1", &s, now_ms()).await;
    assert_eq!(
        (taken.granted, taken.fencing_token),
        (true, Some(2)),
        "{taken:?}"
    );
    assert_eq!(
        leases_of(&f.session(&s, now_ms()).await.unwrap()),
        [("c", 2)]
    );
    // A full session's holder cannot take it: refused, and the permit goes on.
    let s2 = f.open("agent-1", 600, now_ms()).await;
    assert!(f.call(held("d"), now_ms()).await.granted);
    assert!(!f.call(wait_once("d", &s2), now_ms()).await.granted);
    f.fill(&s2, 256, now_ms()).await;
    assert!(f.call(release("d"), now_ms()).await.granted);
    assert_eq!(
        f.get("d", now_ms()).await.fencing_token,
        Some(2),
        "handed to the place"
    );
    let refused = f.acquire_in("d", "agent-1", &s2, now_ms()).await;
    assert_eq!(rules(&refused), ["SESSION_FULL"]);
    let took = f.call(third("d"), now_ms()).await;
    assert!(
        took.granted,
        "the refusal passed the handed permit on: {took:?}"
    );
    assert_eq!(took.fencing_token, Some(3));
}

/// A retry with the requestId of a waiting call in a session, after the session ended, is
/// refused as any acquire in an ended session is: the grant handed to its place ended with the
/// session, and is not replayed as live (the attack of 2026-12-05: it answered granted, token 2,
/// outside any session, while the next acquire was granted token 3).
#[tokio::test]
async fn a_retry_of_a_waiting_call_whose_session_ended_is_refused_not_replayed() {
    let f = Fixture::new().await;
    let held = json!({"op": "acquire", "resource": "r", "holder": "h1", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let s = f.open("h2", 60, now_ms()).await;
    let wait = json!({"op": "acquire", "resource": "r", "holder": "h2", "session": s, "waitSeconds": 1, "requestId": "wq"});
    assert!(!f.call(wait.clone(), now_ms()).await.granted);
    let release = json!({"op": "release", "resource": "r", "holder": "h1", "token": 1});
    let released = f.call(release, now_ms()).await;
    assert_eq!(
        (released.holder.as_deref(), released.fencing_token),
        (Some("h2"), Some(2))
    );
    let close = json!({"op": "close", "session": s, "holder": "h2"});
    assert!(f.call(close, now_ms()).await.granted);
    let retry = f.call(wait, now_ms()).await;
    assert!(!retry.granted, "{retry:?}");
    assert_eq!(rules(&retry), ["SESSION_EXPIRED"]);
    let check = json!({"op": "check", "resource": "r", "token": 2});
    assert_eq!(f.call(check, now_ms()).await.current, Some(false));
    let next = json!({"op": "acquire", "resource": "r", "holder": "h4", "ttlSeconds": 60});
    let next = f.call(next, now_ms()).await;
    assert_eq!((next.granted, next.fencing_token), (true, Some(3)));
}

/// A permit handed to a session's place lives as the session does: each keepalive moves it, up
/// to the place's own end (the attack of 2026-12-05: it lapsed at the session's end as of the
/// hand-off, and the waiter behind took it while the session lived).
#[tokio::test]
async fn a_permit_handed_to_a_sessions_place_moves_with_its_keepalives() {
    let f = Fixture::new().await;
    let held = json!({"op": "acquire", "resource": "r", "holder": "h1", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let s = f.open("h2", 2, now_ms()).await;
    let wait =
        json!({"op": "acquire", "resource": "r", "holder": "h2", "session": s, "waitSeconds": 1});
    assert!(!f.call(wait, now_ms()).await.granted);
    let release = json!({"op": "release", "resource": "r", "holder": "h1", "token": 1});
    assert!(f.call(release, now_ms()).await.granted);
    // Three times the session's ttl, kept alive every half second.
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let keepalive = json!({"op": "keepalive", "session": s, "holder": "h2"});
        assert!(f.call(keepalive, now_ms()).await.granted);
    }
    let third = json!({"op": "acquire", "resource": "r", "holder": "h3", "ttlSeconds": 60});
    let third = f.call(third, now_ms()).await;
    assert!(!third.granted, "{third:?}");
    assert_eq!(third.holder.as_deref(), Some("h2"));
    let taken = f.acquire_in("r", "h2", &s, now_ms()).await;
    assert_eq!(
        (taken.granted, taken.fencing_token),
        (true, Some(2)),
        "{taken:?}"
    );
}

/// A close (or revoke) serves at once the waiters behind a place its session kept, though the
/// session lists no permit there (the attack of 2026-12-05: they waited until the session's old
/// end, or out their whole wait).
#[tokio::test]
async fn a_close_serves_at_once_the_waiters_behind_its_sessions_place() {
    let f = Arc::new(Fixture::new().await);
    let held = json!({"op": "acquire", "resource": "r", "holder": "h1", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let s = f.open("h2", 600, now_ms()).await;
    let wait =
        json!({"op": "acquire", "resource": "r", "holder": "h2", "session": s, "waitSeconds": 1});
    assert!(!f.call(wait, now_ms()).await.granted);
    let waiter = {
        let f = f.clone();
        tokio::spawn(async move {
            let body = json!({"op": "acquire", "resource": "r", "holder": "h3", "ttlSeconds": 60, "waitSeconds": 10});
            let a = f.call(body, now_ms()).await;
            (a, std::time::Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = json!({"op": "release", "resource": "r", "holder": "h1", "token": 1});
    let released = f.call(release, now_ms()).await;
    assert_eq!(
        released.holder.as_deref(),
        Some("h2"),
        "handed to the place in front"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let close = json!({"op": "close", "session": s, "holder": "h2"});
    let closed_at = std::time::Instant::now();
    assert!(f.call(close, now_ms()).await.granted);
    let (a, answered_at) = waiter.await.unwrap();
    assert_eq!((a.granted, a.fencing_token), (true, Some(3)), "{a:?}");
    let after = answered_at.duration_since(closed_at);
    assert!(
        after < Duration::from_millis(500),
        "answered {after:?} after the close"
    );
}

/// A keepalive that moves a session's end earlier (a shorter ttl than the last) serves the
/// waiters of its permits and places at the new end, not at the old one their timers were set
/// to (the attack of 2026-12-07: they were answered only at their own wait's end). With and
/// without a requestId (a keepalive without one is a single conditional write, without a read),
/// for a permit the session holds and for one handed to its place.
#[tokio::test]
async fn a_keepalive_that_ends_a_session_sooner_serves_its_waiters_at_the_new_end() {
    let f = Arc::new(Fixture::new().await);
    let waiter = |resource: &str| {
        let f = f.clone();
        let body = json!({"op": "acquire", "resource": resource, "holder": "w", "ttlSeconds": 60, "waitSeconds": 10});
        tokio::spawn(async move {
            let a = f.call(body, now_ms()).await;
            (a, std::time::Instant::now())
        })
    };
    // The keepalive that gives the session 1 s more: when it was sent.
    async fn shortened(f: &Fixture, s: &str, holder: &str, id: Option<&str>) -> std::time::Instant {
        let mut keep = json!({"op": "keepalive", "session": s, "holder": holder, "ttlSeconds": 1});
        if let Some(id) = id {
            keep["requestId"] = json!(id);
        }
        let kept_at = std::time::Instant::now();
        assert!(f.call(keep, now_ms()).await.granted);
        kept_at
    }
    let served = |answered: (LeaseAnswer, std::time::Instant), kept_at: std::time::Instant| {
        let (a, at) = answered;
        assert!(a.granted, "{a:?}");
        let after = at.duration_since(kept_at);
        // At the new end: not before it (the session lives until then), and not much after.
        assert!(
            after > Duration::from_millis(900) && after < Duration::from_millis(1600),
            "answered {after:?} after the keepalive that left 1 s"
        );
    };
    // A watch of the resource hears the change as soon.
    let watch = |resource: &str, tag: String| {
        let f = f.clone();
        let body = json!({"op": "watch", "resource": resource, "stateTag": tag, "waitSeconds": 10});
        tokio::spawn(async move {
            let a = f.call(body, now_ms()).await;
            assert_eq!(a.changed, Some(true), "{a:?}");
            (a, std::time::Instant::now())
        })
    };
    for (resource, id) in [("held", None), ("held-id", Some("keep-1"))] {
        let s = f.open("agent-1", 600, now_ms()).await;
        let held = f.acquire_in(resource, "agent-1", &s, now_ms()).await;
        assert!(held.granted);
        let heard = watch(resource, held.state_tag.expect("a state tag"));
        let w = waiter(resource);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let kept_at = shortened(&f, &s, "agent-1", id).await;
        served(w.await.unwrap(), kept_at);
        served(heard.await.unwrap(), kept_at);
    }
    // A permit handed to the session's place, not taken yet.
    let held = json!({"op": "acquire", "resource": "placed", "holder": "h1", "ttlSeconds": 60});
    assert!(f.call(held, now_ms()).await.granted);
    let s = f.open("h2", 600, now_ms()).await;
    let wait = json!({"op": "acquire", "resource": "placed", "holder": "h2", "session": s, "waitSeconds": 1});
    assert!(!f.call(wait, now_ms()).await.granted);
    let w = waiter("placed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = json!({"op": "release", "resource": "placed", "holder": "h1", "token": 1});
    assert_eq!(
        f.call(release, now_ms()).await.holder.as_deref(),
        Some("h2")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let kept_at = shortened(&f, &s, "h2", None).await;
    served(w.await.unwrap(), kept_at);
}
