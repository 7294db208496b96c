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

/// The account that owns `presented`, or `None` when the key is malformed, unknown or revoked.
pub async fn authenticate(keys: &KeyStore, presented: &str) -> Result<Option<String>, StoreError> {
    let Some(key) = ApiKey::parse(presented) else {
        return Ok(None);
    };
    let record = keys.find(&key.id()).await?;
    Ok(record.filter(|r| r.accepts(&key)).map(|r| r.account))
}

/// How long a resolved key is remembered on Lambda: a revoked key stops working within this time.
pub const LAMBDA_KEY_CACHE: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache is emptied when full (it only saves a GetItem).
const KEY_CACHE_ENTRIES: usize = 10_000;

/// [`authenticate`] with a short in-process cache of keys that resolved to an account (unknown
/// keys are not cached, so junk cannot fill it). Keyed by the key's hash, never the key.
/// Key hash -> (account, when it was resolved).
type KeyCache = HashMap<[u8; 32], (String, Instant)>;

#[derive(Clone)]
pub struct CachedKeys {
    keys: KeyStore,
    /// Zero: no cache, every check reads the store (a revocation applies at once).
    ttl: Duration,
    cache: Arc<Mutex<KeyCache>>,
}

impl CachedKeys {
    pub fn new(keys: KeyStore, ttl: Duration) -> Self {
        Self {
            keys,
            ttl,
            cache: Arc::default(),
        }
    }

    pub async fn account(&self, presented: &str) -> Result<Option<String>, StoreError> {
        let Some(key) = ApiKey::parse(presented) else {
            return Ok(None);
        };
        if self.ttl.is_zero() {
            return authenticate(&self.keys, presented).await;
        }
        let hash = key.hash();
        if let Some((account, at)) = self.lock().get(&hash).cloned()
            && at.elapsed() < self.ttl
        {
            return Ok(Some(account));
        }
        let account = authenticate(&self.keys, presented).await?;
        if let Some(account) = &account {
            let mut cache = self.lock();
            if cache.len() >= KEY_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(hash, (account.clone(), Instant::now()));
        }
        Ok(account)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeyCache> {
        // A panic while holding this lock cannot leave the map inconsistent: take it back.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
