use super::*;
use serde_json::json;

fn parse(v: serde_json::Value) -> LeaseRequest {
    serde_json::from_value(v).unwrap()
}

/// A refused field's witness shows what was sent, not the op (the attack of the second
/// session of 2026-12-05 found `actual: "release"` for a ttlSeconds of 5).
#[test]
fn a_refused_field_shows_the_value_sent() {
    let request = parse(
        json!({"op": "release", "resource": "r", "holder": "h", "token": 3, "ttlSeconds": 5}),
    );
    let witnesses = request.shape_errors();
    assert_eq!(witnesses.len(), 1, "{witnesses:?}");
    assert_eq!(
        (witnesses[0].rule_id.as_str(), witnesses[0].path.as_str()),
        ("NOT_TAKEN", "/ttlSeconds")
    );
    assert_eq!(witnesses[0].actual, Some(json!(5)));
    assert_eq!(
        witnesses[0].expected,
        Some(json!("no ttlSeconds with op release"))
    );
}

/// get and revoke of a session take no holder or token: a session is ended or shown whole.
#[test]
fn a_sessions_get_and_revoke_take_no_holder_or_token() {
    for op in ["get", "revoke"] {
        let body = json!({"op": op, "session": "s", "holder": "zzz", "token": 3, "reason": "r"});
        let body = if op == "get" {
            json!({"op": op, "session": "s", "holder": "zzz"})
        } else {
            body
        };
        let paths: Vec<String> = parse(body)
            .shape_errors()
            .into_iter()
            .map(|w| w.path)
            .collect();
        let expected: &[&str] = if op == "get" {
            &["/holder"]
        } else {
            &["/holder", "/token"]
        };
        assert_eq!(paths, expected, "{op}");
    }
    let whole = json!({"op": "revoke", "session": "s", "reason": "r"});
    assert!(parse(whole).shape_errors().is_empty());
}

/// A value is bounded in bytes, not characters (the schema's maxLength counts characters):
/// 1024 bytes of two-byte characters pass, one more is refused, naming the field; and only
/// acquire and renew take one.
#[test]
fn a_value_is_at_most_1024_bytes_and_only_acquire_and_renew_take_one() {
    let paths = |body: serde_json::Value| -> Vec<(String, String)> {
        let witnesses = parse(body).shape_errors();
        witnesses.into_iter().map(|w| (w.rule_id, w.path)).collect()
    };
    let acquire =
        |value: String| json!({"op": "acquire", "resource": "r", "holder": "h", "value": value});
    assert!(paths(acquire("é".repeat(512))).is_empty());
    assert!(paths(acquire("x".repeat(1024))).is_empty());
    let over = [("VALUE_TOO_LONG".to_owned(), "/value".to_owned())];
    assert_eq!(paths(acquire("é".repeat(513))), over);
    assert_eq!(paths(acquire("x".repeat(1025))), over);
    let renew = json!({"op": "renew", "resource": "r", "holder": "h", "token": 1, "value": ""});
    assert!(paths(renew).is_empty());
    for op in ["release", "check"] {
        let body = json!({"op": op, "resource": "r", "holder": "h", "token": 1, "value": "v"});
        assert_eq!(
            paths(body),
            [("NOT_TAKEN".to_owned(), "/value".to_owned())],
            "{op}"
        );
    }
}

/// A field an op does not take is refused, naming it, on every op: never accepted and then
/// ignored (the attack of 2026-12-05: check, release and get took limit, waitSeconds and
/// ttlSeconds silently). A requestId on a single resource's read stays taken (and ignored).
#[test]
fn a_field_an_op_does_not_take_is_refused_by_name() {
    let refused = |body: serde_json::Value| -> Vec<String> {
        let request = parse(body);
        request.shape_errors().into_iter().map(|w| w.path).collect()
    };
    let r = |op: &str| json!({"op": op, "resource": "r", "holder": "h", "token": 3});
    let with = |mut body: serde_json::Value, field: &str, value: serde_json::Value| {
        body[field] = value;
        body
    };
    for (op, field) in [
        ("check", "limit"),
        ("check", "waitSeconds"),
        ("check", "ttlSeconds"),
        ("release", "limit"),
        ("release", "waitSeconds"),
        ("release", "ttlSeconds"),
        ("renew", "limit"),
        ("renew", "waitSeconds"),
    ] {
        assert_eq!(
            refused(with(r(op), field, json!(2))),
            [format!("/{field}")],
            "{op}"
        );
    }
    let get = json!({"op": "get", "resource": "r"});
    for field in ["limit", "waitSeconds", "ttlSeconds", "token"] {
        assert_eq!(
            refused(with(get.clone(), field, json!(2))),
            [format!("/{field}")]
        );
    }
    let acquire = json!({"op": "acquire", "resource": "r", "holder": "h"});
    assert_eq!(refused(with(acquire, "token", json!(2))), ["/token"]);
    for op in ["get", "check"] {
        let read = with(r(op), "requestId", json!("req-1"));
        let read = if op == "get" {
            with(read, "token", json!(null))
        } else {
            read
        };
        assert!(refused(read).is_empty(), "{op} with a requestId");
    }
}

#[test]
fn fingerprint_ignores_spelling_but_not_meaning() {
    let a = parse(json!({"op": "acquire", "resource": "r", "holder": "h", "requestId": "x"}));
    let b = parse(json!({"holder": "h", "ttlSeconds": 30, "resource": "r", "op": "acquire"}));
    let c = parse(json!({"op": "acquire", "resource": "r", "holder": "h", "ttlSeconds": 31}));
    let d = parse(json!({"op": "acquire", "resource": "r", "holder": "h2"}));
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_ne!(a.fingerprint(), c.fingerprint());
    assert_ne!(a.fingerprint(), d.fingerprint());
    let waits = parse(json!({"op": "acquire", "resource": "r", "holder": "h", "waitSeconds": 5}));
    assert_eq!(a.fingerprint(), waits.fingerprint());
}

#[test]
fn commands_take_the_default_ttl() {
    let r = parse(json!({"op": "acquire", "resource": "r", "holder": "h"}));
    assert_eq!(
        r.command(),
        Ok(Command::Acquire {
            holder: "h".into(),
            ttl_ms: 30_000,
            limit: 1,
            wait_ms: 0,
            ticket: None,
            session: None,
            value: None,
        })
    );
    let r = parse(json!({"op": "renew", "resource": "r", "holder": "h"}));
    assert_eq!(r.command(), Err(MissingField("token")));
}
