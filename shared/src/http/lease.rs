//! POST /api/v1/lease.

use super::body::{parse_valid, read_limited};
use super::{ApiError, AppState, Caller};
use crate::clock::now_ms;
use crate::lease::LeaseRequest;
use crate::provenance::jcs::sha256;
use crate::schema::lease_input;
use crate::store::StoreError;
use crate::tenant::Tenant;
use crate::witness::Witness;
use axum::Json;
use axum::extract::{Request, State};
use serde_json::Value;

pub async fn handle(
    State(state): State<AppState>,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let (parts, body) = request.into_parts();
    // A bad key is refused first, as API Gateway's authorizer does before the function runs.
    let caller = state.auth.caller(&parts).await?;
    let bytes = read_limited(body).await?;
    let (request, body): (LeaseRequest, Value) =
        parse_valid(&bytes, lease_input(), &["ttlSeconds", "token"])?;
    let tenant = match caller {
        Caller::Account(account) => tenant_for_key(&account, request.tenant_id.as_deref())?,
        Caller::Anonymous => {
            return Err(ApiError::Unauthorized("an API key (X-API-KEY) is required"));
        }
    };
    let answer = state
        .leases
        .execute(&tenant, &request, sha256(&body), now_ms())
        .await?;
    Ok(Json(
        serde_json::to_value(answer).map_err(|e| StoreError::Corrupt(e.to_string()))?,
    ))
}

fn tenant_for_key(account: &str, tenant_id: Option<&str>) -> Result<Tenant, ApiError> {
    let tenant_id = tenant_id.ok_or_else(|| {
        ApiError::InvalidInput(vec![Witness::new(
            "REQUIRED",
            "/tenantId",
            "tenantId is required with an API key",
        )])
    })?;
    // Both parts were validated (account at key creation, tenantId by the schema).
    Tenant::for_key(account, tenant_id).ok_or_else(|| {
        ApiError::InvalidInput(vec![Witness::new(
            "PATTERN",
            "/tenantId",
            "tenantId is not a valid tenant id",
        )])
    })
}
