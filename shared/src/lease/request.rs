//! A lease request after validation: the typed input the rules work on.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Names the input schema in `shared/schemas/lease-input.json`; bump it when that file changes.
pub const INPUT_SCHEMA_VERSION: &str = "lease-input/1";

/// Default lease length when `ttlSeconds` is omitted.
pub const DEFAULT_TTL_SECONDS: u32 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Acquire,
    Renew,
    Release,
    Get,
    Check,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Get => "get",
            Op::Check => "check",
        }
    }
}

/// The request body, deserialized only after it passed the JSON schema, so every field here is
/// already within its bounds and the op-dependent fields are present.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    pub op: Op,
    pub resource: String,
    pub holder: Option<String>,
    pub ttl_seconds: Option<u32>,
    pub token: Option<u64>,
    pub limit: Option<u32>,
    pub tenant_id: Option<String>,
    pub request_id: Option<String>,
}

/// What the caller asked for, with the fields each op needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Acquire {
        holder: String,
        ttl_ms: i64,
        /// How many holders may hold the resource at once (1 = a lease).
        limit: u32,
    },
    Renew {
        holder: String,
        token: u64,
        ttl_ms: i64,
    },
    Release {
        holder: String,
        token: u64,
    },
    Get,
    /// Is `token` (of `holder`, when given) a live permit?
    Check {
        token: u64,
        holder: Option<String>,
    },
}

/// A required field was absent (the schema normally catches this first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingField(pub &'static str);

impl LeaseRequest {
    pub fn command(&self) -> Result<Command, MissingField> {
        let holder = || self.holder.clone().ok_or(MissingField("holder"));
        let token = || self.token.ok_or(MissingField("token"));
        let ttl_ms = i64::from(self.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS)) * 1000;
        Ok(match self.op {
            Op::Acquire => Command::Acquire {
                holder: holder()?,
                ttl_ms,
                limit: self.limit.unwrap_or(1),
            },
            Op::Renew => Command::Renew {
                holder: holder()?,
                token: token()?,
                ttl_ms,
            },
            Op::Release => Command::Release {
                holder: holder()?,
                token: token()?,
            },
            Op::Get => Command::Get,
            Op::Check => Command::Check {
                token: token()?,
                holder: self.holder.clone(),
            },
        })
    }

    /// SHA-256 (hex) of the input that decides the outcome, with defaults filled in, so that a retry
    /// which spells the same request differently (field order, an explicit default ttl) matches,
    /// and one that asks for something else does not. tenantId and requestId are left out: they
    /// are the record's key, not its content.
    pub fn fingerprint(&self) -> String {
        #[derive(Serialize)]
        struct Canonical<'a> {
            op: &'a str,
            resource: &'a str,
            holder: Option<&'a str>,
            ttl_seconds: Option<u32>,
            token: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            limit: Option<u32>,
        }
        let spec = self.op.spec();
        let ttl_matters = spec.ttl;
        let canonical = Canonical {
            op: self.op.as_str(),
            resource: &self.resource,
            holder: self.holder.as_deref(),
            ttl_seconds: ttl_matters.then(|| self.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS)),
            token: self.token,
            // Left out at its default, so a lease's fingerprint is what it was before limits.
            limit: self
                .limit
                .filter(|l| *l != 1 && spec.limit != super::ops::Field::Unused),
        };
        // Serializing a struct of strings and integers cannot fail.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        hex::encode(Sha256::digest(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> LeaseRequest {
        serde_json::from_value(v).unwrap()
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
    }

    #[test]
    fn commands_take_the_default_ttl() {
        let r = parse(json!({"op": "acquire", "resource": "r", "holder": "h"}));
        assert_eq!(
            r.command(),
            Ok(Command::Acquire {
                holder: "h".into(),
                ttl_ms: 30_000,
                limit: 1
            })
        );
        let r = parse(json!({"op": "renew", "resource": "r", "holder": "h"}));
        assert_eq!(r.command(), Err(MissingField("token")));
    }
}
