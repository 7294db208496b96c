//! RFC 8785 JSON Canonicalization Scheme: the bytes that get hashed and signed.
//!
//! Every answer is canonicalized four times (its data, its manifest, and the credential's proof
//! configuration and body), which measured as a tenth of the local server's CPU through the
//! general canonicalizer. Nearly everything this service signs has only ASCII property names and
//! integer numbers, and for those RFC 8785 is simple: properties sorted by name (for ASCII, code
//! unit order is byte order), integers as written, strings escaped as serde_json escapes them
//! (`"`, `\\` and control characters, short forms where JSON has them, else `\u00xx` in lower
//! case). That is written directly here; anything else (a float, an integer beyond 2^53, a
//! non-ASCII name) goes through `serde_json_canonicalizer`. The tests hold the two to the same
//! bytes on generated documents.

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What can be canonicalized: a JSON value, or a JSON object's map.
pub trait Canonical: Serialize {
    /// Write the canonical form into `out` and say true, or say false (leaving `out` in any
    /// state) when it holds something the direct writer does not handle.
    fn write_simple(&self, out: &mut Vec<u8>) -> bool;
}

impl Canonical for Value {
    fn write_simple(&self, out: &mut Vec<u8>) -> bool {
        write_value(self, out)
    }
}

impl Canonical for Map<String, Value> {
    fn write_simple(&self, out: &mut Vec<u8>) -> bool {
        write_object(self.iter(), out)
    }
}

/// A JSON object as if one of its members were not there, canonicalized without copying the
/// rest (a proof's configuration without its value, a credential without its proof: copies of
/// a 6 MiB body to check were most of its memory).
pub struct Without<'a> {
    pub map: &'a Map<String, Value>,
    pub left_out: &'a str,
}

impl Without<'_> {
    fn entries(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.map.iter().filter(|(name, _)| *name != self.left_out)
    }
}

impl Serialize for Without<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (name, value) in self.entries() {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Canonical for Without<'_> {
    fn write_simple(&self, out: &mut Vec<u8>) -> bool {
        write_object(self.entries(), out)
    }
}

/// The canonical UTF-8 bytes of `value`.
pub fn canonical<T: Canonical>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    if value.write_simple(&mut out) {
        return out;
    }
    // Serializing JSON values cannot fail: their keys are strings and their numbers finite.
    serde_json_canonicalizer::to_vec(value).unwrap_or_default()
}

/// SHA-256 of the canonical bytes of `value`.
pub fn sha256<T: Canonical>(value: &T) -> [u8; 32] {
    Sha256::digest(canonical(value)).into()
}

/// Integers up to this magnitude are exact as IEEE doubles, so RFC 8785 writes them as they are.
const EXACT_INTEGER: u64 = (1 << 53) - 1;

fn write_value(value: &Value, out: &mut Vec<u8>) -> bool {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            let exact = match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => i.unsigned_abs() <= EXACT_INTEGER,
                (None, Some(u)) => u <= EXACT_INTEGER,
                (None, None) => false,
            };
            if !exact {
                return false;
            }
            out.extend_from_slice(n.to_string().as_bytes());
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write_value(item, out) {
                    return false;
                }
            }
            out.push(b']');
        }
        Value::Object(map) => return write_object(map.iter(), out),
    }
    true
}

fn write_object<'a>(
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    out: &mut Vec<u8>,
) -> bool {
    let mut entries: Vec<(&String, &Value)> = members.collect();
    if !entries.iter().all(|(name, _)| name.is_ascii()) {
        return false;
    }
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (name, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(name, out);
        out.push(b':');
        if !write_value(value, out) {
            return false;
        }
    }
    out.push(b'}');
    true
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jcs(text: &str) -> String {
        String::from_utf8(canonical(&serde_json::from_str::<Value>(text).unwrap())).unwrap()
    }

    /// An object without one member canonicalizes as the object with that member removed,
    /// through the direct writer and through the general one (a non-ASCII name, a float).
    #[test]
    fn an_object_without_a_member_is_the_object_with_it_removed() {
        for text in [
            r#"{"b": 1, "proof": {"x": [1, 2]}, "a": "s"}"#,
            r#"{"é": 1, "proof": 2, "a": 1.5}"#,
            r#"{"proof": 1}"#,
            r#"{"a": 1}"#,
        ] {
            let Value::Object(map) = serde_json::from_str::<Value>(text).unwrap() else {
                unreachable!()
            };
            let mut removed = map.clone();
            removed.remove("proof");
            let without = Without {
                map: &map,
                left_out: "proof",
            };
            assert_eq!(canonical(&without), canonical(&removed), "{text}");
        }
    }

    /// RFC 8785 section 3.2.3: properties sorted by their UTF-16 code units (so U+1F600, a
    /// surrogate pair starting 0xD83D, sorts before U+FB33).
    #[test]
    fn sorts_keys_by_utf16_code_units() {
        let input = r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"}"#;
        let expected = format!(
            r#"{{"\r":"Carriage Return","1":"One","{}":"Control","{}":"Latin Small Letter O With Diaeresis","{}":"Euro Sign","{}":"Emoji: Grinning Face","{}":"Hebrew Letter Dalet With Dagesh"}}"#,
            '\u{80}', '\u{f6}', '\u{20ac}', '\u{1f600}', '\u{fb33}'
        );
        assert_eq!(jcs(input), expected);
    }

    /// RFC 8785 section 3.2.2 / 3.2.4: ES6 number serialization, minimal string escapes.
    #[test]
    fn serializes_numbers_strings_and_literals_canonically() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        assert_eq!(
            jcs(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// A document drawn from `seed`: names and strings from pools that mix plain ASCII with
    /// quotes, backslashes, control characters and non-ASCII text, and numbers around 2^53
    /// and fractional ones.
    fn document(seed: &mut u64, depth: u32, ascii_only: bool) -> Value {
        fn next(seed: &mut u64) -> u64 {
            // xorshift64: deterministic, no dependency.
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        }
        const NAMES: [&str; 10] = [
            "a",
            "b",
            "B",
            "_",
            "aa",
            "a b",
            "\"q\"",
            "back\\slash",
            "\u{1}",
            "\t\n",
        ];
        const WIDE: [&str; 3] = ["\u{20ac}", "\u{1f600}", "\u{fb33}"];
        const TEXTS: [&str; 8] = [
            "",
            "plain",
            "\"",
            "\\",
            "\u{0}\u{7}\u{8}\u{c}\u{1f}\u{7f}",
            "\r\n\t/",
            "\u{e9}t\u{e9}",
            "\u{1f600}\u{2028}",
        ];
        const NUMBERS: [&str; 9] = [
            "0",
            "-1",
            "9007199254740991",
            "-9007199254740991",
            "9007199254740992",
            "18446744073709551615",
            "-9223372036854775808",
            "0.5",
            "1e30",
        ];
        let pick = next(seed) % if depth == 0 { 4 } else { 6 };
        match pick {
            0 => Value::from(TEXTS[(next(seed) % 8) as usize]),
            1 => serde_json::from_str(NUMBERS[(next(seed) % 9) as usize]).unwrap(),
            2 => [Value::Null, Value::Bool(true), Value::Bool(false)][(next(seed) % 3) as usize]
                .clone(),
            3 => Value::from(next(seed) % 1000),
            4 => Value::Array(
                (0..next(seed) % 4)
                    .map(|_| document(seed, depth - 1, ascii_only))
                    .collect(),
            ),
            _ => {
                let mut map = Map::new();
                for _ in 0..next(seed) % 5 {
                    let name = if !ascii_only && next(seed).is_multiple_of(4) {
                        WIDE[(next(seed) % 3) as usize]
                    } else {
                        NAMES[(next(seed) % 10) as usize]
                    };
                    map.insert(name.into(), document(seed, depth - 1, ascii_only));
                }
                Value::Object(map)
            }
        }
    }

    /// The direct writer and the general canonicalizer agree byte for byte, on documents the
    /// direct writer takes (checked to be most of them) and on those it hands over.
    #[test]
    fn the_direct_writer_matches_the_general_canonicalizer() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let mut direct = 0;
        for round in 0..20_000u32 {
            let value = document(&mut seed, 4, round.is_multiple_of(2));
            let expected = serde_json_canonicalizer::to_vec(&value).unwrap();
            let mut out = Vec::new();
            if value.write_simple(&mut out) {
                direct += 1;
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    String::from_utf8(expected.clone()).unwrap(),
                    "{value}"
                );
            }
            assert_eq!(canonical(&value), expected, "{value}");
        }
        assert!(
            direct > 10_000,
            "only {direct} documents took the direct path"
        );
    }

    #[test]
    fn integers_below_2_pow_53_are_exact() {
        assert_eq!(
            jcs("[9007199254740991, 0, -1, 1e2]"),
            "[9007199254740991,0,-1,100]"
        );
    }
}
