//! GET /console/: the page for people (docs/adr/0008): static HTML, CSS and one script, built
//! into the binary, served under a strict Content-Security-Policy. The page calls the lease API
//! with the key its user types in; it holds nothing of its own.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// No inline script or style, nothing from elsewhere, no framing, no form posts: caller-chosen
/// text (holders, resources, reasons) can only ever be text.
pub const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../../console/index.html");
const CONSOLE_CSS: &str = include_str!("../../console/console.css");
const CONSOLE_JS: &str = include_str!("../../console/console.js");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    let fixed = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONSOLE_CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

pub async fn page() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

pub async fn stylesheet() -> Response {
    asset(CONSOLE_CSS, "text/css; charset=utf-8")
}

pub async fn script() -> Response {
    asset(CONSOLE_JS, "text/javascript; charset=utf-8")
}

/// `/console` without its slash: the page's relative links need the folder.
pub async fn to_folder() -> Response {
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("console/"));
    response
}
