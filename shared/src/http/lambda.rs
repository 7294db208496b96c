//! Serving the router on Lambda behind an API Gateway REST API (payload v1).
//!
//! lambda_http puts the stage in front of the path (`/prod/api/v1/lease`) unless an environment
//! variable says otherwise; the routes are stage-free. [`strip_stage`] removes the request
//! context's stage from the path so routing works whichever way lambda_http was set up.

use super::{AppState, Routes, router};
use axum::http::{Request, Uri};
use lambda_http::request::RequestContext;
use tower::ServiceBuilder;
use tower::util::MapRequest;

/// A request as lambda_http hands it over.
type LambdaRequest = Request<lambda_http::Body>;

/// The router of `routes` as a Lambda service.
pub fn service(
    state: AppState,
    routes: Routes,
) -> MapRequest<axum::Router, fn(LambdaRequest) -> LambdaRequest> {
    ServiceBuilder::new()
        .map_request(strip_stage as fn(LambdaRequest) -> LambdaRequest)
        .service(router(state, routes))
}

/// Remove a leading `/<stage>` (the REST request context's stage) from the path.
pub fn strip_stage<B>(mut request: Request<B>) -> Request<B> {
    let Some(RequestContext::ApiGatewayV1(context)) = request.extensions().get::<RequestContext>()
    else {
        return request;
    };
    let Some(stage) = context.stage.as_deref() else {
        return request;
    };
    let prefix = format!("/{stage}");
    let path = request.uri().path();
    let rest = match path.strip_prefix(&prefix) {
        Some("") => "/",
        Some(rest) if rest.starts_with('/') => rest,
        _ => return request,
    };
    let path_and_query = match request.uri().query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_owned(),
    };
    let mut parts = request.uri().clone().into_parts();
    if let Ok(pq) = path_and_query.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::aws_lambda_events::apigw::ApiGatewayProxyRequestContext;

    fn path_after(stage: Option<&str>, uri: &str) -> String {
        let mut context = ApiGatewayProxyRequestContext::default();
        context.stage = stage.map(str::to_owned);
        let mut request = Request::builder().uri(uri).body(()).unwrap();
        request
            .extensions_mut()
            .insert(RequestContext::ApiGatewayV1(context));
        strip_stage(request).uri().to_string()
    }

    #[test]
    fn strips_the_stage_as_a_whole_segment() {
        assert_eq!(
            path_after(Some("prod"), "/prod/api/v1/lease"),
            "/api/v1/lease"
        );
        assert_eq!(
            path_after(Some("prod"), "/prod/api/v1/lease?x=1"),
            "/api/v1/lease?x=1"
        );
        assert_eq!(path_after(Some("prod"), "/prod"), "/");
        assert_eq!(path_after(Some("prod"), "/production/x"), "/production/x");
        assert_eq!(path_after(Some("prod"), "/api/v1/lease"), "/api/v1/lease");
        assert_eq!(path_after(None, "/prod/api/v1/lease"), "/prod/api/v1/lease");
    }
}
