//! The lease API over real HTTP against `leasekit serve` on the embedded store: every rule of the
//! contract's lease section, bad input, keys, tenants, idempotency, concurrency, restarts.

mod support;

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

/// `2026-11-29T10:00:00.000Z`: ISO 8601, UTC, milliseconds.
fn is_iso_millis(v: &Value) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.len() == 24
        && s.ends_with('Z')
        && s.as_bytes()[10] == b'T'
        && s.as_bytes()[19] == b'.'
        && s.chars().filter(|c| c.is_ascii_digit()).count() == 17
}

#[tokio::test]
async fn acquire_renew_release_get_follow_the_contract() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));

    // get of a never-used resource: pass, nobody holds it.
    let d = c.data(get("t1", "deploy:prod")).await;
    assert_eq!(
        (d["status"].clone(), d["granted"].clone()),
        (json!("pass"), json!(false))
    );
    assert_eq!(
        (
            d["holder"].clone(),
            d["fencingToken"].clone(),
            d["expiresAt"].clone()
        ),
        (Value::Null, Value::Null, Value::Null)
    );

    // acquire, free: granted, token 1, default ttl 30 s.
    let before = std::time::SystemTime::now();
    let d = c.data(acquire("t1", "deploy:prod", "w1")).await;
    assert_eq!(d["status"], "pass");
    assert_eq!(d["op"], "acquire");
    assert_eq!(d["granted"], true);
    assert_eq!(d["holder"], "w1");
    assert_eq!(d["fencingToken"], 1);
    assert_eq!(d["replayed"], false);
    assert_eq!(d["deterministic"], true);
    assert!(d["witnesses"].as_array().unwrap().is_empty());
    assert!(
        d["versions"]["engine"]
            .as_str()
            .unwrap()
            .starts_with("leasekit/")
    );
    assert!(!d["limits"].as_array().unwrap().is_empty());
    assert!(is_iso_millis(&d["expiresAt"]), "{}", d["expiresAt"]);
    let expires = chrono_like_millis(d["expiresAt"].as_str().unwrap());
    let start = before
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        (29_000..=31_000).contains(&(expires - start)),
        "default ttl is 30 s: {}",
        expires - start
    );

    // re-acquire by the holder: same token, later expiry.
    let d2 = c.data(json!({"op": "acquire", "tenantId": "t1", "resource": "deploy:prod", "holder": "w1", "ttlSeconds": 120})).await;
    assert_eq!(
        (d2["granted"].clone(), d2["fencingToken"].clone()),
        (json!(true), json!(1))
    );
    assert!(chrono_like_millis(d2["expiresAt"].as_str().unwrap()) > expires);

    // acquire by another while held: fail, LEASE_HELD, and the live lease is shown.
    let d = c.data(acquire("t1", "deploy:prod", "w2")).await;
    assert_eq!(
        (d["status"].clone(), d["granted"].clone()),
        (json!("fail"), json!(false))
    );
    assert_eq!(rule_ids(&d), ["LEASE_HELD"]);
    assert_eq!(
        (d["holder"].clone(), d["fencingToken"].clone()),
        (json!("w1"), json!(1))
    );

    // renew by holder and token: granted; wrong holder or token: the rule that broke.
    let renew = |holder: &str, token: u64| json!({"op": "renew", "tenantId": "t1", "resource": "deploy:prod", "holder": holder, "token": token, "ttlSeconds": 60});
    let d = c.data(renew("w1", 1)).await;
    assert_eq!(
        (
            d["status"].clone(),
            d["granted"].clone(),
            d["fencingToken"].clone()
        ),
        (json!("pass"), json!(true), json!(1))
    );
    assert_eq!(rule_ids(&c.data(renew("w2", 1)).await), ["NOT_HOLDER"]);
    assert_eq!(rule_ids(&c.data(renew("w1", 2)).await), ["TOKEN_MISMATCH"]);
    assert_eq!(
        rule_ids(&c.data(renew("w2", 7)).await),
        ["NOT_HOLDER", "TOKEN_MISMATCH"]
    );

    // release needs holder and token too; anything else is NO_HOLD.
    let release = |holder: &str, token: u64| json!({"op": "release", "tenantId": "t1", "resource": "deploy:prod", "holder": holder, "token": token});
    for (h, t) in [("w2", 1), ("w1", 2)] {
        let d = c.data(release(h, t)).await;
        assert_eq!(
            (d["status"].clone(), d["granted"].clone()),
            (json!("fail"), json!(false))
        );
        assert_eq!(rule_ids(&d), ["NO_HOLD"]);
    }
    let d = c.data(release("w1", 1)).await;
    assert_eq!(
        (
            d["status"].clone(),
            d["granted"].clone(),
            d["holder"].clone()
        ),
        (json!("pass"), json!(true), Value::Null)
    );
    assert_eq!(rule_ids(&c.data(release("w1", 1)).await), ["NO_HOLD"]);
    assert_eq!(c.data(get("t1", "deploy:prod")).await["granted"], false);

    // After release, the next acquisition gets a strictly larger token.
    assert_eq!(
        c.data(acquire("t1", "deploy:prod", "w2")).await["fencingToken"],
        2
    );
    let d = c.data(get("t1", "deploy:prod")).await;
    assert_eq!(
        (
            d["granted"].clone(),
            d["holder"].clone(),
            d["fencingToken"].clone()
        ),
        (json!(true), json!("w2"), json!(2))
    );
}

/// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS.mmmZ` (days from the civil calendar).
fn chrono_like_millis(s: &str) -> i64 {
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let days = 365 * y + y / 4 - y / 100 + y / 400 + (153 * (m - 3) + 2) / 5 + d - 719_469;
    ((days * 24 + n(11, 13)) * 60 + n(14, 16)) * 60_000 + n(17, 19) * 1000 + n(20, 23)
}

#[tokio::test]
async fn a_lapsed_lease_cannot_be_renewed_and_is_reissued_with_a_new_token() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let d = c.data(json!({"op": "acquire", "tenantId": "t1", "resource": "job", "holder": "w1", "ttlSeconds": 1})).await;
    assert_eq!(d["fencingToken"], 1);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(
        c.data(get("t1", "job")).await["granted"],
        false,
        "server clock says it lapsed"
    );
    let d = c
        .data(
            json!({"op": "renew", "tenantId": "t1", "resource": "job", "holder": "w1", "token": 1}),
        )
        .await;
    assert_eq!(rule_ids(&d), ["LEASE_EXPIRED"]);
    let d = c.data(acquire("t1", "job", "w2")).await;
    assert_eq!(
        (d["granted"].clone(), d["fencingToken"].clone()),
        (json!(true), json!(2))
    );
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field_and_writes_nothing() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r"}),
            "/holder",
            "REQUIRED",
        ),
        (
            json!({"op": "renew", "tenantId": "t1", "resource": "r", "holder": "w"}),
            "/token",
            "REQUIRED",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "token": 1}),
            "/holder",
            "REQUIRED",
        ),
        (
            json!({"tenantId": "t1", "resource": "r", "holder": "w"}),
            "/op",
            "REQUIRED",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "holder": "w"}),
            "/resource",
            "REQUIRED",
        ),
        (
            json!({"op": "acquire", "resource": "r", "holder": "w"}),
            "/tenantId",
            "REQUIRED",
        ),
        (
            json!({"op": "steal", "tenantId": "t1", "resource": "r", "holder": "w"}),
            "/op",
            "ENUM",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "has space", "holder": "w"}),
            "/resource",
            "PATTERN",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r".repeat(201), "holder": "w"}),
            "/resource",
            "PATTERN",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": ""}),
            "/holder",
            "MIN_LENGTH",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w".repeat(129)}),
            "/holder",
            "MAX_LENGTH",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "ttlSeconds": 0}),
            "/ttlSeconds",
            "MINIMUM",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "ttlSeconds": 3601}),
            "/ttlSeconds",
            "MAXIMUM",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "ttlSeconds": 2.5}),
            "/ttlSeconds",
            "TYPE",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "ttlSeconds": "30"}),
            "/ttlSeconds",
            "TYPE",
        ),
        (
            json!({"op": "renew", "tenantId": "t1", "resource": "r", "holder": "w", "token": 0}),
            "/token",
            "MINIMUM",
        ),
        (
            json!({"op": "renew", "tenantId": "t1", "resource": "r", "holder": "w", "token": 9007199254740992u64}),
            "/token",
            "MAXIMUM",
        ),
        (
            json!({"op": "acquire", "tenantId": "t:1", "resource": "r", "holder": "w"}),
            "/tenantId",
            "PATTERN",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "requestId": "has space"}),
            "/requestId",
            "PATTERN",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "owner": "me"}),
            "/owner",
            "UNKNOWN_PROPERTY",
        ),
        (json!(["op", "acquire"]), "", "TYPE"),
        // Values: bounded in bytes (513 two-byte characters are 1026 bytes), and only acquire
        // and renew take one; stateTag only watch; a watch waits at most 20 s.
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "value": "é".repeat(513)}),
            "/value",
            "VALUE_TOO_LONG",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1, "value": "v"}),
            "/value",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "get", "tenantId": "t1", "resource": "r", "stateTag": "abc"}),
            "/stateTag",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "watch", "tenantId": "t1", "resource": "r", "waitSeconds": 21}),
            "/waitSeconds",
            "MAXIMUM",
        ),
        // Finished work (docs/adr/0012): done only on a release of one resource, its result
        // at most 1024 bytes (513 two-byte characters are 1026), its fields only with done.
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1, "done": true, "result": "é".repeat(513)}),
            "/result",
            "RESULT_TOO_LONG",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1, "result": "ok"}),
            "/result",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1, "done": false, "keepDoneSeconds": 60}),
            "/keepDoneSeconds",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1, "done": true, "keepDoneSeconds": 7_776_001}),
            "/keepDoneSeconds",
            "MAXIMUM",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "done": true}),
            "/done",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "leases": [{"resource": "a", "token": 1}, {"resource": "b", "token": 1}], "holder": "w", "done": true}),
            "/done",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "reopen", "tenantId": "t1", "resource": "r", "holder": "w", "reason": "redo"}),
            "/token",
            "REQUIRED",
        ),
        (
            json!({"op": "reopen", "tenantId": "t1", "resource": "r"}),
            "/reason",
            "REQUIRED",
        ),
        // Candidates: 2..50 distinct names, instead of resource or a set, not waiting.
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a"], "holder": "w"}),
            "/candidates",
            "CANDIDATES",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": (0..51).map(|i| format!("c{i}")).collect::<Vec<_>>(), "holder": "w"}),
            "/candidates",
            "CANDIDATES",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a", "b", "a"], "holder": "w"}),
            "/candidates/2",
            "DUPLICATE",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a", "b"], "resource": "a", "holder": "w"}),
            "/candidates",
            "ONE_TARGET",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a", "b"], "resources": ["a", "b"], "holder": "w"}),
            "/candidates",
            "ONE_TARGET",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a", "b"], "holder": "w", "waitSeconds": 5}),
            "/waitSeconds",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "release", "tenantId": "t1", "candidates": ["a", "b"], "holder": "w", "token": 1}),
            "/candidates",
            "NOT_TAKEN",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "candidates": ["a", "has space"], "holder": "w"}),
            "/candidates/1",
            "PATTERN",
        ),
    ];
    for (body, path, rule) in cases {
        let (status, answer) = c.call(body.clone()).await;
        assert_eq!(status, 400, "{body} -> {answer}");
        assert_eq!(answer["code"], "INVALID_INPUT", "{body}");
        let witnesses = answer["witnesses"].as_array().unwrap();
        for w in witnesses {
            for field in ["ruleId", "path", "detail", "expected", "actual"] {
                assert!(
                    w.get(field).is_some(),
                    "{body}: witness without {field}: {w}"
                );
            }
        }
        assert!(
            witnesses
                .iter()
                .any(|w| w["path"] == path && w["ruleId"] == rule),
            "{body}: expected {rule} at {path:?}, got {answer}"
        );
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains(if path.is_empty() { "the body" } else { path })
        );
    }
    let (status, answer) = c.raw("{\"op\": \"acquire\",").await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some("INVALID_JSON"))
    );
    let (status, answer) = c.raw("").await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some("INVALID_JSON"))
    );
    let big = json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "pad": "x".repeat(70_000)});
    let (status, answer) = c.call(big).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (413, Some("PAYLOAD_TOO_LARGE"))
    );
    // None of the above wrote anything: the resource was never acquired.
    let d = c.data(acquire("t1", "r", "w")).await;
    assert_eq!(d["fencingToken"], 1);
}

/// `leasekit keys create --account initech` on the store in `data_dir`.
fn create_key(data_dir: &std::path::Path) -> std::process::Output {
    leasekit()
        .args(["keys", "create", "--account", "initech", "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap()
}

#[tokio::test]
async fn api_keys_are_required_and_checked() {
    let dir = TempDir::new().unwrap();
    // A key created with the CLI against the same data dir, before the server starts.
    let out = create_key(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(
        key.starts_with("lk_") && !key.contains('\n'),
        "stdout is the key and nothing else: {key:?}"
    );
    // stderr says where the key went, and that the store was new there: a server elsewhere
    // would not know the key.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = dir.path().join("leasekit.sqlite3");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("warning: there was no store there"),
        "{stderr}"
    );
    assert!(stderr.contains("LEASEKIT_DATA_DIR"), "{stderr}");
    let again = create_key(dir.path());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "the store was there: {stderr}");

    let server = Server::start(dir.path());
    let body = acquire("t1", "r", "w");
    // No key at all is a payment question (402, see payments_api.rs); a bad key is a 401.
    for bad in [
        Some("unknown-key-0123456789"),
        Some("short"),
        Some("with space 0123456789"),
    ] {
        let (status, answer) = server.client(bad).call(body.clone()).await;
        assert_eq!(status, 401, "{bad:?}: {answer}");
        assert_eq!(answer["code"], "UNAUTHORIZED");
        assert!(
            answer["error"].as_str().unwrap().contains("X-API-KEY"),
            "{answer}"
        );
    }
    // No key: the payment offer names the header a key goes in; a key sent as a bearer token
    // is told where it belongs.
    let (status, answer) = server.client(None).call(body.clone()).await;
    assert_eq!(status, 402, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("X-API-KEY"),
        "{answer}"
    );
    let bearer = post(
        &server.url,
        "/api/v1/lease",
        &body,
        &[("authorization", format!("Bearer {key}"))],
    )
    .await;
    assert_eq!(bearer.status, 402, "{}", bearer.body);
    let told = bearer.body["error"].as_str().unwrap();
    assert!(
        told.contains("Bearer") && told.contains("X-API-KEY"),
        "{told}"
    );
    let c = server.client(Some(&key));
    assert_eq!(c.data(body.clone()).await["granted"], true);

    // Revoked while the server runs: refused from then on.
    let out = leasekit()
        .args(["keys", "revoke", &key, "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, _) = c.call(get("t1", "r")).await;
    assert_eq!(status, 401);
    // Nothing about the key itself is in the store: only its hash.
    // (Every file of the data dir: in WAL mode recent writes live in the -wal file.)
    let mut scanned = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        scanned += bytes.len();
        assert!(
            !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
            "the plain key is stored"
        );
    }
    assert!(scanned > 0);
}

/// A key created when the server cannot be told (keys.generation cannot be written: here a
/// directory stands in its place) is still shown: it is stored and works, the command says what
/// failed and exits non-zero, and no temporary file is left behind. (It used to print no key:
/// the attack of 2026-12-04.)
#[tokio::test]
async fn a_key_is_shown_even_when_the_server_cannot_be_told() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("keys.generation")).unwrap();
    let out = create_key(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("up to 60 s"), "{stderr}");
    let key = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(key.starts_with("lk_"), "no key shown: {key:?} ({stderr})");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("keys.generation."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir(dir.path().join("keys.generation")).unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(&key));
    assert_eq!(c.data(acquire("t1", "r", "w")).await["granted"], true);
}

#[tokio::test]
async fn tenants_and_accounts_never_see_each_other() {
    let (_dir, server) = serve();
    let acme = server.client(Some(ACME_KEY));
    let globex = server.client(Some(GLOBEX_KEY));
    assert_eq!(
        acme.data(acquire("t1", "shared-name", "a")).await["fencingToken"],
        1
    );
    // Another account with the same tenantId: a different namespace.
    let d = globex.data(get("t1", "shared-name")).await;
    assert_eq!(d["granted"], false);
    let d = globex.data(acquire("t1", "shared-name", "g")).await;
    assert_eq!(
        (d["granted"].clone(), d["fencingToken"].clone()),
        (json!(true), json!(1))
    );
    // The same account with another tenantId: also separate.
    assert_eq!(acme.data(get("t2", "shared-name")).await["granted"], false);
    // And acme's lease is untouched by globex.
    assert_eq!(acme.data(get("t1", "shared-name")).await["holder"], "a");
}

#[tokio::test]
async fn request_ids_replay_and_conflict() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let body = json!({"op": "acquire", "tenantId": "t1", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "requestId": "w7-claim-INV-1009"});
    let first = c.data(body.clone()).await;
    assert_eq!(
        (first["granted"].clone(), first["replayed"].clone()),
        (json!(true), json!(false))
    );
    let again = c.data(body.clone()).await;
    assert_eq!(again["replayed"], true);
    let mut same = again.clone();
    same["replayed"] = json!(false);
    assert_eq!(same, first, "the stored answer, not a new one");
    let mut other = body.clone();
    other["holder"] = json!("worker-8");
    let (status, answer) = c.call(other).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (409, Some("IDEMPOTENCY_CONFLICT"))
    );
    // Another tenant of the same account has its own requestId space.
    let mut t2 = body.clone();
    t2["tenantId"] = json!("t2");
    assert_eq!(c.data(t2).await["replayed"], false);
}

/// 50 concurrent HTTP clients per round, 4 rounds: one winner a round, tokens never repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_acquirers_one_winner_per_round() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    let mut seen = Vec::new();
    for round in 0..4 {
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move {
                    c.data(acquire("t1", "hot", &format!("r{round}-w{i}")))
                        .await
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            let d = t.await.unwrap();
            if d["granted"] == true {
                winners.push(d);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}");
        let token = winners[0]["fencingToken"].as_u64().unwrap();
        assert!(
            seen.iter().all(|&t| t < token),
            "token {token} after {seen:?}"
        );
        seen.push(token);
        let release = json!({"op": "release", "tenantId": "t1", "resource": "hot", "holder": winners[0]["holder"], "token": token});
        assert_eq!(c.data(release).await["granted"], true);
    }
}

#[tokio::test]
async fn tokens_and_replays_survive_a_restart() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    let with_id = json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w1", "requestId": "before-restart"});
    assert_eq!(c.data(with_id.clone()).await["fencingToken"], 1);
    c.data(json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w1", "token": 1}))
        .await;
    server.stop();

    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    assert_eq!(
        c.data(acquire("t1", "r", "w2")).await["fencingToken"],
        2,
        "the counter survived"
    );
    let replay = c.data(with_id).await;
    assert_eq!(
        (replay["replayed"].clone(), replay["fencingToken"].clone()),
        (json!(true), json!(1))
    );
    server.stop();
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let (_dir, server) = serve();
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/nope", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "NOT_FOUND");
    let r = http
        .get(format!("{}/api/v1/lease", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(
        r.json::<Value>().await.unwrap()["code"],
        "METHOD_NOT_ALLOWED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_on_another_dynamodb_endpoint() {
    let endpoint = Endpoint::start().await;
    let dir = TempDir::new().unwrap();
    let prefix = unique_prefix();
    let server = Server::start_with(
        dir.path(),
        &[
            "--dynamodb-endpoint",
            &endpoint.url,
            "--table-prefix",
            &prefix,
        ],
    );
    let c = server.client(Some(ACME_KEY));
    assert_eq!(c.data(acquire("t1", "r", "w1")).await["fencingToken"], 1);
    assert_eq!(
        c.data(acquire("t1", "r", "w2")).await["witnesses"][0]["ruleId"],
        "LEASE_HELD"
    );
    server.stop();
    // Nothing went to the data dir: the store is the endpoint.
    assert!(!dir.path().join("leasekit.sqlite3").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_is_a_502_without_internals() {
    let mut endpoint = Endpoint::dynoxide().await;
    let dir = TempDir::new().unwrap();
    let log_path = dir.path().join("server.log");
    let server = Server::start_logged_with(
        dir.path(),
        &["--dynamodb-endpoint", &endpoint.url.clone()],
        std::fs::File::create(&log_path).unwrap(),
    );
    let c = server.client(Some(ACME_KEY));
    assert_eq!(c.data(acquire("t1", "r", "w1")).await["granted"], true);
    endpoint.stop().await;
    for body in [
        acquire("t1", "r2", "w1"),
        get("t1", "r"),
        json!({"op": "acquire", "tenantId": "t1", "resource": "r3", "holder": "w", "requestId": "x"}),
    ] {
        let (status, answer) = c.call(body).await;
        assert_eq!(status, 502, "{answer}");
        assert_eq!(answer["code"], "STORE_UNAVAILABLE");
        assert!(
            !answer["error"].as_str().unwrap().contains("dispatch"),
            "no internals: {answer}"
        );
    }
    // The internals are in the log instead: once per failed request, on its own request line.
    server.stop();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("status=502")).collect();
    assert_eq!(failed.len(), 3, "{log}");
    assert!(
        failed
            .iter()
            .all(|l| l.contains("error=\"DynamoDB request failed: ")),
        "{log}"
    );
    assert_eq!(log.matches("DynamoDB request failed").count(), 3, "{log}");
}

/// JSON Schema counts 1.0 as the integer 1, and so does the service (found by schemathesis).
#[tokio::test]
async fn integral_numbers_written_with_a_fraction_are_integers() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    c.data(acquire("t1", "r", "w")).await;
    let renew = json!({"op": "renew", "tenantId": "t1", "resource": "r", "holder": "w", "token": 1.0, "ttlSeconds": 6e1});
    let d = c.data(renew).await;
    assert_eq!(
        (d["granted"].clone(), d["fencingToken"].clone()),
        (json!(true), json!(1))
    );
}

#[tokio::test]
async fn mcp_refuses_a_bad_key_and_lets_a_wallet_list_the_tools() {
    let (_dir, server) = serve();
    let http = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let send = |key: Option<&'static str>| {
        let mut request = http
            .post(format!("{}/mcp", server.url))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(k) = key {
            request = request.header("x-api-key", k);
        }
        request.send()
    };
    let response = send(Some("not-a-key-0123456789")).await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        response.json::<Value>().await.unwrap()["code"],
        "UNAUTHORIZED"
    );
    // No key is no refusal where payments are on: a wallet pays per tool call (the offer comes
    // back as the tool result; see tests/interop/test_mcp.py).
    let response = send(None).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let listed: Value = response.json().await.unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "lease", "{listed}");
}

/// GET / says where everything is, as a page or as JSON; /healthz answers without a key.
#[tokio::test]
async fn the_root_links_everything_and_healthz_answers() {
    let (_dir, server) = serve();
    let http = reqwest::Client::new();
    let page = http.get(format!("{}/", server.url)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    for path in [
        "/docs/lease/",
        "/console/",
        "/openapi.json",
        "/api/v1/catalog",
        "/healthz",
    ] {
        assert!(
            html.contains(&format!("href=\"{}{path}\"", server.url)),
            "{path}: {html}"
        );
    }
    assert!(
        html.contains("POST /mcp") && html.contains("POST /api/v1/lease"),
        "{html}"
    );
    let index: Value = http
        .get(format!("{}/", server.url))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        index["links"]["lease"],
        format!("{}/api/v1/lease", server.url)
    );
    assert_eq!(index["links"]["mcp"], format!("{}/mcp", server.url));
    // Two Accept headers are one list (the attack of the third session of 2026-12-05: only
    // the first was read, and HTML was served to a caller that preferred JSON).
    let two = http
        .get(format!("{}/", server.url))
        .header("accept", "text/html;q=0.1")
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let kind = two.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("application/json"), "{kind}");
    // Each link works (the GET ones): no dead end from the root.
    for route in index["routes"].as_array().unwrap() {
        if route["method"] == "GET" {
            let url = route["url"].as_str().unwrap();
            let status = http.get(url).send().await.unwrap().status();
            assert_eq!(status, 200, "{url}");
        }
    }
    let health = http
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.headers()["cache-control"], "no-store");
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
}

/// An answer reads top down: `data` first, what happened before the resource and the resource
/// before what the answer rests on. `?signed=false` leaves out what is there for a verifier
/// (`_provenance`) and for the record (`versions`, `limits`); any other value is refused before
/// anything is done. A page (list, audit) carries none of one resource's fields.
#[tokio::test]
async fn answers_put_data_first_and_are_signed_unless_asked_not_to_be() {
    let (_dir, server) = serve();
    let http = reqwest::Client::new();
    let send = |key: &'static str, query: &'static str, body: Value| {
        let request = http
            .post(format!("{}{query}", server.client(None).url))
            .header("x-api-key", key)
            .json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    };
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let one_resource = [
        "status",
        "op",
        "granted",
        "holder",
        "fencingToken",
        "expiresAt",
        "value",
        "limit",
        "holders",
        "done",
        "stateTag",
        "replayed",
        "witnesses",
    ];

    let (status, text) = send(ACME_KEY, "", acquire("t1", "r", "w1")).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.starts_with(r#"{"data":{"status":"pass","op":"acquire","granted":true"#),
        "{text}"
    );
    let signed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&signed), ["data", "_provenance"]);
    let mut expected: Vec<&str> = one_resource.to_vec();
    expected.extend(["versions", "limits", "deterministic"]);
    assert_eq!(keys(&signed["data"]), expected);

    let renew =
        json!({"op": "renew", "tenantId": "t1", "resource": "r", "holder": "w1", "token": 1});
    let (status, text) = send(ACME_KEY, "?signed=false", renew.clone()).await;
    assert_eq!(status, 200, "{text}");
    let unsigned: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&unsigned), ["data"]);
    let mut expected: Vec<&str> = one_resource.to_vec();
    expected.push("deterministic");
    assert_eq!(keys(&unsigned["data"]), expected);
    assert_eq!(unsigned["data"]["granted"], true);

    // signed=true is the default spelled out; anything else is refused, and nothing is done.
    let (status, text) = send(ACME_KEY, "?signed=true", get("t1", "r")).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"_provenance\""), "{text}");
    let release =
        json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "w1", "token": 1});
    // The query is a form: an encoded name is the name, and two answers that disagree are no
    // answer (the attack of the second session of 2026-12-05: sig%6Eed was ignored, and the
    // last of two values won).
    let refused = [
        "?signed=no",
        "?signed",
        "?signed=FALSE",
        "?x=1&signed=",
        "?sig%6Eed=bogus",
        "?signed=false&signed=true",
    ];
    for query in refused {
        let (status, text) = send(ACME_KEY, query, release.clone()).await;
        assert_eq!(status, 400, "{query}: {text}");
        let refusal: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(refusal["code"], "INVALID_REQUEST", "{query}: {text}");
        assert!(
            refusal["error"].as_str().unwrap().contains("signed"),
            "{text}"
        );
    }
    let c = server.client(Some(ACME_KEY));
    assert_eq!(c.data(get("t1", "r")).await["holder"], "w1");
    for query in [
        "?sig%6Eed=false",
        "?signed=fals%65",
        "?signed=false&signed=false",
    ] {
        let (status, text) = send(ACME_KEY, query, get("t1", "r")).await;
        assert_eq!(status, 200, "{query}: {text}");
        assert!(!text.contains("_provenance"), "{query}: {text}");
    }

    // Pages: what happened, the page, what it rests on; no lease fields that would read "free".
    let (status, text) = send(ACME_KEY, "", json!({"op": "list", "tenantId": "t1"})).await;
    assert_eq!(status, 200, "{text}");
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        keys(&listed["data"]),
        [
            "status",
            "op",
            "leases",
            "nextCursor",
            "replayed",
            "witnesses",
            "versions",
            "limits",
            "deterministic"
        ]
    );
    assert_eq!(listed["data"]["leases"][0]["holder"], "w1");
    let audit = json!({"op": "audit", "tenantId": "t1"});
    let (status, text) = send(ACME_ADMIN_KEY, "?signed=false", audit).await;
    assert_eq!(status, 200, "{text}");
    let audited: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        keys(&audited["data"]),
        [
            "status",
            "op",
            "entries",
            "nextCursor",
            "replayed",
            "witnesses",
            "deterministic"
        ]
    );
}
