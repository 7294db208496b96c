//! GET /: where everything is, from the base URL alone: a short page for people, the same as
//! JSON for agents (`Accept: application/json`). And GET /healthz.

use super::docs::{escape, page_head};
use serde_json::{Value, json};

/// Each place: its name, its path under the base URL, its method and what it is for.
const PLACES: &[(&str, &str, &str, &str)] = &[
    (
        "lease",
        "/api/v1/lease",
        "POST",
        "the API: acquire, renew, release, get, check, list, revoke, audit (X-API-KEY, or pay per call with x402)",
    ),
    (
        "docs",
        "/docs/lease/",
        "GET",
        "the API guide: every op with a request and its answer",
    ),
    (
        "console",
        "/console/",
        "GET",
        "see and revoke your leases in a browser (with an API key)",
    ),
    (
        "openapi",
        "/openapi.json",
        "GET",
        "the OpenAPI 3.1 document",
    ),
    (
        "mcp",
        "/mcp",
        "POST",
        "the same ops as MCP tools (streamable HTTP)",
    ),
    (
        "catalog",
        "/api/v1/catalog",
        "GET",
        "capabilities, prices and links, for agents",
    ),
    (
        "sample",
        "/api/v1/samples/lease",
        "GET",
        "a worked request and its signed answer",
    ),
    (
        "didDocument",
        "/.well-known/did.json",
        "GET",
        "the key that signs every answer",
    ),
    (
        "verifyProvenance",
        "/api/v1/verify-provenance",
        "POST",
        "check a signed answer",
    ),
    (
        "health",
        "/healthz",
        "GET",
        "liveness of this process (no store call)",
    ),
];

/// The places as JSON: `links.<name>` is each one's URL.
pub fn index_json(base: &str) -> Value {
    let links: serde_json::Map<String, Value> = PLACES
        .iter()
        .map(|(name, path, _, _)| ((*name).to_owned(), json!(format!("{base}{path}"))))
        .collect();
    let routes: Vec<Value> = PLACES
        .iter()
        .map(|(name, path, method, what)| {
            json!({"name": name, "method": method, "url": format!("{base}{path}"), "description": what})
        })
        .collect();
    json!({
        "name": "leasekit",
        "description": "Leases with fencing tokens for software agents: one holder at a time, a token that lets the store refuse a stale one, signed answers.",
        "links": links,
        "routes": routes,
    })
}

/// The places as a page.
pub fn index_html(base: &str) -> String {
    let mut html = page_head("leasekit");
    html.push_str(
        "<h1>leasekit</h1>\n<p>Leases with fencing tokens for software agents: one holder at a \
         time, a token that lets the store refuse a stale one, signed answers.</p>\n<ul>\n",
    );
    for (_, path, method, what) in PLACES {
        let url = escape(&format!("{base}{path}"));
        let shown = match *method {
            "GET" => format!("<a href=\"{url}\">{}</a>", escape(path)),
            _ => format!("<code>{method} {}</code>", escape(path)),
        };
        html.push_str(&format!("<li>{shown}: {}</li>\n", escape(what)));
    }
    html.push_str("</ul>\n</body></html>\n");
    html
}

/// GET /healthz: this process answers. It calls no store (a check every few seconds would be
/// paid for on DynamoDB, and a store outage is what the 502s and their alarm report).
pub fn health() -> Value {
    json!({"status": "ok"})
}

/// Whether an `Accept` header (all of them, joined with commas) prefers JSON to HTML: the media
/// range that names each most closely (`application/json`, then `application/*`, then `*/*`;
/// case aside) gives its quality, and JSON wins only with a higher one. A tie, no header, or none
/// naming either: HTML, the page a person opens. A range whose quality is not one (0 to 1) is
/// left out.
pub fn prefers_json(accept: &str) -> bool {
    // (quality, how closely it names the type) of the closest range for each.
    let mut json = (0.0_f32, 0);
    let mut html = (0.0_f32, 0);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let quality = parts
            .filter_map(|p| p.trim().split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1.0), |(_, q)| q.trim().parse::<f32>().ok());
        let Some(quality) = quality.filter(|q| (0.0..=1.0).contains(q)) else {
            continue;
        };
        for (target, kind, best) in [
            ("application/json", "application/*", &mut json),
            ("text/html", "text/*", &mut html),
        ] {
            let closeness = match media.as_str() {
                m if m == target => 3,
                m if m == kind => 2,
                "*/*" => 1,
                _ => 0,
            };
            if closeness > best.1 {
                *best = (quality, closeness);
            }
        }
    }
    json.0 > html.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_place_is_linked_under_the_base_in_both_forms() {
        let base = "https://h.example/prod";
        let index = index_json(base);
        let html = index_html(base);
        for (name, path, method, _) in PLACES {
            let url = format!("{base}{path}");
            assert_eq!(index["links"][name], url.as_str());
            match *method {
                "GET" => assert!(html.contains(&format!("href=\"{url}\"")), "{name}"),
                _ => assert!(html.contains(&format!("{method} {path}")), "{name}"),
            }
        }
        assert_eq!(index["routes"].as_array().unwrap().len(), PLACES.len());
    }

    /// The attack of the second session of 2026-12-05: the first type named used to win,
    /// whatever its quality (`application/json;q=0` got JSON).
    #[test]
    fn accept_is_read_with_its_qualities() {
        let cases = [
            ("application/json", true),
            ("application/JSON", true),
            ("application/json;q=0", false),
            ("application/json;q=0.1, text/html", false),
            ("text/html;q=0.1, application/json", true),
            ("text/html, application/json", false),
            ("application/json, text/html", false),
            ("application/json;q=0.5, text/html;q=0.5", false),
            ("application/json;q=2, text/html", false),
            ("application/json;q=abc", false),
            (
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                false,
            ),
            ("*/*", false),
            ("application/*", true),
            ("", false),
            ("application/json; charset=utf-8; q=0.5, text/*;q=0.4", true),
        ];
        for (accept, json) in cases {
            assert_eq!(prefers_json(accept), json, "{accept}");
        }
    }
}
