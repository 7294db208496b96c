//! The sweeper: it closes what a crash or a timeout left open, from the ledger alone. A payment
//! whose answer committed is settled while its authorization is valid; one whose answer never
//! committed is voided; one it is too late for is recorded as expired.

use super::{Payments, Settleable};
use crate::clock::Millis;
use crate::payment::lifecycle::{self, Open, Verdict};
use crate::store::StoreError;
use crate::store::payment_store::Final;
use crate::x402::check::MIN_VALIDITY_SECONDS;

impl Payments {
    /// Close what a sweep at `now` is due to take up (older than [`Self::sweep_grace`]); see
    /// [`Self::sweep`].
    pub async fn sweep_due(&self, now: Millis, limit: i32) -> Result<Swept, StoreError> {
        self.sweep(lifecycle::sweep_cutoff(now, self.sweep_grace), now, limit)
            .await
    }

    /// Close every payment left `accepted` at or before `cutoff` (ms): settle the ones whose
    /// answer committed while their authorization is still valid, void the ones whose answer
    /// never committed, and record the ones it is too late for as `expired`. At most `limit`
    /// items a call. Each outcome is recorded; failures are counted as metrics.
    pub async fn sweep(
        &self,
        cutoff: Millis,
        now: Millis,
        limit: i32,
    ) -> Result<Swept, StoreError> {
        let mut swept = Swept::default();
        for item in self.ledger.pending(cutoff, limit).await? {
            // What the call left: its noted answer, the answer it committed, or the answer it
            // kept for a resend (reads and held claims leave nothing else).
            let committed = item.answered
                || self.ledger.committed(&item.evidence, &item.key).await?
                || self
                    .ledger
                    .answer_kept(&item.key, item.identifier.as_ref())
                    .await?;
            let settleable: Option<Settleable> = serde_json::from_str(&item.payment).ok();
            let open = Open {
                answered: item.answered,
                committed,
                valid_before: item.valid_before,
                settleable: settleable.is_some(),
            };
            match (
                lifecycle::sweep(&open, now, MIN_VALIDITY_SECONDS),
                settleable,
            ) {
                (Verdict::Void(reason), _) => {
                    self.close(&item.key, &Final::Void { reason }, now).await;
                    swept.voided += 1;
                }
                (Verdict::Settle, Some(p)) => {
                    let outcome = self
                        .settle_recorded(&item.key, &p.payload, &p.requirements, now)
                        .await;
                    if outcome.success {
                        swept.settled += 1;
                    } else {
                        swept.failed += 1;
                    }
                }
                // Expired, or a payment kept in a form that no longer reads (never settleable).
                _ => {
                    crate::metrics::count("SettlementExpired");
                    tracing::error!(
                        "a committed paid answer was never settled and its authorization has lapsed"
                    );
                    self.close(&item.key, &Final::Expired, now).await;
                    swept.expired += 1;
                }
            }
        }
        if swept != Swept::default() {
            crate::metrics::count("SettlementSwept");
            tracing::info!(?swept, "swept open payments");
        }
        Ok(swept)
    }
}

/// What one sweep closed (`failed`: the facilitator refused, or did not answer and the payment
/// stays open for the next sweep).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Swept {
    pub settled: u32,
    pub failed: u32,
    pub voided: u32,
    pub expired: u32,
}

impl Swept {
    pub fn total(&self) -> u32 {
        self.settled + self.failed + self.voided + self.expired
    }

    pub fn add(&mut self, other: &Swept) {
        self.settled += other.settled;
        self.failed += other.failed;
        self.voided += other.voided;
        self.expired += other.expired;
    }
}
