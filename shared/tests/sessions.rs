//! Sessions' items over the real store (docs/adr/0010), time passed in: a session is found only
//! in its own tenant, kept alive only by its holder while it lives, and once ended never comes
//! back, whoever writes and however the writes race.

mod common;

use common::test_store;
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::lease::session::{Ended, Session, SessionPermit, SessionWrite};
use leasekit_core::store::session_store::SessionKey;
use leasekit_core::store::{KeptAlive, SessionStore, SessionWritten};
use leasekit_core::tenant::Tenant;
use std::sync::Arc;

async fn store() -> SessionStore {
    let s = test_store().await;
    SessionStore::new(s.client, &s.tables.leases)
}

fn tenant(name: &str) -> Tenant {
    Tenant::for_key("acme", name).unwrap()
}

fn opened(id: &str, now: Millis) -> Session {
    Session::open(id, "agent-1", 30_000, now)
}

#[tokio::test]
async fn a_session_is_found_in_its_own_tenant_only_with_its_permits() {
    let sessions = store().await;
    let t0 = now_ms();
    let mut session = opened("s-found", t0);
    session
        .permits
        .insert("deploy:prod".into(), SessionPermit { token: 7, limit: 1 });
    session
        .permits
        .insert("gpu-pool".into(), SessionPermit { token: 3, limit: 4 });
    sessions.open(&tenant("t1"), &session).await.unwrap();
    assert_eq!(
        sessions.get(&tenant("t1"), "s-found").await.unwrap(),
        Some(session)
    );
    assert_eq!(
        sessions.get(&tenant("t2"), "s-found").await.unwrap(),
        None,
        "another tenant's"
    );
    assert_eq!(
        sessions.get(&tenant("t1"), "s-unknown").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn only_its_holder_keeps_it_alive_and_only_while_it_lives() {
    let sessions = store().await;
    let t = tenant("t1");
    let t0 = now_ms();
    let session = opened("s-keep", t0);
    sessions.open(&t, &session).await.unwrap();
    let later = t0 + 20_000;
    let write = session.keepalive("agent-1", None, later).unwrap();
    let kept = sessions
        .write(&t, "s-keep", Some("agent-1"), &write, later)
        .await
        .unwrap();
    let SessionWritten::Done(kept) = kept else {
        panic!("kept alive: {kept:?}")
    };
    assert_eq!(kept.expires_at, later + 30_000);
    // Another holder's write is refused by the store itself, whatever the caller decided.
    let refused = sessions
        .write(&t, "s-keep", Some("agent-2"), &write, later)
        .await
        .unwrap();
    assert_eq!(refused, SessionWritten::Refused(Some(kept.clone())));
    // At its expiry it has lapsed: no keepalive, not even its holder's.
    let lapsed = kept.expires_at;
    let late = SessionWrite {
        expires_at: lapsed + 30_000,
        ended: None,
    };
    let refused = sessions
        .write(&t, "s-keep", Some("agent-1"), &late, lapsed)
        .await
        .unwrap();
    assert!(
        matches!(refused, SessionWritten::Refused(Some(_))),
        "{refused:?}"
    );
    // An unknown session: refused, and nothing is made.
    let refused = sessions
        .write(&t, "s-none", Some("agent-1"), &write, later)
        .await
        .unwrap();
    assert_eq!(refused, SessionWritten::Refused(None));
    assert_eq!(sessions.get(&t, "s-none").await.unwrap(), None);
}

/// A keepalive is one conditional write with no read, and says whether it moved the session's
/// end earlier: then the waiters of its permits and places must be told, their timers being set
/// to the old end (the attack of 2026-12-07).
#[tokio::test]
async fn a_keepalive_says_whether_it_moved_the_end_earlier() {
    let sessions = store().await;
    let t = tenant("t1");
    let key = SessionKey::new(&t, "s-sooner");
    let t0 = now_ms();
    let session = opened("s-sooner", t0);
    sessions.open(&t, &session).await.unwrap();
    let kept = |expires_at: Millis, earlier: bool| KeptAlive {
        written: SessionWritten::Done(session_until(&session, expires_at)),
        earlier,
    };
    // A second on, its own ttl (30 s): later. 60 s: later still. Then 1 s: earlier. Then its
    // own ttl again: later than 1 s. Each as the store then shows it.
    let at = t0 + 1_000;
    let keepalives = [
        (None, at, at + 30_000, false),
        (Some(60_000), at, at + 60_000, false),
        (Some(1_000), at, at + 1_000, true),
        (None, at + 500, at + 30_500, false),
    ];
    for (ttl, at, end, earlier) in keepalives {
        let answer = sessions.keep_alive(&key, "agent-1", ttl, at).await.unwrap();
        assert_eq!(answer, kept(end, earlier), "{ttl:?} at {at}");
        assert_eq!(
            sessions.get(&t, "s-sooner").await.unwrap(),
            Some(session_until(&session, end))
        );
    }
    // Another holder's: refused, nothing moved.
    let refused = sessions
        .keep_alive(&key, "agent-2", Some(1_000), at + 600)
        .await
        .unwrap();
    assert_eq!(
        refused,
        KeptAlive {
            written: SessionWritten::Refused(Some(session_until(&session, at + 30_500))),
            earlier: false
        }
    );
}

fn session_until(session: &Session, expires_at: Millis) -> Session {
    Session {
        expires_at,
        ..session.clone()
    }
}

#[tokio::test]
async fn a_closed_or_revoked_session_never_comes_back() {
    let sessions = store().await;
    let t = tenant("t1");
    let t0 = now_ms();
    for (id, ended) in [("s-closed", Ended::Closed), ("s-revoked", Ended::Revoked)] {
        let session = opened(id, t0);
        sessions.open(&t, &session).await.unwrap();
        let at = t0 + 1_000;
        let (holder, write) = match ended {
            Ended::Closed => (Some("agent-1"), session.close("agent-1", at).unwrap()),
            Ended::Revoked => (None, session.revoke(at).unwrap()),
        };
        let done = sessions.write(&t, id, holder, &write, at).await.unwrap();
        let SessionWritten::Done(done) = done else {
            panic!("{done:?}")
        };
        assert_eq!((done.ended, done.expires_at), (Some(ended), at));
        // Its holder's keepalive, even one decided before the close, is refused from then on.
        let keep = SessionWrite {
            expires_at: at + 60_000,
            ended: None,
        };
        for now in [at - 500, at, at + 5_000] {
            let refused = sessions
                .write(&t, id, Some("agent-1"), &keep, now)
                .await
                .unwrap();
            assert_eq!(
                refused,
                SessionWritten::Refused(Some(done.clone())),
                "{id} at {now}"
            );
        }
    }
}

/// Sixteen keepalives race one close: once the close is in, the session stays closed (a
/// keepalive written after it would have brought it back).
#[tokio::test]
async fn keepalives_racing_a_close_never_bring_it_back() {
    let sessions = Arc::new(store().await);
    let t = tenant("t1");
    let t0 = now_ms();
    let session = opened("s-race", t0);
    sessions.open(&t, &session).await.unwrap();
    let keepers: Vec<_> = (0..16)
        .map(|i| {
            let (sessions, t, session) = (sessions.clone(), t.clone(), session.clone());
            tokio::spawn(async move {
                let mut kept = 0;
                for round in 0..10 {
                    let now = t0 + 100 + i * 10 + round;
                    let write = session.keepalive("agent-1", None, now).unwrap();
                    let written = sessions
                        .write(&t, "s-race", Some("agent-1"), &write, now)
                        .await
                        .unwrap();
                    if matches!(written, SessionWritten::Done(_)) {
                        kept += 1;
                    }
                }
                kept
            })
        })
        .collect();
    let close_at = t0 + 150;
    let write = session.close("agent-1", close_at).unwrap();
    let closed = sessions
        .write(&t, "s-race", Some("agent-1"), &write, close_at)
        .await
        .unwrap();
    assert!(matches!(closed, SessionWritten::Done(_)), "{closed:?}");
    let mut kept = 0;
    for keeper in keepers {
        kept += keeper.await.unwrap();
    }
    let last = sessions.get(&t, "s-race").await.unwrap().unwrap();
    assert_eq!(
        (last.ended, last.expires_at),
        (Some(Ended::Closed), close_at),
        "{kept} keepalives got in"
    );
}

/// Write `state` over a never-written lease `key` at `now`, as a session-bound acquire will.
async fn put_fresh(
    leases: &leasekit_core::store::LeaseStore,
    key: &leasekit_core::store::LeaseKey,
    state: leasekit_core::lease::LeaseState,
    now: Millis,
) {
    use leasekit_core::lease::{Effect, Guard, Write};
    use leasekit_core::store::{Commit, Outcome, Rounds};
    let write = Write {
        guard: Guard::Version {
            last_token: 0,
            version: 0,
            single_expiry: None,
        },
        effect: Effect::Replace(state),
    };
    let commit = Commit::Together {
        writes: vec![(key.clone(), write)],
        unchanged: None,
        audit: vec![],
        sessions: vec![],
        record: None,
    };
    assert_eq!(
        leases.commit(&commit, now).await.unwrap(),
        Outcome::Committed(None)
    );
}

/// A resource holding a session's permit (docs/adr/0010): stored as never lapsing by itself, read
/// through its session. A keepalive moves the permit's expiry without writing it; a lapse or a
/// close ends it at once for every reader; and no blind take gets past it, even once its session
/// has ended, without reading.
#[tokio::test]
async fn a_sessions_permit_lives_and_ends_with_its_session() {
    use leasekit_core::lease::model::{Permit, UNTIL_ITS_SESSION_ENDS};
    use leasekit_core::lease::{Effect, Guard, LeaseState, Write};
    use leasekit_core::store::{Commit, LeaseKey, LeaseStore, Outcome, Rounds};

    let s = test_store().await;
    let sessions = SessionStore::new(s.client.clone(), &s.tables.leases);
    let leases = LeaseStore::new(s.client.clone(), &s.tables.leases, &s.tables.requests);
    let t = tenant("t1");
    let t0 = now_ms();
    let mut session = opened("s-permit", t0);
    session
        .permits
        .insert("deploy:prod".into(), SessionPermit { token: 1, limit: 1 });
    sessions.open(&t, &session).await.unwrap();
    let key = LeaseKey::new(&t, "deploy:prod");
    let held = LeaseState {
        last_token: 1,
        version: 1,
        permits: vec![Permit {
            session: Some("s-permit".into()),
            ..Permit::new("agent-1", 1, session.expires_at)
        }],
        ..LeaseState::default()
    };
    put_fresh(&leases, &key, held.clone(), t0).await;

    // As stored: the session's id, and an expiry that never comes by itself.
    let stored = leases.get(&key).await.unwrap();
    assert_eq!(stored.permits[0].expires_at, UNTIL_ITS_SESSION_ENDS);
    assert_eq!(stored.permits[0].session.as_deref(), Some("s-permit"));
    // As read: the session's end.
    let read = |now: Millis| {
        let (leases, key) = (&leases, &key);
        async move {
            leases
                .read(std::slice::from_ref(key), None, None, now)
                .await
                .unwrap()
                .leases
                .remove(0)
        }
    };
    let at = t0 + 1_000;
    assert_eq!(
        read(at).await.live(at).map(|l| l.expires_at),
        Some(t0 + 30_000)
    );
    assert_eq!(
        leases.read_one(&key, at).await.unwrap().permits[0].expires_at,
        t0 + 30_000
    );

    // A keepalive moves it, with no write of the resource.
    let kept_at = t0 + 20_000;
    let keep = session.keepalive("agent-1", None, kept_at).unwrap();
    sessions
        .write(&t, "s-permit", Some("agent-1"), &keep, kept_at)
        .await
        .unwrap();
    let at = t0 + 40_000;
    assert_eq!(
        read(at).await.live(at).map(|l| l.expires_at),
        Some(kept_at + 30_000)
    );
    assert_eq!(
        leases.get(&key).await.unwrap(),
        stored,
        "the resource's item is untouched"
    );

    // Lapsed: free to every reader at that instant...
    let lapsed = kept_at + 30_000;
    assert!(
        read(lapsed - 1)
            .await
            .is_current(1, Some("agent-1"), lapsed - 1)
    );
    assert!(read(lapsed).await.live(lapsed).is_none());
    assert!(!read(lapsed).await.is_current(1, None, lapsed));
    // ...but a blind take, which reads nothing, cannot take it: its guard sees the stored
    // expiry, and what comes back is not planned on (its expiries are unresolved).
    let blind = Write {
        guard: Guard::Vacant,
        effect: Effect::Take {
            holder: "agent-2".into(),
            expires_at: lapsed + 30_000,
        },
    };
    let outcome = leases
        .commit(
            &Commit::Lone {
                key: key.clone(),
                write: blind,
            },
            lapsed,
        )
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Changed(None));
    assert_eq!(leases.get(&key).await.unwrap(), stored);

    // A closed session's permit is free at once, long before its expiry; an unknown one's too.
    let other = opened("s-closed", t0);
    sessions.open(&t, &other).await.unwrap();
    let key2 = LeaseKey::new(&t, "gpu-pool");
    let held2 = LeaseState {
        permits: vec![Permit {
            session: Some("s-closed".into()),
            ..Permit::new("agent-1", 1, other.expires_at)
        }],
        ..held.clone()
    };
    let gone = LeaseState {
        permits: vec![Permit {
            session: Some("s-never-opened".into()),
            ..Permit::new("agent-1", 1, t0 + 30_000)
        }],
        ..held
    };
    let key3 = LeaseKey::new(&t, "never");
    for (key, state) in [(&key2, held2), (&key3, gone)] {
        put_fresh(&leases, key, state, t0).await;
    }
    let at = t0 + 2_000;
    let both = leases
        .read(&[key2.clone(), key3.clone()], None, None, at)
        .await
        .unwrap()
        .leases;
    assert!(
        both[0].live(at).is_some() && both[1].live(at).is_none(),
        "{both:?}"
    );
    let close = other.close("agent-1", at).unwrap();
    sessions
        .write(&t, "s-closed", Some("agent-1"), &close, at)
        .await
        .unwrap();
    assert!(leases.read_one(&key2, at).await.unwrap().live(at).is_none());
    // list shows only what lives.
    let page = leases.list(&t, "", None, 10, at).await.unwrap();
    let names: Vec<&str> = page.leases.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["deploy:prod"]);
}
