//! A held lease that renews itself in the background.

use super::{Client, Error};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Why a guard's lease ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// A renewal was refused (the rule: LEASE_EXPIRED, NOT_HOLDER, TOKEN_MISMATCH, NO_HOLD).
    Refused(String),
    /// No renewal got through before the lease would have lapsed.
    Unreachable(String),
}

/// A lease you hold. Renews every third of the TTL; [`Guard::lost`] resolves the moment a
/// renewal fails for good; [`Guard::release`] (or dropping the guard) releases it.
pub struct Guard {
    token: u64,
    lost: watch::Receiver<Option<Lost>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Guard {
    pub(crate) fn start(
        client: Client,
        resource: &str,
        holder: &str,
        token: u64,
        ttl: Duration,
    ) -> Self {
        let (lost_tx, lost) = watch::channel(None);
        let (stop, mut stopped) = oneshot::channel();
        let (resource, holder) = (resource.to_owned(), holder.to_owned());
        let task = tokio::spawn(async move {
            let mut held_until = Instant::now() + ttl - ttl / 10;
            loop {
                tokio::select! {
                    _ = &mut stopped => {
                        if let Err(e) = client.release(&resource, &holder, token).await {
                            tracing::warn!(error = %e, "release failed; the lease lapses by itself");
                        }
                        return;
                    }
                    () = tokio::time::sleep(ttl / 3) => {}
                }
                match client.renew(&resource, &holder, token, ttl).await {
                    Ok(lease) if lease.granted => held_until = Instant::now() + ttl - ttl / 10,
                    Ok(lease) => {
                        let rule = lease
                            .witnesses
                            .first()
                            .map_or("refused", |w| w.rule_id.as_str());
                        let _ = lost_tx.send(Some(Lost::Refused(rule.to_owned())));
                        return;
                    }
                    Err(e) if Instant::now() >= held_until => {
                        let _ = lost_tx.send(Some(Lost::Unreachable(e.to_string())));
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "renewal failed; retrying"),
                }
            }
        });
        Self {
            token,
            lost,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The fencing token of this lease: send it with every write the lease protects.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// Resolves when the lease is lost (never, while it is renewed).
    pub async fn lost(&mut self) -> Lost {
        loop {
            if let Some(reason) = self.lost.borrow().clone() {
                return reason;
            }
            if self.lost.changed().await.is_err() {
                // The renewer ended without a loss: only a release does that.
                return Lost::Refused("RELEASED".into());
            }
        }
    }

    /// Whether the lease is still held (as far as the last renewal knows).
    pub fn is_held(&self) -> bool {
        self.lost.borrow().is_none()
    }

    /// Stop renewing and release the lease; waits for the release.
    pub async fn release(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.map_err(|e| Error::Unavailable(e.to_string()))?;
        }
        Ok(())
    }
}

impl Drop for Guard {
    /// Dropped without `release`: the background task still releases the lease.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
