//! GET /console/: the page for people (docs/adr/0008): static HTML, CSS and a few ES modules
//! (`console.js`, the entry, imports the others), built into the binary, served under a strict
//! Content-Security-Policy. The page calls the lease API with the key its user types in; it holds
//! nothing of its own.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// No inline script or style, nothing from elsewhere, no framing, no form posts: caller-chosen
/// text (holders, resources, reasons) can only ever be text. `script-src 'self'` lets the page
/// load its modules (`<script type="module">` and their `import`s) from this origin only.
pub const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the page: its name under `/console/` (the page itself is `""`, i.e.
/// `/console/`), its text and its content type. Each one gets a route of its own, so any other
/// name under `/console/` is refused as every unknown path is. A module that console.js imports
/// must be here too (a test checks).
pub const ASSETS: [(&str, &str, &str); 7] = [
    (
        "",
        include_str!("../../console/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "console.css",
        include_str!("../../console/console.css"),
        "text/css; charset=utf-8",
    ),
    ("console.js", include_str!("../../console/console.js"), JS),
    ("shown.js", include_str!("../../console/shown.js"), JS),
    ("time.js", include_str!("../../console/time.js"), JS),
    ("protocol.js", include_str!("../../console/protocol.js"), JS),
    ("text.js", include_str!("../../console/text.js"), JS),
];

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

/// `router` with the console's routes: `/console` (to the folder) and each of [`ASSETS`].
pub fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    let mut router = router.route("/console", get(to_folder));
    for (name, body, content_type) in ASSETS {
        router = router.route(
            &format!("/console/{name}"),
            get(move || async move { asset(body, content_type) }),
        );
    }
    router
}

/// `/console` without its slash: the page's relative links need the folder.
async fn to_folder() -> Response {
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("console/"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn served() -> BTreeSet<&'static str> {
        ASSETS.iter().map(|(name, _, _)| *name).collect()
    }

    /// Every script in shared/console/ (its tests aside) is served, and nothing else is listed
    /// twice: a module added there and forgotten here would break the page.
    #[test]
    fn every_module_in_the_folder_is_served() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/console");
        let on_disk: BTreeSet<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".js") || name.ends_with(".css"))
            .collect();
        let listed: BTreeSet<String> = served()
            .into_iter()
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect();
        assert_eq!(on_disk, listed);
        assert_eq!(served().len(), ASSETS.len(), "a name listed twice");
        for (name, _, content_type) in ASSETS {
            if name.ends_with(".js") {
                assert_eq!(content_type, JS, "{name}");
            }
        }
    }

    /// What the modules import is served, from the same folder (`./name.js`): a bare or
    /// outside import would fail in the browser under `script-src 'self'`.
    #[test]
    fn every_import_is_a_served_neighbour() {
        let served = served();
        for (name, body, _) in ASSETS.iter().filter(|(name, _, _)| name.ends_with(".js")) {
            for (at, _) in body.match_indices(" from \"") {
                let rest = &body[at + " from \"".len()..];
                let target = &rest[..rest.find('"').unwrap()];
                let local = target.strip_prefix("./").unwrap_or_else(|| {
                    panic!("{name} imports {target:?}: only ./name.js is served")
                });
                assert!(
                    served.contains(local),
                    "{name} imports {target}, not served"
                );
            }
        }
    }
}
