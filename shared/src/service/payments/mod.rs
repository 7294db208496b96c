//! One paid call, end to end: the 402 offer; accepting a `PAYMENT-SIGNATURE` (local checks, the
//! authorization consumed once in the ledger, the facilitator's /verify); and, only after the work
//! committed, settlement, recorded in the ledger whatever its outcome. What a crash or a timeout
//! leaves open, [`Payments::sweep`] closes later from the ledger alone.

mod settle;
mod sweep;

pub use settle::resettled;
pub use sweep::Swept;

use crate::clock::Millis;
use crate::config::{ClaimPrices, FacilitatorConfig, PaymentConfig};
use crate::payment::lifecycle::{self, Resend};
use crate::provenance::jcs::sha256;
use crate::store::StoreError;
use crate::store::payment_store::{
    Accepted, AuthorizationKey, Consumed, Evidence, Final, FirstUse, Identified, IdentifierKey,
    PaymentLedger,
};
use crate::x402::check::{Refusal, Verified, check_signed, check_window};
use crate::x402::facilitator::{Facilitator, Remote, Unreachable};
use crate::x402::payment_identifier;
use crate::x402::settings::PaymentSettings;
use crate::x402::types::{
    PaymentPayload, PaymentRequired, PaymentRequirements, ResourceInfo, X402_VERSION,
};

#[derive(Clone)]
pub struct Payments {
    pub settings: PaymentSettings,
    /// Price of one lease call, atomic units.
    pub lease_price: u64,
    pub claim_prices: ClaimPrices,
    facilitator: Facilitator,
    ledger: PaymentLedger,
    /// How old an open payment must be before the sweeper takes it up; a resend's answer waits
    /// for the same (see [`lifecycle::kept_answer`]).
    sweep_grace: std::time::Duration,
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
    /// The payment identifier was first used with another payment or another request.
    #[error("this payment identifier was used with another payment or another request")]
    IdentifierTaken,
    /// The first call with this payment has not finished (or another is consuming it now).
    #[error("the first call with this payment has not finished; retry shortly")]
    InProgress,
    /// Our own failure: the details are for the log.
    #[error("internal error: {0}")]
    Internal(String),
}

/// An accepted payment, to be settled once the work is committed; or, when `retry` is set, a
/// payment settled before that this call resends under its payment identifier: the work is
/// answered again and nothing is settled.
#[derive(Debug, Clone)]
pub struct Paid {
    pub verified: Verified,
    key: AuthorizationKey,
    /// The payment identifier it came under, if any (and the route honours them).
    pub identifier: Option<IdentifierKey>,
    pub retry: Option<FirstUse>,
}

impl Paid {
    /// What the answer this payment buys is marked with ([`AuthorizationKey::mark`]; see
    /// [`PaymentLedger::committed`]).
    pub fn mark(&self) -> String {
        self.key.mark()
    }
}

/// The largest payment (payload and requirements, as JSON) accepted: a real one is under 2 KB,
/// the payment-identifier extension included.
pub const MAX_PAYMENT_BYTES: usize = 8 * 1024;

/// What a paid call sells: `route` at `price` atomic units, for the request whose hash is
/// `request_sha256` (a payment identifier's retry must be for this same request).
pub struct Sale<'a> {
    pub route: &'a str,
    pub price: u64,
    pub request_sha256: [u8; 32],
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
            sweep_grace: lifecycle::SWEEP_GRACE,
        })
    }

    /// These payments with another sweep grace (`leasekit serve --settle-grace-seconds`): the
    /// sweeper and every rule that waits for it then use it alike.
    pub fn with_sweep_grace(mut self, grace: std::time::Duration) -> Self {
        self.sweep_grace = grace;
        self
    }

    /// How old an open payment must be before a sweep takes it up.
    pub fn sweep_grace(&self) -> std::time::Duration {
        self.sweep_grace
    }

    /// Payments as `config` says, on the ledger in `tables`: the one way both the Lambda
    /// functions and `leasekit serve` build them. A local facilitator is said in the log.
    pub fn open(
        config: &PaymentConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        tables: &crate::store::Tables,
    ) -> Result<Self, Unreachable> {
        let payments = Self::new(config, PaymentLedger::new(dynamodb, tables))?;
        if payments.is_local() {
            tracing::warn!(
                pay_to = %payments.settings.pay_to.lower(),
                "x402: LOCAL facilitator - payments are checked and recorded, never settled on a chain"
            );
        }
        Ok(payments)
    }

    /// The wallet-proof ledger (sign-in-with-x nonces share the payments ledger).
    pub fn ledger(&self) -> &PaymentLedger {
        &self.ledger
    }

    /// Whether settlements go to the built-in local facilitator (no chain).
    pub fn is_local(&self) -> bool {
        matches!(self.facilitator, Facilitator::Local)
    }

    /// The 402 answer for `resource` at `price` atomic units. It declares the
    /// `payment-identifier` extension (optional), which every paid route honours.
    pub fn required(
        &self,
        resource: ResourceInfo,
        price: u64,
        error: Option<String>,
    ) -> PaymentRequired {
        let mut extensions = serde_json::Map::new();
        payment_identifier::declare(&mut extensions);
        PaymentRequired {
            x402_version: X402_VERSION,
            error,
            resource,
            accepts: vec![self.settings.requirements(price)],
            extensions: Some(extensions),
        }
    }

    /// Accept `payment` (decoded from its header or MCP `_meta`) for `sale`, or say why not. On
    /// success the authorization is consumed: the same one is refused from then on, except as a
    /// retry under its payment identifier (see [`Paid::retry`]). `evidence` says where the
    /// answer it pays for will be once committed (it depends on the payer, hence a function).
    pub async fn accept(
        &self,
        payment: Option<Result<PaymentPayload, Refusal>>,
        sale: &Sale<'_>,
        now: Millis,
        evidence: impl FnOnce(&Verified) -> Evidence,
    ) -> Result<Paid, PaymentError> {
        let payload = payment.ok_or(PaymentError::Required)??;
        let offered: [PaymentRequirements; 1] = [self.settings.requirements(sale.price)];
        let verified = check_signed(payload, &offered, &self.settings)?;
        // Before anything else: it also names the request record of a paid lease mutation
        // (after the authorization), which a resend below replays.
        let evidence = evidence(&verified);
        let payer = verified.payer.lower();
        let key = AuthorizationKey::new(&self.settings.network, &payer, &verified.nonce);
        let identified = payment_identifier::of(&verified.payload)?.map(|id| Identified {
            key: IdentifierKey::new(&self.settings.network, &payer, &id),
            fingerprint: fingerprint(sale, &verified.payload),
        });
        let paid = |verified, first| {
            retry(
                Paid {
                    verified,
                    key: key.clone(),
                    identifier: identified.as_ref().map(|i| i.key.clone()),
                    retry: None,
                },
                first,
                now,
            )
        };
        if let Err(refusal) = check_window(&verified, u64::try_from(now / 1000).unwrap_or(0)) {
            // Past its validity, a payment can still be resent under its identifier: it was
            // checked when first used, and a resend uses nothing up.
            if let Some(identified) = &identified
                && let Some(first) = self.ledger.first_use(&key, identified).await?
            {
                return paid(verified, first);
            }
            return Err(refusal.into());
        }
        let payment = serde_json::to_string(&Settleable {
            payload: verified.payload.clone(),
            requirements: verified.requirements.clone(),
        })
        .map_err(|e| PaymentError::Internal(format!("a payment would not serialize: {e}")))?;
        // The ledger keeps the payment as sent, unknown extensions included: bounded, so that
        // one call cannot make a ledger item (never deleted) of hundreds of kilobytes.
        if payment.len() > MAX_PAYMENT_BYTES {
            return Err(Refusal::TooLarge(MAX_PAYMENT_BYTES).into());
        }
        let accepted = Accepted {
            route: sale.route,
            amount: &verified.requirements.amount,
            pay_to: &verified.requirements.pay_to,
            now,
            valid_before: verified.valid_before,
            payment: &payment,
            evidence: &evidence,
        };
        match self
            .ledger
            .consume(&key, &accepted, identified.as_ref())
            .await?
        {
            Consumed::Yes => {}
            Consumed::UsedBefore => return Err(Refusal::Replayed.into()),
            Consumed::IdentifierTaken => return Err(PaymentError::IdentifierTaken),
            Consumed::Busy => return Err(PaymentError::InProgress),
            Consumed::Again(first) => return paid(verified, first),
        }
        let identifier = identified.map(|i| i.key);
        if let Err(reason) = self
            .facilitator
            .verify(&verified.payload, &verified.requirements)
            .await?
        {
            // Refused before any work: nothing is owed.
            self.close(
                &key,
                &Final::Void {
                    reason: "refused by the facilitator",
                },
                now,
            )
            .await;
            return Err(Refusal::Facilitator(reason).into());
        }
        Ok(Paid {
            verified,
            key,
            identifier,
            retry: None,
        })
    }

    /// Keep the answer a call under a payment identifier gave, for its resends (see
    /// [`PaymentLedger::keep_answer`]). Never fails the call: the answer is given either way, and
    /// a resend that finds none is told so.
    pub async fn keep_answer(&self, paid: &Paid, status: u16, body: &serde_json::Value) {
        let Some(identifier) = &paid.identifier else {
            return;
        };
        if let Err(e) = self
            .ledger
            .keep_answer(identifier, status, &body.to_string())
            .await
        {
            tracing::error!(error = %e, "a paid answer was not kept for its payment identifier");
        }
    }
}

/// A payment resent under its payment identifier, as [`lifecycle::resend`] decides.
fn retry(paid: Paid, first: FirstUse, now: Millis) -> Result<Paid, PaymentError> {
    match lifecycle::resend(first.status, first.accepted, now) {
        Resend::Replay => Ok(Paid {
            retry: Some(first),
            ..paid
        }),
        Resend::Wait => Err(PaymentError::InProgress),
        Resend::TooLate => Err(Refusal::RetryTooLate.into()),
        Resend::Voided => Err(Refusal::Voided.into()),
    }
}

/// What a payment identifier is bound to: the route, the request and the whole payment.
fn fingerprint(sale: &Sale<'_>, payload: &PaymentPayload) -> String {
    let payload = serde_json::to_value(payload).unwrap_or_default();
    let mut bound = Vec::with_capacity(128);
    bound.extend_from_slice(sale.route.as_bytes());
    bound.push(0);
    bound.extend_from_slice(&sale.request_sha256);
    bound.extend_from_slice(&sha256(&payload));
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bound))
}

/// What /settle needs, kept in the ledger for the sweeper.
#[derive(serde::Serialize, serde::Deserialize)]
struct Settleable {
    payload: PaymentPayload,
    requirements: PaymentRequirements,
}
