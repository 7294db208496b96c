//! Sessions in the leases table (docs/adr/0010): one item each, `pk = <tenant>|~session|<id>`.
//! Resource names cannot hold `|` or `~`, so no resource's item can be a session's; another
//! tenant's session is another `pk`, and reads as unknown.
//!
//! | attribute | meaning |
//! |---|---|
//! | `holder` S, `ttl` N | the session's holder, and the ttl (ms) it was opened with |
//! | `exp` N | when it ends unless kept alive; a close or revoke sets it to then |
//! | `ended` S | `closed` or `revoked`, once a call ended it |
//! | `pm` M | its permits: resource -> `{t: token, l: limit}` |
//! | `gone` N | TTL attribute (s): clean-up 90 days after `exp`, never a decision |
//!
//! Every write but `open` is conditioned on the session living (`exp > now`, no `ended`), and a
//! holder's on its holder: so a session once ended stays ended, whoever writes.

use super::expr::Expr;
use super::{
    FirstAttempt, Item, StoreError, Written, conditional_update, get_n, get_s, guarded, n,
    read_item, req_n, req_s, s,
};
use crate::clock::Millis;
use crate::lease::session::{Ended, MAX_SESSION_PERMITS, Session, SessionPermit, SessionWrite};
use crate::tenant::Tenant;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use std::collections::{BTreeMap, HashMap};

/// How long an ended session's item is kept before DynamoDB's TTL may remove it: a get of it
/// answers `session: null` whether it is there or not, so this is only for people reading the
/// table.
const KEPT_MS: Millis = 90 * 24 * 3600 * 1000;

/// The longest a session is kept alive for by one call (ttlSeconds' bound).
const MAX_TTL_MS: Millis = 3600 * 1000;

/// The partition key of `id` in `tenant`.
pub fn session_pk(tenant: &Tenant, id: &str) -> String {
    session_pk_in(tenant.as_str(), id)
}

/// The partition key of `id` in the tenant spelled `tenant` (a lease key's first part).
pub(crate) fn session_pk_in(tenant: &str, id: &str) -> String {
    format!("{tenant}|~session|{id}")
}

/// A session's item: its partition key, and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pk: String,
    id: String,
}

impl SessionKey {
    pub fn new(tenant: &Tenant, id: &str) -> Self {
        Self {
            pk: session_pk(tenant, id),
            id: id.to_owned(),
        }
    }

    /// The session `id` of the tenant spelled `tenant` (a lease key's first part).
    pub(crate) fn in_tenant(tenant: &str, id: &str) -> Self {
        Self {
            pk: session_pk_in(tenant, id),
            id: id.to_owned(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn pk(&self) -> &str {
        &self.pk
    }
}

/// What a commit changes in one session (docs/adr/0010).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChange {
    /// open: the new session, stored if its id is free.
    Open(Session),
    /// keepalive, close, revoke: its new end, if it still lives (and is `holder`'s, when given).
    End {
        holder: Option<String>,
        write: SessionWrite,
    },
    /// Permits join it (if it still lives and has room) and leave it, by resource.
    Permits {
        joins: Vec<Joined>,
        /// Resources whose live permit in it ended (released, revoked, or left it for a permit
        /// of its own). Conditioned only on the item being there when nothing joins: an ended
        /// session's list may shrink.
        leaves: Vec<String>,
    },
}

/// A permit that joins a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub resource: String,
    pub permit: SessionPermit,
    /// The session listed the resource already when read (a holder's acquire of a permit it
    /// has): it takes no more room.
    pub listed: bool,
}

#[derive(Clone)]
pub struct SessionStore {
    client: Client,
    table: String,
}

/// What a conditional write of a session came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionWritten {
    /// Written: the session as it stands now.
    Done(Session),
    /// Its condition did not hold: the session as it stood (`None`: there is none).
    Refused(Option<Session>),
}

/// What a keepalive came to, and whether it may have moved the session's end earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAlive {
    pub written: SessionWritten,
    /// Written, to an end before the one it had (a keepalive with a shorter ttl than the last):
    /// the session's permits and places then lapse before the time their waiters sleep until,
    /// so they must be told. Also when the store did not say the end it had (a retry found
    /// its own first attempt's write).
    pub earlier: bool,
}

impl SessionStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Store a new session. Its id is 128 random bits: an item already there is our failure.
    pub async fn open(&self, tenant: &Tenant, session: &Session) -> Result<(), StoreError> {
        self.open_at(&SessionKey::new(tenant, &session.id), session)
            .await
    }

    /// [`Self::open`] of the session whose item is `key`.
    pub async fn open_at(&self, key: &SessionKey, session: &Session) -> Result<(), StoreError> {
        let (condition, e) = open_condition();
        let send = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(key, session)))
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by its own first attempt finds the same session: the holder and the
        // end it wrote.
        let same = |old: Option<&Item>| {
            let mine = old
                .map(|item| from_item(&session.id, item))
                .transpose()?
                .is_some_and(|stored| stored == *session);
            Ok(match mine {
                true => FirstAttempt::Committed,
                false => FirstAttempt::NotCommitted,
            })
        };
        match guarded(send, same).await? {
            Written::Now(_) | Written::Before(_) => Ok(()),
            Written::Refused(_) => Err(StoreError::Internal(
                "a new session's random id was taken".into(),
            )),
        }
    }

    /// The session `id` of `tenant`, read consistently; `None` when there is none.
    pub async fn get(&self, tenant: &Tenant, id: &str) -> Result<Option<Session>, StoreError> {
        let key = SessionKey::new(tenant, id);
        read_item(&self.client, &self.table, key.pk())
            .await?
            .map(|item| from_item(id, &item))
            .transpose()
    }

    /// Write `write` (a keepalive, close or revoke decided at `now`) to the session `id`, if it
    /// still lives and, when `holder` is given, is still that holder's.
    pub async fn write(
        &self,
        tenant: &Tenant,
        id: &str,
        holder: Option<&str>,
        write: &SessionWrite,
        now: Millis,
    ) -> Result<SessionWritten, StoreError> {
        self.write_at(&SessionKey::new(tenant, id), holder, write, now)
            .await
    }

    /// [`Self::write`] to the session whose item is `key`.
    pub async fn write_at(
        &self,
        key: &SessionKey,
        holder: Option<&str>,
        write: &SessionWrite,
        now: Millis,
    ) -> Result<SessionWritten, StoreError> {
        let expressions = end_expressions(holder, write, now);
        let (written, _) = self
            .conditional(key, expressions, None, |s| {
                s.expires_at == write.expires_at && s.ended == write.ended
            })
            .await?;
        Ok(written)
    }

    /// `holder`'s keepalive of the session of `key` for `ttl_ms` from `now` (`None`: the ttl it
    /// was opened with, which the store reads itself), if it lives and is `holder`'s: one
    /// conditional write, no read first (docs/adr/0010).
    pub async fn keep_alive(
        &self,
        key: &SessionKey,
        holder: &str,
        ttl_ms: Option<Millis>,
        now: Millis,
    ) -> Result<KeptAlive, StoreError> {
        let mut e = Expr::default();
        let condition = format!(
            "{} AND {} = {}",
            lives(&mut e, now),
            e.name("holder"),
            e.value("holder", s(holder))
        );
        let end = match ttl_ms {
            Some(ttl) => e.value("exp", n(now + ttl)),
            None => format!("{} + {}", e.value("now", n(now)), e.name("ttl")),
        };
        // Clean-up only: the longest a keepalive can keep it.
        let gone_at = gone(now + ttl_ms.unwrap_or(MAX_TTL_MS));
        let update = format!(
            "SET {} = {end}, {} = {}",
            e.name("exp"),
            e.name("gone"),
            e.value("gone", n(gone_at))
        );
        // The session as it stood comes back, not as written: the write is its new end, so the
        // one tells both, and whether the end moved earlier.
        let kept = |old: &Session| Session {
            expires_at: old.kept_until(ttl_ms, now),
            ..old.clone()
        };
        let (written, before) = self
            .conditional(key, (update, condition, e), Some(&kept), |s| {
                s.ended.is_none() && s.expires_at == s.kept_until(ttl_ms, now)
            })
            .await?;
        let earlier = match (&written, before) {
            (SessionWritten::Done(after), Some(before)) => after.expires_at < before.expires_at,
            (SessionWritten::Done(_), None) => true,
            (SessionWritten::Refused(_), _) => false,
        };
        Ok(KeptAlive { written, earlier })
    }

    /// One conditional `UpdateItem` of the session of `key`; `wrote` tells, of the item a
    /// retry's refusal found, whether it is this very write's (the SDK retried a lost answer).
    /// With `from_old`, the store gives back the item as it stood, which `from_old` makes the
    /// one written, and the session as it stood comes back too (not after a lost answer).
    async fn conditional(
        &self,
        key: &SessionKey,
        (update, condition, e): (String, String, Expr),
        from_old: Option<&(dyn Fn(&Session) -> Session + Sync)>,
        wrote: impl Fn(&Session) -> bool,
    ) -> Result<(SessionWritten, Option<Session>), StoreError> {
        let id = key.id();
        let mut send =
            conditional_update(&self.client, &self.table, key.pk(), (update, condition, e));
        if from_old.is_some() {
            send = send.return_values(ReturnValue::AllOld);
        }
        let send = send.send();
        let mine = |old: Option<&Item>| {
            let stored = old.map(|item| from_item(id, item)).transpose()?;
            Ok(match stored {
                Some(s) if wrote(&s) => FirstAttempt::Committed,
                _ => FirstAttempt::NotCommitted,
            })
        };
        let session = |item: Option<&Item>| item.map(|item| from_item(id, item)).transpose();
        Ok(match guarded(send, mine).await? {
            Written::Now(out) => match (session(out.attributes())?, from_old) {
                (Some(old), Some(written)) => (SessionWritten::Done(written(&old)), Some(old)),
                (Some(s), None) => (SessionWritten::Done(s), None),
                (None, _) => {
                    return Err(StoreError::Corrupt(
                        "a written session came back empty".into(),
                    ));
                }
            },
            Written::Before(old) => match session(old.as_ref())? {
                Some(s) => (SessionWritten::Done(s), None),
                None => return Err(StoreError::Corrupt("a written session is gone".into())),
            },
            Written::Refused(old) => (SessionWritten::Refused(session(old.as_ref())?), None),
        })
    }
}

/// `change` to the session of `key`, decided at `now`, as one item of a transaction in `table`.
pub(super) fn change_item(
    table: &str,
    key: &SessionKey,
    change: &SessionChange,
    now: Millis,
) -> Result<TransactWriteItem, StoreError> {
    let (update, condition, e) = match change {
        SessionChange::Open(session) => {
            let (condition, e) = open_condition();
            let put = Put::builder()
                .table_name(table)
                .set_item(Some(to_item(key, session)))
                .condition_expression(condition)
                .set_expression_attribute_names(e.names())
                .build()
                .map_err(StoreError::built)?;
            return Ok(TransactWriteItem::builder().put(put).build());
        }
        SessionChange::End { holder, write } => end_expressions(holder.as_deref(), write, now),
        SessionChange::Permits { joins, leaves } => permits_expressions(joins, leaves, now),
    };
    let update = Update::builder()
        .table_name(table)
        .key("pk", s(key.pk()))
        .update_expression(update)
        .condition_expression(condition)
        .set_expression_attribute_names(e.names())
        .set_expression_attribute_values(e.values())
        .build()
        .map_err(StoreError::built)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Joins' and leaves' update and condition: the joins only if the session still lives and has
/// room for the permits it did not list (and still lists those it did).
fn permits_expressions(joins: &[Joined], leaves: &[String], now: Millis) -> (String, String, Expr) {
    let mut e = Expr::default();
    let pm = e.name("pm");
    let mut condition = format!("attribute_exists({})", e.name("pk"));
    let mut sets = Vec::new();
    let mut listed = Vec::new();
    for (i, joined) in joins.iter().enumerate() {
        let r = e.name_of(&format!("j{i}"), &joined.resource);
        let value = e.value(&format!("j{i}"), permit_value(&joined.permit));
        sets.push(format!("{pm}.{r} = {value}"));
        if joined.listed {
            listed.push(format!(" AND attribute_exists({pm}.{r})"));
        }
    }
    if !joins.is_empty() {
        let new = joins.iter().filter(|j| !j.listed).count();
        let most = MAX_SESSION_PERMITS.saturating_sub(new);
        condition = format!(
            "{} AND size({pm}) <= {}{}",
            lives(&mut e, now),
            e.value("most", n(most)),
            listed.concat()
        );
    }
    let removes: Vec<String> = leaves
        .iter()
        .enumerate()
        .filter(|(_, resource)| !joins.iter().any(|j| &j.resource == *resource))
        .map(|(i, resource)| format!("{pm}.{}", e.name_of(&format!("l{i}"), resource)))
        .collect();
    let mut update = String::new();
    if !sets.is_empty() {
        update += &format!("SET {}", sets.join(", "));
    }
    if !removes.is_empty() {
        update += &format!(" REMOVE {}", removes.join(", "));
    }
    (update.trim_start().to_owned(), condition, e)
}

/// A new session's condition: its id is free.
fn open_condition() -> (String, Expr) {
    let mut e = Expr::default();
    let condition = format!("attribute_not_exists({})", e.name("pk"));
    (condition, e)
}

/// The condition that the session lives at `now`: there, not past its end, not ended by a call.
fn lives(e: &mut Expr, now: Millis) -> String {
    let (pk, exp, ended) = (e.name("pk"), e.name("exp"), e.name("ended"));
    format!(
        "attribute_exists({pk}) AND {exp} > {} AND attribute_not_exists({ended})",
        e.value("now", n(now))
    )
}

/// A keepalive's, close's or revoke's update and condition.
fn end_expressions(
    holder: Option<&str>,
    write: &SessionWrite,
    now: Millis,
) -> (String, String, Expr) {
    let mut e = Expr::default();
    let mut condition = lives(&mut e, now);
    if let Some(holder) = holder {
        condition += &format!(
            " AND {} = {}",
            e.name("holder"),
            e.value("holder", s(holder))
        );
    }
    let (exp, ended) = (e.name("exp"), e.name("ended"));
    let mut update = format!(
        "SET {exp} = {}, {} = {}",
        e.value("exp", n(write.expires_at)),
        e.name("gone"),
        e.value("gone", n(gone(write.expires_at)))
    );
    if let Some(how) = write.ended {
        update += &format!(", {ended} = {}", e.value("ended", s(ended_name(how))));
    }
    (update, condition, e)
}

fn permit_value(p: &SessionPermit) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("t".to_owned(), n(p.token)),
        ("l".to_owned(), n(p.limit)),
    ]))
}

/// The TTL attribute (s) of a session that ends at `expires_at`.
fn gone(expires_at: Millis) -> Millis {
    (expires_at + KEPT_MS) / 1000
}

fn ended_name(ended: Ended) -> &'static str {
    match ended {
        Ended::Closed => "closed",
        Ended::Revoked => "revoked",
    }
}

fn to_item(key: &SessionKey, session: &Session) -> Item {
    let permits: HashMap<String, AttributeValue> = session
        .permits
        .iter()
        .map(|(resource, p)| (resource.clone(), permit_value(p)))
        .collect();
    let mut item = HashMap::from([
        ("pk".to_owned(), s(key.pk())),
        ("holder".to_owned(), s(&session.holder)),
        ("ttl".to_owned(), n(session.ttl_ms)),
        ("exp".to_owned(), n(session.expires_at)),
        ("pm".to_owned(), AttributeValue::M(permits)),
        ("gone".to_owned(), n(gone(session.expires_at))),
    ]);
    if let Some(how) = session.ended {
        item.insert("ended".to_owned(), s(ended_name(how)));
    }
    item
}

pub(crate) fn from_item(id: &str, item: &Item) -> Result<Session, StoreError> {
    let ended = match get_s(item, "ended")? {
        None => None,
        Some("closed") => Some(Ended::Closed),
        Some("revoked") => Some(Ended::Revoked),
        Some(other) => return Err(StoreError::Corrupt(format!("session ended as {other:?}"))),
    };
    let mut permits = BTreeMap::new();
    if let Some(AttributeValue::M(map)) = item.get("pm") {
        for (resource, value) in map {
            let AttributeValue::M(fields) = value else {
                return Err(StoreError::Corrupt(format!("session permit {resource:?}")));
            };
            let token = req_n(fields, "t")?;
            let limit = get_n(fields, "l")?.unwrap_or(1);
            permits.insert(resource.clone(), SessionPermit { token, limit });
        }
    }
    Ok(Session {
        id: id.to_owned(),
        holder: req_s(item, "holder")?.to_owned(),
        ttl_ms: req_n(item, "ttl")?,
        expires_at: req_n(item, "exp")?,
        ended,
        permits,
    })
}
