//! POST /api/v1/verify-provenance and GET /.well-known/did.json: free, no key.

use super::body::{parse_valid, read_limited};
use super::{ApiError, AppState};
use crate::provenance::{did, verify::Report, verify::verify as check};
use crate::schema::verify_input;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
struct VerifyRequest {
    data: Value,
    #[serde(rename = "_provenance")]
    provenance: Map<String, Value>,
}

/// Check a `{data, _provenance}` document against this service's key.
pub async fn verify(State(state): State<AppState>, body: Body) -> Result<Json<Report>, ApiError> {
    let bytes = read_limited(body).await?;
    let (request, _): (VerifyRequest, Value) = parse_valid(&bytes, verify_input(), &[])?;
    Ok(Json(check(
        &request.data,
        &request.provenance,
        &state.issuer.verifying_key(),
    )))
}

/// The DID document of the signing key.
pub async fn did_document(State(state): State<AppState>) -> Json<Value> {
    Json(did::document(&state.issuer.verifying_key()))
}
