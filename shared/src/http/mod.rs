//! The HTTP face of the service: one router, served alike by the Lambda functions (through
//! `lambda_http`) and by `leasekit serve` (through `axum::serve`).

pub mod body;
pub mod caller;
mod claims;
mod discovery;
pub mod error;
pub mod lambda;
mod lease;
mod mcp;
pub mod observe;
pub mod paid;
mod provenance;

pub use caller::{Authenticator, Caller};
pub use error::ApiError;

use crate::config::PublicUrl;
use crate::lease::service::LeaseService;
use crate::provenance::Issuer;
use crate::store::{ClaimStore, KeyStore, LeaseStore, Tables};
use crate::x402::payments::Payments;
use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{get, post};

/// Everything a handler needs, built once per process.
#[derive(Clone)]
pub struct AppState {
    pub leases: LeaseService,
    pub auth: Authenticator,
    /// The key that signs answers (its public half is published and checked against).
    pub issuer: Issuer,
    /// x402 payments for callers without a key; `None`: keys only.
    pub payments: Option<Payments>,
    pub claims: ClaimStore,
    /// Free claims per wallet or account per clock hour.
    pub free_claims_per_hour: u32,
    /// The URL callers reach the service at: sign-in-with-x proofs must name its origin, and
    /// every advertised URL starts with it. Never taken from the request's headers.
    pub public: PublicUrl,
    /// Also accept loopback host names on /mcp (local runs, not Lambda).
    pub loopback_hosts: bool,
}

impl AppState {
    /// State over the given DynamoDB client and tables. API keys are checked in this process;
    /// `on_lambda`: also take an account resolved by an API Gateway authorizer.
    pub fn new(
        client: Client,
        tables: &Tables,
        issuer: Issuer,
        on_lambda: bool,
        payments: Option<Payments>,
    ) -> Self {
        let auth = Authenticator::new(KeyStore::new(client.clone(), &tables.keys), on_lambda);
        // Compile the request schemas now, at init, not on the first request.
        crate::schema::lease_input();
        crate::schema::verify_input();
        let claims = ClaimStore::new(client.clone(), &tables.claims);
        let store = LeaseStore::new(client, &tables.leases, &tables.requests);
        Self {
            leases: LeaseService::new(store, issuer.clone()),
            payments,
            claims,
            free_claims_per_hour: 60,
            public: PublicUrl::default(),
            loopback_hosts: !on_lambda,
            auth,
            issuer,
        }
    }
}

/// Every route of the service.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/lease", post(lease::handle))
        .route("/api/v1/verify-provenance", post(provenance::verify))
        .route("/claim", post(claims::paid))
        .route("/openapi.json", get(discovery::openapi))
        .route("/api/v1/catalog", get(discovery::catalog))
        .route("/docs/index.json", get(discovery::catalog))
        .route("/docs/lease/", get(discovery::lease_page))
        .route("/docs/lease", get(discovery::lease_page))
        .route("/docs/lease.json", get(discovery::lease_page_json))
        .route("/api/v1/samples/lease", get(discovery::lease_sample))
        .route("/claim/free", post(claims::free))
        .route("/.well-known/did.json", get(provenance::did_document))
        .with_state(state.clone())
        .merge(mcp::router(state))
        .layer(axum::middleware::from_fn(observe::log_request))
        .layer(axum::middleware::from_fn(detached))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
}

/// Run the request in a task of its own. A server drops a request's future when its caller hangs
/// up; in its own task the request goes on: once a request is read, it is carried out whole,
/// its store writes, its settlement and its log line included, whenever the caller leaves.
pub async fn detached(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "request task failed");
            ApiError::Internal.into_response()
        }
    }
}
