//! The `data` of a lease answer, shaped as `shared/schemas/lease-answer.json`.

use super::model::LeaseState;
use super::request::Op;
use crate::clock::{Millis, iso8601};
use crate::witness::Witness;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The op did what was asked (get always passes).
    Pass,
    /// A rule stopped it; see the witnesses.
    Fail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseAnswer {
    pub status: Status,
    pub op: Op,
    /// acquire/renew: the caller holds the lease now; release: it was released; get: someone holds it.
    pub granted: bool,
    pub holder: Option<String>,
    pub fencing_token: Option<u64>,
    pub expires_at: Option<String>,
    pub replayed: bool,
    pub witnesses: Vec<Witness>,
    pub versions: BTreeMap<String, String>,
    /// Fixed sentences: request records leave them out, and a replay takes them from here.
    #[serde(default = "limits")]
    pub limits: Vec<String>,
    pub deterministic: bool,
}

/// Every semantic dependency of an answer.
fn versions() -> BTreeMap<String, String> {
    [
        ("engine", crate::ENGINE_VERSION),
        ("inputSchema", crate::lease::request::INPUT_SCHEMA_VERSION),
        (
            "clock",
            "server UTC clock; a lease is held while now < expiresAt",
        ),
        (
            "store",
            "DynamoDB conditional writes; fencing counter never deleted",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// What an answer does not promise.
fn limits() -> Vec<String> {
    [
        "Expiry is decided by the server clock; your clock may differ, so renew well before expiresAt.",
        "A fencing token protects only a downstream store that rejects writes with a smaller token.",
        "A lost lease is not pushed to you: renew failing is how a holder learns it lost the lease.",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

impl LeaseAnswer {
    /// The answer for `op`, showing the lease as it stands in `state` at `now`.
    fn new(
        op: Op,
        status: Status,
        granted: bool,
        state: &LeaseState,
        now: Millis,
        witnesses: Vec<Witness>,
    ) -> Self {
        let live = state.live(now);
        Self {
            status,
            op,
            granted,
            holder: live.as_ref().map(|l| l.holder.to_owned()),
            fencing_token: live.as_ref().map(|l| l.token),
            expires_at: live.as_ref().map(|l| iso8601(l.expires_at)),
            replayed: false,
            witnesses,
            versions: versions(),
            limits: limits(),
            deterministic: true,
        }
    }

    /// A granted mutation; `after` is the state it left.
    pub fn granted(op: Op, after: &LeaseState, now: Millis) -> Self {
        Self::new(op, Status::Pass, true, after, now, Vec::new())
    }

    /// A mutation a rule stopped; `state` is the lease as it stands.
    pub fn denied(op: Op, state: &LeaseState, now: Millis, witnesses: Vec<Witness>) -> Self {
        Self::new(op, Status::Fail, false, state, now, witnesses)
    }

    /// A get: always `pass`; `granted` says whether someone holds the lease.
    pub fn observed(state: &LeaseState, now: Millis) -> Self {
        Self::new(
            Op::Get,
            Status::Pass,
            state.live(now).is_some(),
            state,
            now,
            Vec::new(),
        )
    }
}
