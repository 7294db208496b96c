//! One paid call, end to end: the 402 offer; accepting a `PAYMENT-SIGNATURE` (local checks, the
//! authorization consumed once in the ledger, the facilitator's /verify); and, only after the work
//! committed, settlement, recorded in the ledger whatever its outcome.

use super::check::{Refusal, Verified, check, decode};
use super::facilitator::{Facilitator, Remote, Unreachable};
use super::settings::PaymentSettings;
use super::types::{
    PaymentRequired, PaymentRequirements, ResourceInfo, SettlementResponse, X402_VERSION,
};
use crate::clock::Millis;
use crate::config::{ClaimPrices, FacilitatorConfig, PaymentConfig};
use crate::store::StoreError;
use crate::store::payment_store::{Accepted, AuthorizationKey, PaymentLedger};

#[derive(Clone)]
pub struct Payments {
    pub settings: PaymentSettings,
    /// Price of one lease call, atomic units.
    pub lease_price: u64,
    pub claim_prices: ClaimPrices,
    facilitator: Facilitator,
    ledger: PaymentLedger,
}

/// Why a payment did not let the call through.
#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("payment required")]
    Required,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Facilitator(#[from] Unreachable),
}

/// An accepted payment, to be settled once the work is committed.
#[derive(Debug, Clone)]
pub struct Paid {
    pub verified: Verified,
    key: AuthorizationKey,
}

impl Payments {
    pub fn new(config: &PaymentConfig, ledger: PaymentLedger) -> Result<Self, Unreachable> {
        let facilitator = match &config.facilitator {
            FacilitatorConfig::Local => Facilitator::Local,
            FacilitatorConfig::Remote {
                url,
                timeout,
                authorization,
            } => Facilitator::Remote(Box::new(Remote::new(url, *timeout, authorization.clone())?)),
        };
        Ok(Self {
            settings: config.settings.clone(),
            lease_price: config.lease_price,
            claim_prices: config.claim_prices,
            facilitator,
            ledger,
        })
    }

    /// The wallet-proof ledger (sign-in-with-x nonces share the payments ledger).
    pub fn ledger(&self) -> &PaymentLedger {
        &self.ledger
    }

    /// Whether settlements go to the built-in local facilitator (no chain).
    pub fn is_local(&self) -> bool {
        matches!(self.facilitator, Facilitator::Local)
    }

    /// The 402 answer for `resource` at `price` atomic units.
    pub fn required(
        &self,
        resource: ResourceInfo,
        price: u64,
        error: Option<String>,
    ) -> PaymentRequired {
        PaymentRequired {
            x402_version: X402_VERSION,
            error,
            resource,
            accepts: vec![self.settings.requirements(price)],
            extensions: None,
        }
    }

    /// Accept the payment in `header` for `price` on `route`, or say why not. On success the
    /// authorization is consumed: the same one is refused from then on.
    pub async fn accept(
        &self,
        header: Option<&str>,
        price: u64,
        route: &str,
        now: Millis,
    ) -> Result<Paid, PaymentError> {
        let header = header.ok_or(PaymentError::Required)?;
        let offered: [PaymentRequirements; 1] = [self.settings.requirements(price)];
        let verified = check(
            decode(header)?,
            &offered,
            &self.settings,
            u64::try_from(now / 1000).unwrap_or(0),
        )?;
        let key = AuthorizationKey::new(
            &self.settings.network,
            &verified.payer.lower(),
            &verified.nonce,
        );
        let accepted = Accepted {
            route,
            amount: &verified.requirements.amount,
            pay_to: &verified.requirements.pay_to,
            now,
        };
        if !self.ledger.consume(&key, &accepted).await? {
            return Err(Refusal::Replayed.into());
        }
        if let Err(reason) = self
            .facilitator
            .verify(&verified.payload, &verified.requirements)
            .await?
        {
            return Err(Refusal::Facilitator(reason).into());
        }
        Ok(Paid { verified, key })
    }

    /// Settle an accepted payment after the work committed. Never fails the call: an unsuccessful
    /// settlement is logged and left in the ledger as `settlement_failed` for reconciliation.
    pub async fn settle(&self, paid: &Paid, now: Millis) -> SettlementResponse {
        let outcome = self
            .facilitator
            .settle(&paid.verified.payload, &paid.verified.requirements)
            .await;
        crate::metrics::count(if outcome.success {
            "SettlementSucceeded"
        } else {
            "SettlementFailed"
        });
        if !outcome.success {
            tracing::error!(
                reason = outcome.error_reason.as_deref().unwrap_or(""),
                "settlement failed; left for reconciliation"
            );
        }
        if let Err(e) = self.ledger.settled(&paid.key, &outcome, now).await {
            tracing::error!(error = %e, transaction = %outcome.transaction, "settlement outcome not recorded");
        }
        outcome
    }
}
