//! Who is calling: API keys checked against the key store, in-process (local server) or in the
//! API Gateway authorizer (deployed), with one function doing the check in both places.

pub mod authorizer;

use crate::keys::ApiKey;
use crate::store::{KeyStore, StoreError};

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
