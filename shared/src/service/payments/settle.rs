//! Settlement, only after the work committed, recorded in the ledger whatever its outcome; and
//! the void of a payment owed nothing.

use super::{Paid, Payments};
use crate::clock::Millis;
use crate::payment::Status;
use crate::store::payment_store::{AuthorizationKey, Final, FirstUse};
use crate::x402::types::{PaymentPayload, PaymentRequirements, SettlementResponse};

impl Payments {
    /// Settle an accepted payment after the work committed. Never fails the call: an unsuccessful
    /// settlement is logged and left in the ledger as `settlement_failed` for reconciliation.
    pub async fn settle(&self, paid: &Paid, now: Millis) -> SettlementResponse {
        self.settle_recorded(
            &paid.key,
            &paid.verified.payload,
            &paid.verified.requirements,
            now,
        )
        .await
    }

    /// Close an accepted payment that is owed nothing (the call failed, or replayed an answer
    /// that was paid for the first time).
    pub async fn void(&self, paid: &Paid, reason: &str, now: Millis) {
        self.close(&paid.key, &Final::Void { reason }, now).await;
    }

    pub(super) async fn settle_recorded(
        &self,
        key: &AuthorizationKey,
        payload: &PaymentPayload,
        requirements: &PaymentRequirements,
        now: Millis,
    ) -> SettlementResponse {
        match self.facilitator.settle(payload, requirements).await {
            Ok(outcome) if outcome.success => {
                crate::metrics::count("SettlementSucceeded");
                let transaction = &outcome.transaction;
                self.close(key, &Final::Settled { transaction }, now).await;
                outcome
            }
            Ok(outcome) => {
                crate::metrics::count("SettlementFailed");
                let reason = outcome.error_reason.as_deref().unwrap_or("");
                tracing::error!(reason, "settlement refused; recorded for reconciliation");
                let transaction = &outcome.transaction;
                self.close(
                    key,
                    &Final::Failed {
                        transaction,
                        reason,
                    },
                    now,
                )
                .await;
                outcome
            }
            Err(e) => {
                // No usable answer: left open, so the sweeper tries again while the
                // authorization is valid (and records it as expired after that). Noted as
                // answered, since the work is done: the sweeper must settle it, not void it for
                // want of evidence (a read, or a claim that found the key held, leaves none).
                crate::metrics::count("SettlementFailed");
                tracing::error!(error = %e, "settlement not confirmed; the sweeper will retry");
                if let Err(e) = self.ledger.mark_answered(key).await {
                    tracing::error!(error = %e, "an answered payment was not noted as answered");
                }
                SettlementResponse {
                    success: false,
                    error_reason: Some(e.0),
                    payer: Some(payload.payload.authorization.from.to_lowercase()),
                    transaction: String::new(),
                    network: requirements.network.clone(),
                    amount: Some(requirements.amount.clone()),
                }
            }
        }
    }

    /// Record `outcome` on the ledger item; a failure to record is logged (the sweeper will find
    /// the item still open), a lost race is logged too (the first outcome stands).
    pub(super) async fn close(&self, key: &AuthorizationKey, outcome: &Final<'_>, now: Millis) {
        match self.ledger.finish(key, outcome, now).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                status = outcome.status().as_str(),
                "payment outcome already recorded by another settler; the first one stands"
            ),
            Err(e) => tracing::error!(
                error = %e,
                status = outcome.status().as_str(),
                "payment outcome not recorded; the sweeper will retry"
            ),
        }
    }
}

/// The settlement a retry's answer carries again: the first one's, as the ledger has it.
pub fn resettled(paid: &Paid, first: &FirstUse) -> SettlementResponse {
    SettlementResponse {
        success: first.status == Status::Settled,
        error_reason: (first.status != Status::Settled).then(|| "settlement refused".to_owned()),
        payer: Some(paid.verified.payer.lower()),
        transaction: first.transaction.clone().unwrap_or_default(),
        network: paid.verified.requirements.network.clone(),
        amount: Some(paid.verified.requirements.amount.clone()),
    }
}
