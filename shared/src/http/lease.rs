//! POST /api/v1/lease.

mod stream;

use super::body::{read_limited, validate_value};
use super::observe::Note;
use super::paid::{self, Charge, Offer};
use super::{ApiError, AppState, Caller};
use crate::auth::KeyHolder;
use crate::clock::{Millis, now_ms};
use crate::lease::LeaseRequest;
use crate::metrics;
use crate::provenance::jcs::sha256;
use crate::schema::lease_input;
use crate::service::lease::{Actor, SignedAnswer};
use crate::service::lease::{REPLAY_WINDOW_MS, ROUTE};
use crate::store::RecordKey;
use crate::store::payment_store::Evidence;
use crate::tenant::Tenant;
use crate::witness::Witness;
use crate::x402::check::{Refusal, Verified};
use crate::x402::types::{PaymentPayload, SettlementResponse};
use axum::Json;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

pub async fn handle(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    // A bad key is refused first, as API Gateway's authorizer does before the function runs.
    let caller = state.auth.caller(&parts).await?;
    let signed = signed(&parts)?;
    let bytes = read_limited(body).await?;
    // Invalid input is a 400 before any payment is looked at.
    let value =
        crate::strict_json::parse(&bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let (request, body) = lease_valid(value, lease_input())?;
    let request_sha256 = sha256(&body);
    if stream::asked(&parts) {
        if let Some(refused) =
            stream::refusal(&state, &request, matches!(caller, Caller::Account(_)))
        {
            return Err(refused);
        }
        if let Caller::Account(holder) = caller {
            // Refused as a 4xx before the stream starts, not as its first event.
            tenant_for_key(&holder.account, request.tenant_id.as_deref())?;
            return Ok(stream::events(
                state,
                holder,
                request,
                request_sha256,
                signed,
            ));
        }
    }
    let now = now_ms();
    // Boxed, so made only now: the call's future (with the store client's in it) is most of a
    // request's state, and a request still waiting for its body held all of it (a connection
    // stalled in its body cost 63 KB, one on a route without this 21 KB).
    let replied = match caller {
        Caller::Account(holder) => {
            Box::pin(for_account(&state, &holder, &request, request_sha256)).await?
        }
        Caller::Anonymous => {
            let payment = paid::from_header(&parts);
            Box::pin(paid_for(
                &state,
                &parts,
                payment,
                request,
                request_sha256,
                now,
            ))
            .await?
        }
    };
    let mut response = Json(as_asked(replied.body, signed)).into_response();
    response.extensions_mut().insert(replied.note);
    // Every fresh 200 is charged, granted or not; a replay was paid for the first time.
    if let Some(settlement) = &replied.settlement {
        paid::attach(&mut response, settlement);
    }
    Ok(response)
}

/// Whether the caller wants the answer signed: yes unless it asks `?signed=false`. The query is
/// read as a form (`sig%6Eed=false` is `signed=false`); a value other than true or false, or two
/// that disagree, is refused rather than guessed at.
fn signed(parts: &axum::http::request::Parts) -> Result<bool, ApiError> {
    let query = parts.uri.query().unwrap_or("");
    let mut asked = None;
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if name != "signed" {
            continue;
        }
        let this = match value.as_ref() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(ApiError::InvalidRequest(
                    "the query parameter signed is true (the default) or false".into(),
                ));
            }
        };
        if asked.is_some_and(|before| before != this) {
            return Err(ApiError::InvalidRequest(
                "the query parameter signed is given twice, true and false".into(),
            ));
        }
        asked = Some(this);
    }
    Ok(asked.unwrap_or(true))
}

/// A lease answer's body as the caller asked for it: signed, or its data alone
/// (`?signed=false`).
fn as_asked(body: Value, signed: bool) -> Value {
    match signed {
        true => body,
        false => crate::lease::answer::unsigned(body),
    }
}

/// A lease answer as every channel sends it: its JSON, its log note, and a paid call's
/// settlement.
pub(crate) struct Replied {
    pub body: Value,
    pub note: Note,
    pub settlement: Option<SettlementResponse>,
}

impl Replied {
    fn new(
        tenant: &Tenant,
        answer: SignedAnswer,
        settlement: Option<SettlementResponse>,
    ) -> Result<Self, ApiError> {
        let note = Note {
            op: Some(answer.data.op.as_str()),
            outcome: Some(outcome(&answer)),
            tenant: Some(Note::tenant_hash(tenant.as_str())),
        };
        Ok(Self {
            body: answer_json(answer)?,
            note,
            settlement,
        })
    }
}

/// A lease request paid for with `payment` (from the `PAYMENT-SIGNATURE` header, or an MCP
/// tool call's `_meta`): accepted, carried out for the paying wallet, and settled after it
/// committed.
pub(crate) async fn paid_for(
    state: &AppState,
    parts: &axum::http::request::Parts,
    payment: Option<Result<PaymentPayload, Refusal>>,
    mut request: LeaseRequest,
    request_sha256: [u8; 32],
    now: Millis,
) -> Result<Replied, ApiError> {
    let offer = Offer {
        route: ROUTE,
        description: "lease op (acquire, renew, release, get, check, list, revoke, audit)",
        price: state.payments.as_ref().map_or(0, |p| p.lease_price),
        request_sha256,
    };
    let paid = paid::accept(state, parts, payment, &offer, now, |verified| {
        paid_evidence(&mut request, verified, now)
    })
    .await?;
    let tenant = Tenant::for_wallet(&paid.verified.payer);
    // A read writes nothing a resend could be answered from, and reading afresh would sell
    // every later read for the price of one: a read resent under its payment identifier gets the
    // answer kept for it.
    let is_read = !request.op.writes();
    if is_read && let Some(first) = &paid.retry {
        let (_, body, settlement) = paid::kept(state, &paid, first, now)?;
        let note = Note {
            op: Some(request.op.as_str()),
            outcome: Some("replayed"),
            tenant: Some(Note::tenant_hash(tenant.as_str())),
        };
        return Ok(Replied {
            body,
            note,
            settlement: Some(settlement),
        });
    }
    let kept = (is_read && paid.identifier.is_some()).then(|| paid.clone());
    let paid_by = paid.mark();
    // A store failure ends the work with an error: nothing is settled, nothing charged.
    let work = async {
        let paid_by = Some(paid_by.as_str());
        // A paying wallet is the admin of its own tenant: it acts as itself.
        let actor = Actor {
            tenant: &tenant,
            id: tenant.as_str(),
            admin: true,
        };
        let answer = carry_out(state, &actor, &request, request_sha256, now, paid_by).await?;
        // A read's answer is kept before it is settled: a call that dies between the two is
        // charged, and its resend must find the answer it bought (it used to find none, and
        // answer PAYMENT_ANSWER_UNKNOWN).
        if let (Some(paid), Some(payments)) = (&kept, &state.payments) {
            payments
                .keep_answer(paid, 200, &answer_json(answer.clone())?)
                .await;
        }
        Ok(if answer.data.replayed {
            Charge::Replay(answer)
        } else {
            Charge::Yes(answer)
        })
    };
    let (answer, settlement) = paid::settle_after(state, paid, now, work).await?;
    Replied::new(&tenant, answer, settlement)
}

/// The one way every channel (HTTP with a key or a payment, MCP) carries out a lease request
/// for `tenant`: the service applies and signs it, and what it decided is counted.
async fn carry_out(
    state: &AppState,
    actor: &Actor<'_>,
    request: &LeaseRequest,
    request_sha256: [u8; 32],
    now: Millis,
    paid_by: Option<&str>,
) -> Result<SignedAnswer, ApiError> {
    let answer = state
        .leases()?
        .execute_as(actor, request, request_sha256, now, paid_by)
        .await?;
    if !answer.data.replayed && answer.data.op.writes() {
        metrics::count(if answer.data.granted {
            "LeaseGranted"
        } else {
            "LeaseDenied"
        });
    }
    Ok(answer)
}

/// What an answer was, for the log: replayed, granted or denied.
pub(crate) fn outcome(answer: &SignedAnswer) -> &'static str {
    if answer.data.op.spec().pages {
        return "answered";
    }
    match (answer.data.replayed, answer.data.granted) {
        (true, _) => "replayed",
        (false, true) => "granted",
        (false, false) => "denied",
    }
}

/// Where a paid lease call's committed answer will be. A mutation always keeps a request record
/// when paid: with the caller's requestId, or else one named after the payment authorization,
/// which is used once, so that record is never replayed. The record is what lets a sweeper tell
/// a committed paid mutation from one that never happened. A `get` writes nothing.
fn paid_evidence(request: &mut LeaseRequest, verified: &Verified, now: Millis) -> Evidence {
    if !request.op.writes() {
        return Evidence::None;
    }
    let tenant = Tenant::for_wallet(&verified.payer);
    let id = request
        .request_id
        .get_or_insert_with(|| format!("x402-{}", hex::encode(verified.nonce)));
    Evidence::Record {
        pk: RecordKey::new(&tenant, id).as_str().to_owned(),
        exp: now + REPLAY_WINDOW_MS,
    }
}

fn tenant_for_key(account: &str, tenant_id: Option<&str>) -> Result<Tenant, ApiError> {
    let tenant_id = tenant_id.ok_or_else(|| {
        ApiError::InvalidInput(vec![Witness::new(
            "REQUIRED",
            "/tenantId",
            "tenantId is required with an API key",
        )])
    })?;
    // Both parts were validated (account at key creation, tenantId by the schema); an account
    // that is not a valid name is our stored data's fault, not the caller's.
    if Tenant::for_account(account).is_none() {
        return Err(super::caller::malformed_account());
    }
    Tenant::for_key(account, tenant_id).ok_or_else(|| {
        ApiError::InvalidInput(vec![Witness::new(
            "PATTERN",
            "/tenantId",
            "tenantId is not a valid tenant id",
        )])
    })
}

/// A signed answer as the JSON sent (it always serializes; if not, that is our failure). Its
/// provenance is moved in, not copied.
pub(crate) fn answer_json(answer: SignedAnswer) -> Result<Value, ApiError> {
    let data = serde_json::to_value(&answer.data)
        .map_err(|e| ApiError::Internal(format!("a signed answer would not serialize: {e}")))?;
    // Built by hand: `json!` would copy both trees (it serializes again a `Value` it is given).
    let mut body = serde_json::Map::with_capacity(2);
    body.insert("data".into(), data);
    body.insert("_provenance".into(), answer.provenance);
    Ok(Value::Object(body))
}

/// The integer fields of a lease request.
const WHOLE: &[&str] = &[
    "ttlSeconds",
    "token",
    "limit",
    "waitSeconds",
    "pageSize",
    "leases/*/token",
];

/// A lease request already parsed as JSON (the MCP tool's path), validated exactly as the HTTP
/// body is: the request and the hash of its JSON.
/// A lease request valid by `schema` (the whole lease input, or a narrowing of it).
pub(crate) fn validated(
    value: Value,
    schema: &crate::schema::Schema,
) -> Result<(LeaseRequest, [u8; 32]), ApiError> {
    let (request, body) = lease_valid(value, schema)?;
    Ok((request, sha256(&body)))
}

/// A lease request valid by `schema` and named as its op takes it. The schema says how resources
/// are named too (one target, the set that fits the op), but its refusal of that points at the
/// body, not a field: where the request is otherwise well typed, [`LeaseRequest::shape_errors`]
/// names the fields instead.
fn lease_valid(
    value: Value,
    schema: &crate::schema::Schema,
) -> Result<(LeaseRequest, Value), ApiError> {
    match validate_value::<LeaseRequest>(value.clone(), schema, WHOLE) {
        Ok((request, body)) => Ok((well_shaped(request)?, body)),
        Err(refused) => {
            let mut typed = value;
            crate::schema::normalize_integers(&mut typed, WHOLE);
            match serde_json::from_value::<LeaseRequest>(typed) {
                Ok(request) if !request.shape_errors().is_empty() => {
                    Err(ApiError::InvalidInput(request.shape_errors()))
                }
                _ => Err(refused),
            }
        }
    }
}

/// A request the schema took whose resources are named as an op takes them (one, or one set
/// that fits the op, each resource once): else a 400, before any payment is looked at.
fn well_shaped(request: LeaseRequest) -> Result<LeaseRequest, ApiError> {
    let errors = request.shape_errors();
    if errors.is_empty() {
        Ok(request)
    } else {
        Err(ApiError::InvalidInput(errors))
    }
}

/// A validated lease request from an API key's holder (HTTP or MCP), carried out and signed.
/// An admin op from a key without the admin role is refused (403) before anything is read.
pub(crate) async fn for_account(
    state: &AppState,
    holder: &KeyHolder,
    request: &LeaseRequest,
    request_sha256: [u8; 32],
) -> Result<Replied, ApiError> {
    let tenant = tenant_for_key(&holder.account, request.tenant_id.as_deref())?;
    if request.op.spec().admin && !holder.admin {
        return Err(ApiError::Forbidden(
            "this op needs an API key with the admin role (leasekit keys create --admin)",
        ));
    }
    let id = holder.actor();
    let actor = Actor {
        tenant: &tenant,
        id: &id,
        admin: holder.admin,
    };
    let answer = carry_out(state, &actor, request, request_sha256, now_ms(), None).await?;
    Replied::new(&tenant, answer, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that repeats one lease 2,300 times (62 KB, no key needed to send it) is refused
    /// with as few witnesses as any other 400: the answer stays small (it was 279 KB).
    #[test]
    fn a_body_of_many_repeated_leases_earns_a_small_answer() {
        let leases: Vec<Value> = (0..2_300)
            .map(|_| serde_json::json!({"resource": "r", "token": 1}))
            .collect();
        let body = serde_json::json!({"op": "release", "leases": leases, "holder": "h"});
        let refused = lease_valid(body, crate::schema::lease_input()).unwrap_err();
        let answer = refused.body();
        let witnesses = answer["witnesses"].as_array().unwrap();
        assert_eq!(
            witnesses.len(),
            crate::witness::MAX_WITNESSES + 1,
            "{answer}"
        );
        assert_eq!(witnesses.last().unwrap()["ruleId"], "MORE");
        assert!(
            answer.to_string().len() < 8_192,
            "{} bytes",
            answer.to_string().len()
        );
    }

    /// A stored key whose account is not a valid name is our data's fault: a 500, not a 400
    /// that blames the caller's (valid) tenantId.
    #[test]
    fn a_malformed_stored_account_is_ours_not_the_callers() {
        let err = tenant_for_key("bad account|x", Some("t1")).unwrap_err();
        assert_eq!(err.code(), "INTERNAL_ERROR");
        let err = tenant_for_key(&"a".repeat(65), Some("t1")).unwrap_err();
        assert_eq!(err.code(), "INTERNAL_ERROR");
        // The caller's own bad tenantId is still theirs.
        let err = tenant_for_key("acme", Some("bad|tenant")).unwrap_err();
        assert_eq!(err.code(), "INVALID_INPUT");
        assert!(tenant_for_key("acme", Some("t1")).is_ok());
    }
}
