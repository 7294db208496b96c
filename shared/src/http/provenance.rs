//! POST /api/v1/verify-provenance and GET /.well-known/did.json: free, no key.

use super::body::read_large;
use super::{ApiError, AppState};
use crate::provenance::issuer::Trusted;
use crate::provenance::{did, verify::Report, verify::verify as check};
use crate::schema::verify_input;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use serde_json::Value;
use std::sync::LazyLock;
use tokio::sync::Semaphore;

/// The largest body this route reads: 6 MiB, the most a Lambda function can answer (its
/// response payload limit), so every answer the deployed service can deliver can be checked
/// here. Answers are that large only in corners (a set of 50 semaphores, each crowded with 64
/// holders whose values are 1 KiB of control characters, escaped sixfold, made 25 MB on the
/// local server, which has no such limit: those verify offline, with did.json's key); one full
/// semaphore with 1 KiB values is 84 KB, or 457 KB with escaped values. With
/// [`MAX_VERIFY_VALUES`], the costliest body of this size takes about 50 ms of one core in an
/// optimised build (an object of as many keys as allowed), at most `CHECKING` at once.
pub const MAX_VERIFY_BYTES: usize = 6 * 1024 * 1024;

/// How many bodies larger than the other routes take may be read and held at once: memory for
/// them stays at this many times [`MAX_VERIFY_BYTES`], whatever the number of connections. A
/// sender that trickles holds one only until the body deadline.
static LARGE_BODIES: Semaphore = Semaphore::const_new(2);

/// How many documents are checked at once: half the cores (at least one), so that a burst on this
/// free route leaves the other half to the routes that answer leases. Waiting for a turn is
/// asynchronous and holds up no worker.
static CHECKING: LazyLock<Semaphore> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Semaphore::new((cores / 2).max(1))
});

/// Check a `{data, _provenance}` document against this service's keys.
///
/// Parsing, canonicalising and hashing the body is CPU work with no I/O: it runs on the blocking
/// pool, a bounded number at a time, so that a burst of big documents on this free route never
/// holds up the async workers that answer leases.
pub async fn verify(State(state): State<AppState>, body: Body) -> Result<Json<Report>, ApiError> {
    let (bytes, held) = read_large(body, MAX_VERIFY_BYTES, &LARGE_BODIES).await?;
    let trusted = state.issuer()?.trusted();
    // The semaphore is never closed, so acquiring only waits.
    let turn = CHECKING.acquire().await;
    let work = tokio::task::spawn_blocking(move || {
        let _turn = (turn, held);
        report(&bytes, &trusted)
    });
    match work.await {
        Ok(answer) => answer.map(Json),
        // A panic in the check stays a panic, as it would be without the blocking pool.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The route's CPU work: parse, validate and check a body.
fn report(bytes: &[u8], trusted: &Trusted) -> Result<Report, ApiError> {
    if json_values_at_most(bytes) > MAX_VERIFY_VALUES {
        return Err(ApiError::InvalidJson(format!(
            "the body has more than {MAX_VERIFY_VALUES} JSON values, more than any answer"
        )));
    }
    let body =
        crate::strict_json::parse(bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    verify_input()
        .check(&body)
        .map_err(ApiError::InvalidInput)?;
    // Taken apart rather than deserialized, which would copy the whole document again.
    let (data, provenance) = match body {
        Value::Object(mut body) => (body.remove("data"), body.remove("_provenance")),
        _ => (None, None),
    };
    match (data, provenance) {
        (Some(data), Some(Value::Object(provenance))) => Ok(check(&data, &provenance, trusted)),
        // The schema admitted it, so only a schema that disagrees with this code gets here.
        _ => Err(ApiError::Internal(
            "the verify schema admitted a body without data and _provenance".into(),
        )),
    }
}

/// The most JSON values (objects, arrays, strings, numbers, literals; counted as
/// [`json_values_at_most`] counts, keys included) a body may hold. The largest answers count
/// about 36,000 (a set of 50 semaphores of 64 holders) to about 111,000 (a list page of 100 such
/// entries with 64 waiters each and short names). A parsed value costs 30-100 bytes besides its
/// text, so a 6 MiB body of 2-byte values (`[[],[],...]`) took 650 MB to check (found by the
/// attack of 2026-12-07). At this bound the costliest shape measured (262,000 values in one-element
/// arrays nested 120 deep) takes the server from 32 to 108 MB while it is checked.
pub const MAX_VERIFY_VALUES: usize = 1 << 18;

/// An upper bound on the number of JSON values in `bytes`, without parsing them: one, plus one
/// for every `,` `:` `[` and `{` outside strings. Linear and allocation-free.
fn json_values_at_most(bytes: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b':' | b'[' | b'{' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// The DID document of the signing key.
pub async fn did_document(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(did::document(&state.issuer()?.verifying_key())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::Issuer;
    use crate::provenance::answer::{Subject, provenance};
    use crate::provenance::proof;
    use serde_json::{Map, json};
    use std::time::{Duration, Instant};

    fn answer(issuer: &Issuer) -> Value {
        let data = json!({"status": "pass", "op": "acquire", "granted": true, "fencingToken": 7, "replayed": false});
        let subject = Subject {
            route: "POST /api/v1/lease",
            op: "acquire",
            request_sha256: [1; 32],
        };
        json!({"data": data, "_provenance": provenance(issuer, &subject, &data, 1_795_946_400_000)})
    }

    /// `document` with `unit` appended to the string at `pointer` until the body is just under
    /// `size` bytes.
    fn grown(document: &Value, pointer: &str, unit: &str, size: usize) -> Value {
        let mut document = document.clone();
        let unit_len = serde_json::to_string(unit).unwrap().len() - 2;
        let count = (size - document.to_string().len() - 16) / unit_len;
        let target = document.pointer_mut(pointer).unwrap();
        let text = format!("{}{}", target.as_str().unwrap(), unit.repeat(count));
        *target = Value::String(text);
        document
    }

    /// An object of keys filling about `room` bytes: as many as the value bound allows (each
    /// counts twice), of at least `n` characters.
    fn wide(n: usize, room: usize) -> Value {
        let n = n.max(room / (MAX_VERIFY_VALUES / 2 - 64)).max(1);
        let count = room / (n + 6);
        Value::Object(
            (0..count)
                .map(|i| (format!("{i:0n$}"), json!(i % 10)))
                .collect(),
        )
    }

    /// `credential`, changed by `fill`, then signed by a key of the caller's own: its proof
    /// verifies, so every later check runs on it.
    fn self_signed(
        mut credential: Map<String, Value>,
        fill: impl FnOnce(&mut Map<String, Value>),
    ) -> Value {
        fill(&mut credential);
        let key = proof::ProofKey::from_seed(&[9; 32]);
        let method = did::verification_method(&key.verifying_key());
        Value::Object(proof::sign(
            credential,
            &key,
            &method,
            "2026-01-01T00:00:00Z",
        ))
    }

    /// The count never falls below the values serde_json finds, whatever the strings hold.
    #[test]
    fn the_value_count_bounds_the_values_from_above() {
        fn values(v: &Value) -> usize {
            1 + match v {
                Value::Array(items) => items.iter().map(values).sum(),
                Value::Object(members) => members.values().map(values).sum(),
                _ => 0,
            }
        }
        let issuer = Issuer::from_seed(&[3; 32]);
        for document in [
            json!(1),
            json!([]),
            json!({}),
            json!([[], {}, [[]], {"a": {"b": []}}]),
            json!({"s": "\",:[{\\", "t": ["\\\"", "]}", 1.5e300, null, true]}),
            answer(&issuer),
        ] {
            let text = document.to_string();
            let counted = json_values_at_most(text.as_bytes());
            assert!(counted >= values(&document), "{text}: {counted}");
            assert!(counted <= 2 * values(&document), "{text}: {counted}");
        }
        assert_eq!(
            json_values_at_most(b"[[],[],[]]"),
            7,
            "four values, counted high"
        );
    }

    /// The most expensive bodies we know of, each just under `size` bytes: the fields that were
    /// decoded quadratically, and documents that make parsing, canonicalisation, hashing and the
    /// signature check work hardest.
    fn costliest(issuer: &Issuer, size: usize) -> Vec<(&'static str, Value)> {
        let genuine = answer(issuer);
        let credential = genuine["_provenance"]["credential"]
            .as_object()
            .unwrap()
            .clone();
        let room = size - genuine.to_string().len() - 200;
        let with = |pointer: &str, value: Value| {
            let mut d = genuine.clone();
            *d.pointer_mut(pointer).unwrap() = value;
            d
        };
        let mut deep = json!(1);
        for _ in 0..120 {
            let next = json!([deep, {"k": deep.clone()}]);
            if next.to_string().len() > room {
                break;
            }
            deep = next;
        }
        let numbers: Vec<f64> = (0..room / 24)
            .map(|i| 1.234_567_890_123_456_7e-300 * (i as f64 + 1.0))
            .collect();
        vec![
            (
                "proofValue",
                grown(
                    &genuine,
                    "/_provenance/credential/proof/proofValue",
                    "z",
                    size,
                ),
            ),
            (
                "verificationMethod",
                grown(
                    &genuine,
                    "/_provenance/credential/proof/verificationMethod",
                    "z",
                    size,
                ),
            ),
            (
                "issuer, proof verifies",
                with(
                    "/_provenance/credential",
                    self_signed(credential.clone(), |c| {
                        c["issuer"] = json!(format!("did:key:z{}", "z".repeat(room - 300)));
                    }),
                ),
            ),
            ("data, many keys", with("/data", wide(6, room))),
            (
                "data, escaped string",
                grown(&genuine, "/data/op", "\u{1}", size),
            ),
            (
                "data, non-ASCII string",
                grown(&genuine, "/data/op", "\u{1F600}", size),
            ),
            ("data, numbers", with("/data", json!({ "n": numbers }))),
            ("data, deep", with("/data", json!({ "deep": deep }))),
            (
                "data, deepest, a long string inside",
                with("/data", {
                    // The parser's limit is 128 levels; the body and its data take two.
                    let mut nested = json!("z".repeat(room - 1200));
                    for _ in 0..124 {
                        nested = json!({ "a": nested });
                    }
                    nested
                }),
            ),
            (
                "credential, many keys, proof verifies",
                with(
                    "/_provenance/credential",
                    self_signed(credential.clone(), |c| {
                        c["credentialSubject"]["extra"] = wide(6, room - 400);
                    }),
                ),
            ),
            (
                "manifest, many keys",
                with("/_provenance/manifest", {
                    let mut manifest = genuine["_provenance"]["manifest"].clone();
                    manifest["extra"] = wide(6, room);
                    manifest
                }),
            ),
            (
                "@context, long list",
                with(
                    "/_provenance/credential/@context",
                    json!(vec!["https://www.w3.org/ns/credentials/v2"; room / 40]),
                ),
            ),
        ]
    }

    /// No body costs more than its size makes unavoidable: each of the costliest bodies costs
    /// about as much a byte at 128 KiB as at 16 KiB (a cost that grows faster, like one base58
    /// field's quadratic decoding before it was bounded, took over a second at 16 KiB), and none
    /// more than a generous bound a byte. Prints each one's cost; the figures at the route's
    /// limit, for RELIABILITY.md: `LEASEKIT_VERIFY_CPU_BYTES=6291456 cargo test --release -p
    /// leasekit-core --lib no_body_costs -- --nocapture`.
    #[test]
    fn no_body_costs_more_than_its_size_makes_unavoidable() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let trusted = issuer.trusted();
        let sizes = match std::env::var("LEASEKIT_VERIFY_CPU_BYTES") {
            Ok(size) => vec![size.parse().unwrap()],
            Err(_) => vec![16 * 1024, 128 * 1024],
        };
        let mut costs: Vec<Vec<Duration>> = Vec::new();
        for &size in &sizes {
            assert!(size <= MAX_VERIFY_BYTES);
            let mut row = Vec::new();
            for (name, document) in costliest(&issuer, size) {
                let body = serde_json::to_vec(&document).unwrap();
                assert!(body.len() <= size, "{name}: {} bytes", body.len());
                let mut best = Duration::MAX;
                for _ in 0..3 {
                    let start = Instant::now();
                    let answer = report(&body, &trusted);
                    best = best.min(start.elapsed());
                    // Refused unparsed when it has too many values, and only then.
                    match json_values_at_most(&body) > MAX_VERIFY_VALUES {
                        true => assert!(answer.is_err(), "{name}"),
                        false => assert!(!answer.expect(name).verified, "{name}"),
                    }
                }
                let per_byte = best.as_nanos() / body.len() as u128;
                let refused = match json_values_at_most(&body) > MAX_VERIFY_VALUES {
                    true => ", refused: too many values",
                    false => "",
                };
                eprintln!(
                    "verify CPU, {name} ({} bytes): {best:?}, {per_byte} ns a byte{refused}",
                    body.len()
                );
                // Generous for unoptimised test builds on a busy machine (optimised ones take
                // about 70 ns a byte at worst).
                assert!(per_byte < 15_000, "{name}: {per_byte} ns a byte at {size}");
                row.push(best);
            }
            costs.push(row);
        }
        if let [small, large] = &costs[..] {
            let growth = sizes[1] / sizes[0];
            for (i, (a, b)) in small.iter().zip(large).enumerate() {
                // Linear is `growth` times; quadratic would be `growth` squared.
                assert!(
                    *b < *a * 2 * growth as u32 + Duration::from_millis(10),
                    "case {i}: {a:?} at {} bytes, {b:?} at {}",
                    sizes[0],
                    sizes[1]
                );
            }
        }
    }
}
