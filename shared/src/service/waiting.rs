//! How a waiting acquire sleeps between its rounds (docs/adr/0007): until the write that
//! changes its resource wakes it, or a permit or place ahead of it lapses, or its wait ends.
//!
//! In one process that is the only writer of its store (`leasekit serve` on the embedded
//! store), the write's own commit wakes the resource's waiters: no waiter polls. A process that
//! shares its store with others (a Lambda function) cannot be woken by their writes, so its
//! waiters also read again every poll interval, with jitter so that waiters that started
//! together do not read together.

use crate::clock::Millis;
use crate::lease::LeaseState;
use crate::store::LeaseKey;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// This process's waiters, by resource: a `Notify` per resource someone waits for, kept while
/// anyone holds it.
#[derive(Clone, Default)]
pub(crate) struct Waits {
    by_key: Arc<Mutex<HashMap<LeaseKey, Weak<Notify>>>>,
    poll: Option<Duration>,
}

/// Resources with waiters in one process at which dead entries are swept out of the map.
const SWEEP_AT: usize = 4096;

impl Waits {
    pub(crate) fn polling(self, interval: Duration) -> Self {
        Self {
            poll: Some(interval),
            ..self
        }
    }

    /// A waiter's wake-up for `key`, armed now: a write that commits after this call wakes it,
    /// even one that commits before it starts to sleep.
    pub(crate) fn subscribe(&self, key: &LeaseKey) -> Woken {
        let notify = match self.by_key.lock() {
            Ok(mut by_key) => {
                if by_key.len() >= SWEEP_AT {
                    by_key.retain(|_, n| n.strong_count() > 0);
                }
                match by_key.get(key).and_then(Weak::upgrade) {
                    Some(notify) => notify,
                    None => {
                        let notify = Arc::new(Notify::new());
                        by_key.insert(key.clone(), Arc::downgrade(&notify));
                        notify
                    }
                }
            }
            // A poisoned map: wake-ups are lost, the waiter still wakes by its timers.
            Err(_) => Arc::new(Notify::new()),
        };
        let mut notified = Box::pin(notify.notified_owned());
        notified.as_mut().enable();
        Woken {
            notified,
            poll: self.poll,
        }
    }

    /// A write of `key` committed: wake its waiters in this process.
    pub(crate) fn wake(&self, key: &LeaseKey) {
        let notify = self
            .by_key
            .lock()
            .ok()
            .and_then(|by_key| by_key.get(key).and_then(Weak::upgrade));
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }
}

/// One waiter's armed wake-up (see [`Waits::subscribe`]).
pub(crate) struct Woken {
    notified: Pin<Box<OwnedNotified>>,
    poll: Option<Duration>,
}

impl Woken {
    /// Sleep until woken, or `ms` have passed, or (polling) a jittered interval has.
    pub(crate) async fn until(self, ms: Millis) {
        let mut sleep = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        if let Some(poll) = self.poll {
            sleep = sleep.min(jittered(poll));
        }
        tokio::select! {
            () = self.notified => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

/// Between half and all of `interval`, at random.
fn jittered(interval: Duration) -> Duration {
    let mut random = [0u8; 2];
    let fraction = match getrandom::fill(&mut random) {
        Ok(()) => f64::from(u16::from_le_bytes(random)) / f64::from(u16::MAX),
        Err(_) => 1.0,
    };
    interval.mul_f64(0.5 + fraction / 2.0)
}

/// When a waiter who saw `state` at `now` should look again, if nothing wakes it before: the
/// first lapse of a live permit or place (either may free a permit for it or move it up), and
/// at the latest when its wait ends.
pub(crate) fn next_change(state: &LeaseState, now: Millis, deadline: Millis) -> Millis {
    let permits = state.live_permits(now).into_iter().map(|p| p.expires_at);
    let places = state.live_waiters(now).map(|w| w.until);
    permits
        .chain(places)
        .filter(|t| *t > now)
        .fold(deadline, Millis::min)
}
