//! Authorizations (`auth|<network>|<payer>|<nonce>`): consumed once, noted as answered, closed once.

use super::evidence::{self, Evidence};
use super::identifier::{FirstUse, Identified, IdentifiedUse};
use super::sweep::PENDING;
use super::{PaymentLedger, status_of, written_by};
use crate::clock::Millis;
use crate::payment::Status;
use crate::store::expr::Expr;
use crate::store::{
    Cancelled, FirstAttempt, Item, StoreError, Written, call_id, get_n, get_s, guarded, n, s,
    transaction,
};
use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};

/// The ledger key of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationKey(pub(super) String);

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
    evidence::write(&mut item, accepted.evidence);
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

impl PaymentLedger {
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
}
