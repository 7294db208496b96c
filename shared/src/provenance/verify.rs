//! Checking a `{data, _provenance}` document: the proof, the issuer, and every hash, each
//! reported on its own so a caller sees exactly what failed, and whether it is a sample.
//!
//! The work is bounded by the input: the fields that are base58-decoded (quadratic) are bounded
//! before decoding (see `proof` and `did`); the rest is about linear in the body, which the route
//! caps at 6 MiB (the largest answer a Lambda function can deliver), with nesting capped by the
//! JSON parser.

use super::answer::{CREDENTIAL_TYPE, SAMPLE_TYPE};
use super::issuer::Trusted;
use super::jcs::sha256;
use super::{did, proof};
use crate::witness::Witness;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every check passed: an intact answer of this service. Never true for a sample.
    pub verified: bool,
    /// The proof verifies and the signed credential marks invented data: typed as a sample, or
    /// signed with this service's sample key. Not an answer, whatever the other checks say.
    pub sample: bool,
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
    /// That key is this service's answer key, the credential says it is the issuer, and the
    /// credential is typed as an answer.
    pub issuer: bool,
    /// The credential's dataSha256 is the hash of `data`.
    pub data_hash: bool,
    /// The credential's manifestSha256 is the hash of the manifest, and the manifest's
    /// c2pa.hash.data is the hash of `data`.
    pub manifest: bool,
}

/// Check `data` against `provenance`, expecting an answer signed by `trusted.answers`.
pub fn verify(data: &Value, provenance: &Map<String, Value>, trusted: &Trusted) -> Report {
    let mut witnesses = Vec::new();
    let mut checks = Checks::default();
    let mut sample = false;
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
        .map(clipped);
    let data_hash = hex::encode(sha256(data));

    match proof::verify(credential) {
        Ok(signer) => {
            checks.proof = true;
            let claims_signer = issuer.as_deref().and_then(did::resolve) == Some(signer);
            let typed = |name: &str| {
                credential
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.iter().any(|v| v == name))
            };
            sample = typed(SAMPLE_TYPE) || signer == trusted.samples;
            checks.issuer =
                signer == trusted.answers && claims_signer && typed(CREDENTIAL_TYPE) && !sample;
            if sample {
                witnesses.push(
                    Witness::new(
                        "SAMPLE",
                        "/_provenance/credential/type",
                        "a sample: invented data, marked and signed as such, not an answer of this service",
                    )
                    .expected(CREDENTIAL_TYPE)
                    .actual(echoed(credential.get("type"))),
                );
            } else if !checks.issuer {
                witnesses.push(
                    Witness::new(
                        "ISSUER",
                        "/_provenance/credential/issuer",
                        "not issued and signed by this service",
                    )
                    .expected(did::did(&trusted.answers))
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
            .expected(echoed(subject.get("dataSha256")))
            .actual(data_hash.clone()),
        );
    }

    let manifest = provenance.get("manifest").unwrap_or(&Value::Null);
    let manifest_hash = hex::encode(sha256(manifest));
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
        verified: checks.proof && checks.issuer && checks.data_hash && checks.manifest && !sample,
        sample,
        issuer,
        checks,
        witnesses,
    }
}

/// The most bytes of a document's own values a report echoes: enough for any genuine one (a
/// did:key is 56 characters, a hash 64), while a report on a 6 MiB body echoing it whole kept
/// 6 MB per unread answer in memory (the attack of 2026-12-07: 400 idle readers, 2.8 GB).
const ECHO_BYTES: usize = 200;

/// `text`, or its first characters and `…` when it is longer than [`ECHO_BYTES`].
fn clipped(text: &str) -> String {
    if text.len() <= ECHO_BYTES {
        return text.to_owned();
    }
    let end = (0..=ECHO_BYTES)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &text[..end])
}

/// A document's value as a report shows it: as it is when short, else its JSON text clipped.
/// Never serializes more than [`ECHO_BYTES`] of it.
fn echoed(value: Option<&Value>) -> Value {
    /// Takes bytes until it has more than `ECHO_BYTES`, then refuses the rest.
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.0.len() > ECHO_BYTES {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.0.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let Some(value) = value else {
        return Value::Null;
    };
    if let Value::String(text) = value {
        return Value::String(clipped(text));
    }
    let mut text = Capped(Vec::new());
    match serde_json::to_writer(&mut text, value) {
        Ok(()) if text.0.len() <= ECHO_BYTES => value.clone(),
        _ => Value::String(clipped(&String::from_utf8_lossy(&text.0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::answer::{Subject, provenance, sample_provenance};
    use crate::provenance::issuer::Issuer;
    use serde_json::json;

    const SUBJECT: Subject<'static> = Subject {
        route: "POST /api/v1/lease",
        op: "acquire",
        request_sha256: [1; 32],
    };

    fn data() -> Value {
        json!({"status": "pass", "op": "acquire", "granted": true, "fencingToken": 7, "replayed": false})
    }

    fn signed(issuer: &Issuer) -> (Value, Map<String, Value>) {
        let data = data();
        let p = provenance(issuer, &SUBJECT, &data, 1_795_946_400_000);
        (data, p.as_object().unwrap().clone())
    }

    /// A report echoes at most a few hundred bytes of the document's own values, however long
    /// they are, and short genuine ones exactly.
    #[test]
    fn a_report_echoes_little_of_the_document() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (data, mut p) = signed(&issuer);
        let long = "é".repeat(500_000);
        p["credential"]["issuer"] = json!(long);
        p["credential"]["credentialSubject"]["dataSha256"] = json!(long);
        p["credential"]["type"] = json!(vec![long.clone(); 3]);
        let report = verify(&data, &p, &issuer.trusted());
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.len() < 2_000, "{} bytes", text.len());
        assert!(report.issuer.unwrap().ends_with('…'));
        let (data, p) = signed(&issuer);
        let mut changed = data.clone();
        changed["fencingToken"] = json!(8);
        let report = verify(&changed, &p, &issuer.trusted());
        let witness = report
            .witnesses
            .iter()
            .find(|w| w.rule_id == "DATA_HASH")
            .unwrap();
        assert_eq!(
            witness.expected.as_ref(),
            Some(&p["credential"]["credentialSubject"]["dataSha256"])
        );
        assert_eq!(report.issuer.as_deref(), Some(issuer.did()));
    }

    #[test]
    fn an_untouched_answer_verifies_and_replayed_is_signed() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (mut data, p) = signed(&issuer);
        let report = verify(&data, &p, &issuer.trusted());
        assert!(report.verified && !report.sample, "{report:?}");
        assert_eq!(report.issuer.as_deref(), Some(issuer.did()));
        // The contract's hash, with nothing left out.
        assert_eq!(
            p["credential"]["credentialSubject"]["dataSha256"],
            hex::encode(sha256(&data))
        );
        data["replayed"] = json!(true);
        let report = verify(&data, &p, &issuer.trusted());
        assert!(!report.verified && !report.checks.data_hash, "{report:?}");
    }

    #[test]
    fn a_sample_is_reported_as_a_sample_and_never_verified() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let data = data();
        let p = sample_provenance(&issuer, &SUBJECT, &data, 1_795_946_400_000);
        let p = p.as_object().unwrap();
        assert_eq!(p["credential"]["issuer"], issuer.sample_did());
        let r = verify(&data, p, &issuer.trusted());
        assert!(r.sample && !r.verified, "{r:?}");
        assert!(r.checks.proof && !r.checks.issuer && r.checks.data_hash && r.checks.manifest);
        assert_eq!(r.witnesses[0].rule_id, "SAMPLE");
        // Even to a verifier that trusts the sample key as the answer key, it is a sample.
        let naive = Trusted {
            answers: issuer.trusted().samples,
            samples: Issuer::from_seed(&[9; 32]).trusted().samples,
        };
        let r = verify(&data, p, &naive);
        assert!(r.sample && !r.verified && !r.checks.issuer, "{r:?}");
        // And a sample of another deployment is a sample too, by its type.
        let other = Issuer::from_seed(&[4; 32]);
        let p = sample_provenance(&other, &SUBJECT, &data, 1_795_946_400_000);
        let r = verify(&data, p.as_object().unwrap(), &issuer.trusted());
        assert!(r.sample && !r.verified, "{r:?}");
    }

    #[test]
    fn one_changed_character_of_data_fails() {
        let issuer = Issuer::from_seed(&[3; 32]);
        let (mut data, p) = signed(&issuer);
        data["op"] = json!("acquirf");
        let report = verify(&data, &p, &issuer.trusted());
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
        let r = verify(&data, &m, &issuer.trusted());
        assert!(!r.verified && r.checks.proof && !r.checks.manifest);
        let mut c = p.clone();
        c["credential"]["credentialSubject"]["op"] = json!("release");
        let r = verify(&data, &c, &issuer.trusted());
        assert!(!r.verified && !r.checks.proof);
    }

    #[test]
    fn another_issuer_is_reported_as_not_ours() {
        let ours = Issuer::from_seed(&[3; 32]);
        let theirs = Issuer::from_seed(&[4; 32]);
        let (data, p) = signed(&theirs);
        let r = verify(&data, &p, &ours.trusted());
        assert!(r.checks.proof && !r.checks.issuer && !r.verified);
        assert_eq!(r.witnesses[0].rule_id, "ISSUER");
    }
}
