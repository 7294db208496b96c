//! `_provenance` for an answer: a C2PA-aligned manifest and a W3C VC 2.0 whose subject binds the
//! request, the answer's `data` and the manifest by their SHA-256, secured with eddsa-jcs-2022.
//!
//! What is hashed as "the data" is the answer's `data` without its `replayed` flag: that flag says
//! how this copy was delivered (first time or replayed for a repeated requestId), not what the
//! service decided, and leaving it out is what lets a replay carry the original proof unchanged.

use super::issuer::Issuer;
use super::jcs::sha256;
use crate::clock::{Millis, iso8601};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

/// The field of `data` left out of its hash.
pub const UNSIGNED_FIELD: &str = "replayed";

/// Our credential type, beside `VerifiableCredential`.
pub const CREDENTIAL_TYPE: &str = "LeaseAnswerCredential";

pub const VC_CONTEXT: &str = "https://www.w3.org/ns/credentials/v2";

/// What was asked: the route, the op, and SHA-256 of the JCS of the request body.
pub struct Subject<'a> {
    pub route: &'a str,
    pub op: &'a str,
    pub request_sha256: [u8; 32],
}

/// SHA-256 of JCS(`data` without `replayed`).
pub fn data_sha256(data: &Value) -> [u8; 32] {
    match data {
        Value::Object(fields) if fields.contains_key(UNSIGNED_FIELD) => {
            let mut signed = fields.clone();
            signed.remove(UNSIGNED_FIELD);
            sha256(&Value::Object(signed))
        }
        other => sha256(other),
    }
}

/// The `_provenance` of `data`, answering `subject`, issued at `now`.
pub fn provenance(issuer: &Issuer, subject: &Subject<'_>, data: &Value, now: Millis) -> Value {
    let when = iso8601(now);
    let data_hash = data_sha256(data);
    let agent = json!({"name": "leasekit", "version": env!("CARGO_PKG_VERSION")});
    let manifest = json!({
        "claim_generator_info": [agent],
        "title": format!("{} answer", subject.route),
        "format": "application/json",
        "assertions": [
            {
                "label": "c2pa.hash.data",
                "data": {
                    "name": "data (RFC 8785 canonical JSON, without replayed)",
                    "alg": "sha256",
                    "hash": BASE64.encode(data_hash),
                }
            },
            {
                "label": "c2pa.actions",
                "data": {"actions": [{
                    "action": "c2pa.created",
                    "when": when,
                    "softwareAgent": agent,
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
    let credential = json!({
        "@context": [VC_CONTEXT],
        "type": ["VerifiableCredential", CREDENTIAL_TYPE],
        "issuer": issuer.did(),
        "validFrom": when,
        "credentialSubject": {
            "route": subject.route,
            "op": subject.op,
            "requestSha256": hex::encode(subject.request_sha256),
            "dataSha256": hex::encode(data_hash),
            "manifestSha256": hex::encode(sha256(&manifest)),
        },
    });
    let credential = match credential {
        Value::Object(fields) => issuer.secure(fields, &when),
        _ => Map::new(),
    };
    json!({"manifest": manifest, "credential": credential})
}
