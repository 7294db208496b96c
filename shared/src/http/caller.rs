//! Who the caller is. Deployed, API Gateway's authorizer has checked the key and put the account
//! in the request context; locally, the same key check runs in-process. Either way a handler sees
//! a [`Caller`].

use super::error::ApiError;
use crate::auth::authorizer::ACCOUNT_CONTEXT_KEY;
use crate::auth::{API_KEY_HEADER, authenticate};
use crate::store::KeyStore;
use axum::http::request::Parts;
use lambda_http::request::RequestContext;

#[derive(Clone)]
pub enum Authenticator {
    /// Trust the account in the API Gateway (REST, payload v1) authorizer context.
    ApiGateway,
    /// Check the X-API-KEY header against the key store in this process.
    InProcess(KeyStore),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An API key of this account.
    Account(String),
    /// No API key: the caller must pay (or is refused).
    Anonymous,
}

impl Authenticator {
    pub async fn caller(&self, parts: &Parts) -> Result<Caller, ApiError> {
        match self {
            Self::ApiGateway => {
                Ok(account_from_context(parts).map_or(Caller::Anonymous, Caller::Account))
            }
            Self::InProcess(keys) => {
                let Some(header) = parts.headers.get(API_KEY_HEADER) else {
                    return Ok(Caller::Anonymous);
                };
                let presented = header
                    .to_str()
                    .map_err(|_| ApiError::Unauthorized("malformed API key"))?;
                match authenticate(keys, presented).await? {
                    Some(account) => Ok(Caller::Account(account)),
                    None => Err(ApiError::Unauthorized(
                        "malformed, unknown or revoked API key",
                    )),
                }
            }
        }
    }
}

fn account_from_context(parts: &Parts) -> Option<String> {
    let Some(RequestContext::ApiGatewayV1(context)) = parts.extensions.get::<RequestContext>()
    else {
        return None;
    };
    let account = context
        .authorizer
        .fields
        .get(ACCOUNT_CONTEXT_KEY)?
        .as_str()?;
    (!account.is_empty()).then(|| account.to_owned())
}
