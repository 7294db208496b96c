//! The `data` of a lease answer, shaped as `shared/schemas/lease-answer.json`.

use super::model::LeaseState;
use super::ops::Op;
use crate::clock::{Millis, iso8601};
use crate::witness::Witness;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The op did what was asked (get always passes).
    Pass,
    /// A rule stopped it; see the witnesses.
    Fail,
}

/// Serialized by hand (below): a page (list, audit) is about no one resource, so it leaves out
/// the fields that describe one (`granted` to `holders`), which would only read as "free".
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseAnswer {
    pub status: Status,
    pub op: Op,
    /// acquire with candidates: the candidate the answer is about, the one granted
    /// (docs/adr/0012); absent otherwise.
    #[serde(default)]
    pub resource: Option<String>,
    /// acquire/renew: the caller holds the lease now; release: it was released; get: someone holds it.
    #[serde(default)]
    pub granted: bool,
    #[serde(default)]
    pub holder: Option<String>,
    #[serde(default)]
    pub fencing_token: Option<u64>,
    #[serde(default)]
    pub expires_at: Option<String>,
    /// The value of the permit shown (docs/adr/0011), null when it has none.
    #[serde(default)]
    pub value: Option<String>,
    /// How many holders the resource takes at once (1 = a lease).
    #[serde(default = "one")]
    pub limit: u32,
    /// The live permits, by token.
    #[serde(default)]
    pub holders: Vec<Holder>,
    /// The resource's finished mark (docs/adr/0012), null when it is not finished.
    #[serde(default)]
    pub done: Option<DoneView>,
    /// The caller's place in the resource's queue (1 = next), when it waits and was not granted.
    #[serde(default)]
    pub queue_position: Option<usize>,
    /// check: whether the token is a live permit's.
    #[serde(default)]
    pub current: Option<bool>,
    /// Every answer about one resource: a tag of its state after the op (docs/adr/0011), what
    /// a watch is given to wait for a change.
    #[serde(default)]
    pub state_tag: Option<String>,
    /// watch: whether the state is another than the one its tag named.
    #[serde(default)]
    pub changed: Option<bool>,
    /// A set's resources, in request order; list: the page of live resources, by name.
    #[serde(default)]
    pub leases: Option<Vec<SetMember>>,
    /// revoke: the permits it ended.
    #[serde(default)]
    pub revoked: Option<Vec<Holder>>,
    /// audit: the page of entries, newest first.
    #[serde(default)]
    pub entries: Option<Vec<AuditEntry>>,
    /// list, audit: where the next page starts (null at the end); absent for other ops.
    #[serde(default)]
    pub next_cursor: Option<Option<String>>,
    /// open, keepalive, close, and get of a session: the session as it stands after the call
    /// (null: closed, lapsed, revoked or unknown); absent for the ops on resources, which leave
    /// out the fields that describe one resource when they answer about a session.
    #[serde(default, deserialize_with = "present")]
    pub session: Option<Option<SessionView>>,
    pub replayed: bool,
    pub witnesses: Vec<Witness>,
    pub versions: BTreeMap<String, String>,
    /// Fixed sentences: request records leave them out, and a replay takes them from here.
    #[serde(default = "limits")]
    pub limits: Vec<String>,
    pub deterministic: bool,
}

impl Serialize for LeaseAnswer {
    /// The fields in the order people read them: what happened, then the resource, then what
    /// the answer rests on.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("op", &self.op)?;
        if let Some(resource) = &self.resource {
            map.serialize_entry("resource", resource)?;
        }
        if let Some(session) = &self.session {
            map.serialize_entry("granted", &self.granted)?;
            map.serialize_entry("session", session)?;
        } else if !self.op.spec().pages {
            map.serialize_entry("granted", &self.granted)?;
            map.serialize_entry("holder", &self.holder)?;
            map.serialize_entry("fencingToken", &self.fencing_token)?;
            map.serialize_entry("expiresAt", &self.expires_at)?;
            map.serialize_entry("value", &self.value)?;
            map.serialize_entry("limit", &self.limit)?;
            map.serialize_entry("holders", &self.holders)?;
            map.serialize_entry("done", &self.done)?;
            if let Some(tag) = &self.state_tag {
                map.serialize_entry("stateTag", tag)?;
            }
        }
        if let Some(position) = &self.queue_position {
            map.serialize_entry("queuePosition", position)?;
        }
        if let Some(current) = &self.current {
            map.serialize_entry("current", current)?;
        }
        if let Some(changed) = &self.changed {
            map.serialize_entry("changed", changed)?;
        }
        if let Some(leases) = &self.leases {
            map.serialize_entry("leases", leases)?;
        }
        if let Some(revoked) = &self.revoked {
            map.serialize_entry("revoked", revoked)?;
        }
        if let Some(entries) = &self.entries {
            map.serialize_entry("entries", entries)?;
        }
        if let Some(next_cursor) = &self.next_cursor {
            map.serialize_entry("nextCursor", next_cursor)?;
        }
        map.serialize_entry("replayed", &self.replayed)?;
        map.serialize_entry("witnesses", &self.witnesses)?;
        map.serialize_entry("versions", &self.versions)?;
        map.serialize_entry("limits", &self.limits)?;
        map.serialize_entry("deterministic", &self.deterministic)?;
        map.end()
    }
}

/// An answer as sent (`{"data": .., "_provenance": ..}`) without what is there for a verifier
/// (`_provenance`) and for the record (`versions`, `limits`): what `?signed=false` sends, for a
/// person or an agent to read. The rest keeps its order.
pub fn unsigned(mut sent: serde_json::Value) -> serde_json::Value {
    if let Some(answer) = sent.as_object_mut() {
        answer.shift_remove("_provenance");
        if let Some(serde_json::Value::Object(data)) = answer.get_mut("data") {
            data.shift_remove("versions");
            data.shift_remove("limits");
        }
    }
    sent
}

/// A field that is there, even as null (`Some(None)`), told from one that is not (`None`, by
/// `default`): a recorded close's `"session": null` replays as the answer it was.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// One live permit, as answers list them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub holder: String,
    pub fencing_token: u64,
    pub expires_at: String,
    /// The session it lives in (docs/adr/0010), or null.
    #[serde(default)]
    pub session: Option<String>,
    /// Its holder's note (docs/adr/0011), or null.
    #[serde(default)]
    pub value: Option<String>,
    /// Its resource, where a list of permits spans several: a session revoke's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

impl Holder {
    /// `permit` as answers list it (its expiry as resolved: a session's permit, its session's).
    pub fn of(permit: &super::model::Permit) -> Self {
        Self {
            holder: permit.holder.clone(),
            fencing_token: permit.token,
            expires_at: iso8601(permit.expires_at),
            session: permit.session.clone(),
            value: permit.value.clone(),
            resource: None,
        }
    }
}

/// A finished mark, as answers show it (docs/adr/0012).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DoneView {
    pub holder: String,
    pub fencing_token: u64,
    pub done_at: String,
    pub result: Option<String>,
    pub until: String,
}

impl DoneView {
    pub fn of(done: &super::model::Done) -> Self {
        Self {
            holder: done.holder.clone(),
            fencing_token: done.token,
            done_at: iso8601(done.at),
            result: done.result.clone(),
            until: iso8601(done.until),
        }
    }
}

/// A live session, as answers show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub id: String,
    pub holder: String,
    pub expires_at: String,
    /// Its permits, by resource.
    pub leases: Vec<SessionLease>,
}

/// One permit of a session, as the session lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLease {
    pub resource: String,
    pub fencing_token: u64,
    pub limit: u32,
}

impl SessionView {
    /// `session` as shown at `now`: `None` once it has ended (closed, revoked, lapsed).
    pub fn of(session: &super::session::Session, now: Millis) -> Option<Self> {
        session.is_live(now).then(|| Self {
            id: session.id.clone(),
            holder: session.holder.clone(),
            expires_at: iso8601(session.expires_at),
            leases: session
                .permits
                .iter()
                .map(|(resource, p)| SessionLease {
                    resource: resource.clone(),
                    fencing_token: p.token,
                    limit: p.limit,
                })
                .collect(),
        })
    }
}

/// One resource of a set, as it stands after the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetMember {
    pub resource: String,
    pub granted: bool,
    pub holder: Option<String>,
    pub fencing_token: Option<u64>,
    pub expires_at: Option<String>,
    /// The value of the permit shown, null when it has none.
    #[serde(default)]
    pub value: Option<String>,
    pub limit: u32,
    pub holders: Vec<Holder>,
    /// Its finished mark: list shows it on every entry (null when not finished); a set's
    /// member only when it is finished, so that a set's recorded answer is not made longer
    /// (and dearer to keep) by a null per member.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub done: Option<Option<DoneView>>,
    /// list: the live places in its queue, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiters: Option<Vec<Waiter>>,
}

/// One resource as a list entry shows it.
pub fn list_entry(resource: &str, state: &LeaseState, now: Millis) -> SetMember {
    let one = LeaseAnswer::observed(state, None, now);
    SetMember {
        resource: resource.to_owned(),
        granted: one.granted,
        holder: one.holder,
        fencing_token: one.fencing_token,
        expires_at: one.expires_at,
        value: one.value,
        limit: one.limit,
        holders: one.holders,
        done: Some(one.done),
        waiters: Some(
            state
                .live_waiters(now)
                .map(|w| Waiter {
                    holder: w.holder.clone(),
                    until: iso8601(w.lapses_at()),
                })
                .collect(),
        ),
    }
}

/// A live place in a resource's queue, as list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiter {
    pub holder: String,
    /// When the place lapses unless its holder calls again.
    pub until: String,
}

/// One revoke, as the audit keeps it (90 days).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: String,
    /// When it was revoked.
    pub at: String,
    /// Who revoked: `key:<key id>`, or the paying wallet's tenant.
    pub actor: String,
    /// The resource revoked; null for a session's revoke.
    pub resource: Option<String>,
    /// The session revoked (docs/adr/0010); null for a resource's revoke.
    #[serde(default)]
    pub session: Option<String>,
    /// The permits it ended (a session's: each with its resource).
    pub ended: Vec<Holder>,
    pub reason: String,
    /// A reopen's entry (docs/adr/0012): the finished mark it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopened: Option<DoneView>,
}

/// Answers recorded before limits carry none: a lease's.
fn one() -> u32 {
    1
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
    /// The answer for `op`, showing the resource as it stands in `state` at `now`. The top-level
    /// permit is the caller's own when `caller` has one, else the live one with the largest token.
    fn new(
        op: Op,
        status: Status,
        granted: bool,
        state: &LeaseState,
        caller: Option<&str>,
        now: Millis,
        witnesses: Vec<Witness>,
    ) -> Self {
        let live = state.live_permits(now);
        let shown = caller
            .and_then(|c| live.iter().find(|p| p.holder == c))
            .or(live.last());
        Self {
            status,
            op,
            resource: None,
            granted,
            holder: shown.map(|p| p.holder.clone()),
            fencing_token: shown.map(|p| p.token),
            expires_at: shown.map(|p| iso8601(p.expires_at)),
            value: shown.and_then(|p| p.value.clone()),
            limit: state.limit,
            holders: live.iter().map(|p| Holder::of(p)).collect(),
            done: state.finished(now).map(DoneView::of),
            state_tag: Some(state.tag(now)),
            changed: None,
            queue_position: caller.and_then(|c| state.queue_position(c, now)),
            current: None,
            leases: None,
            revoked: None,
            entries: None,
            next_cursor: None,
            session: None,
            replayed: false,
            witnesses,
            versions: versions(),
            limits: limits(),
            deterministic: true,
        }
    }

    /// A granted mutation by `caller`; `after` is the state it left.
    pub fn granted(op: Op, after: &LeaseState, caller: Option<&str>, now: Millis) -> Self {
        Self::new(op, Status::Pass, true, after, caller, now, Vec::new())
    }

    /// The grant handed to a waiting call between its calls, which ended before the call came
    /// back for it (docs/adr/0008): what the call's retry is answered, replayed, as of when it
    /// was handed. Only the caller's permit is known then, so only it is shown.
    pub fn ended_handoff(op: Op, handed: &super::model::EndedHandoff) -> Self {
        let handoff = &handed.handoff;
        let permit = super::model::Permit::new(&handed.holder, handed.token, handoff.expires_at);
        let then = LeaseState {
            last_token: handed.token,
            limit: handed.limit,
            permits: vec![permit],
            ..LeaseState::default()
        };
        let mut answer = Self::granted(op, &then, Some(&handed.holder), handoff.at);
        answer.replayed = true;
        answer
    }

    /// A mutation by `caller` a rule stopped; `state` is the resource as it stands.
    pub fn denied(
        op: Op,
        state: &LeaseState,
        caller: Option<&str>,
        now: Millis,
        witnesses: Vec<Witness>,
    ) -> Self {
        Self::new(op, Status::Fail, false, state, caller, now, witnesses)
    }

    /// A get: always `pass`; `granted` says whether someone holds the resource; `caller`'s own
    /// permit is shown first when it has one.
    pub fn observed(state: &LeaseState, caller: Option<&str>, now: Millis) -> Self {
        Self::new(
            Op::Get,
            Status::Pass,
            state.live(now).is_some(),
            state,
            caller,
            now,
            Vec::new(),
        )
    }

    /// A check of `token` (of `holder`, when given): `pass` and `current` when a live permit has
    /// it, else `fail` with `TOKEN_NOT_CURRENT`.
    pub fn checked(state: &LeaseState, token: u64, holder: Option<&str>, now: Millis) -> Self {
        let current = state.is_current(token, holder, now);
        let (status, witnesses) = if current {
            (Status::Pass, Vec::new())
        } else {
            let held: Vec<_> = state
                .live_permits(now)
                .iter()
                .map(|p| serde_json::json!({"holder": p.holder, "fencingToken": p.token}))
                .collect();
            let witness = Witness::new(
                "TOKEN_NOT_CURRENT",
                "/token",
                match holder {
                    Some(_) => "no live permit of this resource has this token and holder",
                    None => "no live permit of this resource has this token",
                },
            )
            .expected("a live permit's token")
            .actual(held);
            (Status::Fail, vec![witness])
        };
        Self {
            current: Some(current),
            ..Self::new(Op::Check, status, current, state, holder, now, witnesses)
        }
    }

    /// The answer to a set: `granted` when every resource was, `members` each resource's state
    /// after the call (the caller's permit shown first), `witnesses` what blocked it. The
    /// top-level permit is null; `limit` is the largest of the set's.
    pub fn for_set(
        op: Op,
        granted: bool,
        members: &[(&str, &LeaseState)],
        caller: &str,
        now: Millis,
        witnesses: Vec<Witness>,
    ) -> Self {
        let status = if granted { Status::Pass } else { Status::Fail };
        let leases: Vec<SetMember> = members
            .iter()
            .map(|(resource, state)| {
                let one = Self::new(op, status, granted, state, Some(caller), now, Vec::new());
                SetMember {
                    resource: (*resource).to_owned(),
                    granted,
                    holder: one.holder,
                    fencing_token: one.fencing_token,
                    expires_at: one.expires_at,
                    value: one.value,
                    limit: one.limit,
                    holders: one.holders,
                    done: one.done.map(Some),
                    waiters: None,
                }
            })
            .collect();
        Self {
            holder: None,
            fencing_token: None,
            expires_at: None,
            value: None,
            state_tag: None,
            limit: leases.iter().map(|m| m.limit).max().unwrap_or(1),
            holders: Vec::new(),
            done: None,
            leases: Some(leases),
            ..Self::new(
                op,
                status,
                granted,
                &LeaseState::default(),
                None,
                now,
                witnesses,
            )
        }
    }

    /// A revoke that ended `ended`, leaving `after`.
    pub fn revoked(after: &LeaseState, ended: Vec<Holder>, now: Millis) -> Self {
        Self {
            revoked: Some(ended),
            ..Self::new(Op::Revoke, Status::Pass, true, after, None, now, Vec::new())
        }
    }

    /// A page of `list`: its entries ([`list_entry`]: each resource as it stands, its permits
    /// and live places), by name.
    pub fn listed(leases: Vec<SetMember>, next_cursor: Option<String>, now: Millis) -> Self {
        Self {
            leases: Some(leases),
            next_cursor: Some(next_cursor),
            ..Self::page(Op::List, now)
        }
    }

    /// An answer about a session (open, keepalive, close, get of a session): `session` as it
    /// stands after the call at `now` (null once ended). `granted`: the call did what it asked
    /// (a close: the session ended); a get: the session lives. `witnesses`: a rule stopped it.
    pub fn about_session(
        op: Op,
        session: Option<&super::session::Session>,
        now: Millis,
        witnesses: Vec<Witness>,
    ) -> Self {
        let shown = session.and_then(|s| SessionView::of(s, now));
        let status = match witnesses.is_empty() {
            true => Status::Pass,
            false => Status::Fail,
        };
        Self {
            granted: witnesses.is_empty() && (op.writes() || shown.is_some()),
            session: Some(shown),
            ..Self::new(
                op,
                status,
                false,
                &LeaseState::default(),
                None,
                now,
                witnesses,
            )
        }
    }

    /// A page of `audit`, newest first.
    pub fn audited(entries: Vec<AuditEntry>, next_cursor: Option<String>, now: Millis) -> Self {
        Self {
            entries: Some(entries),
            next_cursor: Some(next_cursor),
            ..Self::page(Op::Audit, now)
        }
    }

    /// A page's answer: `pass`, about no one resource (its top-level lease fields are null).
    fn page(op: Op, now: Millis) -> Self {
        Self::new(
            op,
            Status::Pass,
            false,
            &LeaseState::default(),
            None,
            now,
            Vec::new(),
        )
    }
}
