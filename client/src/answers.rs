//! What the service answers, as this client hands it back.

use serde::Deserialize;

/// One rule that stopped an op.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Witness {
    pub rule_id: String,
    pub detail: String,
}

/// The `data` of a lease answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// acquire/renew: you hold it now; release: it was released; get: someone holds it;
    /// check: the token is current. For a set: every resource of it.
    pub granted: bool,
    /// Your permit when you have one, else the live permit with the largest token (null for a
    /// set: see `leases`).
    pub holder: Option<String>,
    pub fencing_token: Option<u64>,
    /// ISO 8601 UTC.
    pub expires_at: Option<String>,
    /// How many holders the resource takes at once (1: a lease; absent from a session's
    /// answer, read as 1).
    #[serde(default = "one")]
    pub limit: u32,
    /// The live permits, by token.
    #[serde(default)]
    pub holders: Vec<Permit>,
    /// check: whether the token is a live permit's.
    #[serde(default)]
    pub current: Option<bool>,
    /// A set's resources, in request order.
    #[serde(default)]
    pub leases: Option<Vec<Member>>,
    /// acquire with a wait that ended ungranted: your place in the queue (1 = next).
    #[serde(default)]
    pub queue_position: Option<u32>,
    /// revoke: the permits it ended.
    #[serde(default)]
    pub revoked: Option<Vec<Permit>>,
    /// open, keepalive, close, get of a session: the session after the call (`None` once it
    /// has ended, or when unknown).
    #[serde(default)]
    pub session: Option<SessionState>,
    /// The shown permit's value (its holder's note: a leader's address, progress).
    #[serde(default)]
    pub value: Option<String>,
    /// The resource's state after the call (an answer about one resource): hand it to
    /// [`crate::Client::watch`] to hear of the next change.
    #[serde(default)]
    pub state_tag: Option<String>,
    /// watch: whether the state is another than the tag sent named.
    #[serde(default)]
    pub changed: Option<bool>,
    /// The resource's finished mark (a done release): while it stands, every acquire is
    /// refused with `DONE`. `None` when it is not finished.
    #[serde(default)]
    pub done: Option<Done>,
    /// An acquire of candidates: the one granted.
    #[serde(default)]
    pub resource: Option<String>,
    pub replayed: bool,
    pub witnesses: Vec<Witness>,
}

fn one() -> u32 {
    1
}

/// A finished resource's mark (docs/adr/0012): who finished it, with which token, when, what
/// the work produced, and until when it stays finished.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Done {
    pub holder: String,
    pub fencing_token: u64,
    /// ISO 8601 UTC.
    pub done_at: String,
    pub result: Option<String>,
    /// ISO 8601 UTC.
    pub until: String,
}

/// A live session, as the service answers it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    pub id: String,
    pub holder: String,
    /// ISO 8601 UTC: it and every permit in it lapse then unless kept alive.
    pub expires_at: String,
    /// Its live permits.
    pub leases: Vec<SessionPermit>,
}

/// One live permit of a session.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPermit {
    pub resource: String,
    pub fencing_token: u64,
    pub limit: u32,
}

/// One live permit of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permit {
    pub holder: String,
    pub fencing_token: u64,
    pub expires_at: String,
    /// The session it lives in (its expiry is the session's), if any.
    #[serde(default)]
    pub session: Option<String>,
    /// Its holder's note, if any.
    #[serde(default)]
    pub value: Option<String>,
}

/// One resource of a set, as it stands after the call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub resource: String,
    pub granted: bool,
    pub holder: Option<String>,
    pub fencing_token: Option<u64>,
    pub expires_at: Option<String>,
    pub limit: u32,
    pub holders: Vec<Permit>,
    #[serde(default)]
    pub done: Option<Done>,
}

/// A page of [`crate::Client::list`]: your tenant's resources with a live permit or waiter, by name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPage {
    pub leases: Vec<Listed>,
    /// Pass it back for the next page; `None` at the end.
    pub next_cursor: Option<String>,
}

/// One resource of a list page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub resource: String,
    pub limit: u32,
    pub holders: Vec<Permit>,
    pub waiters: Vec<Waiter>,
    /// Its finished mark, if it is finished.
    #[serde(default)]
    pub done: Option<Done>,
}

/// A live place in a resource's queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiter {
    pub holder: String,
    /// ISO 8601 UTC: the place lapses then unless its holder calls again.
    pub until: String,
}

/// A page of [`crate::Client::audit`], newest first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next_cursor: Option<String>,
}

/// One revoke, as the audit keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: String,
    pub at: String,
    /// `key:<key id>`, or the paying wallet's tenant.
    pub actor: String,
    /// The resource revoked; `None` for a session's revoke.
    pub resource: Option<String>,
    /// The session revoked, with every permit in it; `None` for a resource's revoke.
    #[serde(default)]
    pub session: Option<String>,
    pub ended: Vec<Permit>,
    pub reason: String,
    /// A reopen's entry: the finished mark it ended.
    #[serde(default)]
    pub reopened: Option<Done>,
}
