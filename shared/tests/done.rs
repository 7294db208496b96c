//! Finished work and claim-next (docs/adr/0012) through the lease service, over the real store
//! (dynoxide, and moto in CI): a done release's mark refuses every kind of acquire, ends the
//! waiters' places, shows in get and list, ends by time or by reopen (audited, the finisher or
//! an admin only); an acquire of candidates takes the first that can be granted now.

mod common;

use common::service::{Fixture, rules};
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::service::lease::LeaseError;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;

fn done(resource: &str, holder: &str, token: u64, extra: Value) -> Value {
    let mut body = json!({"op": "release", "resource": resource, "holder": holder, "token": token, "done": true});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn claim(candidates: &[&str], holder: &str) -> Value {
    json!({"op": "acquire", "candidates": candidates, "holder": holder, "ttlSeconds": 60})
}

/// `f` with task `t` finished by "w1" (token 1) at `now`, with a result, for `keep` seconds.
async fn finished(f: &Fixture, t: &str, now: Millis, keep: u32) {
    f.acquire(t, "w1", now).await;
    let body = done(
        t,
        "w1",
        1,
        json!({"result": "invoice INV-1009 sent", "keepDoneSeconds": keep}),
    );
    let released = f.call(body, now + 1).await;
    assert!(released.granted, "{released:?}");
    assert!(released.holder.is_none());
    let mark = released.done.expect("the release shows the mark");
    assert_eq!((mark.holder.as_str(), mark.fencing_token), ("w1", 1));
}

#[tokio::test]
async fn a_finished_resource_refuses_every_acquire_with_who_finished_it() {
    let f = Fixture::new().await;
    let now = now_ms();
    finished(&f, "task-1", now, 3600).await;
    let acquires = [
        json!({"op": "acquire", "resource": "task-1", "holder": "w2"}),
        json!({"op": "acquire", "resource": "task-1", "holder": "w1"}),
        json!({"op": "acquire", "resource": "task-1", "holder": "w2", "limit": 3}),
        json!({"op": "acquire", "resource": "task-1", "holder": "w2", "requestId": "r-1"}),
        json!({"op": "acquire", "resources": ["task-1", "other"], "holder": "w2"}),
    ];
    for (i, body) in acquires.into_iter().enumerate() {
        let a = f.call(body.clone(), now + 2 + i as Millis).await;
        assert!(!a.granted, "{body}");
        assert_eq!(rules(&a), ["DONE"], "{body}");
        let actual = a.witnesses[0].actual.clone().unwrap();
        assert_eq!(actual["holder"], "w1");
        assert_eq!(actual["fencingToken"], 1);
        assert_eq!(actual["result"], "invoice INV-1009 sent");
    }
    // A waiting acquire is told at once, not after its wait.
    let started = std::time::Instant::now();
    let waited = f
        .call(
            json!({"op": "acquire", "resource": "task-1", "holder": "w3", "waitSeconds": 5}),
            now_ms(),
        )
        .await;
    assert_eq!(rules(&waited), ["DONE"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_eq!(waited.queue_position, None);
    // get and list show the mark; nothing was granted, the counter is where it was.
    let got = f
        .call(json!({"op": "get", "resource": "task-1"}), now + 10)
        .await;
    let mark = got.done.expect("get shows the mark");
    assert_eq!(mark.result.as_deref(), Some("invoice INV-1009 sent"));
    let listed = f.call(json!({"op": "list"}), now + 10).await;
    let entry = listed
        .leases
        .unwrap()
        .into_iter()
        .find(|l| l.resource == "task-1")
        .expect("a finished resource is listed");
    assert_eq!(
        entry.done.flatten().map(|d| d.holder),
        Some("w1".to_owned())
    );
    assert_eq!(f.counter("task-1").await, 1);
    // A resource not finished says so: done is null.
    f.acquire("task-2", "w1", now).await;
    let open = f
        .call(json!({"op": "get", "resource": "task-2"}), now + 10)
        .await;
    assert_eq!(open.done, None);
}

#[tokio::test]
async fn the_mark_ends_by_itself_and_tokens_continue() {
    let f = Fixture::new().await;
    let now = now_ms();
    finished(&f, "t", now, 2).await;
    let before_end = now + 1 + 2_000 - 1;
    let refused = f
        .call(
            json!({"op": "acquire", "resource": "t", "holder": "w2"}),
            before_end,
        )
        .await;
    assert_eq!(rules(&refused), ["DONE"]);
    // At its end (done at now + 1, kept 2 s): free, the next token, the stale mark dropped.
    let at_end = now + 1 + 2_000;
    let got = f.call(json!({"op": "get", "resource": "t"}), at_end).await;
    assert_eq!(got.done, None);
    // A list leaves it out, and tidies its entry away although the stale mark is still stored.
    let listed = f.call(json!({"op": "list"}), at_end).await;
    assert_eq!(listed.leases.map(|l| l.len()), Some(0));
    let item = f
        .client
        .get_item()
        .table_name(&f.tables.leases)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("{}|t", f.tenant)),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert!(
        item.contains_key("dn") && !item.contains_key("lt"),
        "{item:?}"
    );
    let again = f
        .call(
            json!({"op": "acquire", "resource": "t", "holder": "w2"}),
            at_end,
        )
        .await;
    assert!(again.granted, "{again:?}");
    assert_eq!(again.fencing_token, Some(2));
    let stored = f
        .store
        .get(&leasekit_core::store::LeaseKey::new(&f.tenant, "t"))
        .await
        .unwrap();
    assert_eq!(stored.done, None, "the write after the end drops the mark");
}

#[tokio::test]
async fn a_done_release_ends_the_places_of_those_waiting() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("job", "w1", now).await;
    // w2 waits 1 s and goes away with its place kept (30 s).
    let wait = json!({"op": "acquire", "resource": "job", "holder": "w2", "ttlSeconds": 60, "waitSeconds": 1});
    assert_eq!(f.call(wait.clone(), now_ms()).await.queue_position, Some(1));
    let released = f.call(done("job", "w1", 1, json!({})), now_ms()).await;
    assert!(released.granted);
    // Nothing was handed to w2's place: it is told DONE.
    let back = f.call(wait, now_ms()).await;
    assert_eq!(rules(&back), ["DONE"]);
    assert!(back.holders.is_empty());
    assert_eq!(f.counter("job").await, 1);
}

#[tokio::test]
async fn a_semaphores_other_permits_stay_when_one_holder_finishes() {
    let f = Fixture::new().await;
    let now = now_ms();
    for holder in ["a", "b"] {
        let a = f
            .call(
                json!({"op": "acquire", "resource": "s", "holder": holder, "limit": 2, "ttlSeconds": 60}),
                now,
            )
            .await;
        assert!(a.granted);
    }
    let released = f.call(done("s", "a", 1, json!({})), now + 1).await;
    assert!(released.granted, "{released:?}");
    assert_eq!(released.holders.len(), 1);
    let renewed = f
        .call(
            json!({"op": "renew", "resource": "s", "holder": "b", "token": 2, "ttlSeconds": 60}),
            now + 2,
        )
        .await;
    assert!(renewed.granted, "{renewed:?}");
    let c = f
        .call(
            json!({"op": "acquire", "resource": "s", "holder": "c", "limit": 2}),
            now + 3,
        )
        .await;
    assert_eq!(rules(&c), ["DONE"]);
    // The other holder cannot replace the mark (shorten it, take its reopen from "a"): its done
    // release is refused, nothing changed; a plain release ends its permit.
    let b_done = done("s", "b", 2, json!({"result": "mine", "keepDoneSeconds": 1}));
    let refused = f.call(b_done, now + 4).await;
    assert_eq!(rules(&refused), ["DONE"]);
    let mark = refused.done.expect("the mark stands");
    assert_eq!((mark.holder.as_str(), mark.fencing_token), ("a", 1));
    assert_eq!(refused.holders.len(), 1, "b still holds its permit");
    let plain = json!({"op": "release", "resource": "s", "holder": "b", "token": 2});
    assert!(f.call(plain, now + 5).await.granted);
    let later = f
        .call(json!({"op": "get", "resource": "s"}), now + 1_000 + 6_000)
        .await;
    assert_eq!(later.done.map(|d| d.holder), Some("a".to_owned()));
}

#[tokio::test]
async fn done_without_a_live_permit_is_no_hold_and_marks_nothing() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("t", "w1", now).await;
    for body in [
        done("t", "w2", 1, json!({})),
        done("t", "w1", 2, json!({})),
        done("never", "w1", 1, json!({})),
    ] {
        let a = f.call(body.clone(), now + 1).await;
        assert_eq!(rules(&a), ["NO_HOLD"], "{body}");
        assert_eq!(a.done, None);
    }
    let got = f.call(json!({"op": "get", "resource": "t"}), now + 2).await;
    assert_eq!((got.holder.as_deref(), got.done), (Some("w1"), None));
}

#[tokio::test]
async fn a_done_release_with_a_request_id_replays_once_applied() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("t", "w1", now).await;
    let body = done("t", "w1", 1, json!({"requestId": "fin-1", "result": "ok"}));
    let first = f.call(body.clone(), now + 1).await;
    let again = f.call(body, now + 2).await;
    assert!(first.granted && again.granted && again.replayed);
    assert_eq!(first.done, again.done);
    // Another input under the same requestId is a conflict.
    let other = done(
        "t",
        "w1",
        1,
        json!({"requestId": "fin-1", "result": "changed"}),
    );
    let conflict = f.try_as(&f.tenant, other, now + 3).await;
    assert!(matches!(conflict, Err(LeaseError::IdempotencyConflict)));
}

#[tokio::test]
async fn reopen_by_the_finisher_or_an_admin_only_and_audited() {
    let f = Fixture::new().await.acting_as_member("key:member");
    let now = now_ms();
    finished(&f, "t", now, 3600).await;
    let reopen = |holder: Option<&str>, token: Option<u64>| {
        let mut body =
            json!({"op": "reopen", "resource": "t", "reason": "redo: the invoice bounced"});
        if let (Some(h), Some(t)) = (holder, token) {
            body["holder"] = json!(h);
            body["token"] = json!(t);
        }
        body
    };
    // Another holder, a wrong token, no finisher named: forbidden, nothing changed.
    for body in [
        reopen(Some("w2"), Some(1)),
        reopen(Some("w1"), Some(2)),
        reopen(None, None),
    ] {
        let refused = f.try_as(&f.tenant, body.clone(), now + 2).await;
        assert!(
            matches!(refused, Err(LeaseError::Forbidden(_))),
            "{body}: {refused:?}"
        );
    }
    let got = f.call(json!({"op": "get", "resource": "t"}), now + 3).await;
    assert!(got.done.is_some());
    // The finisher with its token reopens it; the next grant continues the counter.
    let reopened = f.call(reopen(Some("w1"), Some(1)), now + 4).await;
    assert!(reopened.granted, "{reopened:?}");
    assert_eq!(reopened.done, None);
    let again = f.acquire("t", "w2", now + 5).await;
    assert_eq!(again.fencing_token, Some(2));
    // An admin reopens whatever mark stands; the audit keeps both, newest first.
    let f = Fixture::on(
        f.client.clone(),
        f.tables.clone(),
        common::service::SEED,
        f.tenant.clone(),
    )
    .acting_as("key:admin");
    let released = f
        .call(done("t", "w2", 2, json!({"result": "second"})), now + 6)
        .await;
    assert!(released.granted);
    let mut by_admin_body = reopen(None, None);
    by_admin_body["requestId"] = json!("admin-reopen");
    let by_admin = f.call(by_admin_body.clone(), now + 7).await;
    assert!(by_admin.granted, "{by_admin:?}");
    // A member key is not replayed the admin's reopen under its requestId: it may not reopen
    // without naming the finisher, whatever was recorded (the attack of 2026-12-06).
    let member = Fixture::on(
        f.client.clone(),
        f.tables.clone(),
        common::service::SEED,
        f.tenant.clone(),
    )
    .acting_as_member("key:member");
    let replay = member.try_as(&member.tenant, by_admin_body, now + 7).await;
    assert!(
        matches!(replay, Err(LeaseError::Forbidden(_))),
        "{replay:?}"
    );
    // Nothing left to reopen.
    let nothing = f.call(reopen(None, None), now + 8).await;
    assert_eq!(rules(&nothing), ["NOT_DONE"]);
    let audit = f
        .call(json!({"op": "audit", "resource": "t"}), now + 9)
        .await;
    let entries = audit.entries.unwrap();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0].actor, "key:admin");
    assert_eq!(
        entries[0].reopened.as_ref().map(|d| d.fencing_token),
        Some(2)
    );
    assert_eq!(entries[1].actor, "key:member");
    assert_eq!(
        entries[1].reopened.as_ref().map(|d| d.holder.as_str()),
        Some("w1")
    );
    assert_eq!(entries[1].reason, "redo: the invoice bounced");
}

#[tokio::test]
async fn candidates_take_the_first_that_can_be_granted_now() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("c0", "other", now).await;
    finished(&f, "c1", now, 3600).await;
    // c2 is held, and has a waiter.
    let short = json!({"op": "acquire", "resource": "c2", "holder": "x", "ttlSeconds": 60});
    assert!(f.call(short, now).await.granted);
    let wait = json!({"op": "acquire", "resource": "c2", "holder": "y", "waitSeconds": 1});
    assert_eq!(f.call(wait, now_ms()).await.queue_position, Some(1));
    let names = ["c0", "c1", "c2", "c3", "c4"];
    let won = f.call(claim(&names, "me"), now + 5).await;
    assert!(won.granted, "{won:?}");
    assert_eq!(won.resource.as_deref(), Some("c3"));
    assert_eq!(won.holder.as_deref(), Some("me"));
    assert_eq!(won.fencing_token, Some(1));
    // The next claim takes c4; then none is left: a witness per candidate.
    let next = f.call(claim(&names, "me2"), now + 6).await;
    assert_eq!(next.resource.as_deref(), Some("c4"));
    let none = f.call(claim(&names, "me3"), now + 7).await;
    assert!(!none.granted);
    assert_eq!(none.resource, None);
    let by_path: Vec<(&str, &str)> = none
        .witnesses
        .iter()
        .map(|w| (w.path.as_str(), w.rule_id.as_str()))
        .collect();
    assert_eq!(
        by_path,
        [
            ("/candidates/0", "LEASE_HELD"),
            ("/candidates/1", "DONE"),
            ("/candidates/2", "WAITERS_AHEAD"),
            ("/candidates/3", "LEASE_HELD"),
            ("/candidates/4", "LEASE_HELD"),
        ]
    );
    assert_eq!(none.leases.as_ref().map(Vec::len), Some(5));
    // The holder of a candidate re-acquires it (its own permit, the same token).
    let mine = f.call(claim(&["c0", "c3"], "me"), now + 8).await;
    assert_eq!(
        (mine.resource.as_deref(), mine.fencing_token),
        (Some("c3"), Some(1))
    );
}

#[tokio::test]
async fn candidates_with_a_limit_and_with_waiters_ahead() {
    let f = Fixture::new().await;
    let now = now_ms();
    let sem = |holder: &str| json!({"op": "acquire", "resource": "pool-a", "holder": holder, "limit": 2, "ttlSeconds": 60});
    assert!(f.call(sem("a"), now).await.granted);
    let body = |holder: &str| json!({"op": "acquire", "candidates": ["pool-a", "pool-b"], "holder": holder, "limit": 2, "ttlSeconds": 60});
    let won = f.call(body("b"), now + 1).await;
    assert_eq!(won.resource.as_deref(), Some("pool-a"));
    assert_eq!(won.fencing_token, Some(2));
    let next = f.call(body("c"), now + 2).await;
    assert_eq!(next.resource.as_deref(), Some("pool-b"));
    // A limit other than the live permits': LIMIT_MISMATCH at that candidate.
    let other =
        json!({"op": "acquire", "candidates": ["pool-a", "pool-b"], "holder": "d", "limit": 3});
    let refused = f.call(other, now + 3).await;
    assert_eq!(rules(&refused), ["LIMIT_MISMATCH", "LIMIT_MISMATCH"]);
}

#[tokio::test]
async fn a_request_id_retry_gets_the_same_resource() {
    let f = Fixture::new().await;
    let now = now_ms();
    let mut body = claim(&["r0", "r1", "r2"], "me");
    body["requestId"] = json!("claim-1");
    f.acquire("r0", "other", now).await;
    let first = f.call(body.clone(), now + 1).await;
    assert_eq!(first.resource.as_deref(), Some("r1"));
    // r0 freed meanwhile: the retry still answers r1, replayed.
    let released = f
        .call(
            json!({"op": "release", "resource": "r0", "holder": "other", "token": 1}),
            now + 2,
        )
        .await;
    assert!(released.granted);
    let retry = f.call(body, now + 3).await;
    assert!(retry.replayed);
    assert_eq!(retry.resource.as_deref(), Some("r1"));
    assert_eq!(retry.fencing_token, first.fencing_token);
    assert_eq!(f.counter("r2").await, 0);
}

#[tokio::test]
async fn candidates_in_a_session_live_in_it() {
    let f = Fixture::new().await;
    let now = now_ms();
    let opened = f
        .call(json!({"op": "open", "holder": "me", "ttlSeconds": 60}), now)
        .await;
    let session = opened.session.flatten().unwrap();
    f.acquire("s0", "other", now).await;
    let body =
        json!({"op": "acquire", "candidates": ["s0", "s1"], "holder": "me", "session": session.id});
    let won = f.call(body, now + 1).await;
    assert_eq!(won.resource.as_deref(), Some("s1"));
    assert_eq!(won.holders[0].session.as_deref(), Some(session.id.as_str()));
    let closed = f
        .call(
            json!({"op": "close", "holder": "me", "session": session.id}),
            now + 2,
        )
        .await;
    assert!(closed.granted);
    let got = f
        .call(json!({"op": "get", "resource": "s1"}), now + 3)
        .await;
    assert!(got.holders.is_empty(), "the permit ended with its session");
}

/// 16 claimers at once over 20 candidates: each task is granted to one claimer only, and each
/// claimer holds one task.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_share_a_task() {
    let f = Arc::new(Fixture::new().await);
    let names: Vec<String> = (0..20).map(|i| format!("task-{i:02}")).collect();
    let mut claimers = Vec::new();
    for w in 0..16 {
        let (f, names) = (f.clone(), names.clone());
        claimers.push(tokio::spawn(async move {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let a = f.call(claim(&refs, &format!("w{w}")), now_ms()).await;
            assert!(a.granted, "{a:?}");
            a.resource.unwrap()
        }));
    }
    let mut won = HashSet::new();
    for c in claimers {
        let resource = c.await.unwrap();
        assert!(won.insert(resource.clone()), "{resource} granted twice");
    }
    assert_eq!(won.len(), 16);
    for name in &names {
        assert!(
            f.counter(name).await <= 1,
            "{name} issued more than one token"
        );
    }
}

/// A watch hears a mark end when it ends, as it hears a permit lapse (the attack of
/// 2026-12-06: it was answered only at its deadline).
#[tokio::test]
async fn a_watch_hears_the_mark_end() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("w", "w1", now).await;
    let released = f
        .call(done("w", "w1", 1, json!({"keepDoneSeconds": 1})), now_ms())
        .await;
    let tag = released.state_tag.unwrap();
    let started = std::time::Instant::now();
    let body = json!({"op": "watch", "resource": "w", "stateTag": tag, "waitSeconds": 10});
    let heard = f.call(body, now_ms()).await;
    assert_eq!(heard.changed, Some(true));
    assert_eq!(heard.done, None);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "heard after {:?}",
        started.elapsed()
    );
}
