//! A history of lease calls and the checker for it: only what real-time order makes certain is
//! checked (client and server read the same clock here). Calls whose answer was lost (the server
//! died) are kept with an unknown outcome: they may have taken effect, so they can excuse an
//! apparent overlap (a release) but never count as a grant.

use std::collections::BTreeMap;

/// Clock tolerance (ms) for comparing the server's expiresAt with the client's clock.
pub const TOLERANCE_MS: i64 = 5;

#[derive(Debug, Clone)]
pub struct Event {
    pub op: &'static str,
    pub resource: String,
    pub holder: String,
    pub invoked: i64,
    pub returned: i64,
    /// `None`: the answer was lost.
    pub granted: Option<bool>,
    /// The token the op used (renew, release) or got (acquire).
    pub token: Option<u64>,
    pub expires_at: Option<i64>,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `2026-11-29T10:00:00.000Z` -> Unix ms.
pub fn parse_iso(s: &str) -> Option<i64> {
    let n = |a: usize, b: usize| s.get(a..b)?.parse::<i64>().ok();
    let (y, m, d) = (n(0, 4)?, n(5, 7)?, n(8, 10)?);
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let days = 365 * y + y / 4 - y / 100 + y / 400 + (153 * (m - 3) + 2) / 5 + d - 719_469;
    Some(((days * 24 + n(11, 13)?) * 60 + n(14, 16)?) * 60_000 + n(17, 19)? * 1000 + n(20, 23)?)
}

/// Fail, naming the first violations, unless `history` keeps every lease rule. `what` says which
/// run it was.
pub fn assert_consistent(history: &[Event], what: &str) {
    let violations = check(history);
    assert!(
        violations.is_empty(),
        "{} violations {what}, first: {:#?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
}

/// Every violation the history shows (empty when it is consistent with the lease rules):
/// tokens go up in real-time order and never to two holders; no token is granted while an
/// earlier grant (returned before the acquire was invoked, not possibly released) is still live;
/// no renew or release succeeds with a superseded token.
pub fn check(history: &[Event]) -> Vec<String> {
    let mut by_resource: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in history {
        by_resource.entry(e.resource.as_str()).or_default().push(e);
    }
    let mut violations = Vec::new();
    for (resource, events) in by_resource {
        let granted = |e: &&&Event| e.granted == Some(true);
        let acquires: Vec<&&Event> = events
            .iter()
            .filter(|e| e.op == "acquire")
            .filter(granted)
            .collect();
        for a in &acquires {
            for b in &acquires {
                let (ta, tb) = (a.token.unwrap(), b.token.unwrap());
                if a.returned < b.invoked && tb < ta {
                    violations.push(format!(
                        "{resource}: token {tb} issued after {ta} (invoked {} > returned {})",
                        b.invoked, a.returned
                    ));
                }
                if ta == tb && a.holder != b.holder {
                    violations.push(format!(
                        "{resource}: token {ta} issued to {} and {}",
                        a.holder, b.holder
                    ));
                }
            }
        }
        for b in &acquires {
            let tb = b.token.unwrap();
            for a in events
                .iter()
                .filter(granted)
                .filter(|e| matches!(e.op, "acquire" | "renew"))
            {
                let ta = a.token.unwrap();
                if ta >= tb || a.returned >= b.invoked {
                    continue;
                }
                let Some(expiry) = a.expires_at else { continue };
                let maybe_released = events.iter().any(|r| {
                    r.op == "release"
                        && r.granted != Some(false)
                        && r.token == Some(ta)
                        && r.invoked < b.returned
                });
                if !maybe_released && b.returned + TOLERANCE_MS < expiry {
                    violations.push(format!(
                        "{resource}: token {tb} granted to {} (returned {}) while token {ta} of {} was live until {expiry}",
                        b.holder, b.returned, a.holder
                    ));
                }
            }
        }
        for m in events
            .iter()
            .filter(granted)
            .filter(|e| matches!(e.op, "renew" | "release"))
        {
            let tm = m.token.unwrap();
            if let Some(newer) = acquires
                .iter()
                .find(|a| a.token.unwrap() > tm && a.returned < m.invoked)
            {
                violations.push(format!(
                    "{resource}: {} succeeded with token {tm} after token {} was issued",
                    m.op,
                    newer.token.unwrap()
                ));
            }
        }
    }
    violations
}
