//! The HTTP face of the service: the routes of each resource, served alike by the Lambda
//! functions (through `lambda_http`, one resource each) and by `leasekit serve` (through
//! `axum::serve`, all of them).

pub mod body;
pub mod caller;
mod claims;
mod console;
mod discovery;
pub mod error;
pub mod lambda;
mod lease;
mod mcp;
pub mod observe;
pub mod paid;
mod provenance;

pub use caller::{Authenticator, Caller, ConnectionOwner};
pub use error::ApiError;

use crate::auth::KeyChanges;
use crate::config::PublicUrl;
use crate::provenance::Issuer;
use crate::service::lease::LeaseService;
use crate::service::payments::Payments;
use crate::store::{ClaimStore, KeyStore, LeaseStore, Tables};
use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{get, post};
use std::sync::Arc;

/// What a process's routes are built from: typed, so no flag is positional and nothing is set
/// after construction.
pub struct Settings {
    pub dynamodb: Client,
    pub tables: Tables,
    /// The signing key: for the routes that sign ([`Routes::signs`]), `None` elsewhere.
    pub issuer: Option<Issuer>,
    /// x402 payments for callers without a key; `None`: keys only.
    pub payments: Option<Payments>,
    /// Free claims per wallet or account in any rolling hour.
    pub free_claims_per_hour: u32,
    /// The URL callers reach the service at (see [`AppState::public`]).
    pub public: PublicUrl,
    /// On Lambda: also take an account resolved by an API Gateway authorizer, and accept no
    /// loopback host names on /mcp.
    pub on_lambda: bool,
    /// Off Lambda: what tells this process that the store's API keys changed, so that it can
    /// remember resolved keys until then (see [`Authenticator::new`]).
    pub key_changes: Option<Arc<dyn KeyChanges>>,
    /// Waiting calls one payer (an account or a wallet) may have in progress at once in this
    /// process; `None`: unbounded (Lambda: one call per execution, bounded by concurrency).
    pub waits_per_payer: Option<std::num::NonZeroUsize>,
}

/// Which routes a process serves. Each Lambda function serves one resource and builds, loads
/// and is allowed (its IAM policy) only what that resource uses; `leasekit serve` serves all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// POST /api/v1/lease.
    Lease,
    /// POST /claim (paid).
    Claim,
    /// POST /claim/free.
    ClaimFree,
    /// POST /mcp.
    Mcp,
    /// The free public routes: verify-provenance, the DID document, OpenAPI, catalog, docs and
    /// the signed sample.
    Public,
    /// Every route (`leasekit serve`).
    All,
}

impl Routes {
    /// Whether these routes sign answers, and so need the signing key.
    pub fn signs(self) -> bool {
        !matches!(self, Self::Claim | Self::ClaimFree)
    }
}

/// Everything a handler needs, built once per process and shared: axum hands each request its
/// own clone of the state, which was a copy of every table name, URL and key (1.5% of the local
/// server's CPU at 16 clients: BENCHMARKS.md, issue #28) and is now a reference count.
#[derive(Clone)]
pub struct AppState(std::sync::Arc<AppParts>);

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What [`AppState`] shares.
pub struct AppParts {
    /// Leases applied and signed; `None` where no route signs.
    leases: Option<LeaseService>,
    pub auth: Authenticator,
    /// The key that signs answers (its public half is published and checked against); `None`
    /// where no route signs.
    issuer: Option<Issuer>,
    /// x402 payments for callers without a key; `None`: keys only.
    pub payments: Option<Payments>,
    pub claims: ClaimStore,
    /// Free claims per wallet or account in any rolling hour.
    pub free_claims_per_hour: u32,
    /// The URL callers reach the service at: sign-in-with-x proofs must name its origin, and
    /// every advertised URL starts with it. Never taken from the request's headers.
    pub public: PublicUrl,
    /// Also accept loopback host names on /mcp (local runs, not Lambda).
    pub loopback_hosts: bool,
    /// Answer a watch as a stream of server-sent events when asked (local runs, not Lambda:
    /// see `lease::stream`).
    pub streams: bool,
}

/// How often a waiting acquire on Lambda looks at its resource again (jittered between half and
/// all of it): one round each, some 5 a second (what a round costs: BENCHMARKS.md); the
/// release-to-grant delay it gives is about half of it on average.
const LAMBDA_WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(250);

impl AppState {
    pub fn new(settings: Settings) -> Self {
        let Settings {
            dynamodb,
            tables,
            issuer,
            payments,
            free_claims_per_hour,
            public,
            on_lambda,
            key_changes,
            waits_per_payer,
        } = settings;
        let keys = KeyStore::new(dynamodb.clone(), &tables.keys);
        let auth = Authenticator::new(keys, on_lambda, key_changes);
        // Compile the request schemas now, at init, not on the first request.
        crate::schema::lease_input();
        crate::schema::verify_input();
        let claims = ClaimStore::new(dynamodb.clone(), &tables.claims);
        let store = LeaseStore::new(dynamodb, &tables.leases, &tables.requests);
        Self(std::sync::Arc::new(AppParts {
            leases: issuer.clone().map(|issuer| {
                let service = match on_lambda {
                    // Other instances write the same table: waiters read it again now and then.
                    true => LeaseService::new(store, issuer).polling(LAMBDA_WAIT_POLL),
                    false => LeaseService::new(store, issuer),
                };
                match waits_per_payer {
                    Some(each) => service.waits_per_payer(each),
                    None => service,
                }
            }),
            payments,
            claims,
            free_claims_per_hour,
            public,
            loopback_hosts: !on_lambda,
            streams: !on_lambda,
            auth,
            issuer,
        }))
    }

    /// The lease service. Only routes that sign are built with a state that lacks it
    /// ([`router`] checks), so the error is never reached; it would be ours, not the caller's.
    pub fn leases(&self) -> Result<&LeaseService, ApiError> {
        self.leases.as_ref().ok_or_else(unsigned)
    }

    /// The signing key (see [`Self::leases`]).
    pub fn issuer(&self) -> Result<&Issuer, ApiError> {
        self.issuer.as_ref().ok_or_else(unsigned)
    }
}

fn unsigned() -> ApiError {
    ApiError::Internal("a signing route was built without the signing key".into())
}

/// The routes of `routes`, with the request log and the detached task around them. A state
/// without the signing key serves no route that signs.
///
/// # Panics
/// If `routes` sign and `state` has no signing key: a wiring mistake, caught at init.
pub fn router(state: AppState, routes: Routes) -> Router {
    assert!(
        !routes.signs() || state.issuer.is_some(),
        "{routes:?} routes sign answers: the state needs the signing key"
    );
    let all = routes == Routes::All;
    let mut router = Router::new();
    if all || routes == Routes::Lease {
        router = router.route("/api/v1/lease", post(lease::handle));
    }
    if all || routes == Routes::Claim {
        router = router.route("/claim", post(claims::paid));
    }
    if all || routes == Routes::ClaimFree {
        router = router.route("/claim/free", post(claims::free));
    }
    if all || routes == Routes::Public {
        router = router
            .route("/", get(discovery::index))
            .route("/healthz", get(discovery::health))
            .route("/api/v1/verify-provenance", post(provenance::verify))
            .route("/.well-known/did.json", get(provenance::did_document))
            .route("/openapi.json", get(discovery::openapi))
            .route("/api/v1/catalog", get(discovery::catalog))
            .route("/docs/index.json", get(discovery::catalog))
            .route("/docs/lease/", get(discovery::lease_page))
            .route("/docs/lease", get(discovery::lease_page))
            .route("/docs/lease.json", get(discovery::lease_page_json))
            .route("/api/v1/samples/lease", get(discovery::lease_sample));
        router = console::routes(router);
    }
    let mut router = router.with_state(state.clone());
    if all || routes == Routes::Mcp {
        router = router.merge(mcp::router(state));
    }
    router
        .layer(axum::middleware::from_fn(observe::log_request))
        .layer(axum::middleware::from_fn(detached))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
}

/// Run the request in a task of its own, inside its span ([`observe::span_for`]). A server drops
/// a request's future when its caller hangs up; in its own task the request goes on: once a
/// request is read, it is carried out whole, its store writes, its settlement and its log line
/// included, whenever the caller leaves. It still learns of the hang-up, where its server can
/// see one ([`crate::service::watching_hang_up`]): a wait ends there.
pub async fn detached(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use tracing::Instrument;
    let span = observe::span_for(&request);
    let run = crate::service::carrying_hang_up(next.run(request).instrument(span));
    match tokio::spawn(run).await {
        Ok(response) => response,
        Err(e) => ApiError::Internal(format!("request task failed: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    /// A state on a store nobody listens at: these requests never reach it.
    fn state(issuer: Option<Issuer>) -> AppState {
        AppState::new(Settings {
            dynamodb: crate::store::local_client("http://127.0.0.1:9"),
            tables: Tables::with_prefix("t"),
            issuer,
            payments: None,
            free_claims_per_hour: 60,
            public: PublicUrl::default(),
            on_lambda: true,
            key_changes: None,
            waits_per_payer: None,
        })
    }

    /// Whether `routes` serve `path`: anything but the router's own 404 says they do.
    async fn serves(routes: Routes, method: &str, path: &str) -> bool {
        let issuer = routes.signs().then(|| Issuer::from_seed(&[7; 32]));
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let response = router(state(issuer), routes)
            .oneshot(request)
            .await
            .unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        body["code"] != "NOT_FOUND"
    }

    /// On Lambda a watch is one call: asked for a stream, the function says so (406) and
    /// starts none (it would be billed for the open stream while it polls the table).
    #[tokio::test]
    async fn a_lambda_function_streams_nothing() {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri("/api/v1/lease")
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(Body::from(r#"{"op":"watch","resource":"r"}"#))
            .unwrap();
        let issuer = Some(Issuer::from_seed(&[7; 32]));
        let response = router(state(issuer), Routes::Lease)
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), 406);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("chain watches"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn each_function_serves_its_own_routes_and_no_other() {
        let owned = [
            (Routes::Lease, "POST", "/api/v1/lease"),
            (Routes::Claim, "POST", "/claim"),
            (Routes::ClaimFree, "POST", "/claim/free"),
            (Routes::Mcp, "POST", "/mcp"),
            (Routes::Public, "POST", "/api/v1/verify-provenance"),
            (Routes::Public, "GET", "/.well-known/did.json"),
            (Routes::Public, "GET", "/openapi.json"),
            (Routes::Public, "GET", "/api/v1/samples/lease"),
        ];
        let functions = [
            Routes::Lease,
            Routes::Claim,
            Routes::ClaimFree,
            Routes::Mcp,
            Routes::Public,
        ];
        for (owner, method, path) in owned {
            assert!(serves(Routes::All, method, path).await, "All: {path}");
            for routes in functions {
                assert_eq!(
                    serves(routes, method, path).await,
                    routes == owner,
                    "{routes:?}: {method} {path}"
                );
            }
        }
    }

    /// The console's files, each with the page's headers, from the public function only; any
    /// other name under /console/ is refused as every unknown path is.
    #[tokio::test]
    async fn the_console_serves_its_files_and_no_other() {
        for (name, body, content_type) in console::ASSETS {
            let path = format!("/console/{name}");
            let request = axum::http::Request::get(&path).body(Body::empty()).unwrap();
            let issuer = Some(Issuer::from_seed(&[7; 32]));
            let response = router(state(issuer), Routes::Public)
                .oneshot(request)
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{path}");
            let headers = response.headers();
            assert_eq!(headers[axum::http::header::CONTENT_TYPE], content_type);
            assert_eq!(
                headers[axum::http::header::CONTENT_SECURITY_POLICY],
                console::CONSOLE_CSP
            );
            assert_eq!(
                headers[axum::http::header::X_CONTENT_TYPE_OPTIONS],
                "nosniff"
            );
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            assert_eq!(bytes, body.as_bytes(), "{path}");
            for routes in [Routes::Lease, Routes::Claim, Routes::ClaimFree, Routes::Mcp] {
                assert!(!serves(routes, "GET", &path).await, "{routes:?}: {path}");
            }
        }
        assert!(serves(Routes::Public, "GET", "/console").await);
        for path in [
            "/console/nope.js",
            "/console/index.html",
            "/console/test/shown.test.mjs",
            "/console/console.js/",
            "/console/shown",
        ] {
            assert!(!serves(Routes::Public, "GET", path).await, "{path}");
            assert!(!serves(Routes::All, "GET", path).await, "{path}");
        }
    }

    #[test]
    fn only_the_routes_that_sign_need_the_signing_key() {
        let signing: Vec<Routes> = [
            Routes::Lease,
            Routes::Claim,
            Routes::ClaimFree,
            Routes::Mcp,
            Routes::Public,
            Routes::All,
        ]
        .into_iter()
        .filter(|r| r.signs())
        .collect();
        assert_eq!(
            signing,
            [Routes::Lease, Routes::Mcp, Routes::Public, Routes::All]
        );
        // The claim functions build without it; a signing one refuses to, at init.
        let _ = router(state(None), Routes::Claim);
        let _ = router(state(None), Routes::ClaimFree);
        let built = std::panic::catch_unwind(|| router(state(None), Routes::Lease));
        assert!(built.is_err());
    }
}
