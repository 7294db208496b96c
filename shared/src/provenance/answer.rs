//! `_provenance` for an answer: a C2PA-aligned manifest and a W3C VC 2.0 whose subject binds the
//! request, the answer's `data` and the manifest by their SHA-256, secured with eddsa-jcs-2022.
//!
//! The data hash is SHA-256(JCS(`data`)), `data` exactly as sent: a replay (`replayed: true`)
//! carries a proof over its own data, so a verifier needs no exception.
//!
//! A sample (invented data, to show the shape of an answer) is never signed as an answer: its
//! credential is typed [`SAMPLE_TYPE`] instead of [`CREDENTIAL_TYPE`], says so in its name and
//! description, and is signed with the sample key (see docs/adr/0004).

use super::issuer::Issuer;
use super::jcs::sha256;
use crate::clock::{Millis, iso8601};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

/// Our credential type for answers, beside `VerifiableCredential`.
pub const CREDENTIAL_TYPE: &str = "LeaseAnswerCredential";

/// The credential type of a sample, in place of [`CREDENTIAL_TYPE`].
pub const SAMPLE_TYPE: &str = "LeasekitSampleAnswer";

pub const VC_CONTEXT: &str = "https://www.w3.org/ns/credentials/v2";

/// What is signed: an answer of this service, or an invented sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Answer,
    Sample,
}

/// What was asked: the route, the op, and SHA-256 of the JCS of the request body.
pub struct Subject<'a> {
    pub route: &'a str,
    pub op: &'a str,
    pub request_sha256: [u8; 32],
}

/// The `_provenance` of the answer `data`, answering `subject`, issued at `now`.
pub fn provenance(issuer: &Issuer, subject: &Subject<'_>, data: &Value, now: Millis) -> Value {
    secured(Kind::Answer, issuer, subject, data, now)
}

/// The `_provenance` of an invented `data`, marked as a sample and signed with the sample key.
pub fn sample_provenance(
    issuer: &Issuer,
    subject: &Subject<'_>,
    data: &Value,
    now: Millis,
) -> Value {
    secured(Kind::Sample, issuer, subject, data, now)
}

fn secured(kind: Kind, issuer: &Issuer, subject: &Subject<'_>, data: &Value, now: Millis) -> Value {
    let when = iso8601(now);
    let data_hash = sha256(data);
    // `json!` copies a `Value` it is given (it serializes it again): the trees made here are
    // moved into place instead.
    let agent = || json!({"name": "leasekit", "version": env!("CARGO_PKG_VERSION")});
    let title = match kind {
        Kind::Answer => format!("{} answer", subject.route),
        Kind::Sample => format!(
            "{} sample answer (invented data, not an answer)",
            subject.route
        ),
    };
    let mut manifest = json!({
        "claim_generator_info": [],
        "title": title,
        "format": "application/json",
        "assertions": [
            {
                "label": "c2pa.hash.data",
                "data": {
                    "name": "data (RFC 8785 canonical JSON)",
                    "alg": "sha256",
                    "hash": BASE64.encode(data_hash),
                }
            },
            {
                "label": "c2pa.actions",
                "data": {"actions": [{
                    "action": "c2pa.created",
                    "when": when,
                    "softwareAgent": null,
                    "parameters": {"route": subject.route, "op": subject.op},
                }]}
            }
        ],
        "ingredients": [{
            "title": "request body (RFC 8785 canonical JSON)",
            "format": "application/json",
            "relationship": "inputTo",
            "hash": {"alg": "sha256", "hash": BASE64.encode(subject.request_sha256)},
        }],
    });
    manifest["claim_generator_info"] = Value::Array(vec![agent()]);
    manifest["assertions"][1]["data"]["actions"][0]["softwareAgent"] = agent();
    let (credential_type, issuer_did) = match kind {
        Kind::Answer => (CREDENTIAL_TYPE, issuer.did()),
        Kind::Sample => (SAMPLE_TYPE, issuer.sample_did()),
    };
    let mut credential = json!({
        "@context": [VC_CONTEXT],
        "type": ["VerifiableCredential", credential_type],
        "issuer": issuer_did,
        "validFrom": when,
        "credentialSubject": {
            "route": subject.route,
            "op": subject.op,
            "requestSha256": hex::encode(subject.request_sha256),
            "dataSha256": hex::encode(data_hash),
            "manifestSha256": hex::encode(sha256(&manifest)),
        },
    });
    if kind == Kind::Sample {
        // For people reading it; the type and the key are what verifiers check.
        credential["name"] = json!("leasekit sample answer");
        credential["description"] =
            json!("Invented data showing the shape of an answer: not an answer of this service.");
    }
    let credential = match (kind, credential) {
        (Kind::Answer, Value::Object(fields)) => issuer.secure(fields, &when),
        (Kind::Sample, Value::Object(fields)) => issuer.secure_sample(fields, &when),
        _ => Map::new(),
    };
    let mut provenance = Map::with_capacity(2);
    provenance.insert("manifest".into(), manifest);
    provenance.insert("credential".into(), Value::Object(credential));
    Value::Object(provenance)
}
