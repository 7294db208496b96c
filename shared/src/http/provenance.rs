//! POST /api/v1/verify-provenance and GET /.well-known/did.json: free, no key.

use super::body::{parse_valid, read_limited};
use super::{ApiError, AppState};
use crate::provenance::issuer::Trusted;
use crate::provenance::{did, verify::Report, verify::verify as check};
use crate::schema::verify_input;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::LazyLock;
use tokio::sync::Semaphore;

#[derive(Deserialize)]
struct VerifyRequest {
    data: Value,
    #[serde(rename = "_provenance")]
    provenance: Map<String, Value>,
}

/// The largest body this route reads. When it was set, the largest answer this service signed (a
/// denied renew with a 128-character holder of control characters) was about 5 KB; sets and
/// semaphores with values have since made answers of up to 139 KB (found 2026-12-06), which
/// this route refuses: they verify offline. Parsing and canonicalising cost about 70 ns a byte
/// at worst in an optimised build (many keys, deep nesting), so this keeps every request near a
/// millisecond.
pub const MAX_VERIFY_BYTES: usize = 16 * 1024;

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
    let bytes = read_limited(body).await?;
    if bytes.len() > MAX_VERIFY_BYTES {
        return Err(ApiError::PayloadTooLarge(MAX_VERIFY_BYTES));
    }
    let trusted = state.issuer()?.trusted();
    // The semaphore is never closed, so acquiring only waits.
    let turn = CHECKING.acquire().await;
    let work = tokio::task::spawn_blocking(move || {
        let _turn = turn;
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
    let (request, _): (VerifyRequest, Value) = parse_valid(bytes, verify_input(), &[])?;
    Ok(check(&request.data, &request.provenance, trusted))
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
    use serde_json::json;
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
    /// the limit.
    fn grown(document: &Value, pointer: &str, unit: &str) -> Value {
        let mut document = document.clone();
        let unit_len = serde_json::to_string(unit).unwrap().len() - 2;
        let count = (MAX_VERIFY_BYTES - document.to_string().len() - 16) / unit_len;
        let target = document.pointer_mut(pointer).unwrap();
        let text = format!("{}{}", target.as_str().unwrap(), unit.repeat(count));
        *target = Value::String(text);
        document
    }

    /// An object of `n`-character keys filling about `room` bytes.
    fn wide(n: usize, room: usize) -> Value {
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

    /// The most expensive bodies we know of, each just under the limit: the fields that were decoded
    /// quadratically, and documents that make parsing, canonicalisation, hashing and the signature
    /// check work hardest. Prints each one's cost (figures for RELIABILITY.md); fails if one takes
    /// more than a generous bound (one unbounded base58 field took over a second before).
    #[test]
    fn no_body_costs_more_than_a_few_milliseconds() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let trusted = issuer.trusted();
        let genuine = answer(&issuer);
        let credential = genuine["_provenance"]["credential"]
            .as_object()
            .unwrap()
            .clone();
        let room = MAX_VERIFY_BYTES - genuine.to_string().len() - 200;
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
        let cases: Vec<(&str, Value)> = vec![
            (
                "proofValue",
                grown(&genuine, "/_provenance/credential/proof/proofValue", "z"),
            ),
            (
                "verificationMethod",
                grown(
                    &genuine,
                    "/_provenance/credential/proof/verificationMethod",
                    "z",
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
            ("data, escaped string", grown(&genuine, "/data/op", "\u{1}")),
            (
                "data, non-ASCII string",
                grown(&genuine, "/data/op", "\u{1F600}"),
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
        ];
        let mut worst = Duration::ZERO;
        for (name, document) in &cases {
            let body = serde_json::to_vec(document).unwrap();
            assert!(
                body.len() <= MAX_VERIFY_BYTES,
                "{name}: {} bytes",
                body.len()
            );
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                let report = report(&body, &trusted).expect(name);
                best = best.min(start.elapsed());
                assert!(!report.verified, "{name}");
            }
            eprintln!("verify CPU, {name} ({} bytes): {best:?}", body.len());
            worst = worst.max(best);
        }
        eprintln!("verify CPU, worst case: {worst:?}");
        // Generous for unoptimised test builds on a busy machine; optimised ones are much faster.
        assert!(worst < Duration::from_millis(250), "{worst:?}");
    }
}
