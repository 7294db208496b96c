//! DynamoDB round trips and capacity units per lease path, measured by the SDK interceptor: the
//! figures the storage design promises (docs/adr/0001-lease-storage.md) and BENCHMARKS.md
//! publishes. Counts, not times: a regression fails here.
//!
//! Print the table: `cargo test -p leasekit-core --test usage -- --nocapture`

mod common;

use common::{ENDPOINT_VAR, test_store};
use leasekit_core::clock::now_ms;
use leasekit_core::lease::LeaseRequest;
use leasekit_core::provenance::Issuer;
use leasekit_core::service::lease::LeaseService;
use leasekit_core::store::LeaseStore;
use leasekit_core::store::usage::{Usage, measured};
use leasekit_core::tenant::Tenant;
use serde_json::json;

fn req(v: serde_json::Value) -> LeaseRequest {
    serde_json::from_value(v).unwrap()
}

/// The expected cost of one path: round trips, read units, billed write units.
type Cost = (u32, f64, f64);

/// Which process sends a call: `Mine` keeps its view of the lease from call to call; `Other`
/// is a second process (another Lambda container), whose writes make `Mine`'s view stale.
#[derive(Clone, Copy)]
enum Who {
    Mine,
    Other,
}

/// Two services on one store, as two Lambda containers are: `Mine` and `Other`.
async fn two_processes() -> (LeaseService, LeaseService) {
    let s = test_store().await;
    let service = |seed: u8| {
        LeaseService::new(
            LeaseStore::new(s.client.clone(), &s.tables.leases, &s.tables.requests),
            Issuer::from_seed(&[seed; 32]),
        )
    };
    (service(1), service(2))
}

#[tokio::test]
async fn every_lease_path_costs_what_the_design_says() {
    let (mine, other) = two_processes().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |who: Who, body: serde_json::Value| {
        let service = match who {
            Who::Mine => mine.clone(),
            Who::Other => other.clone(),
        };
        let tenant = tenant.clone();
        async move {
            let (answer, usage) =
                measured(service.execute(&tenant, &req(body), [0; 32], now)).await;
            (answer.expect("store answers").data, usage)
        }
    };
    let on = |resource: &str, op: &str, holder: &str| json!({"op": op, "resource": resource, "holder": holder});
    let acquire = |holder: &str| on("r", "acquire", holder);
    let with_id = |mut body: serde_json::Value, id: &str| {
        body["requestId"] = json!(id);
        body
    };
    let with_token = |mut body: serde_json::Value, token: u64| {
        body["token"] = json!(token);
        body
    };
    let renew = |token: u64| with_token(on("r", "renew", "a"), token);
    let release = |token: u64| with_token(on("r", "release", "a"), token);
    use Who::{Mine, Other};
    let cases: [(&str, Who, serde_json::Value, bool, Cost); 19] = [
        // A take and a release also write the list index (docs/adr/0008): its entry goes in or
        // out, one write unit; a renew leaves it as it is (the index holds keys only).
        ("acquire, free", Mine, acquire("a"), true, (1, 0.0, 2.0)),
        (
            "acquire, held by another (denied)",
            Mine,
            acquire("b"),
            false,
            (1, 0.0, 1.0),
        ),
        // The view foresees it: straight to the holder's own write.
        (
            "re-acquire by the holder",
            Mine,
            acquire("a"),
            true,
            (1, 0.0, 1.0),
        ),
        ("renew", Mine, renew(1), true, (1, 0.0, 1.0)),
        (
            "renew, wrong token (denied)",
            Mine,
            renew(9),
            false,
            (1, 0.0, 1.0),
        ),
        (
            "get",
            Mine,
            json!({"op": "get", "resource": "r"}),
            true,
            (1, 1.0, 0.0),
        ),
        ("release", Mine, release(1), true, (1, 0.0, 2.0)),
        // With requestId: one transaction, its answer known before it commits. A cancelled one
        // is counted as billed one unit per item (its prepare phase), an upper bound.
        (
            "acquire with requestId",
            Mine,
            with_id(acquire("a"), "q1"),
            true,
            (1, 0.0, 5.0),
        ),
        (
            "replay of that requestId",
            Mine,
            with_id(acquire("a"), "q1"),
            true,
            (1, 0.0, 2.0),
        ),
        // A denial this process's view foresees: its record with a check that the lease is as
        // the view shows it, one transaction (#28). It was a read, then the record alone: two
        // round trips, 4 read units and 1 write unit; now one round trip and 4 write units (a
        // transaction bills each of its two items twice), dearer in units, one round trip less.
        (
            "denied with requestId",
            Mine,
            with_id(acquire("b"), "q2"),
            false,
            (1, 0.0, 4.0),
        ),
        (
            "renew with requestId",
            Mine,
            with_id(renew(2), "q3"),
            true,
            (1, 0.0, 4.0),
        ),
        // The cancelled transaction hands the lease back: decided on, then the record alone.
        (
            "renew with requestId, wrong token (denied)",
            Mine,
            with_id(renew(9), "q4"),
            false,
            (2, 0.0, 3.0),
        ),
        (
            "release with requestId",
            Mine,
            with_id(release(2), "q5"),
            true,
            (1, 0.0, 5.0),
        ),
        (
            "get with requestId",
            Mine,
            with_id(json!({"op": "get", "resource": "r"}), "q6"),
            false,
            (1, 1.0, 0.0),
        ),
        // A resource never seen: the counter's first value is the guess.
        (
            "acquire with requestId, new resource",
            Mine,
            with_id(on("n", "acquire", "a"), "q7"),
            true,
            (1, 0.0, 5.0),
        ),
        // Another container takes and frees "r": this process's view of it is stale.
        (
            "(another process acquires)",
            Other,
            acquire("c"),
            true,
            (1, 0.0, 2.0),
        ),
        (
            "(another process releases)",
            Other,
            with_token(on("r", "release", "c"), 3),
            true,
            (1, 0.0, 2.0),
        ),
        // The stale guess is cancelled, the lease comes back with it, the second try commits.
        (
            "acquire with requestId, stale view",
            Mine,
            with_id(acquire("a"), "q8"),
            true,
            (2, 0.0, 7.0),
        ),
        (
            "re-acquire with requestId",
            Mine,
            with_id(acquire("a"), "q9"),
            true,
            (1, 0.0, 4.0),
        ),
    ];
    let mut table = vec![format!(
        "| {:<42} | {:>11} | {:>10} | {:>11} |",
        "path", "round trips", "read units", "write units"
    )];
    // dynoxide bills capacity by DynamoDB's published rules; moto does not (half a unit per write,
    // nothing for transactions), so against another endpoint only round trips are checked.
    let check_units = std::env::var_os(ENDPOINT_VAR).is_none();
    let mut wrong = Vec::new();
    for (path, who, body, granted, expected) in cases {
        let (data, usage) = run(who, body).await;
        assert_eq!(data.granted, granted, "{path}");
        let Usage {
            round_trips,
            read_units,
            ..
        } = usage;
        let measured = (round_trips, read_units, usage.billed_write_units());
        table.push(format!(
            "| {path:<42} | {round_trips:>11} | {read_units:>10} | {:>11} |",
            measured.2
        ));
        let differs = if check_units {
            measured != expected
        } else {
            measured.0 != expected.0
        };
        if differs {
            wrong.push(format!(
                "{path}: measured {measured:?}, the design says {expected:?}"
            ));
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A denial foreseen on a view that is stale (another process released the lease since): the
/// check fails, the lease comes back with it, and the acquire is decided on that and granted,
/// in two round trips; never a denial recorded on a view the store did not confirm. A denial
/// the check confirms is recorded, and its retry is that answer, replayed.
#[tokio::test]
async fn a_foreseen_denial_on_a_stale_view_is_decided_again_on_the_store() {
    let (mine, other) = two_processes().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let call = |service: &LeaseService, body: serde_json::Value| {
        let (service, tenant) = (service.clone(), tenant.clone());
        async move {
            let (answer, usage) =
                measured(service.execute(&tenant, &req(body), [0; 32], now)).await;
            (answer.expect("store answers").data, usage.round_trips)
        }
    };
    let acquire = |holder: &str, id: &str| json!({"op": "acquire", "resource": "s", "holder": holder, "requestId": id});
    let (held, _) = call(
        &other,
        json!({"op": "acquire", "resource": "s", "holder": "x"}),
    )
    .await;
    assert!(held.granted);
    // Mine sees x holding (a denial without requestId leaves it the view)...
    let (denied, _) = call(
        &mine,
        json!({"op": "acquire", "resource": "s", "holder": "y"}),
    )
    .await;
    assert!(!denied.granted);
    // ... a confirmed denial: one round trip, and its retry replays it.
    let (first, trips) = call(&mine, acquire("y", "d1")).await;
    assert_eq!((first.granted, trips), (false, 1), "{first:?}");
    let (again, _) = call(&mine, acquire("y", "d1")).await;
    assert!(again.replayed && !again.granted, "{again:?}");
    // Then the other process releases: mine's view is stale, and its foreseen denial is not.
    let release =
        json!({"op": "release", "resource": "s", "holder": "x", "token": held.fencing_token});
    assert!(call(&other, release).await.0.granted);
    let (granted, trips) = call(&mine, acquire("y", "d2")).await;
    assert_eq!((granted.granted, trips), (true, 2), "{granted:?}");
    let (replay, _) = call(&mine, acquire("y", "d2")).await;
    assert!(replay.replayed && replay.granted, "{replay:?}");
}

/// Semaphores and sets (docs/adr/0006): a semaphore's write is a consistent read then one
/// version-guarded write; a set is one TransactGetItems then one TransactWriteItems. Holders
/// are 20 bytes, as in the ADR's size table. Printed with `--nocapture`; BENCHMARKS.md has it.
#[tokio::test]
async fn semaphore_and_set_paths_cost_what_the_adr_says() {
    let service = one_process().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |body: serde_json::Value| measure(&service, &tenant, body, now);
    let holder = |i: usize| format!("worker-{i:013}");
    let mut cases: Vec<(String, serde_json::Value, bool, Cost)> = Vec::new();
    // (limit, write units of the full item, of a record that lists every holder)
    for (limit, full_write_units, record_units) in [(8u32, 1.0, 2.0), (64, 3.0, 9.0)] {
        let r = format!("pool{limit}");
        for i in 1..limit as usize {
            let body = json!({"op": "acquire", "resource": r, "holder": holder(i), "limit": limit});
            assert!(run(body).await.0.granted);
        }
        let acquire =
            |i: usize| json!({"op": "acquire", "resource": r, "holder": holder(i), "limit": limit});
        // A consistent read of up to 4 KB is one unit; in a transaction, two an item.
        let read_units = 1.0;
        cases.extend([
            (
                format!("limit {limit}: acquire, last permit"),
                acquire(0),
                true,
                (2, read_units, full_write_units),
            ),
            (
                format!("limit {limit}: acquire, all held (denied)"),
                acquire(99),
                false,
                (1, read_units, 0.0),
            ),
            // The lease's guess (a single holder) fails first, counted as one unit, then the
            // version-guarded write the item that came back decides.
            (
                format!("limit {limit}: renew"),
                json!({"op": "renew", "resource": r, "holder": holder(0), "token": limit}),
                true,
                (2, 0.0, 1.0 + full_write_units),
            ),
            (
                format!("limit {limit}: check"),
                json!({"op": "check", "resource": r, "token": limit}),
                true,
                (1, read_units, 0.0),
            ),
            (
                format!("limit {limit}: release"),
                json!({"op": "release", "resource": r, "holder": holder(0), "token": limit}),
                true,
                (2, 0.0, 1.0 + full_write_units),
            ),
            (
                format!("limit {limit}: acquire with requestId"),
                {
                    let mut b = acquire(0);
                    b["requestId"] = json!(format!("sem{limit}"));
                    b
                    // TransactGetItems of the item and the record (two units each), then the write and
                    // the record in one transaction (twice their units); the record lists every holder.
                },
                true,
                (2, 4.0, 2.0 * (full_write_units + record_units)),
            ),
        ]);
    }
    // moto refuses a TransactGetItems of more than 25 items (DynamoDB takes 100 since 2022; moto's
    // TRANSACTION_MAX_ITEMS is the old limit), so a set of 50 is measured on the embedded store.
    let on_dynoxide = std::env::var_os(ENDPOINT_VAR).is_none();
    let sizes: &[usize] = if on_dynoxide { &[2, 10, 50] } else { &[2, 10] };
    for &n in sizes {
        let resources: Vec<String> = (0..n).map(|i| format!("set{n}-{i}")).collect();
        let leases: Vec<serde_json::Value> = resources
            .iter()
            .map(|r| json!({"resource": r, "token": 1}))
            .collect();
        // Every item of a set is read and written inside a transaction: two units each; a take
        // or a release also writes (or removes) its list index entry, one unit each (an index
        // write is not part of the transaction's two-phase cost).
        let units = 2.0 * n as f64;
        let entries = n as f64;
        cases.extend([
            (format!("set of {n}: acquire"), json!({"op": "acquire", "resources": resources, "holder": "w"}), true, (2, units, units + entries)),
            (format!("set of {n}: acquire, one held (denied)"), json!({"op": "acquire", "resources": resources, "holder": "other"}), false, (1, units, 0.0)),
            (format!("set of {n}: renew"), json!({"op": "renew", "leases": leases, "holder": "w"}), true, (2, units, units)),
            (format!("set of {n}: release"), json!({"op": "release", "leases": leases, "holder": "w"}), true, (2, units, units + entries)),
            // The record lists every member: about 0.25 KB each.
            (format!("set of {n}: acquire with requestId"), json!({"op": "acquire", "resources": resources, "holder": "w", "requestId": format!("set{n}")}), true, (2, units + 2.0, units + entries + [4.0, 6.0, 26.0][[2, 10, 50].iter().position(|&m| m == n).unwrap()])),
        ]);
    }
    // Waiting (docs/adr/0007) behind a lease: the place is the blind take that fails, then the
    // versioned write; nothing wakes the waiter (its own write does not), and the last round
    // (the wait ended) reads instead of guessing again. The
    // release hands the lease on in its write, after its own guess failed on the queued item.
    assert!(
        run(json!({"op": "acquire", "resource": "queued", "holder": "owner"}))
            .await
            .0
            .granted
    );
    cases.extend([
        (
            "wait 1 s behind a lease (a place, ends ungranted)".to_owned(),
            json!({"op": "acquire", "resource": "queued", "holder": "w", "waitSeconds": 1}),
            false,
            (3, 1.0, 2.0),
        ),
        (
            "release, handing the lease to the waiter".to_owned(),
            json!({"op": "release", "resource": "queued", "holder": "owner", "token": 1}),
            true,
            (2, 0.0, 2.0),
        ),
        (
            "wait, free at once (the lease's one write)".to_owned(),
            json!({"op": "acquire", "resource": "free", "holder": "w", "waitSeconds": 5}),
            true,
            (1, 0.0, 2.0),
        ),
        // A list page (docs/adr/0008): the 16 index shards at once (keys only: half a unit
        // each, eventually consistent), then the page's resources, and one more to know whether
        // more follow, in one consistent batch read.
        (
            "list, a page of 2".to_owned(),
            json!({"op": "list", "prefix": "set10-", "pageSize": 2}),
            false,
            (17, 11.0, 0.0),
        ),
    ]);
    let mut measured = Vec::new();
    for (path, body, granted, expected) in cases {
        let (data, usage) = run(body).await;
        assert_eq!(data.granted, granted, "{path}");
        measured.push((path, usage, expected));
    }
    compare(measured);
}

/// Each path's measured cost against what the ADR says, printed as a table: a difference fails
/// (on another store than the embedded one, only in round trips: its units are not DynamoDB's).
fn compare(measured: Vec<(String, Usage, Cost)>) {
    let check_units = std::env::var_os(ENDPOINT_VAR).is_none();
    let mut table = vec![format!(
        "| {:<42} | {:>11} | {:>10} | {:>11} |",
        "path", "round trips", "read units", "write units"
    )];
    let mut wrong = Vec::new();
    for (path, usage, expected) in measured {
        let measured = (
            usage.round_trips,
            usage.read_units,
            usage.billed_write_units(),
        );
        table.push(format!(
            "| {path:<42} | {:>11} | {:>10} | {:>11} |",
            measured.0, measured.1, measured.2
        ));
        let differs = match check_units {
            true => measured != expected,
            false => measured.0 != expected.0,
        };
        if differs {
            wrong.push(format!(
                "{path}: measured {measured:?}, the ADR says {expected:?}"
            ));
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `body` for `tenant` at `now`: its answer, and what it cost.
async fn measure(
    service: &LeaseService,
    tenant: &Tenant,
    body: serde_json::Value,
    now: leasekit_core::clock::Millis,
) -> (leasekit_core::lease::LeaseAnswer, Usage) {
    let (answer, usage) = measured(service.execute(tenant, &req(body), [0; 32], now)).await;
    (answer.expect("store answers").data, usage)
}

/// One process's service on a fresh store.
async fn one_process() -> LeaseService {
    let s = test_store().await;
    LeaseService::new(
        LeaseStore::new(s.client.clone(), &s.tables.leases, &s.tables.requests),
        Issuer::from_seed(&[1; 32]),
    )
}

/// The session paths (docs/adr/0010): what a session costs to open, keep alive and end (one
/// write of its item, whatever it holds), and what its permits add to the paths of a resource.
#[tokio::test]
async fn session_paths_cost_what_adr_0010_says() {
    let service = one_process().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |body: serde_json::Value| measure(&service, &tenant, body, now);
    let (opened, usage) = run(json!({"op": "open", "holder": "agent", "ttlSeconds": 60})).await;
    let id = opened.session.flatten().expect("opened").id;
    let mut measured = vec![("open".to_owned(), usage, (1, 0.0, 1.0))];
    let cases: Vec<(&str, serde_json::Value, bool, Cost)> = vec![
        // The resource's item and the session's, in one TransactGetItems (two units each), then
        // the version-guarded write and the session's list in one transaction (two units
        // each), and the resource's list index entry (one).
        (
            "acquire in a session",
            json!({"op": "acquire", "resource": "r", "holder": "agent", "session": id}),
            true,
            (2, 4.0, 5.0),
        ),
        // Its holder acquires it in the session again: the session, read with the resource, is
        // not read again to judge the permit it holds in it; the permit stays on its list (one
        // version-guarded write, no transaction).
        (
            "acquire in a session, by its holder",
            json!({"op": "acquire", "resource": "r", "holder": "agent", "session": id}),
            true,
            (2, 4.0, 1.0),
        ),
        // The item, then the session its permit names: a consistent GetItem each.
        (
            "get of a resource held in a session",
            json!({"op": "get", "resource": "r"}),
            true,
            (2, 2.0, 0.0),
        ),
        (
            "check of a token held in a session",
            json!({"op": "check", "resource": "r", "token": 1}),
            true,
            (2, 2.0, 0.0),
        ),
        (
            "get of a session",
            json!({"op": "get", "session": id}),
            true,
            (1, 1.0, 0.0),
        ),
        // One conditional write, no read: the store keeps it for the ttl it was opened with.
        (
            "keepalive",
            json!({"op": "keepalive", "session": id, "holder": "agent"}),
            true,
            (1, 0.0, 1.0),
        ),
        // With a requestId its answer is recorded with it: a read of the session and the
        // record, then the write and the record in one transaction.
        (
            "keepalive with requestId",
            json!({"op": "keepalive", "session": id, "holder": "agent", "requestId": "keep-1"}),
            true,
            (2, 4.0, 4.0),
        ),
        // This process saw a session's permit on it: no blind write, but a read (the item,
        // then its session), then the version-guarded write with the session's list, and the
        // index entry's removal.
        (
            "release of a session's permit",
            json!({"op": "release", "resource": "r", "holder": "agent", "token": 1}),
            true,
            (3, 2.0, 5.0),
        ),
        (
            "acquire in a session, again",
            json!({"op": "acquire", "resource": "r", "holder": "agent", "session": id}),
            true,
            (2, 4.0, 5.0),
        ),
        (
            "close (one write, whatever it holds)",
            json!({"op": "close", "session": id, "holder": "agent"}),
            true,
            (1, 0.0, 1.0),
        ),
    ];
    for (path, body, granted, expected) in cases {
        let (data, usage) = run(body).await;
        assert_eq!(data.granted, granted, "{path}: {data:?}");
        measured.push((path.to_owned(), usage, expected));
    }
    compare(measured);
}

/// What holding 1, 20 and 256 resources for an hour costs: each renewed on its own (a renew
/// every 10 s, for a 30 s ttl) against one session kept alive as often, in calls, DynamoDB
/// units and USDC at the list price (0.005 a call). Measured units of one renew and of one
/// keepalive at each size. Print: `cargo test -p leasekit-core --test usage -- --nocapture
/// holding`.
#[tokio::test]
async fn holding_many_resources_costs_one_keepalive_not_a_renew_each() {
    let service = one_process().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |body: serde_json::Value| measure(&service, &tenant, body, now);
    let units = |u: &Usage| u.read_units + u.billed_write_units();
    // One lease's renew, as a holder that renews its own lease sends it.
    let (a, _) = run(json!({"op": "acquire", "resource": "solo", "holder": "agent"})).await;
    assert!(a.granted);
    let renew = json!({"op": "renew", "resource": "solo", "holder": "agent", "token": 1});
    let (renewed, renew_usage) = run(renew).await;
    assert!(renewed.granted);
    let per_hour = 360.0;
    let price = 0.005;
    let mut lines = vec![
        "| resources held | renewals: calls/h | units/h | USDC/day | one session: calls/h | units/h | USDC/day |".to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for n in [1usize, 20, 256] {
        let (opened, _) = run(json!({"op": "open", "holder": "agent", "ttlSeconds": 30})).await;
        let id = opened.session.flatten().unwrap().id;
        for i in 0..n {
            let body = json!({"op": "acquire", "resource": format!("held{n}-{i}"), "holder": "agent", "session": id});
            assert!(run(body).await.0.granted);
        }
        let (kept, keep_usage) =
            run(json!({"op": "keepalive", "session": id, "holder": "agent"})).await;
        assert!(kept.granted);
        let n = n as f64;
        lines.push(format!(
            "| {n} | {} | {} | {:.1} | {} | {} | {:.1} |",
            n * per_hour,
            n * per_hour * units(&renew_usage),
            n * per_hour * 24.0 * price,
            per_hour,
            per_hour * units(&keep_usage),
            per_hour * 24.0 * price,
        ));
    }
    println!("{}", lines.join("\n"));
    println!(
        "one renew: {} round trips, {} units; (the keepalives' units grow with the session's list)",
        renew_usage.round_trips,
        units(&renew_usage)
    );
}

/// Finished work and claim-next (docs/adr/0012): what a done release, an acquire refused by a
/// mark, a reopen, and an acquire of 2, 10 and 50 candidates (none, half and all held) cost.
#[tokio::test]
async fn done_and_candidates_cost_what_adr_0012_says() {
    let service = one_process().await;
    let tenant = Tenant::for_key("acme", "t").unwrap();
    let now = now_ms();
    let run = |body: serde_json::Value| measure(&service, &tenant, body, now);
    let mut cases: Vec<(String, serde_json::Value, bool, Cost)> = Vec::new();
    assert!(
        run(json!({"op": "acquire", "resource": "task", "holder": "w"}))
            .await
            .0
            .granted
    );
    cases.extend([
        // Decided on a read (the mark makes the item versioned), then one guarded write.
        (
            "release with done".to_owned(),
            json!({"op": "release", "resource": "task", "holder": "w", "token": 1, "done": true, "result": "ok"}),
            true,
            (2, 1.0, 1.0),
        ),
        // The unseen take fails on the mark (a unit for the check); the item it hands back
        // says DONE: no read.
        (
            "acquire, finished (DONE)".to_owned(),
            json!({"op": "acquire", "resource": "task", "holder": "w2"}),
            false,
            (1, 0.0, 1.0),
        ),
        // A read, then the item and its audit entry in one transaction (two units each), the
        // audit's index entry and the list entry's removal (one each).
        (
            "reopen".to_owned(),
            json!({"op": "reopen", "resource": "task", "reason": "redo"}),
            true,
            (2, 1.0, 6.0),
        ),
    ]);
    // moto refuses a TransactGetItems of more than 25 items (see the sets above).
    let on_dynoxide = std::env::var_os(ENDPOINT_VAR).is_none();
    let sizes: &[usize] = if on_dynoxide { &[2, 10, 50] } else { &[2, 10] };
    for &n in sizes {
        // Every candidate is read in one snapshot: two units each.
        let units = 2.0 * n as f64;
        for (held, label) in [(0, "none held"), (n / 2, "half held"), (n, "all held")] {
            let names: Vec<String> = (0..n).map(|i| format!("c{n}-{label}-{i}")).collect();
            for name in &names[..held] {
                let body = json!({"op": "acquire", "resource": name, "holder": "other", "ttlSeconds": 600});
                assert!(run(body).await.0.granted);
            }
            let granted = held < n;
            // The winner's take: one conditional write (with its list entry), like a lease's.
            let cost = match granted {
                true => (2, units, 2.0),
                false => (1, units, 0.0),
            };
            cases.push((
                format!("candidates of {n}, {label}"),
                json!({"op": "acquire", "candidates": names, "holder": "w"}),
                granted,
                cost,
            ));
        }
    }
    let mut measured = Vec::new();
    for (path, body, granted, expected) in cases {
        let (data, usage) = run(body).await;
        assert_eq!(data.granted, granted, "{path}: {data:?}");
        measured.push((path, usage, expected));
    }
    compare(measured);
}
