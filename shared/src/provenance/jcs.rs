//! RFC 8785 JSON Canonicalization Scheme: the bytes that get hashed and signed.

use serde::Serialize;
#[cfg(test)]
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical UTF-8 bytes of `value` (a `Value` or a JSON object's `Map`).
pub fn canonical<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing JSON values cannot fail: their keys are strings and their numbers finite.
    serde_json_canonicalizer::to_vec(value).unwrap_or_default()
}

/// SHA-256 of the canonical bytes of `value`.
pub fn sha256<T: Serialize>(value: &T) -> [u8; 32] {
    Sha256::digest(canonical(value)).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jcs(text: &str) -> String {
        String::from_utf8(canonical(&serde_json::from_str::<Value>(text).unwrap())).unwrap()
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

    #[test]
    fn integers_below_2_pow_53_are_exact() {
        assert_eq!(
            jcs("[9007199254740991, 0, -1, 1e2]"),
            "[9007199254740991,0,-1,100]"
        );
    }
}
