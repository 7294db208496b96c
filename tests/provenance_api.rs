//! Signed answers over HTTP: every lease answer carries `_provenance`; the verify route accepts
//! an untouched answer and rejects one changed character; the DID document names the signer; the
//! key survives restarts.

mod support;

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

async fn verify(server: &Server, document: &Value) -> (u16, Value) {
    verify_text(server, document.to_string()).await
}

/// POST `body` to the verify route as it is: (status, the JSON answer).
async fn verify_text(server: &Server, body: String) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/verify-provenance", server.url))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// A server on a data dir of its own, and one genuine answer of it.
async fn served_answer() -> (TempDir, Server, Value) {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let (_, answer) = server
        .client(Some(ACME_KEY))
        .call(acquire("t1", "r", "w"))
        .await;
    (dir, server, answer)
}

async fn did_document(server: &Server) -> Value {
    reqwest::get(format!("{}/.well-known/did.json", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_answer_is_signed_and_verifies_until_one_character_changes() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    let did = did_document(&server).await;
    let issuer = did["id"].as_str().unwrap().to_owned();
    assert!(issuer.starts_with("did:key:z6Mk"), "{did}");
    assert_eq!(
        did["assertionMethod"][0],
        did["verificationMethod"][0]["id"]
    );

    for body in [
        acquire("t1", "r", "worker-7"),
        acquire("t1", "r", "worker-8"),
        get("t1", "r"),
        json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "worker-7", "token": 1, "requestId": "rel-1"}),
    ] {
        let (status, answer) = c.call(body.clone()).await;
        assert_eq!(status, 200);
        let credential = &answer["_provenance"]["credential"];
        assert_eq!(credential["issuer"], issuer.as_str());
        assert_eq!(credential["proof"]["cryptosuite"], "eddsa-jcs-2022");
        assert_eq!(
            credential["proof"]["verificationMethod"],
            did["verificationMethod"][0]["id"]
        );
        assert_eq!(credential["credentialSubject"]["op"], body["op"]);
        assert_eq!(
            answer["_provenance"]["manifest"]["assertions"][1]["data"]["actions"][0]["action"],
            "c2pa.created"
        );

        let (status, report) = verify(&server, &answer).await;
        assert_eq!(status, 200);
        assert_eq!(report["verified"], true, "{report}");
        assert_eq!(
            report["checks"],
            json!({"proof": true, "issuer": true, "dataHash": true, "manifest": true})
        );

        // One character of data changed: rejected, and the witness says where.
        let mut tampered = answer.clone();
        let op = answer["data"]["op"].as_str().unwrap();
        tampered["data"]["op"] = json!(format!("{}x", &op[..op.len() - 1]));
        let (status, report) = verify(&server, &tampered).await;
        assert_eq!(status, 200);
        assert_eq!(report["verified"], false);
        assert_eq!(report["checks"]["dataHash"], false);
        assert_eq!(report["witnesses"][0]["ruleId"], "DATA_HASH");
    }

    // A replay carries a proof over its own data (replayed: true), which verifies too.
    let replay = json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "worker-7", "token": 1, "requestId": "rel-1"});
    let (_, answer) = c.call(replay).await;
    assert_eq!(answer["data"]["replayed"], true);
    assert_eq!(verify(&server, &answer).await.1["verified"], true);
}

#[tokio::test]
async fn the_signing_key_survives_a_restart() {
    let (dir, server, answer) = served_answer().await;
    let before = did_document(&server).await;
    server.stop();
    let server = Server::start(dir.path());
    assert_eq!(did_document(&server).await, before);
    assert_eq!(verify(&server, &answer).await.1["verified"], true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("signing-key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the key file is readable by its owner only"
        );
    }
}

#[tokio::test]
async fn another_servers_answers_are_not_ours() {
    let (a, b) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let server_a = Server::start(a.path());
    let server_b = Server::start(b.path());
    let (_, answer) = server_a
        .client(Some(ACME_KEY))
        .call(acquire("t1", "r", "w"))
        .await;
    let (_, report) = verify(&server_b, &answer).await;
    assert_eq!(report["verified"], false);
    assert_eq!(report["checks"]["proof"], true);
    assert_eq!(report["checks"]["issuer"], false);
}

#[tokio::test]
async fn verify_needs_no_key_but_valid_input() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    for (body, path) in [
        (json!({"data": {}}), "/_provenance"),
        (
            json!({"_provenance": {"manifest": {}, "credential": {}}}),
            "/data",
        ),
        (
            json!({"data": {}, "_provenance": {"manifest": {}}}),
            "/_provenance/credential",
        ),
        (
            json!({"data": [], "_provenance": {"manifest": {}, "credential": {}}}),
            "/data",
        ),
        (
            json!({"data": {}, "_provenance": {"manifest": {}, "credential": {}}, "extra": 1}),
            "/extra",
        ),
    ] {
        let (status, answer) = verify(&server, &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(
            answer["witnesses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["path"] == path),
            "{body}: {answer}"
        );
    }
    // Well-formed but unsigned: a 200 that says what failed.
    let (status, report) = verify(
        &server,
        &json!({"data": {}, "_provenance": {"manifest": {}, "credential": {}}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(report["verified"], false);
    assert_eq!(report["witnesses"][0]["ruleId"], "PROOF");
}

/// SHA-256(JCS(value)) in hex: what the contract says the credential subject carries for `data`.
fn contract_hash(value: &Value) -> String {
    hex::encode(leasekit_core::provenance::jcs::sha256(value))
}

#[tokio::test]
async fn a_sample_is_reported_as_a_sample_never_as_an_answer() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let did = did_document(&server).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sample: Value = reqwest::get(format!("{}/api/v1/samples/lease", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let answer = &sample["response"]["body"];
    let credential = &answer["_provenance"]["credential"];
    // Marked in the signed part, and signed by a key of its own, published with the sample.
    let types = credential["type"].as_array().unwrap();
    assert!(
        types.contains(&json!("LeasekitSampleAnswer")),
        "{credential}"
    );
    assert!(
        !types.contains(&json!("LeaseAnswerCredential")),
        "{credential}"
    );
    assert_ne!(credential["issuer"], did.as_str(), "not the answer key");
    assert_eq!(credential["issuer"], sample["sampleKey"]);
    assert!(
        credential["proof"]["verificationMethod"]
            .as_str()
            .unwrap()
            .starts_with(sample["sampleKey"].as_str().unwrap())
    );

    let (status, report) = verify(&server, answer).await;
    assert_eq!(status, 200);
    assert_eq!(report["verified"], false, "{report}");
    assert_eq!(report["sample"], true, "{report}");
    assert_eq!(
        report["checks"],
        json!({"proof": true, "issuer": false, "dataHash": true, "manifest": true}),
        "an intact sample, not an answer of this service"
    );
    assert_eq!(report["witnesses"][0]["ruleId"], "SAMPLE", "{report}");

    // A genuine answer is not a sample.
    let (_, genuine) = server
        .client(Some(ACME_KEY))
        .call(acquire("t1", "r", "w"))
        .await;
    let (_, report) = verify(&server, &genuine).await;
    assert_eq!(
        (&report["verified"], &report["sample"]),
        (&json!(true), &json!(false))
    );
    // Retyping an answer's credential as a sample (or a sample's as an answer) breaks its proof.
    let mut retyped = answer.clone();
    retyped["_provenance"]["credential"]["type"] =
        json!(["VerifiableCredential", "LeaseAnswerCredential"]);
    let (_, report) = verify(&server, &retyped).await;
    assert_eq!(
        (&report["verified"], &report["checks"]["proof"]),
        (&json!(false), &json!(false))
    );
}

#[tokio::test]
async fn fresh_and_replayed_answers_hash_data_exactly_as_sent() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    let body = json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "w", "requestId": "a-1"});
    let (_, first) = c.call(body.clone()).await;
    let (_, replay) = c.call(body.clone()).await;
    let (_, again) = c.call(body).await;
    assert_eq!(
        (&first["data"]["replayed"], &replay["data"]["replayed"]),
        (&json!(false), &json!(true))
    );
    for answer in [&first, &replay] {
        let subject = &answer["_provenance"]["credential"]["credentialSubject"];
        assert_eq!(
            subject["dataSha256"],
            contract_hash(&answer["data"]),
            "{answer}"
        );
        let (_, report) = verify(&server, answer).await;
        assert_eq!(report["verified"], true, "{report}");
    }
    // The replay signs its own data, so its proof differs; the same record replays the same proof.
    let proof = |a: &Value| a["_provenance"]["credential"]["proof"]["proofValue"].clone();
    assert_ne!(proof(&first), proof(&replay));
    assert_eq!(proof(&replay), proof(&again));
    assert_eq!(replay, again, "a replay is deterministic");
    // Flipping replayed is a change of signed data.
    let mut flipped = replay.clone();
    flipped["data"]["replayed"] = json!(false);
    let (_, report) = verify(&server, &flipped).await;
    assert_eq!(report["checks"]["dataHash"], false, "{report}");
}

/// A verify request whose credential carries `field` = `value` (proof fields under `proof`).
fn with_credential_field(answer: &Value, pointer: &str, value: Value) -> Value {
    let mut document = answer.clone();
    *document
        .pointer_mut(&format!("/_provenance/credential{pointer}"))
        .unwrap() = value;
    document
}

/// The witness messages of a report, joined.
fn reasons(report: &Value) -> String {
    report["witnesses"].to_string()
}

#[tokio::test]
async fn the_longest_accepted_fields_are_answered_and_longer_ones_refused_by_name() {
    let (_dir, server, answer) = served_answer().await;
    let multikey = format!("z{}", "z".repeat(47));
    // An Ed25519 signature is 64 bytes: at most 88 base58 characters after the 'z'. A did:key
    // verification method is did:key:<multikey>#<multikey>, 105 characters.
    for (pointer, longest, too_long) in [
        (
            "/proof/proofValue",
            format!("z{}", "z".repeat(88)),
            format!("z{}", "z".repeat(89)),
        ),
        (
            "/proof/verificationMethod",
            format!("did:key:{multikey}#{multikey}"),
            format!("did:key:{multikey}#{multikey}z"),
        ),
    ] {
        let (status, report) = verify(
            &server,
            &with_credential_field(&answer, pointer, json!(longest)),
        )
        .await;
        assert_eq!(
            (status, &report["verified"]),
            (200, &json!(false)),
            "{report}"
        );
        assert_eq!(report["checks"]["proof"], false, "{report}");
        assert!(
            !reasons(&report).contains("longer than"),
            "{pointer}: {report}"
        );
        let (status, report) = verify(
            &server,
            &with_credential_field(&answer, pointer, json!(too_long)),
        )
        .await;
        assert_eq!(
            (status, &report["verified"]),
            (200, &json!(false)),
            "{report}"
        );
        let field = pointer.rsplit('/').next().unwrap();
        assert!(
            reasons(&report).contains(field) && reasons(&report).contains("longer than"),
            "{pointer}: {report}"
        );
    }
    // The largest body the route reads, with the field that cost most before: answered.
    let largest = filled(
        &answer,
        "/_provenance/credential/proof/proofValue",
        "z",
        MAX_VERIFY_BYTES,
    );
    let (status, report) = verify(&server, &largest).await;
    assert_eq!(
        (status, &report["verified"]),
        (200, &json!(false)),
        "{report}"
    );
    assert!(reasons(&report).contains("proofValue"), "{report}");
    // One byte more: refused unread, with the limit, at once (a client that sends the body
    // anyway may see its write cut off; this one sends only the head).
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /api/v1/verify-provenance HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        MAX_VERIFY_BYTES + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(3), stream.read(&mut answer))
        .await
        .expect("an answer within 3 s")
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        text.contains("PAYLOAD_TOO_LARGE") && text.contains("6291456"),
        "{text}"
    );
}

/// Genuine answers far larger than a request to any other route verify on the route: a full
/// semaphore (64 holders with 1 KiB values: 84 KB), and the same with holders and values of
/// control characters, which JSON escapes sixfold (457 KB). The route read 16 KiB until
/// 2026-12-07 and answered these 413.
#[tokio::test]
async fn the_largest_answers_verify_on_the_route() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    for (resource, unit) in [("plain", "v"), ("escaped", "\u{1}")] {
        let holder = |i: usize| format!("{}{i:04}", unit.repeat(124));
        let mut answer = Value::Null;
        for i in 0..64 {
            let (status, a) = c
                .call(json!({"op": "acquire", "tenantId": "t1", "resource": resource,
                    "holder": holder(i), "limit": 64, "ttlSeconds": 600, "value": unit.repeat(1024)}))
                .await;
            assert_eq!((status, &a["data"]["granted"]), (200, &json!(true)), "{a}");
            answer = a;
        }
        let size = answer.to_string().len();
        assert!(size > 80_000, "{resource}: {size} bytes");
        let (status, report) = verify(&server, &answer).await;
        assert_eq!(
            (status, &report["verified"]),
            (200, &json!(true)),
            "{resource} ({size} bytes): {report}"
        );
        eprintln!("{resource}: an answer of {size} bytes verified");
    }
}

/// A body of many tiny values is refused before it is parsed: a 6 MiB `[[],[],...]` (or object
/// of many short keys) took 650 MB of memory to check (found by the attack of 2026-12-07). The
/// server's peak memory stays near where it was.
#[tokio::test]
async fn a_body_of_too_many_values_is_refused_before_it_is_parsed() {
    let (_dir, server, answer) = served_answer().await;
    let peak_kb = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let before = peak_kb();
    let provenance = answer["_provenance"].to_string();
    let room = MAX_VERIFY_BYTES - provenance.len() - 64;
    let keys = (0..room / 11)
        .map(|i| format!("\"{i:06}\":1"))
        .collect::<Vec<_>>();
    for (shape, inner) in [
        ("arrays", format!("[{}[]]", "[],".repeat(room / 3 - 1))),
        ("keys", format!("{{{}}}", keys.join(","))),
    ] {
        let body = format!("{{\"data\":{{\"a\":{inner}}},\"_provenance\":{provenance}}}");
        assert!(body.len() <= MAX_VERIFY_BYTES, "{shape}: {}", body.len());
        let (status, error) = verify_text(&server, body).await;
        assert_eq!(
            (status, &error["code"]),
            (400, &json!("INVALID_JSON")),
            "{shape}: {error}"
        );
        assert!(
            error["error"].as_str().unwrap().contains("262144"),
            "{error}"
        );
    }
    let refused_mb = (peak_kb() - before) / 1024;
    // Under the bound, the costliest shape measured: one-element arrays nested 120 deep (it
    // took the server 121 MB above its start while copies were made and arrays kept spare room).
    let chain = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let chains = vec![chain; 262_000 / 121];
    let body = format!(
        "{{\"data\":{{\"a\":[{}]}},\"_provenance\":{provenance}}}",
        chains.join(",")
    );
    assert_eq!(verify_text(&server, body).await.0, 200);
    let grown_mb = (peak_kb() - before) / 1024;
    eprintln!("peak memory grew {refused_mb} MB for refused bodies, {grown_mb} MB in all");
    assert!(
        grown_mb < 100,
        "the server's peak memory grew {grown_mb} MB"
    );
}

/// The report on a 6 MiB document echoes a few hundred bytes of it at most: it echoed the
/// credential's issuer and dataSha256 whole, so an unread report kept 6 MB in the server (the
/// attack of 2026-12-07: 400 idle readers, 2.8 GB).
#[tokio::test]
async fn a_report_on_a_large_document_is_small() {
    let (_dir, server, answer) = served_answer().await;
    let room = (MAX_VERIFY_BYTES - answer.to_string().len()) / 2 - 64;
    let mut document = answer.clone();
    document["_provenance"]["credential"]["credentialSubject"]["dataSha256"] =
        json!("a".repeat(room));
    document["_provenance"]["credential"]["issuer"] = json!("z".repeat(room));
    let body = document.to_string();
    assert!(body.len() <= MAX_VERIFY_BYTES && body.len() > MAX_VERIFY_BYTES - 1024);
    let (status, report) = verify(&server, &document).await;
    assert_eq!((status, &report["verified"]), (200, &json!(false)));
    let size = report.to_string().len();
    assert!(size < 4096, "a report of {size} bytes");
}

/// The largest body the verify route reads: the most a Lambda function can answer.
const MAX_VERIFY_BYTES: usize = 6 * 1024 * 1024;

/// `document` with the string at `pointer` grown with `unit` to `size` bytes.
fn filled(document: &Value, pointer: &str, unit: &str, size: usize) -> Value {
    let mut document = document.clone();
    let count = (size - document.to_string().len()) / unit.len();
    let target = document.pointer_mut(pointer).unwrap();
    *target = json!(format!(
        "{}{}",
        target.as_str().unwrap(),
        unit.repeat(count)
    ));
    document
}

/// The hostile verify bodies, each of `size` bytes: the fields whose decoding was quadratic before
/// they were bounded, and a manifest of many keys (the costliest to canonicalise).
fn hostile_bodies(answer: &Value, size: usize) -> Vec<Value> {
    // Entries of 11 bytes ("000123":3,), as many as fit.
    let mut count = (size - answer.to_string().len()) / 11;
    let many_keys = loop {
        let mut document = answer.clone();
        document["_provenance"]["manifest"]["extra"] = Value::Object(
            (0..count)
                .map(|i| (format!("{i:06}"), json!(i % 10)))
                .collect(),
        );
        if document.to_string().len() <= size {
            break document;
        }
        count -= 1;
    };
    let bodies = vec![
        filled(
            answer,
            "/_provenance/credential/proof/proofValue",
            "z",
            size,
        ),
        filled(
            answer,
            "/_provenance/credential/proof/verificationMethod",
            "z",
            size,
        ),
        filled(answer, "/_provenance/credential/issuer", "z", size),
        many_keys,
    ];
    for body in &bodies {
        let body_size = body.to_string().len();
        assert!(body_size <= size && body_size > size - 32, "{body_size}");
    }
    bodies
}

async fn timed_get(c: &Client) -> std::time::Duration {
    let start = std::time::Instant::now();
    let (status, _) = c.call(get("t1", "r")).await;
    assert_eq!(status, 200);
    start.elapsed()
}

/// A burst of hostile verify requests must not hold up a lease answer on the same server: the
/// verify route's work is bounded and kept off the async workers. The bodies are 256 KiB, over
/// what other routes read, so they also queue for the route's large-body permits.
#[tokio::test]
async fn a_burst_of_hostile_verify_requests_leaves_leases_answered_quickly() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    let (_, answer) = c.call(acquire("t1", "r", "w")).await;
    let mut baseline = std::time::Duration::ZERO;
    for _ in 0..5 {
        baseline = baseline.max(timed_get(&c).await);
    }

    let bodies: Arc<Vec<String>> = Arc::new(
        hostile_bodies(&answer, 256 * 1024)
            .iter()
            .map(Value::to_string)
            .collect(),
    );
    let url = format!("{}/api/v1/verify-provenance", server.url);
    let stop = Arc::new(AtomicBool::new(false));
    let mut burst = tokio::task::JoinSet::new();
    for i in 0..16 {
        let (bodies, url, stop) = (bodies.clone(), url.clone(), stop.clone());
        burst.spawn(async move {
            let http = reqwest::Client::new();
            let mut sent = 0;
            // At least one each, and more while the gets are timed (old code: one is seconds).
            while sent == 0 || !stop.load(Ordering::Relaxed) {
                let body = bodies[(i + sent) % bodies.len()].clone();
                let response = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status().as_u16(), 200);
                sent += 1;
            }
            sent
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut worst = std::time::Duration::ZERO;
    for _ in 0..5 {
        worst = worst.max(timed_get(&c).await);
    }
    stop.store(true, Ordering::Relaxed);
    let mut sent = 0;
    while let Some(n) = burst.join_next().await {
        sent += n.unwrap();
    }
    let limit = std::time::Duration::from_secs(1).max(baseline * 20);
    eprintln!("lease get: {baseline:?} alone, {worst:?} during {sent} hostile verify requests");
    assert!(
        worst < limit,
        "a lease get took {worst:?} during the burst (alone: {baseline:?}; limit {limit:?})"
    );
}
