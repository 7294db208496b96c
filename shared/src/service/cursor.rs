//! The cursors of list and audit pages: opaque to callers, bound to the tenant and the op. A
//! cursor is base64url of a 16-byte HMAC-SHA256 tag and the position it names; the tag covers the
//! tenant, the op and the position, so a cursor edited, made up, or taken from another tenant or
//! the other op does not open (a 400 naming `/cursor`), and no caller can read another tenant's
//! names through one.

use crate::tenant::Tenant;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of the tag kept: 128 bits, past any guessing through a 400.
const TAG_BYTES: usize = 16;

/// What a cursor pages through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paged {
    List,
    Audit,
}

impl Paged {
    fn label(self) -> &'static [u8] {
        match self {
            Paged::List => b"list",
            Paged::Audit => b"audit",
        }
    }
}

#[derive(Clone)]
pub struct Cursors {
    key: [u8; 32],
}

impl Cursors {
    pub fn new(key: &[u8; 32]) -> Self {
        Self { key: *key }
    }

    fn tag(&self, tenant: &Tenant, paged: Paged, position: &[u8]) -> Hmac<Sha256> {
        // A key of any length is taken: this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        // Lengths first, so that no two (tenant, op, position) spell the same bytes.
        for part in [tenant.as_str().as_bytes(), paged.label()] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.update(position);
        mac
    }

    /// The cursor naming `position` in `tenant`'s pages of `paged`.
    pub fn seal(&self, tenant: &Tenant, paged: Paged, position: &str) -> String {
        let tag = self.tag(tenant, paged, position.as_bytes()).finalize();
        let mut bytes = tag.into_bytes()[..TAG_BYTES].to_vec();
        bytes.extend_from_slice(position.as_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position `cursor` names, if this service sealed it for `tenant` and `paged`.
    pub fn open(&self, tenant: &Tenant, paged: Paged, cursor: &str) -> Option<String> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() < TAG_BYTES {
            return None;
        }
        let (tag, position) = bytes.split_at(TAG_BYTES);
        self.tag(tenant, paged, position)
            .verify_truncated_left(tag)
            .ok()?;
        String::from_utf8(position.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_for_its_tenant_and_op() {
        let cursors = Cursors::new(&[7; 32]);
        let (a, b) = (
            Tenant::for_key("acme", "t1").unwrap(),
            Tenant::for_key("acme", "t2").unwrap(),
        );
        let cursor = cursors.seal(&a, Paged::List, "deploy:prod");
        assert_eq!(
            cursors.open(&a, Paged::List, &cursor).as_deref(),
            Some("deploy:prod")
        );
        assert_eq!(cursors.open(&b, Paged::List, &cursor), None);
        assert_eq!(cursors.open(&a, Paged::Audit, &cursor), None);
        assert_eq!(
            Cursors::new(&[8; 32]).open(&a, Paged::List, &cursor),
            None,
            "another deployment's key"
        );
        // Any change of a byte breaks it.
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            cursors.open(&a, Paged::List, &URL_SAFE_NO_PAD.encode(&bytes)),
            None
        );
        assert_eq!(cursors.open(&a, Paged::List, "short"), None);
        assert_eq!(cursors.open(&a, Paged::List, "!!!"), None);
    }
}
