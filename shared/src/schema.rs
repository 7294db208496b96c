//! Input validation against the JSON schemas in `shared/schemas/`, with witnesses that name the
//! field (a JSON pointer) and the rule.
//!
//! The schema files are the single source of truth: handlers validate with them, and the OpenAPI
//! document is built from them. Validation runs before anything else looks at the request, so a
//! request that fails it is answered 400 and changes nothing.

use crate::lease::Op;
use crate::witness::Witness;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;
use std::sync::LazyLock;

/// The lease request schema as published.
pub const LEASE_INPUT_JSON: &str = include_str!("../schemas/lease-input.json");

/// A compiled schema.
pub struct Schema {
    validator: Validator,
}

/// The claim request schemas as published.
pub const CLAIM_INPUT_JSON: &str = include_str!("../schemas/claim-input.json");
pub const CLAIM_FREE_INPUT_JSON: &str = include_str!("../schemas/claim-free-input.json");

/// The answer schemas as published (OpenAPI; the MCP tools' output schemas).
pub const LEASE_ANSWER_JSON: &str = include_str!("../schemas/lease-answer.json");
pub const CLAIM_ANSWER_JSON: &str = include_str!("../schemas/claim-answer.json");

/// The verify-provenance request schema as published.
pub const VERIFY_INPUT_JSON: &str = include_str!("../schemas/verify-provenance-input.json");

static LEASE_INPUT: LazyLock<Schema> = LazyLock::new(|| Schema::compile(LEASE_INPUT_JSON));
/// The lease tools of MCP, each a narrowing of the lease input to some ops (see [`lease_tool`]).
static LEASE_TOOLS: LazyLock<Vec<(LeaseTool, Value, Schema)>> = LazyLock::new(|| {
    LeaseTool::ALL
        .iter()
        .map(|tool| {
            let schema = lease_tool_schema(*tool);
            let compiled = Schema::compile(&schema.to_string());
            (*tool, schema, compiled)
        })
        .collect()
});
static VERIFY_INPUT: LazyLock<Schema> = LazyLock::new(|| Schema::compile(VERIFY_INPUT_JSON));
static CLAIM_INPUT: LazyLock<Schema> = LazyLock::new(|| Schema::compile(CLAIM_INPUT_JSON));
static CLAIM_FREE_INPUT: LazyLock<Schema> =
    LazyLock::new(|| Schema::compile(CLAIM_FREE_INPUT_JSON));

pub fn claim_input() -> &'static Schema {
    &CLAIM_INPUT
}

pub fn claim_free_input() -> &'static Schema {
    &CLAIM_FREE_INPUT
}

/// The compiled lease request schema (compiled once per process).
pub fn lease_input() -> &'static Schema {
    &LEASE_INPUT
}

/// The MCP tools that carry lease ops: which ops each offers is the ops table's
/// ([`crate::lease::ops::Spec::tools`]).
pub use crate::lease::ops::Tool as LeaseTool;

/// The lease request schema narrowed to `tool`'s ops: the fields none of them takes are not in
/// it, so a call that sends one is refused (a read tool is never quietly asked to write).
fn lease_tool_schema(tool: LeaseTool) -> Value {
    use crate::lease::ops::Field;
    let mut schema: Value =
        serde_json::from_str(LEASE_INPUT_JSON).expect("embedded schema is JSON");
    let ops: Vec<Op> = tool.ops().collect();
    let specs: Vec<&crate::lease::ops::Spec> = ops.iter().map(|op| op.spec()).collect();
    let any = |takes: &dyn Fn(&crate::lease::ops::Spec) -> bool| specs.iter().any(|s| takes(s));
    let (title, description) = match tool {
        LeaseTool::Lease => ("Lease request (acquire, renew, release, get, check)", None),
        LeaseTool::Read => (
            "Lease read (get, check, watch)",
            Some(
                "Read a resource: get shows its live permits; check answers whether a token is a live permit's (current); watch waits for the next change. Nothing is changed.",
            ),
        ),
        LeaseTool::List => (
            "Lease list",
            Some(
                "A page of your tenant's resources with a live permit or waiter, by name (prefix filter, cursor paging). Advisory: a grant shows within about 2 s. Nothing is changed.",
            ),
        ),
        LeaseTool::Audit => (
            "Lease audit",
            Some(
                "A page of your tenant's revoke audit, newest first (kept 90 days): who revoked which permits, when and why. Admin keys and paying wallets only. Nothing is changed.",
            ),
        ),
        LeaseTool::Revoke => (
            "Lease revoke and reopen",
            Some(
                "revoke: end a holder's permit, or every permit of a resource, at once, with a reason kept in the audit: the holders learn REVOKED. Admin keys and paying wallets only. reopen: end a finished resource's mark early (its finisher with holder and token, an admin key or the paying wallet), audited too.",
            ),
        ),
    };
    schema["title"] = title.into();
    if let Some(description) = description {
        schema["description"] = description.into();
    }
    let names: Vec<&str> = ops.iter().map(|op| op.as_str()).collect();
    schema["properties"]["op"]["enum"] = serde_json::json!(names);
    let kept = [
        ("holder", any(&|s| s.holder != Field::Unused)),
        ("token", any(&|s| s.token != Field::Unused)),
        ("ttlSeconds", any(&|s| s.ttl)),
        ("limit", any(&|s| s.limit != Field::Unused)),
        ("waitSeconds", any(&|s| s.wait != Field::Unused)),
        ("resource", any(&|s| s.resource != Field::Unused)),
        (
            "session",
            any(&|s| s.session != crate::lease::ops::SessionField::Unused),
        ),
        ("reason", any(&|s| s.reason != Field::Unused)),
        ("cursor", any(&|s| s.pages)),
        ("pageSize", any(&|s| s.pages)),
        ("prefix", any(&|s| s.prefix != Field::Unused)),
        ("requestId", any(&|s| s.writes)),
        ("resources", any(&|s| s.set == Some("resources"))),
        ("leases", any(&|s| s.set == Some("leases"))),
        ("value", any(&|s| s.value != Field::Unused)),
        ("stateTag", any(&|s| s.state_tag != Field::Unused)),
        // A done release's fields, and an acquire's candidates (docs/adr/0012).
        ("candidates", any(&|s| s.op == Op::Acquire)),
        ("done", any(&|s| s.op == Op::Release)),
        ("result", any(&|s| s.op == Op::Release)),
        ("keepDoneSeconds", any(&|s| s.op == Op::Release)),
    ];
    if let Some(properties) = schema["properties"].as_object_mut() {
        for (field, keep) in kept {
            if !keep {
                properties.remove(field);
            }
        }
    }
    schema
}

/// `tool`'s input schema, as published and compiled.
pub fn lease_tool(tool: LeaseTool) -> (&'static Value, &'static Schema) {
    let (_, value, schema) = LEASE_TOOLS
        .iter()
        .find(|(t, _, _)| *t == tool)
        .expect("every tool has its schema");
    (value, schema)
}

/// The compiled verify-provenance request schema.
pub fn verify_input() -> &'static Schema {
    &VERIFY_INPUT
}

/// Longest `actual` value echoed back in a witness, in characters.
const ECHO_LIMIT: usize = 200;

/// Longest unknown property name echoed back in a witness, in characters.
const NAME_LIMIT: usize = 64;

pub use crate::witness::MAX_WITNESSES;

impl Schema {
    /// Compile an embedded schema. The schemas ship inside the binary and a unit test compiles
    /// each, so a failure here is a build defect, not a runtime condition.
    fn compile(text: &str) -> Self {
        let schema: Value = serde_json::from_str(text).expect("embedded schema is JSON");
        let validator = jsonschema::validator_for(&schema).expect("embedded schema compiles");
        Self { validator }
    }

    /// `Ok` when `instance` is valid; otherwise one witness per violation, in document order,
    /// [`crate::witness::capped`].
    pub fn check(&self, instance: &Value) -> Result<(), Vec<Witness>> {
        let mut witnesses: Vec<Witness> = self
            .validator
            .iter_errors(instance)
            .flat_map(|e| witnesses_for(&e))
            .collect();
        if witnesses.is_empty() {
            return Ok(());
        }
        witnesses.sort_by(|a, b| a.path.cmp(&b.path).then(a.rule_id.cmp(&b.rule_id)));
        witnesses.dedup_by(|a, b| a.path == b.path && a.rule_id == b.rule_id);
        Err(crate::witness::capped(&witnesses))
    }
}

/// Escape one property name as a JSON pointer segment (RFC 6901).
fn pointer_segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// `text`, cut to `limit` characters (then marked with an ellipsis).
fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() > limit {
        format!("{}…", text.chars().take(limit).collect::<String>())
    } else {
        text.to_owned()
    }
}

fn echo(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(clip(s, ECHO_LIMIT)),
        Value::Object(_) | Value::Array(_) => Value::String(format!("<{}>", type_name(value))),
        other => other.clone(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn witnesses_for(error: &ValidationError<'_>) -> Vec<Witness> {
    let at = error.instance_path().as_str().to_owned();
    let field = if at.is_empty() {
        "the body".to_owned()
    } else {
        at.clone()
    };
    let actual = echo(error.instance());
    let one = |rule: &str, detail: String, expected: Value| {
        vec![
            Witness::new(rule, &at, detail)
                .expected(expected)
                .actual(actual.clone()),
        ]
    };
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            vec![
                Witness::new(
                    "REQUIRED",
                    &format!("{at}/{}", pointer_segment(name)),
                    format!("{name} is required"),
                )
                .expected("present"),
            ]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| {
                // The name is the caller's: echoed cut short, like any value.
                let name = clip(name, NAME_LIMIT);
                Witness::new(
                    "UNKNOWN_PROPERTY",
                    &format!("{at}/{}", pointer_segment(&name)),
                    format!("{name} is not a property of this request"),
                )
            })
            .collect(),
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => format!("{set:?}").to_lowercase(),
            };
            one(
                "TYPE",
                format!("{field} must be of type {expected}"),
                Value::String(expected),
            )
        }
        ValidationErrorKind::Enum { options } => one(
            "ENUM",
            format!("{field} must be one of {options}"),
            (**options).clone(),
        ),
        ValidationErrorKind::Pattern { pattern } => one(
            "PATTERN",
            format!("{field} must match {pattern}"),
            Value::String(pattern.clone()),
        ),
        ValidationErrorKind::MinLength { limit } => one(
            "MIN_LENGTH",
            format!("{field} must have at least {limit} characters"),
            (*limit).into(),
        ),
        ValidationErrorKind::MaxLength { limit } => one(
            "MAX_LENGTH",
            format!("{field} must have at most {limit} characters"),
            (*limit).into(),
        ),
        ValidationErrorKind::Minimum { limit } => one(
            "MINIMUM",
            format!("{field} must be at least {limit}"),
            limit.clone(),
        ),
        ValidationErrorKind::Maximum { limit } => one(
            "MAXIMUM",
            format!("{field} must be at most {limit}"),
            limit.clone(),
        ),
        // The sets' bounds: named here, because the library's own sentence quotes the whole
        // array (a 60 KB array made a 118 KB answer, found by the attack of 2026-12-02).
        ValidationErrorKind::MinItems { limit } => one(
            "MIN_ITEMS",
            format!("{field} must have at least {limit} items"),
            (*limit).into(),
        ),
        ValidationErrorKind::MaxItems { limit } => one(
            "MAX_ITEMS",
            format!("{field} must have at most {limit} items"),
            (*limit).into(),
        ),
        ValidationErrorKind::UniqueItems => one(
            "UNIQUE_ITEMS",
            format!("{field} must not name an item twice"),
            Value::Null,
        ),
        // Any other rule: its own sentence, cut short like any echo.
        _ => one(
            "SCHEMA",
            clip(&format!("{field}: {error}"), ECHO_LIMIT),
            Value::Null,
        ),
    }
}

/// Strings in `fields` longer than `max` UTF-8 bytes (JSON Schema counts characters).
pub fn utf8_bytes(instance: &Value, fields: &[&str], max: usize) -> Vec<Witness> {
    fields
        .iter()
        .filter_map(|name| {
            let len = instance.get(name)?.as_str()?.len();
            (len > max).then(|| {
                Witness::new(
                    "MAX_BYTES",
                    &format!("/{name}"),
                    format!("{name} must be at most {max} UTF-8 bytes"),
                )
                .expected(max)
                .actual(len)
            })
        })
        .collect()
}

/// Integral numbers in `fields` as integers: JSON Schema counts `998.0` and `9.98e2` as the integer
/// 998, so the service reads them as 998 too (the schema already refused fractions, negatives and
/// numbers out of range, so every value here is integral and at most 2^53).
pub fn normalize_integers(instance: &mut Value, fields: &[&str]) {
    for path in fields {
        let segments: Vec<&str> = path.split('/').collect();
        normalize_at(instance, &segments);
    }
}

/// [`normalize_integers`] of one path: its segments are property names, `*` every element of
/// an array (`leases/*/token`).
fn normalize_at(value: &mut Value, segments: &[&str]) {
    const MAX_EXACT: f64 = 9_007_199_254_740_991.0;
    let Some((first, rest)) = segments.split_first() else {
        let integral = value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=MAX_EXACT).contains(f));
        if let (false, Some(f)) = (value.is_u64(), integral) {
            // Exact: an integral f64 at most 2^53 converts to u64 without loss.
            *value = Value::from(f as u64);
        }
        return;
    };
    match (*first, value) {
        ("*", Value::Array(items)) => {
            for item in items {
                normalize_at(item, rest);
            }
        }
        (name, Value::Object(fields)) => {
            if let Some(inner) = fields.get_mut(name) {
                normalize_at(inner, rest);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tool lists only the fields one of its ops takes: stateTag is the read tool's (watch);
    /// the others listed it and then refused it (the attack of 2026-12-06).
    #[test]
    fn only_the_read_tool_lists_state_tag() {
        for tool in [
            LeaseTool::Lease,
            LeaseTool::Read,
            LeaseTool::List,
            LeaseTool::Audit,
            LeaseTool::Revoke,
        ] {
            let (schema, _) = lease_tool(tool);
            let listed = schema["properties"].get("stateTag").is_some();
            assert_eq!(listed, tool == LeaseTool::Read, "{tool:?}");
        }
    }

    fn paths(v: Value) -> Vec<(String, String)> {
        match lease_input().check(&v) {
            Ok(()) => vec![],
            Err(w) => w.into_iter().map(|w| (w.rule_id, w.path)).collect(),
        }
    }

    fn pair(rule: &str, path: &str) -> (String, String) {
        (rule.to_owned(), path.to_owned())
    }

    #[test]
    fn every_embedded_schema_compiles() {
        let _ = lease_input();
        let _ = verify_input();
        let _ = claim_input();
        let _ = claim_free_input();
    }

    #[test]
    fn the_seed_example_is_valid() {
        assert_eq!(
            paths(
                json!({"op": "acquire", "resource": "invoice:INV-1009", "holder": "worker-7", "ttlSeconds": 60, "requestId": "w7-claim-INV-1009"})
            ),
            vec![]
        );
        assert_eq!(
            paths(json!({"op": "get", "resource": "deploy:prod"})),
            vec![]
        );
    }

    #[test]
    fn missing_fields_are_named() {
        assert_eq!(
            paths(json!({"op": "get"})),
            vec![pair("REQUIRED", "/resource")]
        );
        assert_eq!(
            paths(json!({"op": "acquire", "resource": "r"})),
            vec![pair("REQUIRED", "/holder")]
        );
        assert_eq!(
            paths(json!({"op": "renew", "resource": "r"})),
            vec![pair("REQUIRED", "/holder"), pair("REQUIRED", "/token")]
        );
        assert_eq!(
            paths(json!({"op": "release", "resource": "r", "holder": "h"})),
            vec![pair("REQUIRED", "/token")]
        );
    }

    #[test]
    fn bounds_patterns_and_unknown_properties() {
        let base = || json!({"op": "renew", "resource": "r", "holder": "h", "token": 1});
        let with = |k: &str, v: Value| {
            let mut b = base();
            b[k] = v;
            b
        };
        assert_eq!(
            paths(with("ttlSeconds", json!(0))),
            vec![pair("MINIMUM", "/ttlSeconds")]
        );
        assert_eq!(
            paths(with("ttlSeconds", json!(3601))),
            vec![pair("MAXIMUM", "/ttlSeconds")]
        );
        assert_eq!(paths(with("ttlSeconds", json!(3600))), vec![]);
        assert_eq!(
            paths(with("token", json!(0))),
            vec![pair("MINIMUM", "/token")]
        );
        assert_eq!(
            paths(with("token", json!(9007199254740992u64))),
            vec![pair("MAXIMUM", "/token")]
        );
        assert_eq!(
            paths(with("resource", json!("a b"))),
            vec![pair("PATTERN", "/resource")]
        );
        assert_eq!(
            paths(with("resource", json!("a".repeat(201)))),
            vec![pair("PATTERN", "/resource")]
        );
        assert_eq!(
            paths(with("holder", json!(""))),
            vec![pair("MIN_LENGTH", "/holder")]
        );
        assert_eq!(
            paths(with("holder", json!("h".repeat(129)))),
            vec![pair("MAX_LENGTH", "/holder")]
        );
        assert_eq!(
            paths(with("tenantId", json!("a:b"))),
            vec![pair("PATTERN", "/tenantId")]
        );
        assert_eq!(
            paths(with("requestId", json!("x".repeat(129)))),
            vec![pair("PATTERN", "/requestId")]
        );
        assert_eq!(paths(with("op", json!("steal"))), vec![pair("ENUM", "/op")]);
        assert_eq!(
            paths(with("token", json!("1"))),
            vec![pair("TYPE", "/token")]
        );
        assert_eq!(
            paths(with("extra/~x", json!(1))),
            vec![pair("UNKNOWN_PROPERTY", "/extra~1~0x")]
        );
        assert_eq!(paths(json!([1])), vec![pair("TYPE", "")]);
    }

    #[test]
    fn integral_numbers_are_read_as_integers() {
        let mut v = json!({"token": 998.0, "ttlSeconds": 30, "op": "renew"});
        assert!(
            lease_input()
                .check(&json!({"op": "check", "resource": "r", "token": 998.0}))
                .is_ok(),
            "the schema says 998.0 is an integer"
        );
        normalize_integers(&mut v, &["token", "ttlSeconds"]);
        assert_eq!(v, json!({"token": 998, "ttlSeconds": 30, "op": "renew"}));
        assert!(v["token"].is_u64());
    }
}
