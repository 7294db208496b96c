//! A history checker: many concurrent clients issue random acquire/renew/release/get on a few
//! resources with 1 s leases, recording when each call was invoked and when it returned; then
//! the history is checked against the lease rules, using only what real-time order makes certain
//! (client and server read the same clock here):
//! - a new acquisition's token is larger than every token of an acquisition that returned before
//!   it was invoked, and tokens of different holders never repeat;
//! - no two holders overlap: a token is never granted while a lease that was granted (and
//!   returned) before the acquire was invoked is still live and was not released;
//! - nothing succeeds with a superseded token.
//!
//! The clients treat a 502 as the contract says: the outcome is unknown; a read, or a mutation
//! with a requestId, may be sent again. So a store that is slow under load (moto on a busy
//! machine) leaves calls of unknown outcome (a few, bounded), not a failed run; and a run whose
//! store answers too late for seconds at a time checks the retries and replays of requestIds.
//!
//! Against the embedded store by default; `LEASEKIT_TEST_DYNAMODB_ENDPOINT` (moto in CI) serves
//! the same server from that endpoint. `LEASEKIT_HISTORY_OPS` sets the number of operations.

mod support;

use serde_json::Value;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::history::{Event, assert_consistent, check, now_ms, parse_iso};
use support::proxy::{Mode, Proxy};
use support::*;
use tempfile::TempDir;

const CLIENTS: usize = 16;
/// The main run contends on three of these; the fault run spreads over all, so that more of
/// the calls a fault catches are grants (whose retries are replays).
const RESOURCES: [&str; 12] = [
    "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
];
/// Attempts per call before its outcome is recorded as unknown.
const RETRIES: u64 = 5;

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Calls the way the contract tells callers to: a 502 means the store failed or its answer is
/// unknown; a read, or a mutation with a requestId, is safe to send again (the same body), and a
/// mutation without one is not. `None` when the store never answered. Any other status fails
/// the test.
async fn call_as_a_careful_client(client: &Client, body: &Value, tally: &Tally) -> Option<Value> {
    let attempts = match body["op"] == "get" || body.get("requestId").is_some() {
        true => RETRIES,
        false => 1,
    };
    for attempt in 0..attempts {
        let (status, answer) = client.call(body.clone()).await;
        match status {
            200 => {
                if attempt > 0 && answer["data"]["replayed"] == true {
                    tally.replayed.fetch_add(1, Ordering::Relaxed);
                }
                return Some(answer["data"].clone());
            }
            502 if answer["code"] == "STORE_UNAVAILABLE" => {
                tally.store_failed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100 * (attempt + 1))).await
            }
            _ => panic!("{status} {answer} for {body}"),
        }
    }
    tally.unknown.fetch_add(1, Ordering::Relaxed);
    None
}

/// What the clients call.
#[derive(Clone, Copy)]
struct Mix {
    /// How many of `RESOURCES` they work on.
    resources: usize,
    /// Whether every mutation carries a requestId (and so can be retried after a 502). Not in the
    /// main run: moto copies a whole table for every transaction, and the idempotency records
    /// would make its run quadratic.
    request_ids: bool,
}

/// What the clients met besides plain answers.
#[derive(Default)]
struct Tally {
    /// 502s answered.
    store_failed: AtomicUsize,
    /// Retries answered with `replayed: true`: the call had applied, its answer was lost.
    replayed: AtomicUsize,
    /// Calls that never got an answer: their outcome is unknown.
    unknown: AtomicUsize,
}

async fn client_loop(
    client: Client,
    id: usize,
    ops: usize,
    history: Arc<Mutex<Vec<Event>>>,
    tally: Arc<Tally>,
    mix: Mix,
) {
    let holder = format!("h{id}");
    let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1);
    let mut tokens: HashMap<&'static str, u64> = HashMap::new();
    for i in 0..ops {
        let resource = RESOURCES[(rng(&mut seed) % mix.resources as u64) as usize];
        let known = tokens.get(resource).copied();
        let op = match (rng(&mut seed) % 10, known) {
            (0..=4, _) | (_, None) => "acquire",
            (5..=6, Some(_)) => "renew",
            (7..=8, Some(_)) => "release",
            _ => "get",
        };
        let mut body = json!({"op": op, "resource": resource, "tenantId": "history"});
        if op != "get" {
            body["holder"] = json!(holder);
        }
        if matches!(op, "acquire" | "renew") {
            body["ttlSeconds"] = json!(1);
        }
        if matches!(op, "renew" | "release") {
            body["token"] = json!(known);
        }
        if op != "get" && mix.request_ids {
            body["requestId"] = json!(format!("{holder}-{i}"));
        }
        let invoked = now_ms();
        let answer = call_as_a_careful_client(&client, &body, &tally).await;
        let returned = now_ms();
        let (granted, token, expires_at) = match &answer {
            // The store never answered: the call may or may not have taken effect. Keep it with
            // an unknown outcome (the checker lets it excuse an overlap, never count as a grant)
            // and forget the token, as a client that cannot tell would.
            None => {
                tokens.remove(resource);
                (None, known.filter(|_| op != "acquire"), None)
            }
            Some(data) => {
                let granted = data["granted"].as_bool().unwrap();
                if op == "acquire" && granted {
                    tokens.insert(resource, data["fencingToken"].as_u64().unwrap());
                }
                // A granted release ends the lease; a refused renew or release is how a holder
                // learns it lost it. Either way, forget the token, as a real client would.
                if (op == "release" || op == "renew") && (granted == (op == "release")) {
                    tokens.remove(resource);
                }
                let token = match op {
                    "acquire" => data["fencingToken"].as_u64().filter(|_| granted),
                    "get" => None,
                    _ => known,
                };
                let expires_at = data["expiresAt"]
                    .as_str()
                    .and_then(parse_iso)
                    .filter(|_| granted && op != "release");
                (Some(granted), token, expires_at)
            }
        };
        history.lock().unwrap().push(Event {
            op,
            resource: resource.to_owned(),
            holder: holder.clone(),
            invoked,
            returned,
            granted,
            token,
            expires_at,
        });
        // A little randomness in pacing, so leases lapse between calls too.
        if rng(&mut seed).is_multiple_of(8) {
            tokio::time::sleep(Duration::from_millis(rng(&mut seed) % 50)).await;
        }
    }
}

/// `total` random calls from `CLIENTS` concurrent clients of `server`, mixed as `mix` says; fails
/// unless the history keeps the lease rules, exercised contention and lapses, and lost at most 1%
/// of its answers.
async fn run_and_check(server: &Server, total: usize, mix: Mix, store: &str) -> Tally {
    let history = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let tally = Arc::new(Tally::default());
    let client = server.client(Some(ACME_KEY));
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            tokio::spawn(client_loop(
                client.clone(),
                id,
                total / CLIENTS,
                Arc::clone(&history),
                Arc::clone(&tally),
                mix,
            ))
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let history = history.lock().unwrap().clone();
    let granted_acquires = history
        .iter()
        .filter(|e| e.op == "acquire" && e.granted == Some(true))
        .count();
    let denied = history
        .iter()
        .filter(|e| e.granted == Some(false) && e.op != "get")
        .count();
    let tally = Arc::into_inner(tally).unwrap();
    let unknown = tally.unknown.load(Ordering::Relaxed);
    eprintln!(
        "history: {} ops in {:.1} s ({} granted acquires, {} denied mutations; {} 502s, {} \
         replayed, {} unknown), store: {store}",
        history.len(),
        started.elapsed().as_secs_f64(),
        granted_acquires,
        denied,
        tally.store_failed.load(Ordering::Relaxed),
        tally.replayed.load(Ordering::Relaxed),
        unknown,
    );
    assert!(history.len() >= total - CLIENTS);
    // A store that keeps failing would leave nothing to check: a few calls lost to a loaded
    // machine are the most a run may shrug off.
    assert!(
        unknown * 100 <= total,
        "{unknown} of {total} calls never got the store's answer"
    );
    assert!(
        granted_acquires > 50 && denied > 50,
        "the history exercised contention and lapses"
    );
    assert_consistent(&history, "in the history");
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_concurrent_histories_follow_the_lease_rules() {
    let total: usize = std::env::var("LEASEKIT_HISTORY_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = TempDir::new().unwrap();
    let endpoint = std::env::var("LEASEKIT_TEST_DYNAMODB_ENDPOINT").ok();
    let prefix = unique_prefix();
    let server = match &endpoint {
        Some(url) => Server::start_with(
            dir.path(),
            &["--dynamodb-endpoint", url, "--table-prefix", &prefix],
        ),
        None => Server::start(dir.path()),
    };
    let mix = Mix {
        resources: 3,
        request_ids: false,
    };
    run_and_check(
        &server,
        total,
        mix,
        endpoint.as_deref().unwrap_or("embedded"),
    )
    .await;
}

/// The store commits every write but its answers come too late, for seconds at a time (a
/// loaded or partitioned store): the server answers 502, the clients retry with the same
/// requestIds, and the history, replays included, still keeps every lease rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn histories_hold_when_the_store_commits_but_answers_too_late() {
    let endpoint = Endpoint::dynoxide().await;
    let proxy = Arc::new(Proxy::start(&endpoint.url));
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--dynamodb-endpoint",
            &proxy.url,
            "--table-prefix",
            &unique_prefix(),
        ],
    );
    // Three times: late for longer than the store client's whole budget (5 s), then on time.
    let faults = tokio::spawn({
        let proxy = Arc::clone(&proxy);
        async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(3_000)).await;
                proxy.set(Mode::Slow(Duration::from_secs(3)));
                tokio::time::sleep(Duration::from_millis(5_500)).await;
                proxy.set(Mode::Pass);
            }
        }
    });
    let mix = Mix {
        resources: RESOURCES.len(),
        request_ids: true,
    };
    let tally = run_and_check(&server, 1_500, mix, "dynoxide behind a late proxy").await;
    faults.abort();
    assert!(
        tally.store_failed.load(Ordering::Relaxed) > 0,
        "the store answered late"
    );
    assert!(
        tally.replayed.load(Ordering::Relaxed) > 0,
        "some calls applied and were replayed to their retries"
    );
}

/// The checker catches what it claims to: histories with a double grant, a token going back,
/// and a superseded token succeeding.
#[test]
fn the_checker_finds_broken_histories() {
    let e = |op, holder: &str, invoked, returned, token, expires_at| Event {
        op,
        resource: "r0".to_owned(),
        holder: holder.into(),
        invoked,
        returned,
        granted: Some(true),
        token: Some(token),
        expires_at,
    };
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(1_010)),
            e("acquire", "b", 20, 30, 2, Some(1_030))
        ])
        .iter()
        .any(|v| v.contains("while token 1"))
    );
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 5, Some(20)),
            e("acquire", "b", 50, 60, 4, Some(1_060))
        ])
        .iter()
        .any(|v| v.contains("issued after"))
    );
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(20)),
            e("acquire", "b", 50, 60, 2, Some(1_060)),
            e("renew", "a", 70, 80, 1, Some(1_080))
        ])
        .iter()
        .any(|v| v.contains("succeeded with token 1"))
    );
    // And accepts a correct one: lapse, then a new token.
    assert!(
        check(&[
            e("acquire", "a", 0, 10, 1, Some(20)),
            e("acquire", "b", 50, 60, 2, Some(1_060))
        ])
        .is_empty()
    );
}
