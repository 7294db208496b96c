//! Tenants: the namespace every lease, request record and claim lives in.
//!
//! An API key's tenant is `key:<account>:<tenantId>`; a paying wallet's is `wallet:<address>`.
//! Account names and tenant ids match `[A-Za-z0-9_.-]{1,64}`, so neither contains `:` or `|` and a
//! tenant string is unambiguous. Two accounts can never name the same tenant, whatever tenantId
//! they send, because the account comes from the authenticated key, never from the body.

use std::fmt;

/// A validated tenant namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant(String);

/// Whether `s` is a valid account name or tenant id: `[A-Za-z0-9_.-]{1,64}`.
pub fn is_valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl Tenant {
    /// The tenant of an API-key caller. Both parts must be valid names (`None` otherwise).
    pub fn for_key(account: &str, tenant_id: &str) -> Option<Self> {
        (is_valid_name(account) && is_valid_name(tenant_id))
            .then(|| Self(format!("key:{account}:{tenant_id}")))
    }

    /// An API key account's scope for claims (which have no tenantId): `key:<account>`.
    pub fn for_account(account: &str) -> Option<Self> {
        is_valid_name(account).then(|| Self(format!("key:{account}")))
    }

    /// The tenant of a paying wallet: `wallet:<lowercase 0x address>`.
    pub fn for_wallet(address: &crate::x402::eip712::Address) -> Self {
        Self(format!("wallet:{}", address.lower()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Who answers for this tenant: an API key's account (`key:<account>`, whatever the
    /// tenantId; names hold no `:`), or the paying wallet. What a server's shares are counted
    /// by, so that more tenantIds buy no bigger share.
    pub fn payer(&self) -> &str {
        match self.0.strip_prefix("key:") {
            Some(rest) => match rest.find(':') {
                Some(colon) => &self.0[.."key:".len() + colon],
                None => &self.0,
            },
            None => &self.0,
        }
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_tenants_are_namespaced_by_account() {
        let a = Tenant::for_key("acme", "t1").unwrap();
        let b = Tenant::for_key("globex", "t1").unwrap();
        assert_eq!(a.as_str(), "key:acme:t1");
        assert_ne!(a, b);
    }

    #[test]
    fn every_tenant_of_an_account_has_the_accounts_payer() {
        let t1 = Tenant::for_key("acme", "t1").unwrap();
        let t2 = Tenant::for_key("acme", "other.tenant").unwrap();
        assert_eq!(t1.payer(), "key:acme");
        assert_eq!(t2.payer(), "key:acme");
        assert_eq!(Tenant::for_account("acme").unwrap().payer(), "key:acme");
        assert_eq!(
            Tenant::for_key("globex", "t1").unwrap().payer(),
            "key:globex"
        );
        let wallet = Tenant::for_wallet(&crate::x402::eip712::Address([0xaa; 20]));
        assert_eq!(wallet.payer(), wallet.as_str());
    }

    #[test]
    fn separators_cannot_be_smuggled_in() {
        assert!(Tenant::for_key("acme:t1", "x").is_none());
        assert!(Tenant::for_key("acme", "t1|x").is_none());
        assert!(Tenant::for_key("", "t1").is_none());
        assert!(Tenant::for_key("acme", &"a".repeat(65)).is_none());
        assert!(Tenant::for_key("acme", &"a".repeat(64)).is_some());
    }
}
