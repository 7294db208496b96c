//! list, revoke and audit (docs/adr/0008) through the lease service, over the real store
//! (dynoxide, and moto in CI): the contract's "Coordination" bullets. Time is passed in.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::service::{Fixture, rules};
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::lease::answer::Status;
use leasekit_core::service::lease::LeaseError;
use leasekit_core::tenant::Tenant;
use serde_json::json;

/// The shared fixture, its calls made as an API key: the actor an audit entry names.
async fn fixture() -> Fixture {
    Fixture::new().await.acting_as("key:0123456789abcdef")
}

impl Fixture {
    /// Every name `list` gives, page by page (`page_size` each), and the pages' sizes.
    async fn list_all(
        &self,
        prefix: Option<&str>,
        page_size: u32,
        now: Millis,
    ) -> (Vec<String>, Vec<usize>) {
        let (mut names, mut sizes, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
        loop {
            let mut body = json!({"op": "list", "pageSize": page_size});
            if let Some(prefix) = prefix {
                body["prefix"] = json!(prefix);
            }
            if let Some(cursor) = &cursor {
                body["cursor"] = json!(cursor);
            }
            let page = self.call(body, now).await;
            assert_eq!(page.status, Status::Pass);
            let leases = page.leases.expect("a list answer lists");
            sizes.push(leases.len());
            names.extend(leases.into_iter().map(|l| l.resource));
            match page.next_cursor.expect("a list answer has nextCursor") {
                Some(next) => cursor = Some(next),
                None => return (names, sizes),
            }
        }
    }
}

#[tokio::test]
async fn list_pages_through_every_live_resource_once_by_name() {
    let f = fixture().await;
    let now = now_ms();
    let mut expected: Vec<String> = (0..37).map(|i| format!("job:{i:03}")).collect();
    for name in &expected {
        f.acquire(name, "w", now).await;
    }
    f.acquire("deploy:prod", "w", now).await;
    // Released and never-taken resources are not listed; another tenant's never.
    let r = f.acquire("gone", "w", now).await;
    let released = f
        .call(
            json!({"op": "release", "resource": "gone", "holder": "w", "token": r.fencing_token}),
            now,
        )
        .await;
    assert!(released.granted);
    let other = Tenant::for_key("acme", "t2").unwrap();
    let theirs = json!({"op": "acquire", "resource": "job:500", "holder": "x"});
    assert!(f.try_as(&other, theirs, now).await.unwrap().granted);

    let (names, sizes) = f.list_all(Some("job:"), 10, now).await;
    assert_eq!(names, expected, "every job once, in order");
    assert_eq!(sizes, vec![10, 10, 10, 7]);
    expected.insert(0, "deploy:prod".into());
    let (names, sizes) = f.list_all(None, 50, now).await;
    assert_eq!(names, expected);
    assert_eq!(sizes, vec![38], "one page, and its cursor is null");
    let (names, _) = f.list_all(Some("nothing-here"), 5, now).await;
    assert!(names.is_empty());

    // An entry shows what get shows: holders, tokens, expiry, limit.
    let page = f
        .call(json!({"op": "list", "prefix": "deploy:"}), now)
        .await;
    let entry = &page.leases.unwrap()[0];
    assert_eq!(entry.holders.len(), 1);
    assert_eq!(entry.holders[0].holder, "w");
    assert_eq!(entry.limit, 1);
    assert_eq!(entry.waiters.as_deref(), Some(&[][..]));
}

#[tokio::test]
async fn a_lapsed_lease_leaves_the_list_and_its_entry_is_tidied_away() {
    let f = fixture().await;
    let now = now_ms();
    f.call(
        json!({"op": "acquire", "resource": "short", "holder": "w", "ttlSeconds": 1}),
        now,
    )
    .await;
    f.acquire("long", "w", now).await;
    let (names, _) = f.list_all(None, 10, now).await;
    assert_eq!(names, ["long", "short"]);
    // Two seconds on: the lapsed one is skipped, and the page takes it out of the index.
    let later = now + 2_000;
    let (names, _) = f.list_all(None, 10, later).await;
    assert_eq!(names, ["long"]);
    let item = f
        .client
        .get_item()
        .table_name(&f.tables.leases)
        .key("pk", AttributeValue::S(format!("{}|short", f.tenant)))
        .send()
        .await
        .unwrap();
    let item = item.item().unwrap();
    assert!(
        !item.contains_key("lt") && !item.contains_key("lr"),
        "{item:?}"
    );
    assert!(item.contains_key("tok"), "the counter stays");
    // Taken again, it is listed again.
    f.acquire("short", "v", later).await;
    let (names, _) = f.list_all(None, 10, later).await;
    assert_eq!(names, ["long", "short"]);
}

#[tokio::test]
async fn a_page_of_many_lapsed_entries_still_finds_the_live_ones() {
    let f = fixture().await;
    let now = now_ms();
    for i in 0..30 {
        f.call(
            json!({"op": "acquire", "resource": format!("a{i:02}"), "holder": "w", "ttlSeconds": 1}),
            now,
        )
        .await;
    }
    for name in ["b1", "b2", "b3"] {
        f.acquire(name, "w", now).await;
    }
    // Small pages over 30 lapsed entries (tidied as they are met): every live one, once.
    let (names, _) = f.list_all(None, 2, now + 2_000).await;
    assert_eq!(names, ["b1", "b2", "b3"]);
    let (names, sizes) = f.list_all(None, 2, now + 3_000).await;
    assert_eq!(names, ["b1", "b2", "b3"]);
    assert_eq!(sizes, [2, 1], "tidied: no more empty pages");
}

#[tokio::test]
async fn a_semaphore_and_its_waiters_are_listed() {
    let f = fixture().await;
    let now = now_ms();
    for holder in ["a", "b"] {
        let body = json!({"op": "acquire", "resource": "pool", "holder": holder, "limit": 2});
        assert!(f.call(body, now).await.granted);
    }
    // A waiter whose wait already ended keeps its place 30 s: listed with it.
    let body =
        json!({"op": "acquire", "resource": "pool", "holder": "c", "limit": 2, "waitSeconds": 1});
    let waited = f.call(body, now).await;
    assert_eq!(waited.queue_position, Some(1));
    let page = f.call(json!({"op": "list"}), now).await;
    let entry = &page.leases.unwrap()[0];
    assert_eq!(entry.limit, 2);
    let holders: Vec<&str> = entry.holders.iter().map(|h| h.holder.as_str()).collect();
    assert_eq!(holders, ["a", "b"]);
    let waiters = entry.waiters.clone().unwrap();
    assert_eq!(waiters.len(), 1);
    assert_eq!(waiters[0].holder, "c");
}

#[tokio::test]
async fn a_cursor_works_only_for_its_tenant_and_op() {
    let f = fixture().await;
    let now = now_ms();
    for name in ["a", "b", "c"] {
        f.acquire(name, "w", now).await;
    }
    let page = f.call(json!({"op": "list", "pageSize": 1}), now).await;
    let cursor = page.next_cursor.unwrap().unwrap();
    let other = Tenant::for_key("acme", "t2").unwrap();
    let theirs = f
        .try_as(&other, json!({"op": "list", "cursor": cursor}), now)
        .await;
    assert!(matches!(theirs, Err(LeaseError::BadCursor)), "{theirs:?}");
    let audit = f
        .try_as(&f.tenant, json!({"op": "audit", "cursor": cursor}), now)
        .await;
    assert!(matches!(audit, Err(LeaseError::BadCursor)), "{audit:?}");
    let made_up = f
        .try_as(
            &f.tenant,
            json!({"op": "list", "cursor": "AAAAAAAAAAAAAAAAAAAAAAAAAA"}),
            now,
        )
        .await;
    assert!(matches!(made_up, Err(LeaseError::BadCursor)));
    let next = f
        .call(json!({"op": "list", "pageSize": 1, "cursor": cursor}), now)
        .await;
    assert_eq!(next.leases.unwrap()[0].resource, "b");
}

#[tokio::test]
async fn a_revoked_holder_learns_revoked_and_its_token_is_not_current() {
    let f = fixture().await;
    let now = now_ms();
    let held = f.acquire("deploy:prod", "wedged", now).await;
    let token = held.fencing_token.unwrap();
    let revoke = json!({"op": "revoke", "resource": "deploy:prod", "reason": "stuck since 3 am"});
    let revoked = f.call(revoke, now + 1).await;
    assert_eq!(revoked.status, Status::Pass, "{revoked:?}");
    assert!(revoked.granted);
    let ended = revoked.revoked.clone().unwrap();
    assert_eq!(
        (ended[0].holder.as_str(), ended[0].fencing_token),
        ("wedged", token)
    );
    assert!(revoked.holders.is_empty(), "nobody holds it after");
    for op in ["renew", "release"] {
        let body = json!({"op": op, "resource": "deploy:prod", "holder": "wedged", "token": token});
        let answer = f.call(body, now + 2).await;
        assert_eq!(
            (answer.granted, rules(&answer)),
            (false, vec!["REVOKED"]),
            "{op}"
        );
    }
    let check = json!({"op": "check", "resource": "deploy:prod", "token": token});
    assert_eq!(f.call(check, now + 2).await.current, Some(false));
    // The next holder gets a larger token, and the revoked one still learns REVOKED after it.
    let next = f.acquire("deploy:prod", "fresh", now + 3).await;
    assert!(next.fencing_token.unwrap() > token);
    let body =
        json!({"op": "renew", "resource": "deploy:prod", "holder": "wedged", "token": token});
    assert_eq!(rules(&f.call(body, now + 4).await), ["REVOKED"]);
    // Nothing left to revoke of that holder: NO_HOLD, and no audit entry for it.
    let again =
        json!({"op": "revoke", "resource": "deploy:prod", "holder": "wedged", "reason": "again"});
    let again = f.call(again, now + 5).await;
    assert_eq!((again.granted, rules(&again)), (false, vec!["NO_HOLD"]));
    let audit = f.call(json!({"op": "audit"}), now + 6).await;
    let entries = audit.entries.unwrap();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!(entry.resource.as_deref(), Some("deploy:prod"));
    assert_eq!(entry.reason, "stuck since 3 am");
    assert_eq!(entry.actor, "key:0123456789abcdef");
    assert_eq!(entry.ended, ended);
    assert_eq!(audit.next_cursor, Some(None));
    // Kept 90 days: the entry's TTL (epoch seconds) lets DynamoDB delete it after that, not before.
    let items = f
        .client
        .scan()
        .table_name(&f.tables.requests)
        .send()
        .await
        .unwrap();
    let entries: Vec<_> = items
        .items()
        .iter()
        .filter(|i| i.contains_key("atm"))
        .collect();
    assert_eq!(entries.len(), 1);
    let ttl: i64 = match entries[0].get("ttl") {
        Some(AttributeValue::N(n)) => n.parse().unwrap(),
        other => panic!("no ttl: {other:?}"),
    };
    let days_90 = 90 * 24 * 3600;
    let revoked_at = (now + 1) / 1000;
    assert!(
        (revoked_at + days_90..=revoked_at + days_90 + 3601).contains(&ttl),
        "{ttl}"
    );
}

#[tokio::test]
async fn revoking_one_permit_of_a_semaphore_hands_it_to_the_first_waiter() {
    let f = fixture().await;
    let now = now_ms();
    for holder in ["a", "b"] {
        let body = json!({"op": "acquire", "resource": "pool", "holder": holder, "limit": 2});
        assert!(f.call(body, now).await.granted);
    }
    for waiter in ["c", "d"] {
        let body = json!({"op": "acquire", "resource": "pool", "holder": waiter, "limit": 2, "waitSeconds": 1});
        assert!(!f.call(body, now).await.granted);
    }
    let revoke = json!({"op": "revoke", "resource": "pool", "holder": "a", "reason": "r"});
    let revoked = f.call(revoke, now + 10).await;
    assert!(revoked.granted, "{revoked:?}");
    let holders: Vec<(&str, u64)> = revoked
        .holders
        .iter()
        .map(|h| (h.holder.as_str(), h.fencing_token))
        .collect();
    assert_eq!(holders, [("b", 2), ("c", 3)], "c was first in line");
    // Revoke every permit: both go, and d, next in line, gets one.
    let all = f
        .call(
            json!({"op": "revoke", "resource": "pool", "reason": "all"}),
            now + 20,
        )
        .await;
    let ended: Vec<&str> = all
        .revoked
        .as_ref()
        .unwrap()
        .iter()
        .map(|h| h.holder.as_str())
        .collect();
    assert_eq!(ended, ["b", "c"]);
    let left: Vec<&str> = all.holders.iter().map(|h| h.holder.as_str()).collect();
    assert_eq!(left, ["d"]);
}

#[tokio::test]
async fn a_revoke_with_request_id_applies_once_with_one_audit_entry() {
    let f = fixture().await;
    let now = now_ms();
    f.acquire("r", "w", now).await;
    let body = json!({"op": "revoke", "resource": "r", "reason": "once", "requestId": "rv-1"});
    let first = f.call(body.clone(), now).await;
    assert!(first.granted && !first.replayed);
    // A new holder takes it; the retry replays the first answer, ending nothing more.
    f.acquire("r", "v", now + 1).await;
    let again = f.call(body, now + 2).await;
    assert!(again.replayed && again.granted);
    let get = f.call(json!({"op": "get", "resource": "r"}), now + 3).await;
    assert_eq!(get.holder.as_deref(), Some("v"));
    let other =
        json!({"op": "revoke", "resource": "r", "reason": "different", "requestId": "rv-1"});
    let conflict = f.try_as(&f.tenant, other, now + 4).await;
    assert!(matches!(conflict, Err(LeaseError::IdempotencyConflict)));
    let audit = f.call(json!({"op": "audit"}), now + 5).await;
    assert_eq!(audit.entries.unwrap().len(), 1);
}

#[tokio::test]
async fn the_audit_is_newest_first_paged_filtered_and_kept_90_days() {
    let f = fixture().await;
    let now = now_ms();
    for i in 0..5u8 {
        let at = now + Millis::from(i) * 1000;
        let resource = if i % 2 == 0 { "even" } else { "odd" };
        f.acquire(resource, "w", at).await;
        let body = json!({"op": "revoke", "resource": resource, "reason": format!("r{i}")});
        assert!(f.call(body, at).await.granted);
    }
    let later = now + 10_000;
    let (mut reasons, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let mut body = json!({"op": "audit", "pageSize": 2});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = f.call(body, later).await;
        reasons.extend(page.entries.unwrap().into_iter().map(|e| e.reason));
        match page.next_cursor.unwrap() {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(reasons, ["r4", "r3", "r2", "r1", "r0"]);
    let odd = f
        .call(json!({"op": "audit", "resource": "odd"}), later)
        .await;
    let odd: Vec<String> = odd.entries.unwrap().into_iter().map(|e| e.reason).collect();
    assert_eq!(odd, ["r3", "r1"]);
    // Past 90 days an entry is not listed, whether or not TTL has deleted it yet.
    let days_90 = 90 * 24 * 3600 * 1000;
    let gone = f.call(json!({"op": "audit"}), now + days_90 + 2_500).await;
    let left: Vec<String> = gone
        .entries
        .unwrap()
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert_eq!(left, ["r4", "r3"]);
    // Another tenant sees none of it.
    let other = Tenant::for_key("acme", "t2").unwrap();
    let theirs = f
        .try_as(&other, json!({"op": "audit"}), later)
        .await
        .unwrap();
    assert!(theirs.entries.unwrap().is_empty());
}

/// A revoke with a token ends only the permit with that token: a holder's newer permit is left
/// alone (the console sends the token it shows).
#[tokio::test]
async fn a_revoke_with_a_token_is_fenced() {
    let f = fixture().await;
    let now = now_ms();
    let first = f.acquire("r", "w", now).await.fencing_token.unwrap();
    let release = json!({"op": "release", "resource": "r", "holder": "w", "token": first});
    assert!(f.call(release, now).await.granted);
    let second = f.acquire("r", "w", now + 1).await.fencing_token.unwrap();
    let stale = json!({"op": "revoke", "resource": "r", "holder": "w", "token": first, "reason": "the one on screen"});
    let stale = f.call(stale, now + 2).await;
    assert_eq!((stale.granted, rules(&stale)), (false, vec!["NO_HOLD"]));
    let get = f.call(json!({"op": "get", "resource": "r"}), now + 3).await;
    assert_eq!(get.fencing_token, Some(second), "the newer permit stands");
    let current = json!({"op": "revoke", "resource": "r", "token": second, "reason": "this one"});
    let current = f.call(current, now + 4).await;
    assert_eq!(current.revoked.unwrap()[0].fencing_token, second);
}

/// A page carries at most 1 MiB of entries (at least one), whatever pageSize asks: three
/// semaphores crowded with 64 holders whose holders and values are control characters (JSON
/// escapes each sixfold: about 457 KB an entry) come two, then one, and the cursor still reaches
/// every name once. Without the bound a page of 100 such entries is 46 MB, past what a Lambda
/// function can answer (6 MiB), and no cursor gets past it.
#[tokio::test]
async fn a_page_of_crowded_semaphores_stops_at_a_megabyte_and_the_cursor_goes_on() {
    use leasekit_core::service::lease::LIST_PAGE_BYTES;
    let f = fixture().await;
    let now = now_ms();
    let unit = "\u{1}";
    let names: Vec<String> = (0..3).map(|i| format!("crowded:{i}")).collect();
    for name in &names {
        for i in 0..64 {
            let holder = format!("{}{i:04}", unit.repeat(124));
            let a = f
                .call(
                    json!({"op": "acquire", "resource": name, "holder": holder, "limit": 64,
                        "ttlSeconds": 600, "value": unit.repeat(1024)}),
                    now,
                )
                .await;
            assert!(a.granted, "{name} {i}");
        }
    }
    let (listed, sizes) = f.list_all(Some("crowded:"), 100, now).await;
    assert_eq!(listed, names, "every name once, in order");
    assert_eq!(sizes, vec![2, 1]);
    let page = f.call(json!({"op": "list", "pageSize": 100}), now).await;
    let bytes = serde_json::to_vec(&page).unwrap().len();
    assert!(
        bytes > LIST_PAGE_BYTES * 3 / 4 && bytes < LIST_PAGE_BYTES + 4096,
        "{bytes} bytes"
    );
}
