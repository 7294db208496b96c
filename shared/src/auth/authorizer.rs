//! The API Gateway REST `REQUEST` authorizer: resolves `X-API-KEY` to its account and passes the
//! account to the functions in the authorizer context (`requestContext.authorizer.account`).
//!
//! A bad key is answered with the error `Unauthorized`, which API Gateway turns into a 401. A
//! request without a key is allowed with no account, so that routes which also take x402
//! payments can answer it (with a 401 or 402) themselves.

use super::authenticate;
use crate::store::{KeyStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// The parts of the REQUEST authorizer event this authorizer reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerRequest {
    pub method_arn: String,
    #[serde(default)]
    pub headers: Option<HashMap<String, String>>,
}

/// The policy answer: principal, IAM policy, and the context passed on to the function.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerResponse {
    pub principal_id: String,
    pub policy_document: Value,
    pub context: Map<String, Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthorizerError {
    /// API Gateway answers 401 when an authorizer fails with exactly this message.
    #[error("Unauthorized")]
    Unauthorized,
    #[error("key store unavailable: {0}")]
    Store(#[from] StoreError),
}

/// The context key carrying the account.
pub const ACCOUNT_CONTEXT_KEY: &str = "account";
/// The context key carrying the key's id (what an audit entry names).
pub const KEY_ID_CONTEXT_KEY: &str = "keyId";
/// The context key saying whether the key has the admin role: `"true"` or `"false"` (API
/// Gateway passes context values on as strings).
pub const ADMIN_CONTEXT_KEY: &str = "admin";

pub async fn authorize(
    keys: &KeyStore,
    request: &AuthorizerRequest,
) -> Result<AuthorizerResponse, AuthorizerError> {
    let presented = request
        .headers
        .iter()
        .flatten()
        .find(|(name, _)| name.eq_ignore_ascii_case(super::API_KEY_HEADER))
        .map(|(_, value)| value.as_str());
    let resource = api_wildcard(&request.method_arn);
    let Some(presented) = presented else {
        return Ok(allow("anonymous", &resource, Map::new()));
    };
    let holder = authenticate(keys, presented)
        .await?
        .ok_or(AuthorizerError::Unauthorized)?;
    let mut context = Map::new();
    context.insert(
        ACCOUNT_CONTEXT_KEY.into(),
        Value::String(holder.account.clone()),
    );
    context.insert(KEY_ID_CONTEXT_KEY.into(), Value::String(holder.key_id));
    context.insert(
        ADMIN_CONTEXT_KEY.into(),
        Value::String(holder.admin.to_string()),
    );
    Ok(allow(&holder.account, &resource, context))
}

/// The policy covers every method and path of the API stage, because API Gateway caches the
/// answer per key and reuses it on other routes.
fn api_wildcard(method_arn: &str) -> String {
    // arn:aws:execute-api:region:account:api-id/stage/METHOD/path...
    let mut parts = method_arn.splitn(3, '/');
    match (parts.next(), parts.next()) {
        (Some(api), Some(stage)) => format!("{api}/{stage}/*/*"),
        _ => method_arn.to_owned(),
    }
}

fn allow(principal: &str, resource: &str, context: Map<String, Value>) -> AuthorizerResponse {
    AuthorizerResponse {
        principal_id: principal.to_owned(),
        policy_document: json!({
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}]
        }),
        context,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_covers_the_whole_stage() {
        assert_eq!(
            api_wildcard(
                "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/POST/api/v1/lease"
            ),
            "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/*/*"
        );
    }
}
