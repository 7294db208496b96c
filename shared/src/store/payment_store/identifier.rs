//! Payment identifiers (`payid|<network>|<payer>|<id>`): an id taken by one payment for one
//! request, and the answer kept for its resends.

use super::{AuthorizationKey, PaymentLedger, status_of};
use crate::clock::Millis;
use crate::payment::Status;
use crate::store::expr::Expr;
use crate::store::{FirstAttempt, Item, StoreError, get_n, get_s, n, req_n, req_s, s};

/// A payment identifier (the x402 `payment-identifier` extension) in the ledger:
/// `payid|<network>|<payer>|<id>`, an item of its own, so that an id is taken by one payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifierKey(pub(super) String);

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
pub(super) enum IdentifiedUse {
    Free,
    Other,
    Same(FirstUse),
}

impl PaymentLedger {
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
    pub(super) async fn identified_use(
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
}
