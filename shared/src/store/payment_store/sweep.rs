//! The sweeper's view: the sparse index over open (accepted) authorizations.

use super::evidence;
use super::{AuthorizationKey, Evidence, IdentifierKey, PaymentLedger};
use crate::clock::Millis;
use crate::store::expr::Expr;
use crate::store::{Item, StoreError, get_n, get_s, n, req_n, req_s, s};

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
pub(super) const PENDING: &str = "accepted";

impl PaymentLedger {
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
}

fn pending_from_item(item: &Item) -> Result<Pending, StoreError> {
    let evidence = evidence::read(item)?;
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
