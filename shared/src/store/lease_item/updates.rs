//! How each write changes a lease item: the update expression of every [`Effect`], with the
//! condition its guard is ([`conditions`]), and the item's entry in the list index (`lt`, `lr`:
//! docs/adr/0008). The attributes themselves are `lease_item`'s.

use super::super::expr::Expr;
use super::super::{n, s};
use super::conditions;
use super::{done_map, ended_handoffs_list, permits_map, places_list, revoked_list, shard_key};
use crate::clock::Millis;
use crate::lease::{Effect, Write};
use aws_sdk_dynamodb::types::AttributeValue;

/// The update and condition of `write` on the item (its attributes: see `lease_item`).
pub(crate) fn write_expressions(pk: &str, write: &Write, now_ms: Millis) -> (String, String, Expr) {
    let mut e = Expr::default();
    let (holder, tok, exp) = (e.name("holder"), e.name("tok"), e.name("exp"));
    let (lim, pm, until, ver) = (e.name("lim"), e.name("pm"), e.name("until"), e.name("ver"));
    let (wq, wuntil, hv) = (e.name("wq"), e.name("wuntil"), e.name("hv"));
    let now = e.value("now", n(now_ms));
    let condition = conditions::guard(&mut e, &write.guard, &now);
    let mut update = Clauses::default();
    match &write.effect {
        // A take on a lapsed semaphore makes it a lease again: its permits go, and the places
        // its guard found lapsed.
        Effect::Take {
            holder: h,
            expires_at,
        } => {
            update.set(&holder, e.value("holder", s(h)));
            update.set(&exp, e.value("exp", n(expires_at)));
            update.add(&tok, e.value("one", n(1)));
            update.remove(&[&pm, &lim, &until, &wq, &wuntil, &hv]);
        }
        Effect::Extend { expires_at } => update.set(&exp, e.value("exp", n(expires_at))),
        Effect::Clear => update.remove(&[&holder, &exp]),
        // A versioned resource, whole; a single permit it replaces goes.
        Effect::Replace(after) if after.is_versioned() => {
            let latest = after.permits.iter().map(|p| p.stored_expiry()).max();
            update.set(&lim, e.value("lim", n(after.limit)));
            update.set(&pm, e.value("pm", permits_map(after)));
            update.set(&until, e.value("until", n(latest.unwrap_or(0))));
            update.set(&ver, e.value("ver", n(after.version)));
            update.set(&tok, e.value("tok", n(after.last_token)));
            update.remove(&[&holder, &exp]);
            match after.waiters.iter().map(|w| w.until).max() {
                Some(last) => {
                    update.set(&wq, e.value("wq", places_list(after)));
                    update.set(&wuntil, e.value("wuntil", n(last)));
                }
                None => update.remove(&[&wq, &wuntil]),
            }
            // A unseen take is guarded on its absence, so that a permit a waiting call has not
            // taken ends in a write that remembers it (docs/adr/0008).
            match after.has_live_handoff() {
                true => update.set(&hv, e.value("hv", AttributeValue::Bool(true))),
                false => update.remove(&[&hv]),
            }
        }
        // A lease again (its last waiter served): its permit as a lease keeps it, the version
        // carried on so that no earlier read's guard can match it.
        Effect::Replace(after) => {
            update.set(&ver, e.value("ver", n(after.version)));
            update.set(&tok, e.value("tok", n(after.last_token)));
            match after.permits.first() {
                Some(p) => {
                    update.set(&holder, e.value("holder", s(&p.holder)));
                    update.set(&exp, e.value("exp", n(p.expires_at)));
                }
                None => update.remove(&[&holder, &exp]),
            }
            update.remove(&[&pm, &lim, &until, &wq, &wuntil, &hv]);
        }
    }
    // The revoked permits and the hand-offs that ended untaken (docs/adr/0008): only a replace
    // changes them; other writes keep them.
    if let Effect::Replace(after) = &write.effect {
        let (rv, hd, dn) = (e.name("rv"), e.name("hd"), e.name("dn"));
        // The finished mark (docs/adr/0012): set by a done release, dropped by a reopen or
        // by the first write after it ends.
        match &after.done {
            Some(done) => update.set(&dn, e.value("dn", done_map(done))),
            None => update.remove(&[&dn]),
        }
        match after.revoked.is_empty() {
            true => update.remove(&[&rv]),
            false => update.set(&rv, e.value("rv", revoked_list(after))),
        }
        match after.ended_handoffs.is_empty() {
            true => update.remove(&[&hd]),
            false => update.set(&hd, e.value("hd", ended_handoffs_list(after))),
        }
    }
    index_entry(&mut update, &mut e, pk, &write.effect, now_ms);
    let update = update.render();
    // Not every update and condition mentions every name declared.
    let e = e.used_in(&[&update, &condition]);
    (update, condition, e)
}

/// Set or remove the index entry of the item `pk` in an update whose effect is `effect` (at `now`):
/// set when it leaves a live permit, place or finished mark, removed when it leaves the resource free, and
/// left alone by a renew (the entry is there since its take).
fn index_entry(update: &mut Clauses, e: &mut Expr, pk: &str, effect: &Effect, now: Millis) {
    let listed = match effect {
        Effect::Extend { .. } => return,
        Effect::Take { expires_at, .. } => *expires_at > now,
        Effect::Clear => false,
        Effect::Replace(after) => {
            after.live(now).is_some()
                || after.live_waiters(now).next().is_some()
                || after.finished(now).is_some()
        }
    };
    let (lt, lr) = (e.name("lt"), e.name("lr"));
    match (listed, pk.split_once('|')) {
        (true, Some((tenant, resource))) => {
            update.set(&lt, e.value("lt", s(shard_key(tenant, resource))));
            update.set(&lr, e.value("lr", s(resource)));
        }
        _ => update.remove(&[&lt, &lr]),
    }
}

/// The clauses of an update expression, gathered so that each kind appears once.
#[derive(Default)]
pub(crate) struct Clauses {
    set: Vec<String>,
    add: Vec<String>,
    remove: Vec<String>,
}

impl Clauses {
    pub(crate) fn set(&mut self, name: &str, value: String) {
        self.set.push(format!("{name} = {value}"));
    }

    fn add(&mut self, name: &str, value: String) {
        self.add.push(format!("{name} {value}"));
    }

    pub(crate) fn remove(&mut self, names: &[&str]) {
        self.remove.extend(names.iter().map(|n| (*n).to_owned()));
    }

    fn render(&self) -> String {
        [
            ("SET", &self.set),
            ("ADD", &self.add),
            ("REMOVE", &self.remove),
        ]
        .iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(kind, parts)| format!("{kind} {}", parts.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
    }
}
