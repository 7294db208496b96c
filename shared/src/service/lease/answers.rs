//! What an answer is signed for, and what a request record keeps of it to replay it.

use super::rounds::Target;
use super::{LeaseError, ROUTE, SignedAnswer};
use crate::clock::Millis;
use crate::lease::{LeaseAnswer, REPLAY_WINDOW_MS};
use crate::provenance::Issuer;
use crate::provenance::answer::{Subject, provenance};
use crate::store::{RecordPut, StoreError, StoredRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest answer a request record keeps: DynamoDB's 400 KB item limit, less room for the
/// record's other attributes.
pub const MAX_KEPT_ANSWER_BYTES: usize = 380 * 1024;

/// What a request is, for signing: its op and the SHA-256 of its canonical body.
#[derive(Clone, Copy)]
pub(super) struct Signing<'a> {
    pub op: &'a str,
    pub request_sha256: [u8; 32],
    pub now: Millis,
    /// The payment authorization that pays for this answer, kept on its record.
    pub paid_by: Option<&'a str>,
    /// When the request's record stops being replayed: the replay window from the request's
    /// start, whichever round of a wait writes it (a paid call's evidence names this time).
    pub record_expires: Millis,
    /// The tenant and resource the answer is about (`tenant|resource`), when it is about one:
    /// what its state tag is bound to ([`state_tag`]). `None` where the tag is set already (a
    /// replay's kept answer) or there is none.
    pub scope: Option<&'a str>,
}

impl Signing<'_> {
    /// The same request, signed as of `now`.
    pub(super) fn at(&self, now: Millis) -> Self {
        Self { now, ..*self }
    }
}

/// Our own answer would not serialize.
pub(super) fn unserializable(err: serde_json::Error) -> LeaseError {
    LeaseError::Internal(format!("a lease answer would not serialize: {err}"))
}

/// `answer`, signed by `issuer` for the request `signing` describes.
pub(super) fn sign(
    issuer: &Issuer,
    mut answer: LeaseAnswer,
    signing: &Signing<'_>,
) -> Result<SignedAnswer, LeaseError> {
    if let (Some(scope), Some(tag)) = (signing.scope, answer.state_tag.as_mut()) {
        *tag = state_tag(issuer, scope, tag);
    }
    let data = serde_json::to_value(&answer).map_err(unserializable)?;
    let subject = Subject {
        route: ROUTE,
        op: signing.op,
        request_sha256: signing.request_sha256,
    };
    let provenance = provenance(issuer, &subject, &data, signing.now);
    Ok(SignedAnswer {
        data: answer,
        provenance,
    })
}

/// The state tag callers see for the state whose digest is `digest`
/// ([`crate::lease::LeaseState::tag`]) of the resource `scope` names: a MAC with the issuer's
/// tag key, so that equal states of two resources (or tenants) have different tags, and a tag
/// that leaks tells nothing of the holders and values it stands for (the attack of 2026-12-06
/// found a bare digest, equal across tenants and open to guessing offline).
pub(super) fn state_tag(issuer: &Issuer, scope: &str, digest: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(issuer.tag_key())
        .expect("HMAC takes a key of any length");
    mac.update(scope.as_bytes());
    mac.update(&[0]);
    mac.update(digest.as_bytes());
    hex::encode(&mac.finalize().into_bytes()[..12])
}

/// What a request record keeps of its answer: the data without its fixed sentences, and what the
/// proof was made from. A replay signs the same data, marked `replayed: true`, for the same
/// request at the same time: its proof covers exactly the data it carries (no field is left out
/// of the hash), and as Ed25519 signatures are deterministic (RFC 8032), every replay of a record
/// carries the same proof. Keeping the whole signed answer instead would make a record about
/// 2.4 KB: three write units where this takes one (two in a transaction).
#[derive(Serialize, Deserialize)]
struct Kept {
    data: Value,
    /// When the answer was signed (ms).
    at: Millis,
    /// SHA-256 of the request body it answered, hex.
    request: String,
}

/// The request record a request with a requestId commits: its `answer` kept (see [`Kept`]), or,
/// with none, a waiting acquire's place (docs/adr/0007), which takes the requestId for this input
/// without an answer to replay.
fn record_of(
    fingerprint: &str,
    answer: Option<&SignedAnswer>,
    signing: &Signing<'_>,
) -> Result<StoredRecord, LeaseError> {
    Ok(StoredRecord {
        fingerprint: fingerprint.to_owned(),
        answer: answer
            .map(|a| keep(a, signing))
            .transpose()?
            .unwrap_or_default(),
        expires_at: signing.record_expires,
        paid_by: signing.paid_by.map(str::to_owned),
        queued: answer.is_none(),
    })
}

/// The put of `target`'s record, when its request has a requestId: keeping `answer`, or with none
/// a waiting call's place. `over_place`: it may replace this input's place (only an answer
/// decided on the store's own state may: that state says what was handed to the place).
pub(super) fn record_put(
    target: &Target,
    answer: Option<&SignedAnswer>,
    signing: &Signing<'_>,
    over_place: bool,
) -> Result<Option<RecordPut>, LeaseError> {
    let Some(key) = &target.record else {
        return Ok(None);
    };
    Ok(Some(RecordPut {
        key: key.clone(),
        record: record_of(&target.fingerprint, answer, signing)?,
        over_place,
    }))
}

/// The record of `answer` (see [`Kept`]).
fn keep(answer: &SignedAnswer, signing: &Signing<'_>) -> Result<String, LeaseError> {
    let mut data = serde_json::to_value(&answer.data).map_err(unserializable)?;
    if let Some(fields) = data.as_object_mut() {
        fields.remove("limits");
    }
    let kept = Kept {
        data,
        at: signing.now,
        request: hex::encode(signing.request_sha256),
    };
    serde_json::to_string(&kept).map_err(unserializable)
}

/// The stored answer, marked as replayed and signed as of when it was first answered; or a
/// conflict if the input differs.
pub(super) fn replay(
    issuer: &Issuer,
    record: &StoredRecord,
    fingerprint: &str,
) -> Result<SignedAnswer, LeaseError> {
    if record.fingerprint != fingerprint {
        return Err(LeaseError::IdempotencyConflict);
    }
    // A waiting acquire's place under this very input, met where no wait resumes it (its
    // commit lost a race to another writer of the record): answered as contention.
    if record.queued {
        return Err(LeaseError::Contention);
    }
    let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("stored answer: {e}"));
    let kept: Kept = serde_json::from_str(&record.answer).map_err(|e| corrupt(&e))?;
    let mut data: LeaseAnswer = serde_json::from_value(kept.data).map_err(|e| corrupt(&e))?;
    data.replayed = true;
    let mut request_sha256 = [0; 32];
    hex::decode_to_slice(&kept.request, &mut request_sha256).map_err(|e| corrupt(&e))?;
    let signing = Signing {
        op: data.op.as_str(),
        request_sha256,
        now: kept.at,
        paid_by: None,
        record_expires: kept.at + REPLAY_WINDOW_MS,
        // The kept answer's tag is the one it was answered with.
        scope: None,
    };
    sign(issuer, data, &signing)
}
