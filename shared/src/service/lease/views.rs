//! This process's last sight of each lease: a guess that picks a round's first write, never the
//! source of an answer.

use crate::lease::LeaseState;
use crate::store::LeaseKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The last sight of each lease this process has had, to plan a write with no read. Only a
/// guess: a write planned on it is guarded, so a stale view (another Lambda container wrote
/// since) costs one cancelled try, whose item comes back, and never a wrong answer. Bounded:
/// forgotten all at once when full.
#[derive(Clone, Default)]
pub(super) struct Views(Arc<Mutex<HashMap<LeaseKey, LeaseState>>>);

/// Leases a process keeps a view of, at most (each some 200 bytes).
const MAX_VIEWS: usize = 16_384;

impl Views {
    pub(super) fn get(&self, key: &LeaseKey) -> Option<LeaseState> {
        let views = self.0.lock().ok()?;
        views.get(key).filter(|s| !s.names_a_session()).cloned()
    }

    /// Whether this process last saw `key` with a session's permit: its next write is planned
    /// on a read, not guessed (docs/adr/0010). Such a sight is never a view ([`Self::get`]): its
    /// permits end when their session does, which no guard on the lease's own item sees, so a
    /// write guessed on it could commit a stale decision.
    pub(super) fn reads_first(&self, key: &LeaseKey) -> bool {
        let Ok(views) = self.0.lock() else {
            return false;
        };
        views.get(key).is_some_and(LeaseState::names_a_session)
    }

    /// Remember `state` of `key`, unless the view is of a later write already. A lease's
    /// version never goes back (its item is never deleted; every write of a versioned one adds
    /// one), so a lower one is an older sight: two writes of one lease that commit close
    /// together, or a read that began before a write, may come here out of order, and a waiter
    /// that looks at the view instead of reading (`LeaseService::acquire`) must see the later.
    pub(super) fn put(&self, key: &LeaseKey, state: &LeaseState) {
        if let Ok(mut views) = self.0.lock() {
            if views
                .get(key)
                .is_some_and(|seen| seen.version > state.version)
            {
                return;
            }
            if views.len() >= MAX_VIEWS && !views.contains_key(key) {
                views.clear();
            }
            views.insert(key.clone(), state.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::model::Permit;
    use crate::tenant::Tenant;

    #[test]
    fn a_lease_with_session_permits_is_never_a_view() {
        let views = Views::default();
        let key = LeaseKey::new(&Tenant::for_key("acme", "t1").unwrap(), "r");
        let held = LeaseState::granted(3, "agent-1", 1_000);
        views.put(&key, &held);
        assert_eq!(views.get(&key), Some(held.clone()));
        let mut in_session = held;
        in_session.permits[0] = Permit {
            session: Some("s1".into()),
            ..in_session.permits[0].clone()
        };
        assert!(!views.reads_first(&key));
        views.put(&key, &in_session);
        assert_eq!(views.get(&key), None, "the older view is forgotten too");
        assert!(views.reads_first(&key), "its next write reads first");
    }

    #[test]
    fn a_sight_of_an_older_version_never_replaces_a_later_one() {
        let views = Views::default();
        let key = LeaseKey::new(&Tenant::for_key("acme", "t1").unwrap(), "r");
        let mut later = LeaseState::granted(3, "agent-1", 1_000);
        later.version = 5;
        let mut older = LeaseState::granted(2, "agent-0", 900);
        older.version = 4;
        views.put(&key, &later);
        views.put(&key, &older);
        assert_eq!(views.get(&key), Some(later.clone()));
        // The same version (a lease's writes that keep it unversioned) is the newer sight.
        let mut same = LeaseState::granted(3, "agent-2", 2_000);
        same.version = 5;
        views.put(&key, &same);
        assert_eq!(views.get(&key), Some(same));
    }
}
