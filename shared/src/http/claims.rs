//! POST /claim (paid per attempt over x402) and POST /claim/free (an API key, or a wallet proven
//! with sign-in-with-x; at most N a wallet or account per hour).
//!
//! Answers: 201 `{outcome: "acquired", plan, claim}` when the caller won the key; 200 `{outcome:
//! "held", mine, plan, claim}` when a live hold exists, `mine` when its holder is the request's
//! holder (the crash-resume signal: after a lost answer, retry the same key and holder). A paid
//! attempt is settled and carries `payment` on both outcomes; a free one never does.

use super::body::{read_limited, validate_value};
use super::caller::malformed_account;
use super::observe::Note;
use super::paid::{self, Charge, Offer};
use super::{ApiError, AppState, Caller};
use crate::claims::{Claim, MAX_BYTES, Outcome, Plan};
use crate::clock::{Millis, now_ms};
use crate::provenance::jcs::sha256;
use crate::schema::{claim_free_input, claim_input, utf8_bytes};
use crate::service::payments::Paid;
use crate::store::claim_store::claim_pk;
use crate::store::payment_store::{Evidence, FirstUse};
use crate::tenant::Tenant;
use crate::witness::Witness;
use crate::x402::check::Verified;
use crate::x402::siwx;
use crate::x402::types::{PaymentRequired, ResourceInfo, SettlementResponse, X402_VERSION};
use axum::Json;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub const ROUTE: &str = "POST /claim";

#[derive(Deserialize)]
struct PaidClaim {
    key: String,
    plan: Plan,
    holder: String,
}

#[derive(Deserialize)]
pub(crate) struct FreeClaim {
    key: String,
    holder: String,
}

/// Validate a claim already parsed as JSON: the schema, then the UTF-8 byte limits.
pub(crate) fn check<T: serde::de::DeserializeOwned>(
    value: Value,
    schema: &crate::schema::Schema,
) -> Result<T, ApiError> {
    let (claim, value): (T, Value) = validate_value(value, schema, &[])?;
    let too_long = utf8_bytes(&value, &["key", "holder"], MAX_BYTES);
    if too_long.is_empty() {
        Ok(claim)
    } else {
        Err(ApiError::InvalidInput(too_long))
    }
}

/// Parse and validate a claim body.
fn parse<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    schema: &crate::schema::Schema,
) -> Result<T, ApiError> {
    let value: Value =
        crate::strict_json::parse(bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    check(value, schema)
}

pub async fn paid(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let value: Value = crate::strict_json::parse(&read_limited(body).await?)
        .map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let request_sha256 = sha256(&value);
    let claim: PaidClaim = check(value, claim_input())?;
    let now = now_ms();
    let price = state
        .payments
        .as_ref()
        .and_then(|p| p.claim_prices.of(claim.plan))
        .unwrap_or(0);
    let offer = Offer {
        route: ROUTE,
        description: "exclusive hold on a key (hour, day or week)",
        price,
        request_sha256,
    };
    let evidence = |verified: &Verified| Evidence::Claim {
        pk: claim_pk(Tenant::for_wallet(&verified.payer).as_str(), &claim.key),
        holder: claim.holder.clone(),
        acquired: now,
    };
    let payment = paid::from_header(&parts);
    let paid = paid::accept(&state, &parts, payment, &offer, now, evidence).await?;
    let scope = Tenant::for_wallet(&paid.verified.payer);
    if let Some(first) = &paid.retry {
        return resent(&state, &paid, first, &scope, now);
    }
    let asset = paid.verified.requirements.asset.clone();
    let paid_by = paid.mark();
    let kept = paid.identifier.is_some().then(|| paid.clone());
    // A store failure ends the work with an error: nothing settled, nothing charged. Billed per
    // attempt otherwise: settled whether the key was won or held.
    let work = async {
        let outcome = state
            .claims
            .claim(
                scope.as_str(),
                &claim.key,
                &claim.holder,
                claim.plan,
                now,
                Some(&paid_by),
            )
            .await?;
        // Kept before it is settled, so that a resend finds an answer for whatever it is
        // charged (a crash between the two used to leave PAYMENT_ANSWER_UNKNOWN for a paid
        // answer); the receipt is added once there is one.
        if let (Some(paid), Some(payments)) = (&kept, &state.payments) {
            let (status, body) = answer_body(outcome.clone(), claim.plan, None);
            payments.keep_answer(paid, status.as_u16(), &body).await;
        }
        Ok(Charge::Yes((outcome, claim.plan)))
    };
    let ((outcome, plan), settlement) = paid::settle_after(&state, paid, now, work).await?;
    let settlement =
        settlement.ok_or_else(|| ApiError::Internal("a paid claim came back unsettled".into()))?;
    let receipt = receipt(&settlement, &asset);
    let (status, body) = answer_body(outcome, plan, Some(receipt));
    if let (Some(paid), Some(payments)) = (&kept, &state.payments) {
        payments.keep_answer(paid, status.as_u16(), &body).await;
    }
    let mut response = (status, Json(body)).into_response();
    let note = note("claim", response.status(), &scope);
    response.extensions_mut().insert(note);
    paid::attach(&mut response, &settlement);
    Ok(response)
}

/// A paid claim resent under its payment identifier: the answer kept for it (see
/// [`paid::kept`]), never a new attempt.
fn resent(
    state: &AppState,
    paid: &Paid,
    first: &FirstUse,
    scope: &Tenant,
    now: Millis,
) -> Result<Response, ApiError> {
    let (status, body, settlement) = paid::kept(state, paid, first, now)?;
    let mut response = (status, Json(body)).into_response();
    response
        .extensions_mut()
        .insert(note("claim", status, scope));
    paid::attach(&mut response, &settlement);
    Ok(response)
}

pub async fn free(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let caller = state.auth.caller(&parts).await?;
    let claim: FreeClaim = parse(&read_limited(body).await?, claim_free_input())?;
    let now = now_ms();
    let scope = match caller {
        Caller::Account(holder) => {
            Tenant::for_account(&holder.account).ok_or_else(malformed_account)?
        }
        Caller::Anonymous => prove_wallet(&state, &parts, now).await?,
    };
    let outcome = free_claim(&state, &scope, &claim, now).await?;
    let mut response = answer(outcome, Plan::Free, None);
    let note = note("claim_free", response.status(), &scope);
    response.extensions_mut().insert(note);
    Ok(response)
}

/// A free claim for `scope`, within the hourly quota.
pub(crate) async fn free_claim(
    state: &AppState,
    scope: &Tenant,
    claim: &FreeClaim,
    now: Millis,
) -> Result<Outcome, ApiError> {
    if let Some(retry_after) = state
        .claims
        .count_free(scope.as_str(), state.free_claims_per_hour, now)
        .await?
    {
        return Err(ApiError::RateLimited {
            retry_after,
            reason: format!("too many free claims this hour; retry after {retry_after} s"),
        });
    }
    Ok(state
        .claims
        .claim(
            scope.as_str(),
            &claim.key,
            &claim.holder,
            Plan::Free,
            now,
            None,
        )
        .await?)
}

/// The wallet proven by the `SIGN-IN-WITH-X` header, or the 402 that asks for it. The proof
/// must name the configured public URL (not the request's `Host`). A header that is not a
/// well-formed, bounded SIWX payload is bad input: 400 naming the field, nothing written.
async fn prove_wallet(state: &AppState, parts: &Parts, now: Millis) -> Result<Tenant, ApiError> {
    let network = state
        .payments
        .as_ref()
        .map_or("eip155:8453", |p| p.settings.network.as_str());
    let (host, base) = (state.public.authority(), state.public.base());
    let ask = |error: Option<String>, code: &'static str| -> Result<ApiError, ApiError> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce)
            .map_err(|e| ApiError::Internal(format!("no randomness for a SIWX nonce: {e}")))?;
        let uri = state.public.url(parts.uri.path());
        let mut extensions = Map::new();
        extensions.insert(
            siwx::EXTENSION.into(),
            siwx::advertise(host, &uri, network, &hex::encode(nonce), now),
        );
        let required = PaymentRequired {
            x402_version: X402_VERSION,
            error: error
                .or_else(|| Some("prove a wallet with sign-in-with-x, or send an API key".into())),
            resource: ResourceInfo {
                url: uri,
                description: Some("free 300 s hold on a key".into()),
                mime_type: None,
            },
            accepts: Vec::new(),
            extensions: Some(extensions),
        };
        Ok(ApiError::Payment {
            required: Box::new(required),
            code,
        })
    };
    let Some(header) = parts.headers.get(siwx::HEADER) else {
        return Err(ask(None, "IDENTITY_REQUIRED")?);
    };
    let payload = header
        .to_str()
        .map_err(|_| siwx::SiwxError::Malformed("not ASCII".into()))
        .and_then(siwx::decode)
        .map_err(siwx_input)?;
    let address = match siwx::verify(&payload, host, &base, network, now) {
        Ok(address) => address,
        Err(e) => return Err(ask(Some(e.to_string()), "IDENTITY_INVALID")?),
    };
    let ledger = state
        .payments
        .as_ref()
        .map(|p| p.ledger())
        .ok_or(ApiError::Unauthorized("wallets are not accepted here"))?;
    if !ledger
        .consume_siwx(&address.lower(), &payload.nonce, now)
        .await?
    {
        return Err(ask(
            Some(siwx::SiwxError::Replayed.to_string()),
            "IDENTITY_INVALID",
        )?);
    }
    Ok(Tenant::for_wallet(&address))
}

/// A malformed or out-of-bounds `SIGN-IN-WITH-X` header as a 400: the witness path names the
/// header and the field (`SIGN-IN-WITH-X.nonce`); it is not in the body, so not a JSON pointer.
fn siwx_input(err: siwx::SiwxError) -> ApiError {
    let (path, rule) = match &err {
        siwx::SiwxError::Field { field, .. } => {
            (format!("{}.{field}", siwx::HEADER_NAME), "SIWX_FIELD")
        }
        _ => (siwx::HEADER_NAME.to_owned(), "SIWX_MALFORMED"),
    };
    ApiError::InvalidInput(vec![Witness::new(rule, &path, err.to_string())])
}

/// The log note of a claim answer: acquired (201) or held (200).
pub(crate) fn note(op: &'static str, status: StatusCode, scope: &Tenant) -> Note {
    let outcome = if status == StatusCode::CREATED {
        "acquired"
    } else {
        "held"
    };
    Note {
        op: Some(op),
        outcome: Some(outcome),
        tenant: Some(Note::tenant_hash(scope.as_str())),
    }
}

fn receipt(settlement: &SettlementResponse, asset: &str) -> Value {
    json!({
        "payer": settlement.payer,
        "amount": settlement.amount,
        "asset": asset,
        "network": settlement.network,
        "transaction": settlement.transaction,
        "settled": settlement.success,
    })
}

fn answer(outcome: Outcome, plan: Plan, payment: Option<Value>) -> Response {
    let (status, body) = answer_body(outcome, plan, payment);
    (status, Json(body)).into_response()
}

/// The status and body of a claim answer.
pub(crate) fn answer_body(
    outcome: Outcome,
    plan: Plan,
    payment: Option<Value>,
) -> (StatusCode, Value) {
    let (status, mut body) = match outcome {
        Outcome::Acquired(claim) => (
            StatusCode::CREATED,
            json!({"outcome": "acquired", "plan": plan, "claim": view(&claim)}),
        ),
        Outcome::Held { claim, mine } => (
            StatusCode::OK,
            json!({"outcome": "held", "mine": mine, "plan": plan, "claim": view(&claim)}),
        ),
    };
    if let Some(payment) = payment {
        body["payment"] = payment;
    }
    (status, body)
}

/// A hold as answered: never the scope (the caller knows its own wallet or account).
fn view(claim: &Claim) -> Value {
    serde_json::to_value(claim).unwrap_or_default()
}
