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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// This process's waiters and writers, by resource: what a resource someone waits for or writes
/// has, kept while anyone holds it.
#[derive(Clone, Default)]
pub(crate) struct Waits {
    by_key: Arc<Mutex<HashMap<LeaseKey, Weak<Resource>>>>,
    poll: Option<Duration>,
}

/// One resource in this process: the wake-up of its waiters, and the turn its writers take.
#[derive(Default)]
struct Resource {
    changed: Arc<Notify>,
    /// The highest version a write in this process has left the lease at, set before its
    /// waiters are woken: a waiter that looks at the views instead of reading knows a view
    /// older than that for what it is (the views forget everything when full, and a read that
    /// began before the write may put its older sight back after).
    written: AtomicU64,
    /// Held for one round of a mutation. Within one process, writers of a resource go one at a
    /// time, in the order they came (tokio's mutex is fair), instead of racing on its version:
    /// 40 waiters arriving together once took seconds of lost races to take their places, and
    /// took them out of their order of arrival (found by the attack of 2026-12-03). Writers in
    /// other processes still race, guarded as ever, and so does a plain single-permit acquire
    /// here (see `LeaseService::execute_as`: its refusals share a group commit).
    turn: Arc<tokio::sync::Mutex<()>>,
}

/// A writer's turn on a resource (see [`Resource::turn`]); the resource is kept while it is held.
pub(crate) struct Turn {
    _held: tokio::sync::OwnedMutexGuard<()>,
    _of: Arc<Resource>,
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
    /// even one that commits before it starts to sleep. Armed while the waiter holds its turn,
    /// after its own write (writers of a resource in this process take turns).
    pub(crate) fn subscribe(&self, key: &LeaseKey) -> Woken {
        let resource = self.resource(key);
        Woken {
            notified: armed(&resource),
            poll: self.poll,
            resource,
        }
    }

    /// Whether this process is the only writer of its store (it does not poll): then every
    /// write of a lease wakes its waiters here, after leaving its state in the views.
    pub(crate) fn sole_writer(&self) -> bool {
        self.poll.is_none()
    }

    /// Wait for this process's turn to write `key`, first come first served.
    pub(crate) async fn turn(&self, key: &LeaseKey) -> Turn {
        let resource = self.resource(key);
        let held = resource.turn.clone().lock_owned().await;
        Turn {
            _held: held,
            _of: resource,
        }
    }

    fn resource(&self, key: &LeaseKey) -> Arc<Resource> {
        let Ok(mut by_key) = self.by_key.lock() else {
            // A poisoned map: wake-ups and turns are lost; waiters still wake by their timers,
            // writers still race guarded.
            return Arc::new(Resource::default());
        };
        if by_key.len() >= SWEEP_AT {
            by_key.retain(|_, n| n.strong_count() > 0);
        }
        match by_key.get(key).and_then(Weak::upgrade) {
            Some(resource) => resource,
            None => {
                let resource = Arc::new(Resource::default());
                by_key.insert(key.clone(), Arc::downgrade(&resource));
                resource
            }
        }
    }

    /// Wake every waiter in this process of a resource of `tenant`: a session of the tenant
    /// ended, and its places, which it does not list, may stand in front of them (each looks
    /// again: one read).
    pub(crate) fn wake_tenant(&self, tenant: &crate::tenant::Tenant) {
        let resources: Vec<Arc<Resource>> = match self.by_key.lock() {
            Ok(by_key) => by_key
                .iter()
                .filter(|(key, _)| key.is_of(tenant))
                .filter_map(|(_, resource)| resource.upgrade())
                .collect(),
            Err(_) => return,
        };
        for resource in resources {
            resource.changed.notify_waiters();
        }
    }

    /// A write of `key` committed, leaving it at `version`: wake its waiters in this process.
    pub(crate) fn wake(&self, key: &LeaseKey, version: u64) {
        let resource = self
            .by_key
            .lock()
            .ok()
            .and_then(|by_key| by_key.get(key).and_then(Weak::upgrade));
        if let Some(resource) = resource {
            resource.written.fetch_max(version, Ordering::SeqCst);
            resource.changed.notify_waiters();
        }
    }
}

/// One waiter's armed wake-up (see [`Waits::subscribe`]).
pub(crate) struct Woken {
    notified: Pin<Box<OwnedNotified>>,
    poll: Option<Duration>,
    /// Kept so that writers find the same wake-up while this waiter sleeps.
    resource: Arc<Resource>,
}

/// What ended a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A write of the resource in this process committed (and left its state in the views).
    ByWrite,
    /// The time asked for, or a poll, came.
    ByTime,
}

impl Woken {
    /// The highest version a write of the resource in this process has left it at (see
    /// [`Resource::written`]).
    pub(crate) fn written(&self) -> u64 {
        self.resource.written.load(Ordering::SeqCst)
    }

    /// Sleep until woken, or `ms` have passed, or (polling) a jittered interval has. Armed
    /// again as it returns, on the same resource: a write that commits from then on wakes it
    /// again. The resource is kept all along, and with it the highest version written: a
    /// waiter that held the resource's last reference used to drop it as it woke, and armed
    /// anew on a fresh one that knew no write, so a stale view passed for fresh.
    pub(crate) async fn until(&mut self, ms: Millis) -> Woke {
        let mut sleep = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        if let Some(poll) = self.poll {
            sleep = sleep.min(jittered(poll));
        }
        let woke = tokio::select! {
            () = self.notified.as_mut() => Woke::ByWrite,
            () = tokio::time::sleep(sleep) => Woke::ByTime,
        };
        // Woken by time, it is still armed; woken by a write, it arms again.
        if woke == Woke::ByWrite {
            self.notified = armed(&self.resource);
        }
        woke
    }
}

/// A wake-up of `resource`'s waiters, armed now (see [`Waits::subscribe`]).
fn armed(resource: &Arc<Resource>) -> Pin<Box<OwnedNotified>> {
    let mut notified = Box::pin(resource.changed.clone().notified_owned());
    notified.as_mut().enable();
    notified
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
    let places = state
        .live_waiters(now)
        .map(crate::lease::model::Place::lapses_at);
    // A finished mark's end changes the state too (docs/adr/0012): a watch hears it then (the
    // attack of 2026-12-06 found a watch answered only at its deadline).
    let mark = state.finished(now).map(|d| d.until);
    permits
        .chain(places)
        .chain(mark)
        .filter(|t| *t > now)
        .fold(deadline, Millis::min)
}

/// A future that resolves when the caller of the request being served has hung up.
pub type HungUp = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How to learn that the caller of a request hung up: made by the server that holds the
/// connection, called only by a wait (so a server may start watching only then).
pub type HangUpWatch = Arc<dyn Fn() -> HungUp + Send + Sync>;

tokio::task_local! {
    static HANG_UP: HangUpWatch;
}

/// Serve `request` (a future that answers one request) where its caller's hang-up can be seen:
/// a wait inside it ends when `watch`'s future resolves. `leasekit serve` runs each request so;
/// a Lambda function cannot (API Gateway does not tell a function its caller left), and there a
/// wait runs its course.
pub async fn watching_hang_up<F: Future>(watch: HangUpWatch, request: F) -> F::Output {
    HANG_UP.scope(watch, request).await
}

/// This task's hang-up watch, if it serves a request whose caller can be seen to hang up: for a
/// task of its own (a spawned task does not inherit it), through [`watching_hang_up`].
pub fn this_hang_up() -> Option<HangUpWatch> {
    HANG_UP.try_with(Arc::clone).ok()
}

/// `request` with this task's hang-up watch, if it has one, for a task of its own.
pub fn carrying_hang_up<F: Future>(request: F) -> impl Future<Output = F::Output> {
    let watch = this_hang_up();
    async move {
        match watch {
            Some(watch) => HANG_UP.scope(watch, request).await,
            None => request.await,
        }
    }
}

/// Resolves when the caller of the request this task serves hangs up; never where that cannot
/// be seen (outside [`watching_hang_up`]).
pub(crate) fn hung_up() -> HungUp {
    HANG_UP
        .try_with(|watch| watch())
        .unwrap_or_else(|_| Box::pin(std::future::pending()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::Tenant;

    /// A waiter woken by a write knows the version it left, though nothing else held the
    /// resource: the wake-up it holds, armed again, kept it (a waiter that was the resource's
    /// last holder used to arm anew on a fresh resource that knew no write, and took a view
    /// older than that write for fresh: found by CI's run of 2026-12-07, a test under load).
    #[tokio::test]
    async fn a_woken_waiter_keeps_the_version_written_and_is_armed_again() {
        let waits = Waits::default();
        let key = LeaseKey::new(&Tenant::for_key("acme", "t1").unwrap(), "r");
        let mut woken = waits.subscribe(&key);
        waits.wake(&key, 5);
        assert_eq!(woken.until(60_000).await, Woke::ByWrite);
        assert_eq!(woken.written(), 5);
        // Armed again: the next write wakes it, and one that left a lower version does not
        // lower what it knows.
        waits.wake(&key, 3);
        let woke = tokio::time::timeout(Duration::from_secs(5), woken.until(60_000)).await;
        assert_eq!(woke, Ok(Woke::ByWrite));
        assert_eq!(woken.written(), 5);
        // Woken by time, it is still armed.
        assert_eq!(woken.until(1).await, Woke::ByTime);
        waits.wake(&key, 8);
        assert_eq!(woken.until(60_000).await, Woke::ByWrite);
        assert_eq!(woken.written(), 8);
    }
}
