//! Fair waiting through the lease service, over the real store (dynoxide, and moto in CI): the
//! contract's "Fair waiting" bullets with concurrent waiters, the queue as the item keeps it,
//! requestId's rules for a wait, and the hand-off of a permit that lapses while its waiter is
//! between calls.

mod common;

use common::service::{Fixture, lapsed_with_a_waiter_between_calls, rules};
use leasekit_core::clock::now_ms;
use leasekit_core::lease::LeaseAnswer;
use leasekit_core::service::lease::LeaseError;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

impl Fixture {
    /// `body` at the real time (waits take real time).
    async fn call_now(&self, body: Value) -> LeaseAnswer {
        self.call(body, now_ms()).await
    }

    /// The stored item's attribute names.
    async fn attributes(&self, resource: &str) -> Vec<String> {
        let item = self
            .client
            .get_item()
            .table_name(&self.tables.leases)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_waiters_are_served_in_arrival_order_by_the_release_that_frees() {
    let w = Arc::new(Fixture::new().await);
    let first = w.call_now(acquire("job", "h0", 0)).await;
    assert!(first.granted);
    let mut tasks = Vec::new();
    for (i, holder) in ["w1", "w2", "w3", "w4"].into_iter().enumerate() {
        let w2 = w.clone();
        tasks.push(tokio::spawn(async move {
            let got = w2.call_now(acquire("job", holder, 20)).await;
            assert!(got.granted, "{got:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            let freed = w2.call_now(release("job", holder, got.fencing_token)).await;
            assert!(freed.granted, "{freed:?}");
            (holder, got.fencing_token)
        }));
        // Arrival order: each place taken before the next waiter comes.
        loop {
            let seen = w.call_now(acquire("job", holder, 0)).await;
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
    let newcomer = w.call_now(acquire("job", "newcomer", 0)).await;
    assert_eq!(
        (newcomer.granted, rules(&newcomer)),
        (false, vec!["WAITERS_AHEAD"])
    );
    assert_eq!(
        newcomer.queue_position, None,
        "a caller who does not wait takes no place"
    );
    w.call_now(release("job", "h0", first.fencing_token)).await;
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
    assert!(w.call_now(acquire("job", "newcomer", 0)).await.granted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapse_is_handed_to_the_waiter_and_a_wait_that_ends_says_its_place() {
    let w = Fixture::new().await;
    let held = w
        .call_now(json!({"op": "acquire", "resource": "lapse", "holder": "gone", "ttlSeconds": 1}))
        .await;
    let started = std::time::Instant::now();
    let got = w.call_now(acquire("lapse", "next", 5)).await;
    assert!(got.granted, "{got:?}");
    assert_eq!(got.fencing_token, Some(held.fencing_token.unwrap() + 1));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Behind a live lease, a 1 s wait ends with the place, not recorded.
    let ended = w
        .call_now(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 1, "requestId": "late-1"}))
        .await;
    assert_eq!((ended.granted, ended.queue_position), (false, Some(1)));
    let again = w
        .call_now(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 0, "requestId": "late-1"}))
        .await;
    assert!(!again.replayed, "a wait that ended is not kept for replays");
    assert_eq!(again.queue_position, Some(1));
    // Released: the lease is handed to the place, and the same requestId now gets and keeps it.
    w.call_now(release("lapse", "next", got.fencing_token))
        .await;
    let won = w
        .call_now(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 3, "requestId": "late-1"}))
        .await;
    assert_eq!((won.granted, won.replayed), (true, false));
    let replay = w
        .call_now(json!({"op": "acquire", "resource": "lapse", "holder": "late", "waitSeconds": 9, "requestId": "late-1"}))
        .await;
    assert_eq!(
        (replay.replayed, replay.fencing_token),
        (true, won.fencing_token)
    );
}

/// A permit handed to a waiter between its calls answers that waiter's requestId, once: when the
/// permit ends before the waiter calls again (released under another requestId, or lapsed with
/// the place), the retry of the same requestId is the grant it was handed, replayed, not a second
/// permit (found by the attack of 2026-12-03, round 2); when an operator revoked it, the retry is
/// told REVOKED (the attack of 2026-12-05), and never a second permit either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_handed_between_calls_answers_the_waiters_request_id_once() {
    let w = Fixture::new().await;
    for end in ["released", "revoked", "lapsed"] {
        let resource = format!("handed-{end}");
        let owner = w
            .call_now(json!({"op": "acquire", "resource": resource, "holder": "owner"}))
            .await;
        let mut asked = acquire(&resource, "late", 1);
        asked["requestId"] = json!(format!("late-{end}"));
        let queued = w.call_now(asked.clone()).await;
        assert_eq!((queued.granted, queued.queue_position), (false, Some(1)));
        // Between the waiter's calls, the owner's release hands the permit to its place.
        w.call_now(release(&resource, "owner", owner.fencing_token))
            .await;
        let handed = w.call_now(json!({"op": "get", "resource": resource})).await;
        assert_eq!(handed.holder.as_deref(), Some("late"), "{end}: {handed:?}");
        let token = handed.fencing_token;
        let mut later = now_ms();
        match end {
            "released" => {
                let freed = w.call_now(release(&resource, "late", token)).await;
                assert!(freed.granted, "{freed:?}");
            }
            "revoked" => {
                let revoked = w
                    .call_now(json!({"op": "revoke", "resource": resource, "holder": "late", "reason": "test"}))
                    .await;
                assert!(revoked.granted, "{revoked:?}");
            }
            _ => later += 40_000,
        }
        for attempt in 0..2 {
            let mut retry = asked.clone();
            retry["waitSeconds"] = json!(0);
            let again = w.call(retry, later).await;
            if end == "revoked" {
                // Revoked before the waiter came back: told so, not replayed a grant an operator
                // ended (issue #41; before, the retry said granted with an expiry ahead). The
                // first retry's answer is recorded, and the next replays it.
                assert_eq!(
                    (again.granted, again.replayed, rules(&again)),
                    (false, attempt == 1, vec!["REVOKED"]),
                    "{end}: {again:?}"
                );
                continue;
            }
            assert_eq!(
                (again.granted, again.fencing_token, again.replayed),
                (true, token, true),
                "{end}: the retry is the grant it was handed, not another: {again:?}"
            );
        }
        let after = w
            .call(json!({"op": "get", "resource": resource}), later)
            .await;
        assert_eq!(after.holder, None, "{end}: no second permit: {after:?}");
        let next = w
            .call(
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
    let w = Fixture::new().await;
    for (case, second, retries) in [
        ("w1-first", Some("b"), ["a", "b"]),
        ("w2-first", Some("b"), ["b", "a"]),
        ("no-id", None, ["a", "a"]),
    ] {
        let resource = format!("several-{case}");
        let owner = w
            .call_now(json!({"op": "acquire", "resource": resource, "holder": "owner"}))
            .await;
        let call = |id: Option<&str>| {
            let mut body = acquire(&resource, "w", 1);
            if let Some(id) = id {
                body["requestId"] = json!(format!("{case}-{id}"));
            }
            body
        };
        assert_eq!(w.call_now(call(Some("a"))).await.queue_position, Some(1));
        assert_eq!(w.call_now(call(second)).await.queue_position, Some(1));
        w.call_now(release(&resource, "owner", owner.fencing_token))
            .await;
        let handed = w.call_now(json!({"op": "get", "resource": resource})).await;
        assert_eq!(handed.fencing_token, Some(2), "{case}: {handed:?}");
        assert!(w.call_now(release(&resource, "w", Some(2))).await.granted);
        // The call the place answered replays token 2; the other is a new acquire, its first.
        let answered = second.unwrap_or("a");
        let mut tokens = Vec::new();
        for id in retries {
            let mut again = call(Some(id));
            again["waitSeconds"] = json!(0);
            let got = w.call_now(again).await;
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

/// A waiting acquire's requestId is taken by its input from its first round on (found by the
/// attack of 2026-12-03: a wait that ended ungranted left the id free, another request applied
/// under it, and the waiter's own retry then got 409). The retry resumes the place.
#[tokio::test]
async fn a_waiting_acquires_request_id_is_its_own_before_any_grant() {
    let f = Fixture::new().await;
    let now = now_ms();
    f.acquire("q", "a", now).await;
    let wait = json!({"op": "acquire", "resource": "q", "holder": "w1", "ttlSeconds": 60, "waitSeconds": 1, "requestId": "dup"});
    let waited = f.call(wait.clone(), now).await;
    assert_eq!((waited.granted, waited.queue_position), (false, Some(1)));
    for other in [
        json!({"op": "acquire", "resource": "q", "holder": "w2", "ttlSeconds": 60, "waitSeconds": 1, "requestId": "dup"}),
        json!({"op": "acquire", "resource": "elsewhere", "holder": "w3", "requestId": "dup"}),
    ] {
        let reused = f.try_as(&f.tenant, other.clone(), now).await;
        assert!(
            matches!(reused, Err(LeaseError::IdempotencyConflict)),
            "{other}: {reused:?}"
        );
    }
    let page = f.call(json!({"op": "list"}), now).await;
    let leases = page.leases.unwrap();
    assert_eq!(
        leases.len(),
        1,
        "nothing applied under the reused id: {leases:?}"
    );
    assert_eq!(leases[0].waiters.as_ref().unwrap().len(), 1);
    // The waiter's retry, byte for byte: its place again, not a conflict, not a replay.
    let again = f.call(wait.clone(), now + 2_000).await;
    assert_eq!(
        (again.granted, again.queue_position, again.replayed),
        (false, Some(1), false)
    );
    // Released: the retry is granted, and a retry after that replays the grant.
    let release = json!({"op": "release", "resource": "q", "holder": "a", "token": 1});
    assert!(f.call(release, now + 3_000).await.granted);
    let granted = f.call(wait.clone(), now + 4_000).await;
    assert!(granted.granted && !granted.replayed, "{granted:?}");
    let replayed = f.call(wait, now + 5_000).await;
    assert!(replayed.granted && replayed.replayed);
    assert_eq!(replayed.fencing_token, granted.fencing_token);
}

/// A refusal whose read notices a lapse hands the freed permit to the first waiter in a write
/// of its own, so that what it answers is what the store holds (found by the attack of
/// 2026-12-03: LEASE_HELD cited a token that neither get nor check could see).
#[tokio::test]
async fn a_refusal_that_notices_a_lapse_writes_the_hand_off() {
    let (f, now) = lapsed_with_a_waiter_between_calls().await;
    // a's lease has lapsed, w1 is between calls: x is refused, and the store now says w1 holds.
    let later = now + 2_500;
    for (limit, rule) in [(1, "LEASE_HELD"), (2, "LIMIT_MISMATCH")] {
        let x = json!({"op": "acquire", "resource": "q", "holder": "x", "limit": limit});
        let refused = f.call(x, later).await;
        assert_eq!(
            (refused.granted, rules(&refused)),
            (false, vec![rule]),
            "{refused:?}"
        );
        let holders: Vec<(&str, u64)> = refused
            .holders
            .iter()
            .map(|h| (h.holder.as_str(), h.fencing_token))
            .collect();
        assert_eq!(
            holders,
            [("w1", 2)],
            "the answer shows the permit its witness cites"
        );
    }
    let get = f
        .call(json!({"op": "get", "resource": "q"}), later + 1)
        .await;
    assert_eq!(
        (get.holder.as_deref(), get.fencing_token),
        (Some("w1"), Some(2))
    );
    let check = json!({"op": "check", "resource": "q", "token": 2, "holder": "w1"});
    assert_eq!(f.call(check, later + 1).await.current, Some(true));
}

/// The readers see what the next write will: a permit that lapsed while the earliest waiter is
/// between calls is that waiter's (kept for it until its place's 30 s run out), so get, check
/// and list show it held by the waiter, with the token it will have, and a revoke of every
/// permit ends it, audited. Before (the attack of 2026-12-03, round 4), each said nobody held
/// the resource, and the very next acquire was refused with LEASE_HELD by the waiter.
#[tokio::test]
async fn readers_see_a_lapsed_permit_as_the_waiters_it_is_kept_for() {
    let (f, now) = lapsed_with_a_waiter_between_calls().await;
    let later = now + 2_500;
    let get = f.call(json!({"op": "get", "resource": "q"}), later).await;
    assert_eq!(
        (get.granted, get.holder.as_deref(), get.fencing_token),
        (true, Some("w1"), Some(2)),
        "{get:?}"
    );
    let check = json!({"op": "check", "resource": "q", "token": 2, "holder": "w1"});
    assert_eq!(f.call(check, later).await.current, Some(true));
    let page = f.call(json!({"op": "list"}), later).await;
    let q = &page.leases.expect("a list answer lists")[0];
    let holders: Vec<(&str, u64)> = q
        .holders
        .iter()
        .map(|h| (h.holder.as_str(), h.fencing_token))
        .collect();
    assert_eq!(holders, [("w1", 2)], "{q:?}");
    assert_eq!(
        q.waiters.as_ref().map(Vec::len),
        Some(0),
        "w1's place is served"
    );
    // Reading wrote nothing: the newcomer's refusal cites the same permit.
    let x = json!({"op": "acquire", "resource": "q", "holder": "x"});
    let refused = f.call(x, later + 1).await;
    assert_eq!(
        (refused.holder.as_deref(), refused.fencing_token),
        (Some("w1"), Some(2)),
        "{refused:?}"
    );
    // Revoking every permit, with nothing written since the lapse, ends the one kept for w1,
    // audited; tokens go on from it.
    let (f, now) = lapsed_with_a_waiter_between_calls().await;
    let later = now + 2_500;
    let revoke = json!({"op": "revoke", "resource": "q", "reason": "drain"});
    let revoked = f.call(revoke, later + 2).await;
    assert!(revoked.granted, "{revoked:?}");
    let ended: Vec<(String, u64)> = revoked
        .revoked
        .unwrap()
        .iter()
        .map(|p| (p.holder.clone(), p.fencing_token))
        .collect();
    assert_eq!(ended, [("w1".to_owned(), 2)]);
    let audit = f
        .call(json!({"op": "audit", "resource": "q"}), later + 3)
        .await;
    let entry = &audit.entries.expect("an audit answer lists")[0];
    let audited: Vec<(&str, u64)> = entry
        .ended
        .iter()
        .map(|p| (p.holder.as_str(), p.fencing_token))
        .collect();
    assert_eq!(audited, [("w1", 2)], "the audit names the permit ended");
    let next = f.acquire("q", "y", later + 3).await;
    assert_eq!(next.fencing_token, Some(3));
}

/// A late renew or release, refused, writes the hand-off its read noticed as an acquire's
/// refusal does (found by the attack of 2026-12-03, round 3: get showed nobody holding while
/// the waiter's place was live), with a requestId and without.
#[tokio::test]
async fn a_late_renew_or_release_writes_the_hand_off_it_notices() {
    for (late, rule) in [
        (
            json!({"op": "renew", "resource": "q", "holder": "a", "token": 1}),
            "LEASE_EXPIRED",
        ),
        (
            json!({"op": "release", "resource": "q", "holder": "a", "token": 1}),
            "NO_HOLD",
        ),
        (
            json!({"op": "renew", "resource": "q", "holder": "a", "token": 1, "requestId": "late-1"}),
            "LEASE_EXPIRED",
        ),
    ] {
        let (f, now) = lapsed_with_a_waiter_between_calls().await;
        let later = now + 2_500;
        let refused = f.call(late.clone(), later).await;
        assert_eq!(
            (refused.granted, rules(&refused)),
            (false, vec![rule]),
            "{late}"
        );
        let get = f
            .call(json!({"op": "get", "resource": "q"}), later + 1)
            .await;
        assert_eq!(
            (get.holder.as_deref(), get.fencing_token),
            (Some("w1"), Some(2)),
            "{late}: the waiter holds the permit the lapse freed"
        );
    }
}

/// A waiting acquire refused by a rule (here LIMIT_MISMATCH, from a caller with a place) is
/// answered at once, as a refusal: not waited out, and not its own record's replay (found by
/// the attack of 2026-12-03, round 3).
#[tokio::test]
async fn a_refused_waiting_acquire_with_a_place_answers_at_once() {
    let (f, now) = lapsed_with_a_waiter_between_calls().await;
    let started = std::time::Instant::now();
    let other_limit = json!({"op": "acquire", "resource": "q", "holder": "w1", "ttlSeconds": 60, "limit": 2, "waitSeconds": 3, "requestId": "lm-1"});
    let refused = f.call(other_limit.clone(), now + 100).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        (refused.granted, refused.replayed, rules(&refused)),
        (false, false, vec!["LIMIT_MISMATCH"])
    );
    let again = f.call(other_limit, now + 200).await;
    assert!(again.replayed, "{again:?}");
}

/// Each waiting acquire's store calls, with 8 waiters in line behind a holder: a write of the
/// resource wakes every waiter in this process, and each used to run a round (a read) on every
/// wake: the 8th waiter was woken by the 7 places taken after its own and by every hand-off,
/// take and release ahead of it, a round trip each. Now a waiter woken by a write looks first at
/// the state that write left, and runs a round only when it would do more than wait on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_reads_the_store_only_when_a_write_changes_its_turn() {
    const WAITERS: usize = 8;
    let w = Arc::new(Fixture::new().await);
    let first = w.call_now(acquire("line", "h0", 0)).await;
    assert!(first.granted);
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let holder = format!("w{i}");
        let w2 = w.clone();
        let asked = holder.clone();
        tasks.push(tokio::spawn(async move {
            let request = common::service::req(acquire("line", &asked, 20));
            let call = w2.signed(&request, now_ms());
            let (got, usage) = leasekit_core::store::usage::measured(call).await;
            let got = got.data;
            assert!(got.granted, "{got:?}");
            let freed = w2
                .call_now(release("line", &asked, got.fencing_token))
                .await;
            assert!(freed.granted, "{freed:?}");
            (asked, got.fencing_token, usage.round_trips)
        }));
        loop {
            let seen = w.call_now(acquire("line", &holder, 0)).await;
            if seen.queue_position == Some(i + 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    w.call_now(release("line", "h0", first.fencing_token)).await;
    let mut served = Vec::new();
    for task in tasks {
        served.push(task.await.unwrap());
    }
    // Served in their order, each with the next token.
    let order: Vec<(String, Option<u64>)> =
        served.iter().map(|(h, t, _)| (h.clone(), *t)).collect();
    let expected: Vec<(String, Option<u64>)> = (0..WAITERS)
        .map(|i| (format!("w{i}"), Some(i as u64 + 2)))
        .collect();
    assert_eq!(order, expected);
    // A place taken (a guessed take refused, then the place written) and a hand-off taken (a
    // write planned on the view of the release that handed it), whatever the line ahead: 3
    // round trips each, where they made 11-13 (and 4 until a hand-off was read first).
    let calls: Vec<u32> = served.iter().map(|(_, _, calls)| *calls).collect();
    assert!(calls.iter().all(|c| *c <= 3), "{calls:?}");
}
