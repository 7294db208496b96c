//! The contract's "Coordination" ops over real HTTP against `leasekit serve` on the embedded
//! store: semaphores and check with an API key, their bad input, and real concurrent clients.

mod support;

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

fn semaphore(resource: &str, holder: &str, limit: Value) -> Value {
    json!({"op": "acquire", "tenantId": "t1", "resource": resource, "holder": holder, "limit": limit})
}

#[tokio::test]
async fn a_semaphore_and_a_check_over_http() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    for (holder, token) in [("a", 1), ("b", 2)] {
        let d = c.data(semaphore("pool", holder, json!(2))).await;
        assert_eq!(d["granted"], true, "{d}");
        assert_eq!(
            (d["holder"].clone(), d["fencingToken"].clone()),
            (json!(holder), json!(token))
        );
        assert_eq!(d["limit"], 2);
    }
    let full = c.data(semaphore("pool", "c", json!(2))).await;
    assert_eq!(
        (full["status"].clone(), rule_ids(&full)),
        (json!("fail"), vec!["LEASE_HELD".to_owned()])
    );
    let holders: Vec<_> = full["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["holder"].clone(), h["fencingToken"].clone()))
        .collect();
    assert_eq!(holders, [(json!("a"), json!(1)), (json!("b"), json!(2))]);
    let mismatch = c.data(semaphore("pool", "c", json!(5))).await;
    assert_eq!(rule_ids(&mismatch), ["LIMIT_MISMATCH"]);
    assert_eq!(mismatch["witnesses"][0]["path"], "/limit");
    let check = |token: u64| json!({"op": "check", "tenantId": "t1", "resource": "pool", "token": token, "holder": "b"});
    let (status, current) = c.call(check(2)).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            current["data"]["current"].clone(),
            current["data"]["status"].clone()
        ),
        (json!(true), json!("pass"))
    );
    assert!(
        current["_provenance"]["credential"]["proof"].is_object(),
        "a check is signed"
    );
    let stale = c.data(check(1)).await;
    assert_eq!(
        (stale["current"].clone(), rule_ids(&stale)),
        (json!(false), vec!["TOKEN_NOT_CURRENT".to_owned()])
    );
    // A lease's answer shows limit 1 and its one holder.
    let lease = c.data(acquire("t1", "single", "a")).await;
    assert_eq!(
        (
            lease["limit"].clone(),
            lease["holders"].as_array().unwrap().len()
        ),
        (json!(1), 1)
    );
}

#[tokio::test]
async fn bad_coordination_input_is_a_400_naming_the_field_and_writes_nothing() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let cases: Vec<(Value, &str)> = vec![
        (semaphore("r", "w", json!(0)), "/limit"),
        (semaphore("r", "w", json!(65)), "/limit"),
        (semaphore("r", "w", json!(2.5)), "/limit"),
        (semaphore("r", "w", json!("3")), "/limit"),
        (semaphore("r", "w", json!(null)), "/limit"),
        (semaphore("r", "w", json!(1u64 << 40)), "/limit"),
        (
            json!({"op": "check", "tenantId": "t1", "resource": "r"}),
            "/token",
        ),
        (
            json!({"op": "check", "tenantId": "t1", "resource": "r", "token": 0}),
            "/token",
        ),
        (
            json!({"op": "check", "tenantId": "t1", "resource": "r", "token": 1, "holder": ""}),
            "/holder",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = c.call(body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["code"], "INVALID_INPUT", "{body}: {answer}");
        let paths: Vec<&str> = answer["witnesses"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["path"].as_str())
            .collect();
        assert!(paths.contains(&field), "{body}: {answer}");
    }
    let d = c.data(get("t1", "r")).await;
    assert_eq!(
        (d["granted"].clone(), d["holders"].clone()),
        (json!(false), json!([]))
    );
    let fresh = c.data(semaphore("r", "w", json!(1))).await;
    assert_eq!(fresh["fencingToken"], 1, "nothing was written before");
}

/// Twelve clients on one limit-3 semaphore, each acquiring, holding a moment and releasing in a
/// loop: at no moment do more than three hold a permit, and no token is issued twice. A client's
/// hold is timed from its grant's answer to its release's sending, inside the server's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twelve_clients_never_overfill_a_limit_3_semaphore() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let start = Instant::now();
    let holds: Arc<Mutex<Vec<(Duration, Duration, u64)>>> = Arc::default();
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (c, holds) = (c.clone(), Arc::clone(&holds));
            tokio::spawn(async move {
                let holder = format!("w{i}");
                let mut grants = 0;
                while start.elapsed() < Duration::from_secs(4) {
                    let d = c.data(json!({"op": "acquire", "tenantId": "t1", "resource": "pool", "holder": holder, "limit": 3, "ttlSeconds": 20})).await;
                    if d["granted"] != true {
                        assert_eq!(rule_ids(&d), ["LEASE_HELD"], "{d}");
                        continue;
                    }
                    let from = start.elapsed();
                    let token = d["fencingToken"].as_u64().unwrap();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    let to = start.elapsed();
                    let release = json!({"op": "release", "tenantId": "t1", "resource": "pool", "holder": holder, "token": token});
                    assert_eq!(c.data(release).await["granted"], true);
                    holds.lock().unwrap().push((from, to, token));
                    grants += 1;
                }
                grants
            })
        })
        .collect();
    let mut grants = 0;
    for t in tasks {
        grants += t.await.unwrap();
    }
    let holds = holds.lock().unwrap().clone();
    assert_eq!(holds.len(), grants);
    assert!(grants >= 12, "only {grants} grants in 4 s");
    let mut tokens: Vec<u64> = holds.iter().map(|h| h.2).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), holds.len(), "a token issued twice");
    // The most holds overlapping at any moment: at each hold's start, count those it is inside.
    let most = holds
        .iter()
        .map(|(from, _, _)| {
            holds
                .iter()
                .filter(|(f, t, _)| f <= from && from < t)
                .count()
        })
        .max()
        .unwrap();
    assert!(most <= 3, "{most} holders at once");
    // And it is a semaphore, not a lock: three do hold at once.
    assert_eq!(most, 3, "never three holders at once");
    println!("{grants} grants, at most {most} at once");
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("set:{i}")).collect()
}

#[tokio::test]
async fn a_set_of_fifty_over_http_with_a_request_id() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let body = json!({"op": "acquire", "tenantId": "t1", "resources": names(50), "holder": "me", "requestId": "fifty"});
    let d = c.data(body.clone()).await;
    assert_eq!(
        (d["granted"].clone(), d["holder"].clone()),
        (json!(true), Value::Null),
        "{d}"
    );
    let leases = d["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 50);
    assert!(
        leases
            .iter()
            .all(|m| m["granted"] == true && m["fencingToken"] == 1 && m["holder"] == "me")
    );
    assert_eq!(c.data(body).await["replayed"], true);
    // Another holder's overlapping set: refused whole, a witness per blocking resource.
    let mut other = names(2);
    other.push("free-one".into());
    let refused = c
        .data(json!({"op": "acquire", "tenantId": "t1", "resources": other, "holder": "you"}))
        .await;
    let paths: Vec<_> = refused["witnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["path"].clone())
        .collect();
    assert_eq!(paths, [json!("/resources/0"), json!("/resources/1")]);
    assert_eq!(
        c.data(get("t1", "free-one")).await["granted"],
        false,
        "nothing taken"
    );
    let all: Vec<Value> = names(50)
        .iter()
        .map(|r| json!({"resource": r, "token": 1}))
        .collect();
    let released = c
        .data(json!({"op": "release", "tenantId": "t1", "leases": all, "holder": "me"}))
        .await;
    assert_eq!(released["granted"], true, "{released}");
    assert_eq!(c.data(get("t1", "set:49")).await["granted"], false);
}

#[tokio::test]
async fn bad_set_input_is_a_400_naming_the_field_and_writes_nothing() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let acquire_set = |resources: Value| json!({"op": "acquire", "tenantId": "t1", "holder": "w", "resources": resources});
    let two = json!([{"resource": "a", "token": 1}, {"resource": "b", "token": 1}]);
    let cases: Vec<(Value, &str)> = vec![
        (acquire_set(json!(["a"])), "/resources"),
        (acquire_set(json!(names(51))), "/resources"),
        (acquire_set(json!([])), "/resources"),
        (acquire_set(json!(["a", "a"])), "/resources"),
        (acquire_set(json!(["a", "has space"])), "/resources/1"),
        (
            json!({"op": "acquire", "tenantId": "t1", "holder": "w", "resource": "a", "resources": ["a", "b"]}),
            "/resources",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "holder": "w", "resources": ["a", "b"], "waitSeconds": 5}),
            "/waitSeconds",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "holder": "w", "leases": two}),
            "/leases",
        ),
        (
            json!({"op": "renew", "tenantId": "t1", "holder": "w", "resources": ["a", "b"], "token": 1}),
            "/resources",
        ),
        (
            json!({"op": "renew", "tenantId": "t1", "holder": "w", "leases": two, "token": 1}),
            "/token",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "holder": "w", "leases": [{"resource": "a", "token": 1}, {"resource": "a", "token": 2}]}),
            "/leases/1/resource",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "holder": "w", "leases": [{"resource": "a", "token": 1}]}),
            "/leases",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "holder": "w", "leases": [{"resource": "a"}, {"resource": "b", "token": 1}]}),
            "/leases/0/token",
        ),
        (
            json!({"op": "get", "tenantId": "t1", "resources": ["a", "b"]}),
            "/resources",
        ),
        (
            json!({"op": "check", "tenantId": "t1", "leases": two}),
            "/leases",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resources": ["a", "b"]}),
            "/holder",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = c.call(body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["code"], "INVALID_INPUT", "{body}: {answer}");
        let paths: Vec<&str> = answer["witnesses"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["path"].as_str())
            .collect();
        assert!(paths.contains(&field), "{body}: {answer}");
    }
    for r in ["a", "b"] {
        assert_eq!(
            c.data(get("t1", r)).await["granted"],
            false,
            "{r} untouched"
        );
    }
}

/// Eight clients over HTTP, each taking one of four overlapping pairs and releasing it, in a
/// loop for 3 s: a resource is never held by two at once, and a set is never seen half held
/// (each holder's grant shows both of its resources as its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_clients_with_overlapping_sets_never_share_a_resource() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let start = Instant::now();
    let pairs = [["a", "b"], ["b", "c"], ["c", "d"], ["d", "a"]];
    // When a client held which pair: from its grant's answer to its release's sending.
    type Hold = (Duration, Duration, [&'static str; 2]);
    let holds: Arc<Mutex<Vec<Hold>>> = Arc::default();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (c, holds) = (c.clone(), Arc::clone(&holds));
            tokio::spawn(async move {
                let (holder, pair) = (format!("w{i}"), pairs[i % 4]);
                while start.elapsed() < Duration::from_secs(3) {
                    let d = c.data(json!({"op": "acquire", "tenantId": "t1", "resources": pair, "holder": holder, "ttlSeconds": 20})).await;
                    if d["granted"] != true {
                        continue;
                    }
                    let from = start.elapsed();
                    for m in d["leases"].as_array().unwrap() {
                        assert_eq!(m["holder"], json!(holder), "{d}");
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let to = start.elapsed();
                    let leases: Vec<Value> = d["leases"].as_array().unwrap().iter().map(|m| json!({"resource": m["resource"], "token": m["fencingToken"]})).collect();
                    let released = c.data(json!({"op": "release", "tenantId": "t1", "leases": leases, "holder": holder})).await;
                    assert_eq!(released["granted"], true, "{released}");
                    holds.lock().unwrap().push((from, to, pair));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let holds = holds.lock().unwrap().clone();
    assert!(holds.len() >= 8, "only {} grants", holds.len());
    for (i, (from, to, pair)) in holds.iter().enumerate() {
        for (f2, t2, other) in &holds[i + 1..] {
            let overlap = from < t2 && f2 < to;
            let share = pair.iter().any(|r| other.contains(r));
            assert!(!(overlap && share), "{pair:?} and {other:?} held at once");
        }
    }
    println!("{} set grants", holds.len());
}

/// Integral numbers written with a fraction are integers in `limit` and a set's tokens too
/// (as in `token` and `ttlSeconds`); and `get` with a holder shows that holder's permit first.
/// Both found by the attack of 2026-12-02 (a 400 naming no field; the largest token shown).
#[tokio::test]
async fn fractions_are_integers_everywhere_and_get_shows_the_callers_permit() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let d = c.data(semaphore("pool", "a", json!(2.0))).await;
    assert_eq!(
        (d["granted"].clone(), d["limit"].clone()),
        (json!(true), json!(2))
    );
    c.data(semaphore("pool", "b", json!(2))).await;
    let mine = c
        .data(json!({"op": "get", "tenantId": "t1", "resource": "pool", "holder": "a"}))
        .await;
    assert_eq!(
        (mine["holder"].clone(), mine["fencingToken"].clone()),
        (json!("a"), json!(1))
    );
    let anyone = c.data(get("t1", "pool")).await;
    assert_eq!(anyone["holder"], "b", "the largest token without a holder");
    c.data(json!({"op": "acquire", "tenantId": "t1", "resources": ["x", "y"], "holder": "a"}))
        .await;
    let leases = json!([{"resource": "x", "token": 1.0}, {"resource": "y", "token": 1}]);
    let released = c
        .data(json!({"op": "release", "tenantId": "t1", "leases": leases, "holder": "a"}))
        .await;
    assert_eq!(released["granted"], true, "{released}");
}

/// A set far past its bound is refused with a small answer that names the field, not one that
/// quotes the whole array back (118 KB for 6000 names, found by the attack of 2026-12-02).
#[tokio::test]
async fn an_oversized_set_is_refused_in_a_few_bytes() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let names: Vec<String> = (0..6000).map(|i| format!("r{i}")).collect();
    let body = json!({"op": "acquire", "tenantId": "t1", "holder": "w", "resources": names});
    let (status, answer) = c.call(body).await;
    assert_eq!(
        (status, answer["witnesses"][0]["ruleId"].clone()),
        (400, json!("MAX_ITEMS"))
    );
    assert_eq!(answer["witnesses"][0]["path"], "/resources");
    let size = answer.to_string().len();
    assert!(size < 2048, "{size} bytes: {answer}");
}
