//! Checking a `{data, _provenance}` document: the proof, the issuer, and every hash, each
//! reported on its own so a caller sees exactly what failed.

use super::answer::{CREDENTIAL_TYPE, data_sha256};
use super::jcs::sha256;
use super::{did, proof};
use crate::witness::Witness;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every check passed.
    pub verified: bool,
    /// The credential's issuer, as it claims.
    pub issuer: Option<String>,
    pub checks: Checks,
    pub witnesses: Vec<Witness>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    /// The Data Integrity proof verifies with the key its verification method names.
    pub proof: bool,
    /// That key is this service's, and the credential says it is the issuer.
    pub issuer: bool,
    /// The credential's dataSha256 is the hash of `data`.
    pub data_hash: bool,
    /// The credential's manifestSha256 is the hash of the manifest, and the manifest's
    /// c2pa.hash.data is the hash of `data`.
    pub manifest: bool,
}

/// Check `data` against `provenance`, expecting it signed by `ours`.
pub fn verify(data: &Value, provenance: &Map<String, Value>, ours: &VerifyingKey) -> Report {
    let mut witnesses = Vec::new();
    let mut checks = Checks::default();
    let empty = Map::new();
    let credential = match provenance.get("credential").and_then(Value::as_object) {
        Some(c) => c,
        None => {
            witnesses.push(Witness::new(
                "SHAPE",
                "/_provenance/credential",
                "the credential is missing",
            ));
            &empty
        }
    };
    let subject = credential
        .get("credentialSubject")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let issuer = credential
        .get("issuer")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let data_hash = hex::encode(data_sha256(data));

    match proof::verify(credential) {
        Ok(signer) => {
            checks.proof = true;
            let is_ours = signer == *ours;
            let claims_signer = issuer.as_deref().and_then(did::resolve) == Some(signer);
            let typed = credential
                .get("type")
                .and_then(Value::as_array)
                .is_some_and(|t| t.iter().any(|v| v == CREDENTIAL_TYPE));
            checks.issuer = is_ours && claims_signer && typed;
            if !checks.issuer {
                witnesses.push(
                    Witness::new(
                        "ISSUER",
                        "/_provenance/credential/issuer",
                        "not issued and signed by this service",
                    )
                    .expected(did::did(ours))
                    .actual(issuer.clone().map_or(Value::Null, Value::String)),
                );
            }
        }
        Err(e) => witnesses.push(Witness::new(
            "PROOF",
            "/_provenance/credential/proof",
            e.to_string(),
        )),
    }

    checks.data_hash =
        subject.get("dataSha256").and_then(Value::as_str) == Some(data_hash.as_str());
    if !checks.data_hash {
        witnesses.push(
            Witness::new(
                "DATA_HASH",
                "/data",
                "data is not what the credential signed",
            )
            .expected(subject.get("dataSha256").cloned().unwrap_or(Value::Null))
            .actual(data_hash.clone()),
        );
    }

    let manifest = provenance.get("manifest").cloned().unwrap_or(Value::Null);
    let manifest_hash = hex::encode(sha256(&manifest));
    let manifest_bound =
        subject.get("manifestSha256").and_then(Value::as_str) == Some(manifest_hash.as_str());
    let manifest_data = manifest
        .get("assertions")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x.get("label").and_then(Value::as_str) == Some("c2pa.hash.data"))
        })
        .and_then(|a| a.pointer("/data/hash"))
        .and_then(Value::as_str)
        .and_then(|h| BASE64.decode(h).ok())
        .map(hex::encode);
    checks.manifest = manifest_bound && manifest_data.as_deref() == Some(data_hash.as_str());
    if !checks.manifest {
        witnesses.push(Witness::new(
            "MANIFEST_HASH",
            "/_provenance/manifest",
            "the manifest is not the one the credential signed, or does not hash this data",
        ));
    }

    Report {
        verified: checks.proof && checks.issuer && checks.data_hash && checks.manifest,
        issuer,
        checks,
        witnesses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::answer::{Subject, provenance};
    use crate::provenance::issuer::Issuer;
    use serde_json::json;

    fn signed(issuer: &Issuer) -> (Value, Map<String, Value>) {
        let data = json!({"status": "pass", "op": "acquire", "granted": true, "fencingToken": 7, "replayed": false});
        let subject = Subject {
            route: "POST /api/v1/lease",
            op: "acquire",
            request_sha256: [1; 32],
        };
        let p = provenance(issuer, &subject, &data, 1_795_946_400_000);
        (data, p.as_object().unwrap().clone())
    }

    #[test]
    fn an_untouched_answer_verifies_and_replayed_is_not_signed() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (mut data, p) = signed(&issuer);
        let report = verify(&data, &p, &issuer.verifying_key());
        assert!(report.verified, "{report:?}");
        assert_eq!(report.issuer.as_deref(), Some(issuer.did()));
        data["replayed"] = json!(true);
        assert!(verify(&data, &p, &issuer.verifying_key()).verified);
    }

    #[test]
    fn one_changed_character_of_data_fails() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (mut data, p) = signed(&issuer);
        data["op"] = json!("acquirf");
        let report = verify(&data, &p, &issuer.verifying_key());
        assert!(!report.verified);
        assert!(report.checks.proof && !report.checks.data_hash && !report.checks.manifest);
        assert_eq!(report.witnesses[0].rule_id, "DATA_HASH");
    }

    #[test]
    fn a_changed_manifest_or_credential_fails() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (data, p) = signed(&issuer);
        let mut m = p.clone();
        m["manifest"]["title"] = json!("something else");
        let r = verify(&data, &m, &issuer.verifying_key());
        assert!(!r.verified && r.checks.proof && !r.checks.manifest);
        let mut c = p.clone();
        c["credential"]["credentialSubject"]["op"] = json!("release");
        let r = verify(&data, &c, &issuer.verifying_key());
        assert!(!r.verified && !r.checks.proof);
    }

    #[test]
    fn another_issuer_is_reported_as_not_ours() {
        let ours = Issuer::from_seed(&[3; 32]);
        let theirs = Issuer::from_seed(&[4; 32]);
        let (data, p) = signed(&theirs);
        let r = verify(&data, &p, &ours.verifying_key());
        assert!(r.checks.proof && !r.checks.issuer && !r.verified);
        assert_eq!(r.witnesses[0].rule_id, "ISSUER");
    }
}
