//! Who is calling: API keys checked against the key store, in-process (local server) or in the
//! API Gateway authorizer (deployed), with one function doing the check in both places.

pub mod authorizer;

use crate::keys::ApiKey;
use crate::store::{KeyStore, StoreError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The header that carries an API key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// Who holds a valid API key: its account, the key's id (what an audit entry names), and
/// whether it has the admin role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHolder {
    pub account: String,
    pub key_id: String,
    pub admin: bool,
}

impl KeyHolder {
    /// How an audit entry names this key: `key:<key id>`.
    pub fn actor(&self) -> String {
        format!("key:{}", self.key_id)
    }
}

/// Who holds `presented`, or `None` when the key is malformed, unknown or revoked.
pub async fn authenticate(
    keys: &KeyStore,
    presented: &str,
) -> Result<Option<KeyHolder>, StoreError> {
    let Some(key) = ApiKey::parse(presented) else {
        return Ok(None);
    };
    // Boxed: the store call's future is some KB, and a request's future that awaits this
    // (every request that presents a key, before its body is read) would be that large even
    // when the key is remembered and no store call is made.
    let record = Box::pin(keys.find(&key.id())).await?;
    Ok(record.filter(|r| r.accepts(&key)).map(|r| KeyHolder {
        account: r.account,
        key_id: r.id.as_str().to_owned(),
        admin: r.admin,
    }))
}

/// How long a resolved key is remembered on Lambda: a revoked key stops working within this time.
pub const LAMBDA_KEY_CACHE: Duration = Duration::from_secs(60);
/// The most a local server remembers a key even when the keys' generation never changes: should
/// a change fail to be recorded (a full disk under `leasekit keys`), a revoked key still stops
/// working within this time.
pub const LOCAL_KEY_CACHE: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache is emptied when full (it only saves a GetItem).
const KEY_CACHE_ENTRIES: usize = 10_000;

/// Says when the key store may have changed. Each change of the store's keys (a key created or
/// revoked) must be followed by a change of [`Self::generation`] before the change is reported
/// done, so that a cache stamped with the generation it read before its lookup never serves a
/// key past its revocation.
pub trait KeyChanges: Send + Sync {
    /// A value that differs from the one before each change; an error means "unknown" (the
    /// cache is bypassed).
    fn generation(&self) -> std::io::Result<u64>;
}

/// How long [`CachedKeys`] may remember a resolved key.
#[derive(Clone)]
pub enum KeyFreshness {
    /// Not at all: every check reads the store.
    Never,
    /// For this long (Lambda: the store is shared by many containers, nothing tells one of them
    /// about a revocation).
    For(Duration),
    /// Until the store's keys change (the local server: `leasekit keys` says when), and for
    /// `at_most` at the longest.
    UntilChanged {
        changes: Arc<dyn KeyChanges>,
        at_most: Duration,
    },
}

/// [`authenticate`] with an in-process cache of keys that resolved to an account (unknown
/// keys are not cached, so junk cannot fill it). Keyed by the key's hash, never the key.
/// Key hash -> (account, when it was resolved, the key generation read before the lookup).
type KeyCache = HashMap<[u8; 32], (KeyHolder, Instant, u64)>;

/// The cache and the generation it last saw: when the generation moves, every entry goes, so
/// none can come back should an older generation be read again.
#[derive(Default)]
struct Cached {
    entries: KeyCache,
    generation: Option<u64>,
}

#[derive(Clone)]
pub struct CachedKeys {
    keys: KeyStore,
    freshness: KeyFreshness,
    cache: Arc<Mutex<Cached>>,
}

impl CachedKeys {
    pub fn new(keys: KeyStore, freshness: KeyFreshness) -> Self {
        Self {
            keys,
            freshness,
            cache: Arc::default(),
        }
    }

    pub async fn resolve(&self, presented: &str) -> Result<Option<KeyHolder>, StoreError> {
        let Some(key) = ApiKey::parse(presented) else {
            return Ok(None);
        };
        // The generation now, before any lookup: what the store says after this point is at
        // least as new as it.
        let (ttl, generation) = match &self.freshness {
            KeyFreshness::Never => return authenticate(&self.keys, presented).await,
            KeyFreshness::For(ttl) => (*ttl, 0),
            KeyFreshness::UntilChanged { changes, at_most } => match changes.generation() {
                Ok(generation) => (*at_most, generation),
                Err(_) => return authenticate(&self.keys, presented).await,
            },
        };
        let hash = key.hash();
        {
            let mut cache = self.lock();
            if cache.generation != Some(generation) {
                cache.entries.clear();
                cache.generation = Some(generation);
            }
            if let Some((account, at, stamp)) = cache.entries.get(&hash)
                && at.elapsed() < ttl
                && *stamp == generation
            {
                return Ok(Some(account.clone()));
            }
        }
        let account = authenticate(&self.keys, presented).await?;
        let mut cache = self.lock();
        match &account {
            Some(account) => {
                if cache.entries.len() >= KEY_CACHE_ENTRIES {
                    cache.entries.clear();
                }
                cache
                    .entries
                    .insert(hash, (account.clone(), Instant::now(), generation));
            }
            // Unknown or revoked now: nothing may answer for it from memory any more.
            None => {
                cache.entries.remove(&hash);
            }
        }
        Ok(account)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        // A panic while holding this lock cannot leave the map inconsistent: take it back.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
