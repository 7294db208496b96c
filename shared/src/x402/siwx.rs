//! x402 `sign-in-with-x` (SIWX) for EVM wallets: proving a wallet without paying. The client signs
//! an EIP-4361 message (EIP-191 `personal_sign`) and sends its fields and signature, base64 JSON,
//! in the `SIGN-IN-WITH-X` header. Checked here: every field is within its bounds ([`decode`]:
//! a header out of bounds is bad input, not a failed proof), the domain and the URI's origin are
//! the service's configured public URL (never the request's `Host`), the message is at most 5
//! minutes old (and not from the future), unexpired, and the signature recovers to `address`.
//! That a nonce is used only once is the ledger's job.

use super::eip712::{Address, keccak, recover};
use crate::clock::{Millis, iso8601};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub const EXTENSION: &str = "sign-in-with-x";
pub const HEADER: &str = "sign-in-with-x";
/// The header as documented (and named in errors).
pub const HEADER_NAME: &str = "SIGN-IN-WITH-X";
/// How old a signed message may be.
pub const MAX_AGE_MS: Millis = 5 * 60 * 1000;
/// Clock skew tolerated for `issuedAt` in the future.
const SKEW_MS: Millis = 30 * 1000;

/// The header's fields (x402 SIWX payload). Other fields are ignored, not refused: the official
/// clients send hints such as `signatureScheme`, and only the fields here are in the signed
/// message.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub domain: String,
    pub address: String,
    pub uri: String,
    pub version: String,
    pub chain_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub nonce: String,
    pub issued_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    pub signature: String,
}

/// The longest `SIGN-IN-WITH-X` header read (base64): a proof is a few hundred bytes.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SiwxError {
    #[error("SIGN-IN-WITH-X is not base64 of a SIWX payload: {0}")]
    Malformed(String),
    /// A field out of its bounds: `field` is its name in the payload.
    #[error("SIGN-IN-WITH-X.{field}: {detail}")]
    Field { field: &'static str, detail: String },
    #[error("SIWX: only EVM wallets (type eip191, chainId {0}) are supported")]
    Chain(String),
    #[error("SIWX: domain must be {0}")]
    Domain(String),
    #[error("SIWX: uri must be on {0}")]
    Uri(String),
    #[error("SIWX: issuedAt is not an RFC 3339 time, or more than 5 minutes old, or in the future")]
    IssuedAt,
    #[error("SIWX: the message has expired or is not valid yet")]
    Window,
    #[error("SIWX: the signature does not recover to address")]
    Signature,
    #[error("SIWX: this nonce was used before")]
    Replayed,
}

/// The payload of a `SIGN-IN-WITH-X` header, every field within its bounds.
pub fn decode(header: &str) -> Result<Payload, SiwxError> {
    if header.len() > MAX_HEADER_BYTES {
        return Err(SiwxError::Malformed(format!(
            "longer than {MAX_HEADER_BYTES} bytes"
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(header.trim())
        .map_err(|e| SiwxError::Malformed(format!("base64: {e}")))?;
    let payload: Payload =
        serde_json::from_slice(&bytes).map_err(|e| SiwxError::Malformed(format!("JSON: {e}")))?;
    bounds(&payload)?;
    Ok(payload)
}

/// What a field may be: at most `max` bytes (and at least `min`), of `allowed` characters.
struct Bound {
    field: &'static str,
    min: usize,
    max: usize,
    allowed: fn(char) -> bool,
    what: &'static str,
}

fn printable(c: char) -> bool {
    !c.is_control()
}

/// URI characters (RFC 3986: unreserved, reserved and `%`).
fn uri_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=%".contains(c)
}

impl Bound {
    fn check(&self, value: &str) -> Result<(), SiwxError> {
        let fail = |detail: String| SiwxError::Field {
            field: self.field,
            detail,
        };
        if value.len() < self.min || value.len() > self.max {
            return Err(fail(format!(
                "must be {}..{} bytes, got {}",
                self.min,
                self.max,
                value.len()
            )));
        }
        match value.chars().find(|c| !(self.allowed)(*c)) {
            Some(c) => Err(fail(format!("{c:?} is not allowed: {}", self.what))),
            None => Ok(()),
        }
    }
}

/// Each field's bounds: EIP-4361's grammar where it has one (nonce: at least 8 alphanumerics;
/// version "1"; an address is 0x and 40 hex digits), generous maxima elsewhere, so that no
/// caller-chosen string reaches the store or a log unbounded.
fn bounds(p: &Payload) -> Result<(), SiwxError> {
    let b = |field, min, max, allowed, what| Bound {
        field,
        min,
        max,
        allowed,
        what,
    };
    let time = |field| {
        b(
            field,
            1,
            64,
            |c: char| c.is_ascii_alphanumeric() || ":.+-".contains(c),
            "an RFC 3339 time",
        )
    };
    let checks: [(Bound, Option<&str>); 11] = [
        (
            b("domain", 1, 255, uri_char, "a host[:port]"),
            Some(&p.domain),
        ),
        (
            b(
                "address",
                42,
                42,
                |c| c.is_ascii_alphanumeric(),
                "0x and 40 hex digits",
            ),
            Some(&p.address),
        ),
        (b("uri", 1, 2048, uri_char, "an RFC 3986 URI"), Some(&p.uri)),
        (
            b(
                "chainId",
                3,
                64,
                |c| c.is_ascii_alphanumeric() || ":-_".contains(c),
                "CAIP-2",
            ),
            Some(&p.chain_id),
        ),
        (
            b("type", 1, 32, |c| c.is_ascii_alphanumeric(), "eip191"),
            Some(&p.kind),
        ),
        (
            b(
                "nonce",
                8,
                128,
                |c| c.is_ascii_alphanumeric(),
                "letters and digits (EIP-4361)",
            ),
            Some(&p.nonce),
        ),
        (time("issuedAt"), Some(&p.issued_at)),
        (time("expirationTime"), p.expiration_time.as_deref()),
        (time("notBefore"), p.not_before.as_deref()),
        (
            b("statement", 0, 1024, printable, "one line of text"),
            p.statement.as_deref(),
        ),
        (
            b("requestId", 0, 256, uri_char, "URI characters"),
            p.request_id.as_deref(),
        ),
    ];
    for (bound, value) in checks {
        if let Some(value) = value {
            bound.check(value)?;
        }
    }
    if p.version != "1" {
        return Err(SiwxError::Field {
            field: "version",
            detail: "must be \"1\" (EIP-4361)".into(),
        });
    }
    let resources = p.resources.as_deref().unwrap_or_default();
    if resources.len() > 16 {
        return Err(SiwxError::Field {
            field: "resources",
            detail: format!("at most 16, got {}", resources.len()),
        });
    }
    for r in resources {
        b("resources", 1, 2048, uri_char, "an RFC 3986 URI").check(r)?;
    }
    // 65 bytes (r, s, v) in hex: the only signature an EOA makes and we recover.
    b(
        "signature",
        130,
        132,
        |c| c.is_ascii_alphanumeric(),
        "0x and 130 hex digits",
    )
    .check(&p.signature)
}

/// The EIP-4361 message the wallet signed, laid out as the reference implementation does.
pub fn message(p: &Payload) -> Result<String, SiwxError> {
    let chain = p
        .chain_id
        .strip_prefix("eip155:")
        .ok_or_else(|| SiwxError::Chain(p.chain_id.clone()))?;
    let mut prefix = format!(
        "{} wants you to sign in with your Ethereum account:\n{}",
        p.domain, p.address
    );
    match &p.statement {
        Some(statement) => {
            prefix.push_str("\n\n");
            prefix.push_str(statement);
        }
        None => prefix.push('\n'),
    }
    let mut suffix = vec![
        format!("URI: {}", p.uri),
        format!("Version: {}", p.version),
        format!("Chain ID: {chain}"),
        format!("Nonce: {}", p.nonce),
        format!("Issued At: {}", p.issued_at),
    ];
    if let Some(t) = &p.expiration_time {
        suffix.push(format!("Expiration Time: {t}"));
    }
    if let Some(t) = &p.not_before {
        suffix.push(format!("Not Before: {t}"));
    }
    if let Some(id) = &p.request_id {
        suffix.push(format!("Request ID: {id}"));
    }
    if let Some(resources) = &p.resources {
        let mut lines = vec!["Resources:".to_owned()];
        lines.extend(resources.iter().map(|r| format!("- {r}")));
        suffix.push(lines.join("\n"));
    }
    Ok(format!("{prefix}\n\n{}", suffix.join("\n")))
}

/// The EIP-191 digest of a personal message.
pub fn personal_digest(message: &str) -> [u8; 32] {
    let mut bytes = format!("\x19Ethereum Signed Message:\n{}", message.len()).into_bytes();
    bytes.extend_from_slice(message.as_bytes());
    keccak(&bytes)
}

fn millis(text: &str) -> Option<Millis> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Whether `uri` lies under `base` (`scheme://host[:port]` and any path prefix). A dot segment
/// (`.`, `..`, or either percent-encoded) anywhere in the path is refused: a client resolves it
/// (RFC 3986 5.2.4), so `/base/../other` names a path outside the base that a plain prefix
/// check would accept.
fn under(uri: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    let Some(rest) = uri.strip_prefix(base) else {
        return false;
    };
    if !(rest.is_empty() || rest.starts_with(['/', '?', '#'])) {
        return false;
    }
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    !path.split('/').any(|segment| {
        let segment = segment.to_ascii_lowercase().replace("%2e", ".");
        segment == "." || segment == ".."
    })
}

/// Check `p` against the service's public `host` (`host[:port]`, the EIP-4361 domain) and
/// `base` URL (`scheme://host[:port]` and any path prefix) as configured, at `now`, on `network`
/// (CAIP-2): the proof's URI must lie under the base, so a proof signed for another application on
/// the same origin is not accepted. The wallet it proves, on success.
pub fn verify(
    p: &Payload,
    host: &str,
    base: &str,
    network: &str,
    now: Millis,
) -> Result<Address, SiwxError> {
    if p.kind != "eip191" || p.chain_id != network {
        return Err(SiwxError::Chain(network.to_owned()));
    }
    if p.domain != host {
        return Err(SiwxError::Domain(host.to_owned()));
    }
    if !under(&p.uri, base) {
        return Err(SiwxError::Uri(base.to_owned()));
    }
    let issued = millis(&p.issued_at).ok_or(SiwxError::IssuedAt)?;
    if now - issued > MAX_AGE_MS || issued - now > SKEW_MS {
        return Err(SiwxError::IssuedAt);
    }
    let expired = p
        .expiration_time
        .as_deref()
        .map(|t| millis(t).is_none_or(|t| t <= now));
    let early = p
        .not_before
        .as_deref()
        .map(|t| millis(t).is_none_or(|t| t > now));
    if expired == Some(true) || early == Some(true) {
        return Err(SiwxError::Window);
    }
    let address =
        Address::parse(&p.address).ok_or_else(|| SiwxError::Malformed("address".into()))?;
    let signature = p.signature.strip_prefix("0x").unwrap_or(&p.signature);
    let signature = hex::decode(signature).map_err(|_| SiwxError::Malformed("signature".into()))?;
    if recover(&personal_digest(&message(p)?), &signature) != Some(address) {
        return Err(SiwxError::Signature);
    }
    Ok(address)
}

/// The `sign-in-with-x` extension a 402 advertises: what to sign, and on which chain.
pub fn advertise(host: &str, uri: &str, network: &str, nonce: &str, now: Millis) -> Value {
    json!({
        "info": {
            "domain": host,
            "uri": uri,
            "version": "1",
            "nonce": nonce,
            "issuedAt": iso8601(now),
            "statement": "Sign in to claim a key for free.",
        },
        "supportedChains": [{"chainId": network, "type": "eip191"}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x402::client::address_of;
    use k256::ecdsa::SigningKey;

    const NOW: Millis = 1_795_946_400_000;

    fn signed(key: &SigningKey, edit: impl Fn(&mut Payload)) -> Payload {
        let mut p = Payload {
            domain: "127.0.0.1:3000".into(),
            address: address_of(key).lower(),
            uri: "http://127.0.0.1:3000/claim/free".into(),
            version: "1".into(),
            chain_id: "eip155:84532".into(),
            kind: "eip191".into(),
            nonce: "a1b2c3d4e5f6a7b8".into(),
            issued_at: iso8601(NOW - 1000),
            statement: Some("Sign in to claim a key for free.".into()),
            expiration_time: None,
            not_before: None,
            request_id: None,
            resources: None,
            signature: String::new(),
        };
        edit(&mut p);
        crate::x402::client::sign_in(key, &mut p).unwrap();
        p
    }

    fn check(p: &Payload) -> Result<Address, SiwxError> {
        verify(
            p,
            "127.0.0.1:3000",
            "http://127.0.0.1:3000",
            "eip155:84532",
            NOW,
        )
    }

    fn encoded(p: &Payload) -> String {
        base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(p).unwrap())
    }

    #[test]
    fn decode_bounds_every_field_and_names_it() {
        let key = SigningKey::from_slice(&[9; 32]).unwrap();
        assert!(decode(&encoded(&signed(&key, |_| {}))).is_ok());
        let field = |edit: fn(&mut Payload)| match decode(&encoded(&signed(&key, edit))) {
            Err(SiwxError::Field { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(|p| p.nonce = "a".repeat(3000)), "nonce");
        assert_eq!(field(|p| p.nonce = "short".into()), "nonce");
        assert_eq!(field(|p| p.nonce = "abc-defgh".into()), "nonce");
        assert_eq!(field(|p| p.domain = "d".repeat(256)), "domain");
        assert_eq!(field(|p| p.domain = "a b".into()), "domain");
        assert_eq!(
            field(|p| p.uri = format!("http://h/{}", "u".repeat(2048))),
            "uri"
        );
        assert_eq!(field(|p| p.version = "2".into()), "version");
        assert_eq!(field(|p| p.chain_id = "eip155:".repeat(20)), "chainId");
        assert_eq!(field(|p| p.issued_at = "9".repeat(65)), "issuedAt");
        assert_eq!(
            field(|p| p.expiration_time = Some("x".repeat(65))),
            "expirationTime"
        );
        assert_eq!(
            field(|p| p.statement = Some("line\nbreak".into())),
            "statement"
        );
        assert_eq!(field(|p| p.statement = Some("s".repeat(1025))), "statement");
        assert_eq!(field(|p| p.request_id = Some("r".repeat(257))), "requestId");
        assert_eq!(
            field(|p| p.resources = Some(vec!["http://h/".into(); 17])),
            "resources"
        );
        assert_eq!(field(|p| p.address = format!("{}0", p.address)), "address");
        let mut long = signed(&key, |_| {});
        long.signature.push_str("00");
        assert!(matches!(
            decode(&encoded(&long)),
            Err(SiwxError::Field {
                field: "signature",
                ..
            })
        ));
        assert!(matches!(
            decode(&"A".repeat(MAX_HEADER_BYTES + 4)),
            Err(SiwxError::Malformed(_))
        ));
    }

    #[test]
    fn the_message_follows_eip_4361() {
        let key = SigningKey::from_slice(&[9; 32]).unwrap();
        let p = signed(&key, |p| {
            p.statement = None;
            p.resources = Some(vec!["http://127.0.0.1:3000/claim/free".into()]);
        });
        let text = message(&p).unwrap();
        assert!(
            text.starts_with("127.0.0.1:3000 wants you to sign in with your Ethereum account:\n0x")
        );
        assert!(text.contains("\n\n\nURI: http://127.0.0.1:3000/claim/free\nVersion: 1\nChain ID: 84532\nNonce: a1b2c3d4e5f6a7b8\nIssued At: "));
        assert!(text.ends_with("\nResources:\n- http://127.0.0.1:3000/claim/free"));
    }

    #[test]
    fn a_fresh_signed_message_proves_the_wallet() {
        let key = SigningKey::from_slice(&[9; 32]).unwrap();
        assert_eq!(check(&signed(&key, |_| {})), Ok(address_of(&key)));
    }

    #[test]
    fn each_check_refuses() {
        let key = SigningKey::from_slice(&[9; 32]).unwrap();
        assert_eq!(
            check(&signed(&key, |p| p.domain = "evil.example".into())),
            Err(SiwxError::Domain("127.0.0.1:3000".into()))
        );
        assert!(matches!(
            check(&signed(&key, |p| p.uri = "http://evil.example/claim/free".into())),
            Err(SiwxError::Uri(_))
        ));
        // The URI must lie under the configured base URL, path prefix included.
        let accepted = |uri: &str, base: &str| {
            let p = signed(&key, |p| p.uri = uri.into());
            verify(&p, "127.0.0.1:3000", base, "eip155:84532", NOW).is_ok()
        };
        assert!(accepted(
            "http://127.0.0.1:3000/base/claim/free",
            "http://127.0.0.1:3000/base"
        ));
        assert!(accepted(
            "http://127.0.0.1:3000/base",
            "http://127.0.0.1:3000/base/"
        ));
        // Dots that are not whole path segments, or are in the query, are just characters.
        assert!(accepted(
            "http://127.0.0.1:3000/base/claim/free..x?next=../y",
            "http://127.0.0.1:3000/base"
        ));
        for (uri, base) in [
            (
                "http://127.0.0.1:3000/other/claim/free",
                "http://127.0.0.1:3000/base",
            ),
            (
                "http://127.0.0.1:3000/baseball",
                "http://127.0.0.1:3000/base",
            ),
            ("http://127.0.0.1:30000/claim/free", "http://127.0.0.1:3000"),
            (
                "http://127.0.0.1:3000.evil/claim/free",
                "http://127.0.0.1:3000",
            ),
            // Dot segments resolve outside the base (RFC 3986 5.2.4), encoded or not.
            (
                "http://127.0.0.1:3000/base/../other/claim/free",
                "http://127.0.0.1:3000/base",
            ),
            (
                "http://127.0.0.1:3000/base/%2e%2E/other",
                "http://127.0.0.1:3000/base",
            ),
            (
                "http://127.0.0.1:3000/base/.%2e",
                "http://127.0.0.1:3000/base",
            ),
            (
                "http://127.0.0.1:3000/base/./claim/free",
                "http://127.0.0.1:3000/base",
            ),
        ] {
            assert!(!accepted(uri, base), "{uri} accepted under {base}");
        }
        assert_eq!(
            check(&signed(&key, |p| p.issued_at = iso8601(NOW - MAX_AGE_MS - 1))),
            Err(SiwxError::IssuedAt)
        );
        assert_eq!(
            check(&signed(&key, |p| p.issued_at = iso8601(NOW + 60_000))),
            Err(SiwxError::IssuedAt)
        );
        assert_eq!(
            check(&signed(&key, |p| p.issued_at = "yesterday".into())),
            Err(SiwxError::IssuedAt)
        );
        assert_eq!(
            check(&signed(&key, |p| p.expiration_time = Some(iso8601(NOW - 1)))),
            Err(SiwxError::Window)
        );
        assert_eq!(
            check(&signed(&key, |p| p.not_before = Some(iso8601(NOW + 1)))),
            Err(SiwxError::Window)
        );
        assert!(matches!(
            check(&signed(&key, |p| p.chain_id = "eip155:1".into())),
            Err(SiwxError::Chain(_))
        ));
        let mut p = signed(&key, |_| {});
        p.address = address_of(&SigningKey::from_slice(&[8; 32]).unwrap()).lower();
        assert_eq!(check(&p), Err(SiwxError::Signature));
        let mut p = signed(&key, |_| {});
        p.nonce = "changed".into();
        assert_eq!(check(&p), Err(SiwxError::Signature));
    }
}
