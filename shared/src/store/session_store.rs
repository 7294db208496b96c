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
    FirstAttempt, Item, StoreError, Written, get_n, get_s, guarded, n, read_item, req_n, req_s, s,
};
use crate::clock::Millis;
use crate::lease::session::{Ended, Session, SessionPermit, SessionWrite};
use crate::tenant::Tenant;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use std::collections::{BTreeMap, HashMap};

/// How long an ended session's item is kept before DynamoDB's TTL may remove it: a get of it
/// answers `session: null` whether it is there or not, so this is only for people reading the
/// table.
const KEPT_MS: Millis = 90 * 24 * 3600 * 1000;

/// The partition key of `id` in `tenant`.
pub fn session_pk(tenant: &Tenant, id: &str) -> String {
    session_pk_in(tenant.as_str(), id)
}

/// The partition key of `id` in the tenant spelled `tenant` (a lease key's first part).
pub(crate) fn session_pk_in(tenant: &str, id: &str) -> String {
    format!("{tenant}|~session|{id}")
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

impl SessionStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Store a new session. Its id is 128 random bits: an item already there is our failure.
    pub async fn open(&self, tenant: &Tenant, session: &Session) -> Result<(), StoreError> {
        let mut e = Expr::default();
        let condition = format!("attribute_not_exists({})", e.name("pk"));
        let send = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(tenant, session)))
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
        read_item(&self.client, &self.table, &session_pk(tenant, id))
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
        let mut e = Expr::default();
        let exp = e.name("exp");
        let ended = e.name("ended");
        let mut condition = format!(
            "{exp} > {} AND attribute_not_exists({ended})",
            e.value("now", n(now))
        );
        if let Some(holder) = holder {
            condition += &format!(
                " AND {} = {}",
                e.name("holder"),
                e.value("holder", s(holder))
            );
        }
        let mut update = format!(
            "SET {exp} = {}, {} = {}",
            e.value("exp", n(write.expires_at)),
            e.name("gone"),
            e.value("gone", n(gone(write.expires_at)))
        );
        if let Some(how) = write.ended {
            update += &format!(", {ended} = {}", e.value("ended", s(ended_name(how))));
        }
        let send = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(session_pk(tenant, id)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by its own first attempt finds the end it wrote.
        let mine = |old: Option<&Item>| {
            let stored = old.map(|item| from_item(id, item)).transpose()?;
            Ok(match stored {
                Some(s) if s.expires_at == write.expires_at && s.ended == write.ended => {
                    FirstAttempt::Committed
                }
                _ => FirstAttempt::NotCommitted,
            })
        };
        let session = |item: Option<&Item>| item.map(|item| from_item(id, item)).transpose();
        Ok(match guarded(send, mine).await? {
            Written::Now(out) => match session(out.attributes())? {
                Some(s) => SessionWritten::Done(s),
                None => {
                    return Err(StoreError::Corrupt(
                        "a written session came back empty".into(),
                    ));
                }
            },
            Written::Before(old) => match session(old.as_ref())? {
                Some(s) => SessionWritten::Done(s),
                None => return Err(StoreError::Corrupt("a written session is gone".into())),
            },
            Written::Refused(old) => SessionWritten::Refused(session(old.as_ref())?),
        })
    }
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

fn to_item(tenant: &Tenant, session: &Session) -> Item {
    let permits: HashMap<String, AttributeValue> = session
        .permits
        .iter()
        .map(|(resource, p)| {
            let fields =
                HashMap::from([("t".to_owned(), n(p.token)), ("l".to_owned(), n(p.limit))]);
            (resource.clone(), AttributeValue::M(fields))
        })
        .collect();
    let mut item = HashMap::from([
        ("pk".to_owned(), s(session_pk(tenant, &session.id))),
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
