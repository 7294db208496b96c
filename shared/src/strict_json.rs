//! Request bodies as JSON, strictly: a member name that appears twice in one object is refused.
//! Parsers disagree on which of two duplicates counts (serde_json keeps the last, others the
//! first), so a document with duplicates can mean one thing to us and another to whoever reads
//! it next; RFC 8785 (JCS), which our signatures hash, and I-JSON (RFC 7493) both forbid them.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Parse `bytes` as one JSON value with no duplicate member names at any depth.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = deserializer.deserialize_any(Strict)?;
    deserializer.end()?;
    Ok(value)
}

struct Strict;

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictSeed)? {
            items.push(item);
        }
        // A growing Vec keeps room for 4 or more: for bodies of many short arrays that spare room
        // was most of their parsed size (a verify body of 262,000 one-element arrays took 120 MB).
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictSeed)?;
            if members.contains_key(&name) {
                return Err(de::Error::custom(format!(
                    "the member name {name:?} appears twice in one object"
                )));
            }
            members.insert(name, value);
        }
        Ok(Value::Object(members))
    }
}

struct StrictSeed;

impl<'de> de::DeserializeSeed<'de> for StrictSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(Strict)
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::json;

    #[test]
    fn duplicates_are_refused_at_any_depth() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"d":{"holder":"x","holder":"y"}}"#,
            r#"[{"k":1},{"k":1,"k":1}]"#,
        ] {
            let err = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(err.contains("appears twice"), "{text}: {err}");
        }
    }

    #[test]
    fn everything_else_parses_as_serde_json_does() {
        let text = r#"{"a":[1,-2,3.5,true,null,"s\u00e9"],"b":{"c":{}},"n":9007199254740991}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert_eq!(parse(b" 1 ").unwrap(), json!(1));
        assert!(parse(b"{} x").is_err(), "trailing characters");
        assert!(parse(b"{").is_err());
    }
}
