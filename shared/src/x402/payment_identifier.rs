//! The x402 v2 `payment-identifier` extension: a paying client names its payment with an id of
//! its own (16-128 characters of `A-Z a-z 0-9 _ -`), so that resending the same payment gets
//! the answer it bought instead of a refusal, and the same id on another payment is refused.
//!
//! We declare it (optional) in every `PaymentRequired.extensions`; a client that speaks it
//! echoes the declaration in its `PaymentPayload.extensions` with `info.id` added. An echo
//! without an id is no identifier. Pure: what the ledger does with an id is in
//! `store::payment_store`, how it relates to `requestId` in `docs/adr/0005-payment-identifier.md`.

use super::check::Refusal;
use super::types::PaymentPayload;
use serde_json::{Map, Value, json};

/// The extension's key in `extensions`.
pub const KEY: &str = "payment-identifier";

pub const MIN_LENGTH: usize = 16;
pub const MAX_LENGTH: usize = 128;

/// The declaration put in every 402 answer's `extensions`: supported, not required, with the
/// JSON Schema of the `info` a client sends back.
pub fn declaration() -> Value {
    json!({
        "info": {"required": false},
        "schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "required": {"type": "boolean"},
                "id": {
                    "type": "string",
                    "minLength": MIN_LENGTH,
                    "maxLength": MAX_LENGTH,
                    "pattern": "^[a-zA-Z0-9_-]+$"
                }
            },
            "required": ["required"]
        }
    })
}

/// `extensions` with our declaration in it.
pub fn declare(extensions: &mut Map<String, Value>) {
    extensions.insert(KEY.to_owned(), declaration());
}

/// The payment's identifier, if it carries one; a malformed one is refused, naming the field.
pub fn of(payload: &PaymentPayload) -> Result<Option<String>, Refusal> {
    let Some(extension) = payload.extensions.as_ref().and_then(|e| e.get(KEY)) else {
        return Ok(None);
    };
    let malformed = |why: &str| Refusal::Identifier(format!("extensions.{KEY}.info.id {why}"));
    // The extension and its info are objects: anything else is a malformed identifier, refused
    // rather than taken for none (which would use the payment up without one).
    let Some(extension) = extension.as_object() else {
        return Err(Refusal::Identifier(format!(
            "extensions.{KEY} must be an object"
        )));
    };
    let info = match extension.get("info") {
        None => return Ok(None),
        Some(Value::Object(info)) => info,
        Some(_) => {
            return Err(Refusal::Identifier(format!(
                "extensions.{KEY}.info must be an object"
            )));
        }
    };
    let id = match info.get("id") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(id)) => id,
        Some(_) => return Err(malformed("must be a string")),
    };
    // Counted in bytes: the allowed characters are ASCII, so bytes are characters here.
    if !(MIN_LENGTH..=MAX_LENGTH).contains(&id.len()) {
        return Err(malformed("must be 16 to 128 characters long"));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(malformed("may hold only A-Z, a-z, 0-9, '_' and '-'"));
    }
    Ok(Some(id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x402::check::tests::{PAY_TO, settings};
    use crate::x402::types::{Authorization, ExactPayload};

    fn with(extensions: Option<Value>) -> PaymentPayload {
        PaymentPayload {
            x402_version: 2,
            resource: None,
            accepted: settings().requirements(5000),
            payload: ExactPayload {
                signature: "0x".into(),
                authorization: Authorization {
                    from: PAY_TO.into(),
                    to: PAY_TO.into(),
                    value: "5000".into(),
                    valid_after: "0".into(),
                    valid_before: "0".into(),
                    nonce: "0x00".into(),
                },
            },
            extensions: extensions.map(|e| e.as_object().cloned().unwrap()),
        }
    }

    fn id(id: Value) -> Result<Option<String>, Refusal> {
        let mut extension = declaration();
        extension["info"]["id"] = id;
        of(&with(Some(json!({ KEY: extension }))))
    }

    #[test]
    fn an_echoed_declaration_without_an_id_is_no_identifier() {
        assert_eq!(of(&with(None)), Ok(None));
        assert_eq!(of(&with(Some(json!({})))), Ok(None));
        assert_eq!(of(&with(Some(json!({ KEY: declaration() })))), Ok(None));
        assert_eq!(id(Value::Null), Ok(None));
    }

    #[test]
    fn ids_at_each_limit() {
        let ok = |s: String| assert_eq!(id(json!(s.clone())), Ok(Some(s)));
        ok("a".repeat(16));
        ok("Z9_-".repeat(32));
        ok("pay_7d5d747be160e280504c099d984bcfe0".into());
        for bad in [
            json!("a".repeat(15)),
            json!("a".repeat(129)),
            json!(""),
            json!("pay_7d5d747be160e28!"),
            json!("pay_7d5d747be160e28é"),
            json!("pay 7d5d747be160e280"),
            json!(12345678901234567_u64),
            json!({"id": "x"}),
        ] {
            let refused = id(bad.clone()).expect_err(&bad.to_string());
            assert!(
                refused.to_string().contains("payment-identifier.info.id"),
                "{refused}"
            );
        }
    }

    #[test]
    fn an_extension_or_info_that_is_not_an_object_is_refused_not_ignored() {
        for extension in [
            json!(null),
            json!("pay_0123456789abcdef"),
            json!([1]),
            json!(7),
        ] {
            let refused = of(&with(Some(json!({ KEY: extension.clone() })))).expect_err("refused");
            assert!(
                refused
                    .to_string()
                    .contains("extensions.payment-identifier must be an object"),
                "{extension}: {refused}"
            );
        }
        for info in [json!(null), json!("x"), json!([])] {
            let refused =
                of(&with(Some(json!({ KEY: {"info": info.clone()} })))).expect_err("refused");
            assert!(
                refused.to_string().contains(".info must be an object"),
                "{info}: {refused}"
            );
        }
    }
}
