//! Each payer's (an API key's account, or a paying wallet: [`Tenant::payer`]) share of a
//! server's concurrent waits. A waiting call holds a connection (and,
//! deployed, a Lambda execution) for up to its whole wait; without a bound, one tenant's waits
//! could take every connection of `leasekit serve` while other tenants' calls queued behind
//! them for the length of a wait (the attack of 2026-12-05: a `get` took 38.8 s). Over its share
//! a waiting call is refused at once, before anything is read or written.

use crate::tenant::Tenant;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

/// The waits in progress in this process, by payer, and how many one payer may have.
pub(crate) struct WaitShares {
    each: NonZeroUsize,
    taken: Mutex<HashMap<String, usize>>,
}

/// One wait's place in its payer's share, given back when dropped.
pub(crate) struct Share {
    shares: Arc<WaitShares>,
    payer: String,
}

/// The payer already has `.0` waits in progress, its whole share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareTaken(pub usize);

impl WaitShares {
    pub(crate) fn new(each: NonZeroUsize) -> Arc<Self> {
        Arc::new(Self {
            each,
            taken: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more wait of `tenant`'s payer, if its share has room.
    pub(crate) fn take(self: &Arc<Self>, tenant: &Tenant) -> Result<Share, ShareTaken> {
        let payer = tenant.payer();
        let mut taken = self.lock();
        let count = taken.entry(payer.to_owned()).or_insert(0);
        if *count >= self.each.get() {
            return Err(ShareTaken(*count));
        }
        *count += 1;
        Ok(Share {
            shares: self.clone(),
            payer: payer.to_owned(),
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut taken = self.shares.lock();
        if let Some(count) = taken.get_mut(&self.payer) {
            *count -= 1;
            // A payer without waits takes no room: the map holds only those waiting now.
            if *count == 0 {
                taken.remove(&self.payer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> Tenant {
        Tenant::for_key(name, "t").unwrap()
    }

    #[test]
    fn a_payer_has_its_share_and_no_more_and_others_theirs() {
        let shares = WaitShares::new(NonZeroUsize::new(2).unwrap());
        let (a, b) = (tenant("a"), tenant("b"));
        let first = shares.take(&a).unwrap();
        let _second = shares.take(&a).unwrap();
        assert_eq!(shares.take(&a).err(), Some(ShareTaken(2)));
        // Another tenantId of the same account is the same payer: no more room.
        let a2 = Tenant::for_key("a", "another").unwrap();
        assert_eq!(shares.take(&a2).err(), Some(ShareTaken(2)));
        // Another account's share is its own.
        let _b = shares.take(&b).unwrap();
        let _b2 = shares.take(&b).unwrap();
        // A wait that ends gives its place back.
        drop(first);
        let _again = shares.take(&a).unwrap();
        assert_eq!(shares.take(&a).err(), Some(ShareTaken(2)));
    }

    #[test]
    fn payers_without_waits_are_forgotten() {
        let shares = WaitShares::new(NonZeroUsize::new(1).unwrap());
        for i in 0..100 {
            drop(shares.take(&tenant(&format!("t{i}"))).unwrap());
        }
        assert!(shares.lock().is_empty());
    }
}
