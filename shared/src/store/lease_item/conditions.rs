//! Every condition on a lease item, each a named function with the rule it spells written
//! beside it: the only translation of the domain's guards ([`Guard::holds`]) into DynamoDB
//! condition expressions, as the DynamoDB lock client keeps its conditions in one block.
//! `shared/tests/guards.rs` proves each equal to its rule over every small state, on DynamoDB's
//! own evaluation (dynoxide, moto). `now` is always a placeholder for the request's time.

use super::super::expr::Expr;
use super::super::{n, s};
use crate::clock::Millis;
use crate::lease::{Guard, MAX_TOKEN};

/// `guard` as a condition expression on the lease item, at `now`.
pub(crate) fn guard(e: &mut Expr, guard: &Guard, now: &str) -> String {
    match guard {
        Guard::Vacant => vacant(e, now),
        Guard::VacantAt { last_token } => vacant_at(e, now, *last_token),
        Guard::HeldBy { holder, token } => held_by(e, now, holder, *token),
        Guard::Version {
            last_token,
            version,
            single_expiry,
        } => unchanged(e, *last_token, *version, *single_expiry),
    }
}

/// [`Guard::Vacant`], an unseen take's: the resource is free ([`free`]) and its counter is below the
/// ceiling, whatever it is (no read told it).
pub(crate) fn vacant(e: &mut Expr, now: &str) -> String {
    let tok = e.name("tok");
    format!(
        "{free} AND (attribute_not_exists({tok}) OR {tok} < {max})",
        free = free(e, now),
        max = e.value("max", n(MAX_TOKEN)),
    )
}

/// [`Guard::VacantAt`], a take decided on a read: the resource is free and its counter is exactly
/// the one read (absent when it was 0), below the ceiling: no take issues a token past it.
pub(crate) fn vacant_at(e: &mut Expr, now: &str, last_token: u64) -> String {
    let tok = e.name("tok");
    let free = free(e, now);
    match last_token {
        0 => format!("{free} AND attribute_not_exists({tok})"),
        last => format!(
            "{free} AND {tok} = {t} AND {tok} < {max}",
            t = e.value("last", n(last)),
            max = e.value("max", n(MAX_TOKEN)),
        ),
    }
}

/// [`Guard::HeldBy`], a renew's, a release's and a re-acquire's: `holder` holds the lease's one
/// permit with `token`, live at `now`.
pub(crate) fn held_by(e: &mut Expr, now: &str, holder: &str, token: u64) -> String {
    let (h, tok, exp) = (e.name("holder"), e.name("tok"), e.name("exp"));
    format!(
        "{h} = {holder} AND {tok} = {token} AND {exp} > {now}",
        holder = e.value("guardHolder", s(holder)),
        token = e.value("guardToken", n(token)),
    )
}

/// [`Guard::Version`], a read-modify-write's (a semaphore's, a queue's) and a guessed denial's
/// check: the item is exactly as read. Its counter at `last_token` and its version at `version`
/// (each absent when 0), and a lease's single permit expiring at `single_expiry` (absent when
/// `None`): every write changes one of them, so together they pin the item.
pub(crate) fn unchanged(
    e: &mut Expr,
    last_token: u64,
    version: u64,
    single_expiry: Option<Millis>,
) -> String {
    let (tok, ver, exp) = (e.name("tok"), e.name("ver"), e.name("exp"));
    let is = |e: &mut Expr, name: &str, key: &str, value: u64| match value {
        0 => format!("attribute_not_exists({name})"),
        v => format!("{name} = {}", e.value(key, n(v))),
    };
    let expiry = match single_expiry {
        Some(x) => format!("{exp} = {}", e.value("singleExp", n(x))),
        None => format!("attribute_not_exists({exp})"),
    };
    format!(
        "{} AND {} AND {expiry}",
        is(e, &tok, "last", last_token),
        is(e, &ver, "version", version),
    )
}

/// The condition that the resource is free at `now` (a placeholder): no live permit of either
/// kind, nobody waiting, no permit a waiting call has not taken, and no finished mark, live or
/// stale (docs/adr/0012: a stale one is dropped by a write decided on a read)
/// ([`crate::lease::LeaseState::is_free`]).
pub(crate) fn free(e: &mut Expr, now: &str) -> String {
    let dn = e.name("dn");
    format!(
        "{unheld} AND attribute_not_exists({dn})",
        unheld = unheld(e, now)
    )
}

/// No live permit of either kind, nobody waiting, and no permit a waiting call has not taken.
fn unheld(e: &mut Expr, now: &str) -> String {
    let (holder, exp) = (e.name("holder"), e.name("exp"));
    let (until, wuntil, hv) = (e.name("until"), e.name("wuntil"), e.name("hv"));
    format!(
        "(attribute_not_exists({holder}) OR attribute_not_exists({exp}) OR {exp} <= {now}) \
         AND (attribute_not_exists({until}) OR {until} <= {now}) \
         AND (attribute_not_exists({wuntil}) OR {wuntil} <= {now}) \
         AND attribute_not_exists({hv})"
    )
}

/// A list index entry that may be tidied away: the item is listed (`lt`), [`unheld`] at `now`,
/// and its finished mark, if any, ended (a stale mark waits for the next write to drop it, but
/// lists nothing), so that no live permit, place or mark loses its entry.
pub(crate) fn listed_and_free(e: &mut Expr, now: &str) -> String {
    let (lt, dn, u) = (e.name("lt"), e.name("dn"), e.name("u"));
    format!(
        "attribute_exists({lt}) AND {unheld} AND (attribute_not_exists({dn}) OR {dn}.{u} <= {now})",
        unheld = unheld(e, now)
    )
}
