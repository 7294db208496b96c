//! The payment ledger: one item per payment authorization, `pk = auth|<network>|<payer>|<nonce>`.
//! Its conditional creation is what consumes an authorization at most once, across instances and
//! retries. Ledger items are never deleted.
//!
//! An item's life is [`crate::payment::lifecycle`]'s (the rules are there; this module only keeps
//! the states): `accepted`, then exactly one final status. Only the first final write wins (each
//! is conditional on `accepted`), so the live path and the sweeper never both record an outcome. While `accepted`, the item carries `pending`, the key of a sparse
//! index (`pending`, ordered by `accepted`), which is how the sweeper finds what a crash, a timeout
//! or a lost connection left open without scanning the whole ledger.
//!
//! An accepted item also says where the answer it paid for would be if it committed (its
//! [`Evidence`]), so a sweeper can tell a committed call (settle it) from one that never got that
//! far (void it) without trusting anything but the store.

use super::expr::Expr;
use super::{
    Cancelled, FirstAttempt, Item, StoreError, Tables, Written, call_id, get_n, get_s, guarded, n,
    req_n, req_s, s, transaction,
};
use crate::clock::Millis;
use crate::payment::Status;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};

#[derive(Clone)]
pub struct PaymentLedger {
    client: Client,
    table: String,
    requests: String,
    claims: String,
}

/// The ledger key of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationKey(String);

impl AuthorizationKey {
    pub fn new(network: &str, payer: &str, nonce: &[u8; 32]) -> Self {
        Self(format!(
            "auth|{network}|{}|0x{}",
            payer.to_lowercase(),
            hex::encode(nonce)
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What an answer this authorization paid for is marked with (`paidBy`): the first 16 bytes
    /// of the key's SHA-256, hex. A quarter of the key's length, so that a paid request record
    /// stays within one write unit wherever it did before.
    pub fn mark(&self) -> String {
        let digest = <sha2::Sha256 as sha2::Digest>::digest(self.0.as_bytes());
        hex::encode(&digest[..16])
    }
}

/// Where the committed answer of a paid call is, if it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Nothing durable is written (a lease `get`): if the call's outcome is unknown, it is void,
    /// unless it kept its answer under a payment identifier ([`PaymentLedger::answer_kept`]).
    None,
    /// A lease mutation's request record (`pk` in the requests table); it is this call's record
    /// when its replay window ends at `exp`, which is fixed by the call's own time.
    Record { pk: String, exp: Millis },
    /// A claim won by `holder` at the call's time `acquired` (`pk` in the claims table). A claim
    /// that found the key held writes nothing, so an unknown outcome there is void.
    Claim {
        pk: String,
        holder: String,
        acquired: Millis,
    },
}

/// What the ledger keeps about an accepted authorization.
pub struct Accepted<'a> {
    pub route: &'a str,
    pub amount: &'a str,
    pub pay_to: &'a str,
    pub now: Millis,
    /// The authorization stops being valid at this Unix time (s): settle before it.
    pub valid_before: u64,
    /// JSON of what the facilitator's /settle takes (payload and requirements), so that a
    /// sweeper can settle without the request.
    pub payment: &'a str,
    pub evidence: &'a Evidence,
}

/// A payment identifier (the x402 `payment-identifier` extension) in the ledger:
/// `payid|<network>|<payer>|<id>`, an item of its own, so that an id is taken by one payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifierKey(String);

impl IdentifierKey {
    pub fn new(network: &str, payer: &str, id: &str) -> Self {
        Self(format!("payid|{network}|{}|{id}", payer.to_lowercase()))
    }
}

/// A payment identifier and what it was first used for: a hash of the route, the request and
/// the whole payment payload. A retry must match it exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identified {
    pub key: IdentifierKey,
    pub fingerprint: String,
}

/// What consuming an authorization came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consumed {
    /// Consumed now, by this call.
    Yes,
    /// The authorization was consumed before, and not under this payment identifier.
    UsedBefore,
    /// This very payment, with this identifier, for this same request, was accepted before.
    Again(FirstUse),
    /// The identifier was taken by another payment or another request.
    IdentifierTaken,
    /// Another call is consuming the same authorization or identifier at this moment.
    Busy,
}

/// The ledger's state of the first use of a payment identifier's authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstUse {
    pub status: Status,
    pub transaction: Option<String>,
    /// When it was accepted (ms).
    pub accepted: Millis,
    /// The answer it was given, where the route keeps one ([`PaymentLedger::keep_answer`]):
    /// the HTTP status and the JSON body.
    pub answer: Option<(u16, String)>,
}

/// Who holds a payment identifier (see [`PaymentLedger::first_use`]).
enum IdentifiedUse {
    Free,
    Other,
    Same(FirstUse),
}

/// The ledger item of a newly accepted authorization, consumed by the call `call` (see
/// [`call_id`]: a retry of the consume knows its own item by it).
fn accepted_item(key: &AuthorizationKey, accepted: &Accepted<'_>, call: &str) -> Item {
    let mut item = Item::from([
        ("pk".to_owned(), s(&key.0)),
        ("call".to_owned(), s(call)),
        ("status".to_owned(), s(Status::Accepted.as_str())),
        ("pending".to_owned(), s(PENDING)),
        ("route".to_owned(), s(accepted.route)),
        ("amount".to_owned(), s(accepted.amount)),
        ("payTo".to_owned(), s(accepted.pay_to)),
        ("accepted".to_owned(), n(accepted.now)),
        ("validBefore".to_owned(), n(accepted.valid_before)),
        ("payment".to_owned(), s(accepted.payment)),
    ]);
    let mut put = |name: &str, value| {
        item.insert(name.to_owned(), value);
    };
    match accepted.evidence {
        Evidence::None => {}
        Evidence::Record { pk, exp } => {
            put("evidence", s("record"));
            put("evidencePk", s(pk));
            put("evidenceAt", n(*exp));
        }
        Evidence::Claim {
            pk,
            holder,
            acquired,
        } => {
            put("evidence", s("claim"));
            put("evidencePk", s(pk));
            put("evidenceHolder", s(holder));
            put("evidenceAt", n(*acquired));
        }
    }
    item
}

/// An outcome that closes a ledger item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Final<'a> {
    Settled {
        transaction: &'a str,
    },
    Failed {
        transaction: &'a str,
        reason: &'a str,
    },
    Void {
        reason: &'a str,
    },
    Expired,
}

impl Final<'_> {
    pub fn status(&self) -> Status {
        match self {
            Final::Settled { .. } => Status::Settled,
            Final::Failed { .. } => Status::SettlementFailed,
            Final::Void { .. } => Status::Void,
            Final::Expired => Status::Expired,
        }
    }
}

/// An accepted item, as the sweeper reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub key: AuthorizationKey,
    pub accepted: Millis,
    pub valid_before: u64,
    pub payment: String,
    pub evidence: Evidence,
    /// Its call answered (its work was done) but could not learn its settlement's outcome:
    /// settle it, whatever the evidence says (a read, or a claim that found the key held,
    /// leaves none).
    pub answered: bool,
    /// The payment identifier it came under, whose item keeps the answer its call gave (see
    /// [`PaymentLedger::answer_kept`]).
    pub identifier: Option<IdentifierKey>,
}

/// The sparse index over accepted items, and the value of its key attribute.
pub const PENDING_INDEX: &str = "pending";
const PENDING: &str = "accepted";

/// A stored status; anything else is corrupt data, never a default.
fn status_of(item: &Item) -> Result<Status, StoreError> {
    let stored = req_s(item, "status")?;
    Status::parse(stored).ok_or_else(|| StoreError::Corrupt(format!("payment status {stored}")))
}

impl PaymentLedger {
    /// The ledger in `tables.payments`; the requests and claims tables are where its evidence is.
    pub fn new(client: Client, tables: &Tables) -> Self {
        Self {
            client,
            table: tables.payments.clone(),
            requests: tables.requests.clone(),
            claims: tables.claims.clone(),
        }
    }

    /// Record the authorization as used, and with it the payment identifier if the payment
    /// carries one (both or neither: one transaction). What came of it: see [`Consumed`].
    pub async fn consume(
        &self,
        key: &AuthorizationKey,
        accepted: &Accepted<'_>,
        identified: Option<&Identified>,
    ) -> Result<Consumed, StoreError> {
        let call = call_id()?;
        let mut item = accepted_item(key, accepted, &call);
        if let Some(identified) = identified {
            // Where the answer a resend gets is kept: evidence for the sweeper too.
            item.insert("identifier".to_owned(), s(&identified.key.0));
        }
        let Some(identified) = identified else {
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send();
            // A retry refused by the item its own first attempt put is this call's consume (it
            // used to refuse the payer's first use as "used before").
            return Ok(
                match guarded(put, |old| Ok(written_by(old, &call))).await? {
                    Written::Now(_) | Written::Before(_) => Consumed::Yes,
                    Written::Refused(_) => Consumed::UsedBefore,
                },
            );
        };
        let put = |item: Item| {
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map(|put| TransactWriteItem::builder().put(put).build())
                .map_err(StoreError::built)
        };
        let named = Item::from([
            ("pk".to_owned(), s(&identified.key.0)),
            ("authorization".to_owned(), s(&key.0)),
            ("fp".to_owned(), s(&identified.fingerprint)),
            ("accepted".to_owned(), n(accepted.now)),
        ]);
        let result = self
            .client
            .transact_write_items()
            .transact_items(put(item)?)
            .transact_items(put(named)?)
            .send()
            .await;
        let reasons = match transaction(result)? {
            Ok(_) => return Ok(Consumed::Yes),
            Err(reasons) => reasons,
        };
        // A retried transaction refused by what its own first attempt wrote (DynamoDB answers a
        // retry with the same client token as a success; an emulator may not).
        if let Some(Cancelled::Condition(Some(old))) = reasons.first()
            && written_by(Some(old), &call) == FirstAttempt::Committed
        {
            return Ok(Consumed::Yes);
        }
        if reasons.iter().any(|r| matches!(r, Cancelled::Conflict)) {
            return Ok(Consumed::Busy);
        }
        if !matches!(reasons.get(1), Some(Cancelled::Condition(_))) {
            // Only the authorization was taken: used before, with another identifier or none.
            return Ok(Consumed::UsedBefore);
        }
        Ok(match self.identified_use(key, identified).await? {
            IdentifiedUse::Same(first) => Consumed::Again(first),
            IdentifiedUse::Other => Consumed::IdentifierTaken,
            // Not there yet: being consumed by another call right now.
            IdentifiedUse::Free => Consumed::Busy,
        })
    }

    /// The first use of `key` under `identified`, if the identifier was taken by this very
    /// payment for this very request; `None` if it is free or bound to another.
    pub async fn first_use(
        &self,
        key: &AuthorizationKey,
        identified: &Identified,
    ) -> Result<Option<FirstUse>, StoreError> {
        Ok(match self.identified_use(key, identified).await? {
            IdentifiedUse::Same(first) => Some(first),
            IdentifiedUse::Other | IdentifiedUse::Free => None,
        })
    }

    /// Who holds the identifier: nobody, another payment or request, or this very one (and how
    /// its first use stands).
    async fn identified_use(
        &self,
        key: &AuthorizationKey,
        identified: &Identified,
    ) -> Result<IdentifiedUse, StoreError> {
        let Some(first) = self.get(&identified.key.0).await? else {
            return Ok(IdentifiedUse::Free);
        };
        if req_s(&first, "fp")? != identified.fingerprint
            || req_s(&first, "authorization")? != key.0
        {
            return Ok(IdentifiedUse::Other);
        }
        let Some(paid) = self.get(&key.0).await? else {
            return Err(StoreError::Corrupt(
                "a payment identifier names an authorization the ledger lacks".into(),
            ));
        };
        let answer = match (
            get_n::<u16>(&first, "answerStatus")?,
            get_s(&first, "answer")?,
        ) {
            (Some(status), Some(body)) => Some((status, body.to_owned())),
            _ => None,
        };
        Ok(IdentifiedUse::Same(FirstUse {
            status: status_of(&paid)?,
            transaction: get_s(&paid, "transaction")?
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            accepted: req_n(&paid, "accepted")?,
            answer,
        }))
    }

    /// Keep on the payment identifier's item the answer its call gave (`status`, JSON `body`),
    /// for a route whose answer cannot be had again from what the call wrote (a claim that found
    /// the key held writes nothing). Written after settlement; a resend finds it there.
    pub async fn keep_answer(
        &self,
        key: &IdentifierKey,
        status: u16,
        body: &str,
    ) -> Result<(), StoreError> {
        let mut e = Expr::default();
        let update = format!(
            "SET {a} = {body}, {st} = {status}",
            a = e.name("answer"),
            body = e.value("body", s(body)),
            st = e.name("answerStatus"),
            status = e.value("status", n(status)),
        );
        // The same SET again is harmless: a retry is refused only where the item is missing.
        let missing = |_: Option<&Item>| Ok(FirstAttempt::NotCommitted);
        if self
            .update_if(&key.0, update, "attribute_exists(pk)".into(), e, missing)
            .await?
        {
            Ok(())
        } else {
            Err(StoreError::Corrupt(
                "an answer kept for a payment identifier the ledger lacks".into(),
            ))
        }
    }

    /// One conditional UpdateItem of the ledger item `pk`: `false` if `condition` did not hold
    /// (and, for a retried write, `first` did not find its own first attempt: see [`guarded`]).
    async fn update_if(
        &self,
        pk: &str,
        update: String,
        condition: String,
        e: Expr,
        first: impl FnOnce(Option<&Item>) -> Result<FirstAttempt, StoreError>,
    ) -> Result<bool, StoreError> {
        let send = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        Ok(!matches!(guarded(send, first).await?, Written::Refused(_)))
    }

    /// A ledger item, read consistently.
    async fn get(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::sdk)?;
        Ok(out.item)
    }

    /// Note on a still open item that its call answered (see [`Pending::answered`]).
    pub async fn mark_answered(&self, key: &AuthorizationKey) -> Result<(), StoreError> {
        let mut e = Expr::default();
        let status = e.name("status");
        let update = format!("SET {} = {}", e.name("answered"), e.value("one", n(1)));
        let condition = format!("{status} = {}", e.value("a", s(Status::Accepted.as_str())));
        // Refused: closed meanwhile (by the sweeper), nothing left to note; whether a retry's
        // first attempt noted it first makes no difference.
        let either = |_: Option<&Item>| Ok(FirstAttempt::NotCommitted);
        self.update_if(&key.0, update, condition, e, either)
            .await
            .map(|_| ())
    }

    /// Close the item with `outcome`, unless it was closed already (`false` then: someone else
    /// recorded an outcome first, and theirs stands).
    pub async fn finish(
        &self,
        key: &AuthorizationKey,
        outcome: &Final<'_>,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let (transaction, reason) = match outcome {
            Final::Settled { transaction } => (*transaction, ""),
            Final::Failed {
                transaction,
                reason,
            } => (*transaction, *reason),
            Final::Void { reason } => ("", *reason),
            Final::Expired => ("", "the authorization expired before it was settled"),
        };
        let mut e = Expr::default();
        let status = e.name("status");
        let update = format!(
            "SET {status} = {s}, {tx} = {t}, {at} = {now}, {reason} = {r} REMOVE {pending}",
            s = e.value("s", s(outcome.status().as_str())),
            tx = e.name("transaction"),
            t = e.value("t", s(transaction)),
            at = e.name("settledAt"),
            now = e.value("now", n(now)),
            reason = e.name("errorReason"),
            r = e.value("r", s(reason)),
            pending = e.name("pending"),
        );
        let condition = format!(
            "{status} = {a}",
            a = e.value("a", s(Status::Accepted.as_str()))
        );
        // A retry refused by its own first attempt's outcome: this very status, transaction and
        // time. It used to log "another settler won" about itself.
        let ours = |old: Option<&Item>| {
            let Some(old) = old else {
                return Ok(FirstAttempt::NotCommitted);
            };
            let same = status_of(old)? == outcome.status()
                && get_s(old, "transaction")? == Some(transaction)
                && get_n::<Millis>(old, "settledAt")? == Some(now);
            Ok(match same {
                true => FirstAttempt::Committed,
                false => FirstAttempt::NotCommitted,
            })
        };
        self.update_if(&key.0, update, condition, e, ours).await
    }

    /// Up to `limit` accepted items accepted at or before `cutoff`, oldest first. The index is
    /// eventually consistent: an item may still show after it was closed, and [`Self::finish`]'s
    /// condition makes that harmless.
    pub async fn pending(&self, cutoff: Millis, limit: i32) -> Result<Vec<Pending>, StoreError> {
        let mut e = Expr::default();
        let condition = format!(
            "{p} = {v} AND {a} <= {cutoff}",
            p = e.name("pending"),
            v = e.value("v", s(PENDING)),
            a = e.name("accepted"),
            cutoff = e.value("cutoff", n(cutoff)),
        );
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(PENDING_INDEX)
            .key_condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .limit(limit)
            .send()
            .await
            .map_err(StoreError::sdk)?;
        out.items().iter().map(pending_from_item).collect()
    }

    /// Whether the answer that `evidence` points to was committed by the call that `paid_by`
    /// paid for. The item names the authorization that paid for it (`paidBy`), so a replay made
    /// in the same millisecond under another payment, whose evidence is otherwise the same, is not
    /// taken for the call that committed. Items written before `paidBy` was kept are judged by
    /// the rest alone.
    pub async fn committed(
        &self,
        evidence: &Evidence,
        paid_by: &AuthorizationKey,
    ) -> Result<bool, StoreError> {
        let (table, pk) = match evidence {
            Evidence::None => return Ok(false),
            Evidence::Record { pk, .. } => (&self.requests, pk),
            Evidence::Claim { pk, .. } => (&self.claims, pk),
        };
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .map_err(StoreError::sdk)?;
        let Some(item) = out.item() else {
            return Ok(false);
        };
        if get_s(item, "paidBy")?.is_some_and(|by| by != paid_by.mark()) {
            return Ok(false);
        }
        Ok(match evidence {
            Evidence::None => false,
            Evidence::Record { exp, .. } => get_n::<Millis>(item, "exp")? == Some(*exp),
            Evidence::Claim {
                holder, acquired, ..
            } => {
                get_n::<Millis>(item, "acquired")? == Some(*acquired)
                    && get_s(item, "holder")? == Some(holder.as_str())
            }
        })
    }

    /// Whether the call paid by `key` under `identifier` kept its answer there: it answered (a
    /// read, or a claim that found the key held, leaves no other trace), so what it sold is owed.
    /// An answer is kept before settlement, so a call that died while settling is found here.
    pub async fn answer_kept(
        &self,
        key: &AuthorizationKey,
        identifier: Option<&IdentifierKey>,
    ) -> Result<bool, StoreError> {
        let Some(identifier) = identifier else {
            return Ok(false);
        };
        let Some(item) = self.get(&identifier.0).await? else {
            return Ok(false);
        };
        Ok(get_s(&item, "authorization")? == Some(key.as_str())
            && get_s(&item, "answer")?.is_some())
    }

    /// Every payment authorization in the ledger, for operators' reconciliation (`leasekit
    /// payments`): a full scan, not for a request path.
    pub async fn all(&self) -> Result<Vec<LedgerRow>, StoreError> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(StoreError::sdk)?;
            for item in out.items() {
                if req_s(item, "pk")?.starts_with("auth|") {
                    rows.push(row_from_item(item)?);
                }
            }
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(rows),
            }
        }
    }
}

/// One ledger item as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerRow {
    pub authorization: String,
    pub status: Status,
    pub route: String,
    pub amount: String,
    pub accepted: Millis,
    pub transaction: Option<String>,
    pub error_reason: Option<String>,
}

fn row_from_item(item: &Item) -> Result<LedgerRow, StoreError> {
    let text = |name: &str| -> Result<Option<String>, StoreError> {
        Ok(get_s(item, name)?
            .filter(|v| !v.is_empty())
            .map(str::to_owned))
    };
    Ok(LedgerRow {
        authorization: req_s(item, "pk")?.to_owned(),
        status: status_of(item)?,
        route: req_s(item, "route")?.to_owned(),
        amount: req_s(item, "amount")?.to_owned(),
        accepted: req_n(item, "accepted")?,
        transaction: text("transaction")?,
        error_reason: text("errorReason")?,
    })
}

fn pending_from_item(item: &Item) -> Result<Pending, StoreError> {
    let evidence = match get_s(item, "evidence")? {
        None => Evidence::None,
        Some("record") => Evidence::Record {
            pk: req_s(item, "evidencePk")?.to_owned(),
            exp: req_n(item, "evidenceAt")?,
        },
        Some("claim") => Evidence::Claim {
            pk: req_s(item, "evidencePk")?.to_owned(),
            holder: req_s(item, "evidenceHolder")?.to_owned(),
            acquired: req_n(item, "evidenceAt")?,
        },
        Some(other) => return Err(StoreError::Corrupt(format!("evidence {other}"))),
    };
    Ok(Pending {
        key: AuthorizationKey(req_s(item, "pk")?.to_owned()),
        accepted: req_n(item, "accepted")?,
        valid_before: req_n(item, "validBefore")?,
        payment: req_s(item, "payment")?.to_owned(),
        evidence,
        answered: get_n::<u8>(item, "answered")? == Some(1),
        identifier: get_s(item, "identifier")?.map(|pk| IdentifierKey(pk.to_owned())),
    })
}

impl PaymentLedger {
    /// Record a sign-in-with-x nonce of `address` as used. `false` if it was used before.
    pub async fn consume_siwx(
        &self,
        address: &str,
        nonce: &str,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let call = call_id()?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(format!("siwx|{}|{nonce}", address.to_lowercase())))
            .item("accepted", n(now))
            .item("call", s(&call))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by its own first attempt's nonce: the sign-in is this call's.
        let written = guarded(put, |old| Ok(written_by(old, &call))).await?;
        Ok(!matches!(written, Written::Refused(_)))
    }
}

/// Whether `old` is the item written by the call `call` (see [`call_id`]).
fn written_by(old: Option<&Item>, call: &str) -> FirstAttempt {
    match old.and_then(|i| get_s(i, "call").ok().flatten()) == Some(call) {
        true => FirstAttempt::Committed,
        false => FirstAttempt::NotCommitted,
    }
}
