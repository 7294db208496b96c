//! Who the caller is. Deployed, API Gateway's authorizer has checked the key and put the account
//! in the request context; locally, the same key check runs in-process. Either way a handler sees
//! a [`Caller`].

use super::error::ApiError;
use crate::auth::authorizer::{ACCOUNT_CONTEXT_KEY, ADMIN_CONTEXT_KEY, KEY_ID_CONTEXT_KEY};
use crate::auth::{
    API_KEY_HEADER, CachedKeys, KeyChanges, KeyFreshness, KeyHolder, LAMBDA_KEY_CACHE,
    LOCAL_KEY_CACHE,
};
use crate::store::KeyStore;
use axum::http::request::Parts;
use lambda_http::request::RequestContext;
use std::sync::Arc;

/// Who is calling. The API key is checked in this process (the same check as the API Gateway
/// authorizer), through a short cache; on Lambda, an account an authorizer already resolved (on
/// key-only routes) is taken as is.
#[derive(Clone)]
pub struct Authenticator {
    keys: CachedKeys,
    /// Trust `requestContext.authorizer.account` (API Gateway REST events only carry it when an
    /// authorizer ran; callers cannot set it).
    trust_gateway: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An API key (of its account).
    Account(KeyHolder),
    /// No API key: the caller must pay (or is refused).
    Anonymous,
}

impl Authenticator {
    /// On Lambda (`trust_gateway`), resolved keys are remembered for [`LAMBDA_KEY_CACHE`] to
    /// save a read per request. Elsewhere they are remembered until `key_changes` says the keys
    /// changed, so that a revocation applies at once; without it every request reads the store.
    pub fn new(
        keys: KeyStore,
        trust_gateway: bool,
        key_changes: Option<Arc<dyn KeyChanges>>,
    ) -> Self {
        let freshness = match (trust_gateway, key_changes) {
            (true, _) => KeyFreshness::For(LAMBDA_KEY_CACHE),
            (false, Some(changes)) => KeyFreshness::UntilChanged {
                changes,
                at_most: LOCAL_KEY_CACHE,
            },
            (false, None) => KeyFreshness::Never,
        };
        Self {
            keys: CachedKeys::new(keys, freshness),
            trust_gateway,
        }
    }

    pub async fn caller(&self, parts: &Parts) -> Result<Caller, ApiError> {
        if let Some(holder) = self
            .trust_gateway
            .then(|| holder_from_context(parts))
            .flatten()
        {
            return Ok(Caller::Account(holder));
        }
        let mut sent = parts.headers.get_all(API_KEY_HEADER).iter();
        let Some(header) = sent.next() else {
            return Ok(Caller::Anonymous);
        };
        // Two keys are no key: which one a proxy or a framework keeps differs (found by the
        // attack of 2026-12-03: the first won, admin or not).
        if sent.next().is_some() {
            return Err(ApiError::Unauthorized(
                "send one API key (X-API-KEY header), not several",
            ));
        }
        let presented = header
            .to_str()
            .map_err(|_| ApiError::Unauthorized("malformed API key (the X-API-KEY header)"))?;
        match self.keys.resolve(presented).await? {
            Some(holder) => {
                if let Some(owner) = parts.extensions.get::<ConnectionOwner>() {
                    (owner.0)(&holder.account);
                }
                Ok(Caller::Account(holder))
            }
            None => Err(ApiError::Unauthorized(
                "malformed, unknown or revoked API key (the X-API-KEY header)",
            )),
        }
    }
}

/// Told the account of each request whose API key checked out, by a server that shares its
/// connections between accounts (`leasekit serve`: at its connection cap, the account with the
/// most connections gives one up). Everything else on a connection (no key, a bad key, a head
/// not yet read) counts as the keyless caller's. On Lambda no request carries one: API Gateway
/// holds the connections.
#[derive(Clone)]
pub struct ConnectionOwner(pub Arc<dyn Fn(&str) + Send + Sync>);

/// The key holder the authorizer put in the context. A context without the key's id or role
/// (an authorizer from before they existed) is a key without the admin role.
fn holder_from_context(parts: &Parts) -> Option<KeyHolder> {
    let Some(RequestContext::ApiGatewayV1(context)) = parts.extensions.get::<RequestContext>()
    else {
        return None;
    };
    let field = |name: &str| context.authorizer.fields.get(name)?.as_str();
    let account = field(ACCOUNT_CONTEXT_KEY).filter(|a| !a.is_empty())?;
    Some(KeyHolder {
        account: account.to_owned(),
        key_id: field(KEY_ID_CONTEXT_KEY).unwrap_or_default().to_owned(),
        admin: field(ADMIN_CONTEXT_KEY) == Some("true"),
    })
}

/// An API key whose stored account is not a valid name: our data's fault, not the caller's.
pub(crate) fn malformed_account() -> ApiError {
    ApiError::Internal("a stored API key's account is not a valid name".into())
}
