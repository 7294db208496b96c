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
        self.0.lock().ok()?.get(key).cloned()
    }

    pub(super) fn put(&self, key: &LeaseKey, state: &LeaseState) {
        if let Ok(mut views) = self.0.lock() {
            if views.len() >= MAX_VIEWS && !views.contains_key(key) {
                views.clear();
            }
            views.insert(key.clone(), state.clone());
        }
    }
}
