//! Where the committed answer of a paid call is, kept on its authorization's item, and whether it
//! committed: what lets a sweeper settle a call that answered and void one that did not.

use super::{AuthorizationKey, PaymentLedger};
use crate::clock::Millis;
use crate::store::{Item, StoreError, get_n, get_s, n, read_item, req_n, req_s, s};

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

/// Keep `evidence` on an authorization's item (read back by [`read`]).
pub(super) fn write(item: &mut Item, evidence: &Evidence) {
    let mut put = |name: &str, value| {
        item.insert(name.to_owned(), value);
    };
    match evidence {
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
}

/// The evidence [`write`] kept on an authorization's item.
pub(super) fn read(item: &Item) -> Result<Evidence, StoreError> {
    Ok(match get_s(item, "evidence")? {
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
    })
}

impl PaymentLedger {
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
        let Some(item) = read_item(&self.client, table, pk).await? else {
            return Ok(false);
        };
        let item = &item;
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
}
